//! From a request to a confinement plan: the ceiling, writable roots held by descriptor,
//! protected paths, the backend and its arguments, the environment and the limits — all
//! decided in the helper before anything forks.
mod caps;
mod context;
pub(crate) mod deny;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod namespaces;
mod not_run;
mod plan;
mod request;
// The macOS backend; on Linux only its unit tests build it (its snapshots run everywhere).
pub(crate) mod fingerprint;
#[cfg(any(target_os = "macos", test))]
mod seatbelt;

use std::os::fd::OwnedFd;

#[cfg(target_os = "macos")]
use confine_protocol::Gap;
use confine_protocol::{Backend, Enforcement, Network, Refusal, Spawn, Stage};

use crate::protect::Root;
pub(crate) use caps::{Applied, Planned};
pub(crate) use context::{Context, Unusable, candidates, layers, static_verdict, unavailable};
#[cfg(target_os = "linux")]
pub(crate) use namespaces::lend;
pub(crate) use not_run::NotRun;
use not_run::{fail, refuse};
pub(crate) use plan::{Cleanup, Confinement, Plan};
#[cfg(any(target_os = "macos", test))]
use plan::{denied_reads, enforcement_of, temp_dir};
use request::confined_unix_sockets;
#[cfg(any(target_os = "macos", test))]
use request::protection;
pub(crate) use request::{check_environment, writable_roots};
use request::{environment, rlimits};

/// Builds the plan for `backend`, which the caller has selected (and probed), and states what it
/// cannot enforce.
pub(crate) fn plan(
    spawn: &Spawn,
    ctx: &Context,
    backend: Backend,
    roots: &[Root],
    proxy: Option<OwnedFd>,
) -> Result<Plan, NotRun> {
    let mut plan = plan_backend(spawn, ctx, backend, roots, proxy)?;
    let Some(enforcement) = plan.enforcement.take() else {
        return Ok(plan);
    };
    let mut missing = match enforcement {
        Enforcement::Full => Vec::new(),
        Enforcement::Partial { missing } => missing,
    };
    missing.extend(plan.caps.missing.clone());
    // macOS has no subreaper: the shim cannot promise the whole tree ends (sys/macos_tree.rs).
    #[cfg(target_os = "macos")]
    missing.push(Gap::ProcessTree);
    // macOS takes RLIMIT_AS (its RLIMIT_RSS) and enforces nothing by it.
    #[cfg(target_os = "macos")]
    if plan.rlimits.iter().any(|(r, _)| *r == nix::libc::RLIMIT_AS) {
        missing.push(Gap::AddressSpace);
    }
    if missing.is_empty() {
        plan.enforcement = Some(Enforcement::Full);
        return Ok(plan);
    }
    if ctx.ceiling.refuse_partial {
        return refuse(Refusal::CeilingPartial { backend, missing });
    }
    plan.enforcement = Some(Enforcement::Partial { missing });
    Ok(plan)
}

/// The Landlock ABI whose rules control TCP binds and connects (Linux 6.7).
const LANDLOCK_NET_ABI: u32 = 4;

/// The proxy's socket, when the request has one and `backend` can keep the command to the proxy:
/// bwrap gives it a network namespace of its own, where the bridge listens; under Landlock the
/// shim answers its every `connect` and Landlock's TCP rules keep it from listening.
fn bridge_socket(
    spawn: &Spawn,
    ctx: &Context,
    backend: Backend,
    network_allowed: bool,
    proxy: Option<OwnedFd>,
) -> Result<Option<OwnedFd>, NotRun> {
    if !spawn.proxy || backend == Backend::None {
        return Ok(None);
    }
    if network_allowed {
        return refuse(Refusal::ProxyWithNetwork);
    }
    if backend == Backend::Landlock && ctx.landlock_abi < LANDLOCK_NET_ABI {
        return refuse(Refusal::ProxyNeedsLandlockNet {
            needed: LANDLOCK_NET_ABI,
            abi: ctx.landlock_abi,
        });
    }
    match proxy {
        Some(fd) => Ok(Some(fd)),
        None => fail(
            Stage::Prepare,
            "the proxy bridge's socket did not arrive with the request".into(),
        ),
    }
}

/// The plan of a command that runs unconfined (danger-full-access).
fn unconfined(
    spawn: &Spawn,
    ctx: &Context,
    layers: Vec<confine_protocol::Layer>,
    rlimits: Vec<(crate::sys::Resource, u64)>,
    caps: Planned,
) -> Plan {
    Plan {
        backend: Backend::None,
        enforcement: None,
        layers,
        argv: spawn.argv.clone(),
        env: environment(spawn, ctx, None),
        confinement: Confinement::None,
        rlimits,
        caps,
        cleanup: Cleanup::default(),
        connects: None,
    }
}

fn plan_backend(
    spawn: &Spawn,
    ctx: &Context,
    backend: Backend,
    roots: &[Root],
    proxy: Option<OwnedFd>,
) -> Result<Plan, NotRun> {
    let rlimits = rlimits(spawn, &ctx.ceiling);
    let caps = caps::plan(spawn, ctx, backend);
    let network_allowed = spawn.policy.network == Network::Allow;
    let proxy = bridge_socket(spawn, ctx, backend, network_allowed, proxy)?;
    if spawn.policy.local_binding && !network_allowed && backend == Backend::Landlock {
        return refuse(Refusal::LocalBindingNeedsNamespace { backend });
    }
    let listed = confined_unix_sockets(spawn, ctx, backend, roots, network_allowed)?;
    let layers = layers(backend, ctx);
    // Only the Linux backends keep the proxy's socket (bwrap's bridge, the shim under Landlock).
    #[cfg(not(target_os = "linux"))]
    drop(proxy);
    match backend {
        #[cfg(target_os = "linux")]
        Backend::Bwrap | Backend::Landlock | Backend::Namespaces => {
            let start = linux::Start {
                spawn,
                ctx,
                roots,
                proxy,
                listed,
                rlimits,
                caps,
                layers,
                network_allowed,
            };
            match backend {
                Backend::Namespaces => namespaces::plan(start),
                _ => linux::plan(backend, start),
            }
        }
        #[cfg(not(target_os = "linux"))]
        Backend::Bwrap | Backend::Landlock | Backend::Namespaces => fail(
            Stage::Unavailable,
            format!("{} is a Linux backend; this is macOS", backend.as_str()),
        ),
        Backend::None => Ok(unconfined(spawn, ctx, layers, rlimits, caps)),
        // Seatbelt on Linux is refused before any plan (`static_verdict`); this arm keeps a
        // request that gets here anyway from running unconfined.
        #[cfg(not(any(target_os = "macos", test)))]
        Backend::Seatbelt => fail(
            Stage::Unavailable,
            "seatbelt is the macOS backend; this is Linux".into(),
        ),
        #[cfg(any(target_os = "macos", test))]
        Backend::Seatbelt => {
            let protection = protection(spawn, roots)?;
            let mut cleanup = Cleanup::default();
            let tmp = temp_dir(spawn, ctx, &mut cleanup)?;
            let denied = denied_reads(spawn, roots, tmp.as_ref())?;
            let mut checked =
                seatbelt::Checked::new(spawn, roots, protection, &ctx.own_paths, listed);
            checked.deny_read = denied.into_iter().map(|d| d.path).collect();
            checked.temp = tmp.as_ref().map(|t| (t.path.clone(), t.writable));
            // On macOS alone: the unit tests on Linux may run as root, and have no macOS.
            checked.as_root = cfg!(target_os = "macos") && nix::unistd::geteuid().is_root();
            #[cfg(target_os = "macos")]
            {
                checked.macos_version = seatbelt::running_version();
            }
            let (argv, missing) = checked.command()?;
            Ok(Plan {
                backend,
                enforcement: Some(enforcement_of(missing)),
                layers,
                argv,
                env: environment(spawn, ctx, tmp.as_ref().map(|t| t.path.as_path())),
                confinement: Confinement::None,
                rlimits,
                caps,
                cleanup,
                connects: None,
            })
        }
    }
}
