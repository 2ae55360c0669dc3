//! `agentd probe [--json]`: what the configured confine-helper says of itself on this machine.
//!
//! agentd starts (or connects to) the helper it would use for a session and asks for its `Info`
//! without sending any kept verdict as a hint, so an embedded helper probes every backend afresh;
//! the usable verdicts it reports then replace the kept ones. What is printed is the helper's
//! own report: every backend's verdict and why an unusable one is, the Landlock ABI, the backend
//! `auto` selects, and the ceiling as the helper enforces it (the narrowest grant, and why, when
//! the ceiling file is broken).

use clap::Args;
use confine_protocol::{Backend, HelperInfo, Network};
use serde_json::json;

use super::args::HelperArgs;
use super::exit::{EXIT_FAILURE, fail};
use crate::config::Effective;
use crate::helper_client::HelperEndpoint;
use crate::terminal;

// `agentd probe [OPTIONS]` (its help is the variant's in `Command`)
#[derive(Debug, Args)]
pub struct ProbeCommand {
    #[command(flatten)]
    pub helper: HelperArgs,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Asks the helper for its report and prints it; 0 when a backend is usable, 1 when none is
/// (confined modes fail closed) or the ceiling is broken (every request is refused), 125 when
/// the helper could not be asked.
pub(super) async fn probe_command(command: &ProbeCommand) -> u8 {
    let client = match Effective::load(&command.helper.flags())
        .map_err(|e| e.to_string())
        .and_then(|config| config.probe_client().map_err(|e| e.to_string()))
    {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let info = match client.info().await {
        Ok(info) => info,
        Err(e) => return fail(&format!("cannot ask confine-helper for its report: {e}")),
    };
    let helper = match client.endpoint() {
        HelperEndpoint::Embedded(path) => path.display().to_string(),
        HelperEndpoint::Service(socket) => format!("served on {}", socket.display()),
    };
    if command.json {
        println!("{}", json_report(&info, &helper));
    } else {
        print!("{}", terminal::visible(&text_report(&info, &helper)));
    }
    if runs_commands(&info) {
        0
    } else {
        EXIT_FAILURE
    }
}

/// The backend `auto` would use: the first usable one, in the helper's order of preference.
fn selected(info: &HelperInfo) -> Option<Backend> {
    info.backends.iter().find(|b| b.usable).map(|b| b.backend)
}

/// Whether the helper will run a confined command: a backend is usable and the ceiling is not
/// broken.
fn runs_commands(info: &HelperInfo) -> bool {
    selected(info).is_some() && info.grant.broken.is_none()
}

/// The report as lines of text.
fn text_report(info: &HelperInfo, helper: &str) -> String {
    let mut out = format!("{} ({helper})\n", info.software);
    match info.landlock_abi {
        Some(abi) => out.push_str(&format!("landlock ABI: {abi}\n")),
        None => out.push_str("landlock ABI: none\n"),
    }
    for b in &info.backends {
        // A usable backend's detail says only that; an unusable one's says why.
        if b.usable {
            out.push_str(&format!("{:<10} usable\n", b.backend.as_str()));
        } else {
            out.push_str(&format!(
                "{:<10} unusable: {}\n",
                b.backend.as_str(),
                b.detail
            ));
        }
    }
    out.push_str(&format!(
        "selected: {}\n",
        selected(info).map_or("none (confined modes will fail closed)", Backend::as_str)
    ));
    let grant = &info.grant;
    if let Some(broken) = &grant.broken {
        out.push_str(&format!(
            "ceiling: BROKEN: {broken}; every request is refused until it is fixed\n"
        ));
        return out;
    }
    let sources = if grant.sources.is_empty() {
        "no ceiling file".to_owned()
    } else {
        grant.sources.join(", ")
    };
    out.push_str(&format!(
        "ceiling: up to {}, network {} ({sources})\n",
        grant.max_mode.as_str(),
        if grant.network == Network::Allow {
            "allowed"
        } else {
            "denied"
        }
    ));
    out
}

/// The report as one JSON object.
fn json_report(info: &HelperInfo, helper: &str) -> serde_json::Value {
    let backends: Vec<serde_json::Value> = info
        .backends
        .iter()
        .map(|b| {
            json!({
                "backend": b.backend.as_str(),
                "usable": b.usable,
                "detail": b.detail,
                "layers": b.layers.iter().map(|l| l.as_str()).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "software": info.software,
        "helper": helper,
        "landlock_abi": info.landlock_abi,
        "backends": backends,
        "selected": selected(info).map(Backend::as_str),
        "ceiling": {
            "sources": info.grant.sources,
            "max_mode": info.grant.max_mode.as_str(),
            "allow_network": info.grant.network == Network::Allow,
            "broken": info.grant.broken,
        },
    })
}

#[cfg(test)]
mod tests {
    use confine_protocol::{BackendReport, Grant, Layer, Mode};

    use super::*;

    fn info(bwrap: bool, broken: Option<&str>) -> HelperInfo {
        HelperInfo {
            software: "confine-helper 9.9.9".into(),
            pid: 7,
            backends: vec![
                BackendReport {
                    backend: Backend::Bwrap,
                    usable: bwrap,
                    fingerprint: None,
                    detail: if bwrap {
                        "usable"
                    } else {
                        "bwrap is not installed"
                    }
                    .into(),
                    layers: vec![Layer::Namespaces, Layer::Seccomp],
                },
                BackendReport {
                    backend: Backend::Landlock,
                    usable: false,
                    fingerprint: None,
                    detail: "this kernel does not offer Landlock".into(),
                    layers: vec![Layer::Landlock, Layer::Seccomp],
                },
            ],
            landlock_abi: None,
            grant: Grant {
                max_mode: Mode::ReadOnly,
                network: Network::Deny,
                sources: vec!["/etc/confine-helper/ceiling.toml".into()],
                broken: broken.map(str::to_owned),
            },
        }
    }

    #[test]
    fn the_text_names_each_verdict_the_selection_and_the_ceiling() {
        let text = text_report(&info(true, None), "/usr/bin/confine-helper");
        assert_eq!(
            text,
            "confine-helper 9.9.9 (/usr/bin/confine-helper)\n\
             landlock ABI: none\n\
             bwrap      usable\n\
             landlock   unusable: this kernel does not offer Landlock\n\
             selected: bwrap\n\
             ceiling: up to read-only, network denied (/etc/confine-helper/ceiling.toml)\n"
        );
        let none = text_report(&info(false, Some("bad key")), "h");
        assert!(
            none.contains("selected: none (confined modes will fail closed)\n"),
            "{none}"
        );
        assert!(
            none.ends_with(
                "selected: none (confined modes will fail closed)\n\
                 ceiling: BROKEN: bad key; every request is refused until it is fixed\n"
            ),
            "{none}"
        );
        assert!(runs_commands(&info(true, None)));
        assert!(!runs_commands(&info(false, None)), "no usable backend");
        assert!(
            !runs_commands(&info(true, Some("bad key"))),
            "a broken ceiling"
        );
    }

    #[test]
    fn the_json_carries_the_same_report() {
        let report = json_report(&info(false, Some("bad key")), "h");
        assert_eq!(report["selected"], serde_json::Value::Null);
        assert_eq!(report["backends"][0]["backend"], "bwrap");
        assert_eq!(report["backends"][0]["usable"], false);
        assert_eq!(report["backends"][0]["detail"], "bwrap is not installed");
        assert_eq!(report["ceiling"]["max_mode"], "read-only");
        assert_eq!(report["ceiling"]["allow_network"], false);
        assert_eq!(report["ceiling"]["broken"], "bad key");
        assert_eq!(report["helper"], "h");
        let usable = json_report(&info(true, None), "h");
        assert_eq!(usable["selected"], "bwrap");
        assert_eq!(usable["ceiling"]["broken"], serde_json::Value::Null);
    }
}
