//! `confine-helper probe`: every backend's verdict, the Landlock ABI, the selection and the
//! ceiling, as text or as one JSON line.

use std::process::ExitCode;

use crate::confine::Context;

/// Prints every backend's verdict; exits non-zero when no backend is usable.
pub(crate) fn print(ctx: &Context, json: bool) -> ExitCode {
    let info = crate::server::info(ctx);
    let selected = info
        .backends
        .iter()
        .find(|b| b.usable)
        .map(|b| b.backend.as_str());
    if json {
        let backends: Vec<String> = info
            .backends
            .iter()
            .map(|b| {
                format!(
                    "{{\"backend\":{},\"usable\":{},\"detail\":{}}}",
                    json_string(b.backend.as_str()),
                    b.usable,
                    json_string(&b.detail)
                )
            })
            .collect();
        println!(
            "{{\"software\":{},\"landlock_abi\":{},\"backends\":[{}],\"selected\":{},\"ceiling\":{{\"sources\":[{}],\"max_mode\":{},\"allow_network\":{},\"broken\":{}}}}}",
            json_string(&info.software),
            info.landlock_abi
                .map_or("null".to_owned(), |a| a.to_string()),
            backends.join(","),
            selected.map_or("null".to_owned(), json_string),
            ctx.ceiling
                .sources
                .iter()
                .map(|p| json_string(&p.display().to_string()))
                .collect::<Vec<_>>()
                .join(","),
            json_string(ctx.ceiling.max_mode.as_str()),
            ctx.ceiling.allow_network,
            ctx.ceiling
                .broken
                .as_ref()
                .map_or("null".to_owned(), |b| json_string(&b.to_string())),
        );
    } else {
        println!("{}", info.software);
        match info.landlock_abi {
            Some(abi) => println!("landlock ABI: {abi}"),
            None => println!("landlock ABI: none"),
        }
        for b in &info.backends {
            let verdict = if b.usable { "usable" } else { "unusable" };
            println!("{:<9} {verdict}: {}", b.backend.as_str(), b.detail);
        }
        println!(
            "selected: {}",
            selected.unwrap_or("none (confined modes will fail closed)")
        );
        if let Some(broken) = &ctx.ceiling.broken {
            println!("ceiling: BROKEN: {broken}");
        }
    }
    if selected.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// A JSON string literal.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
