//! What the helper says of itself: the `Info` reply ([`info`]: every backend's verdict, the
//! Landlock ABI, the grant of the ceiling). agentd prints it (`agentd probe`).

use confine_protocol::{Backend, BackendReport, Grant, HelperInfo, Mode, Network};

use crate::command;
use crate::confine::Context;

/// Every backend's verdict (probing those not yet probed) and the Landlock ABI.
pub(crate) fn info(ctx: &Context) -> HelperInfo {
    HelperInfo {
        software: format!("confine-helper {}", env!("CARGO_PKG_VERSION")),
        pid: std::process::id(),
        backends: [Backend::Namespaces, Backend::Bwrap, Backend::Landlock]
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
