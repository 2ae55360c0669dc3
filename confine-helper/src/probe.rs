//! What the helper says of itself: the `Info` reply ([`info`]: every backend's verdict, the
//! Landlock ABI, the grant of the ceiling), and `confine-helper probe`, which prints it with the
//! selection and the ceiling, as text or as one JSON line.

use std::process::ExitCode;

use confine_protocol::{Backend, BackendReport, Grant, HelperInfo, Mode, Network};

use crate::command;
use crate::confine::Context;

/// Prints every backend's verdict; exits non-zero when no backend is usable.
pub(crate) fn print(ctx: &Context, json: bool) -> ExitCode {
    let info = info(ctx);
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
            // A usable backend's detail says only that; an unusable one's says why.
            if b.usable {
                println!("{:<9} usable", b.backend.as_str());
            } else {
                println!("{:<9} unusable: {}", b.backend.as_str(), b.detail);
            }
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

/// Every backend's verdict (probing those not yet probed) and the Landlock ABI.
pub(crate) fn info(ctx: &Context) -> HelperInfo {
    HelperInfo {
        software: format!("confine-helper {}", env!("CARGO_PKG_VERSION")),
        pid: std::process::id(),
        backends: [Backend::Bwrap, Backend::Landlock]
            .into_iter()
            .map(|backend| {
                let verdict = command::verdict(backend, ctx);
                BackendReport {
                    backend,
                    usable: verdict.is_ok(),
                    fingerprint: verdict.is_ok().then(|| ctx.fingerprint(backend)).flatten(),
                    detail: verdict.map_or_else(|why| why.to_string(), |()| "usable".into()),
                    layers: crate::confine::layers(backend, ctx),
                }
            })
            .collect(),
        landlock_abi: Some(ctx.landlock_abi).filter(|abi| *abi > 0),
        grant: grant(&ctx.ceiling),
    }
}

/// The ceiling as a requester needs it to offer only what will be granted. A broken ceiling
/// refuses every request; it is announced as the narrowest grant.
fn grant(ceiling: &crate::ceiling::Ceiling) -> Grant {
    let broken = ceiling.broken.is_some();
    Grant {
        max_mode: if broken {
            Mode::ReadOnly
        } else {
            ceiling.max_mode
        },
        network: if ceiling.allow_network && !broken {
            Network::Allow
        } else {
            Network::Deny
        },
        sources: ceiling
            .sources
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        broken: ceiling.broken.as_ref().map(ToString::to_string),
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
