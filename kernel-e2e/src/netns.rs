//! A network of a case's own, for what the allow-list proxy may reach: two network namespaces
//! joined by a veth pair. **Here** is where agentd runs (and so its proxy, and under Landlock the
//! command): its end of the pair holds `10.77.0.1/24` and `fd77::1/64`, addresses of this
//! machine as the proxy sees it. **There** is another machine on its link: `10.77.0.2/24` and
//! `fd77::2/64`. A host file the case writes names them, and agentd reads it in place of
//! `/etc/hosts`, in a mount namespace of its own, so nothing of the host changes.
//!
//! Namespaces belong to threads: each piece of work runs on a thread of its own that enters the
//! namespace first (and what that thread starts — `ip`, agentd — starts there too), so the
//! suite's other threads and cases keep the host's network. The namespaces are held by
//! descriptors and end with the case. Making them needs root.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, setns, unshare};

use crate::case::{Stop, fail};
use crate::error::E2eError;
use crate::route_events::RouteEvents;

/// Here's addresses, and there's.
pub const HERE_V4: &str = "10.77.0.1";
pub const HERE_V6: &str = "fd77::1";
pub const THERE_V4: &str = "10.77.0.2";
pub const THERE_V6: &str = "fd77::2";
const PREFIX_V4: &str = "/24";
const PREFIX_V6: &str = "/64";

/// The two ends of the veth pair.
const HERE_LINK: &str = "lab-here";
const THERE_LINK: &str = "lab-there";

/// The two namespaces, and the host file agentd reads.
#[derive(Debug)]
pub struct NetLab {
    here: OwnedFd,
    there: OwnedFd,
    hosts: PathBuf,
}

impl NetLab {
    /// Makes both namespaces and the link between them; `hosts` is the host file agentd will
    /// read. Skips when the suite is not root, or the kernel has no veth or no IPv6.
    pub fn new(hosts: &Path) -> Result<NetLab, Stop> {
        if !nix::unistd::Uid::effective().is_root() {
            return Err(Stop::Skip(
                "a network namespace of the case's own needs the suite to run as root".into(),
            ));
        }
        if !Path::new("/proc/sys/net/ipv6").exists() {
            return Err(Stop::Skip("the kernel has no IPv6".into()));
        }
        if Command::new("ip").arg("-V").output().is_err() {
            return Err(Stop::Skip("ip (iproute2) is not installed".into()));
        }
        let lab = NetLab {
            here: new_namespace()?,
            there: new_namespace()?,
            hosts: hosts.to_owned(),
        };
        // Created here with its peer moved there at once: `ip` opens there's namespace by a
        // path to the suite's own descriptor of it.
        let there_path = format!("/proc/{}/fd/{}", std::process::id(), lab.there.as_raw_fd());
        lab.in_namespace(&lab.here, || {
            let pair = [
                "link",
                "add",
                HERE_LINK,
                "type",
                "veth",
                "peer",
                "name",
                THERE_LINK,
                "netns",
                &there_path,
            ];
            ip(&pair).map_err(|e| Stop::Skip(format!("cannot make a veth pair: {e}")))?;
            configure(HERE_LINK, HERE_V4, HERE_V6)
        })??;
        lab.in_namespace(&lab.there, || configure(THERE_LINK, THERE_V4, THERE_V6))??;
        Ok(lab)
    }

    /// Runs `body` on a thread of its own in the namespace here, with the host file on
    /// `/etc/hosts`: what it starts (agentd, its helper, the command) runs there.
    pub fn here<T: Send>(&self, body: impl FnOnce() -> T + Send) -> Result<T, Stop> {
        self.in_namespace(&self.here, || {
            // A mount namespace of the thread's own (unsharing it also unshares the thread's
            // file system context), where no mount reaches the host's.
            unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_FS)
                .map_err(|e| fail(format!("cannot make a mount namespace: {e}")))?;
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )
            .map_err(|e| fail(format!("cannot make the mounts private: {e}")))?;
            mount(
                Some(self.hosts.as_path()),
                "/etc/hosts",
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .map_err(|e| {
                fail(format!(
                    "cannot mount {} on /etc/hosts: {e}",
                    self.hosts.display()
                ))
            })?;
            Ok(body())
        })?
    }

    /// Runs `body` in the namespace here, without the host file (to bind a service there).
    pub fn in_here<T: Send>(&self, body: impl FnOnce() -> T + Send) -> Result<T, Stop> {
        self.in_namespace(&self.here, body)
    }

    /// Runs `body` in the namespace there.
    pub fn in_there<T: Send>(&self, body: impl FnOnce() -> T + Send) -> Result<T, Stop> {
        self.in_namespace(&self.there, body)
    }

    fn in_namespace<T: Send>(
        &self,
        namespace: &OwnedFd,
        body: impl FnOnce() -> T + Send,
    ) -> Result<T, Stop> {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    setns(namespace, CloneFlags::CLONE_NEWNET)
                        .map_err(|e| fail(format!("cannot enter a network namespace: {e}")))?;
                    Ok(body())
                })
                .join()
                .map_err(|_| fail("a thread in a network namespace panicked"))?
        })
    }
}

/// A fresh network namespace, held by a descriptor: made by a thread of its own, which ends.
fn new_namespace() -> Result<OwnedFd, Stop> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                unshare(CloneFlags::CLONE_NEWNET)
                    .map_err(|e| fail(format!("cannot make a network namespace: {e}")))?;
                File::open("/proc/thread-self/ns/net")
                    .map(OwnedFd::from)
                    .map_err(|e| fail(format!("cannot hold a network namespace: {e}")))
            })
            .join()
            .map_err(|_| fail("the thread making a network namespace panicked"))?
    })
}

/// Loopback up, and `link` up with its two addresses (IPv6 without duplicate detection, which
/// would leave it unusable for a while), once both are routed as this machine's.
fn configure(link: &str, v4: &str, v6: &str) -> Result<(), Stop> {
    let v4_prefix = format!("{v4}{PREFIX_V4}");
    let v6_prefix = format!("{v6}{PREFIX_V6}");
    ip(&["link", "set", "lo", "up"]).map_err(Stop::from)?;
    ip(&["addr", "add", &v4_prefix, "dev", link]).map_err(Stop::from)?;
    ip(&["-6", "addr", "add", &v6_prefix, "dev", link, "nodad"])
        .map_err(|e| Stop::Skip(format!("cannot give {link} an IPv6 address: {e}")))?;
    // Before the link comes up: no notice of the routes it brings is missed.
    let events = RouteEvents::subscribe()
        .map_err(|e| fail(format!("cannot subscribe to route notices: {e}")))?;
    ip(&["link", "set", link, "up"]).map_err(Stop::from)?;
    wait_until_local(&events, v4)?;
    wait_until_local(&events, v6)
}

/// How long an address may take to be routed as this machine's once its link is up: the
/// kernel installs an IPv6 address's route from a work queue, after `ip` has returned.
const ADDRESS_READY: Duration = Duration::from_secs(10);

/// Waits, at most [`ADDRESS_READY`], until the kernel routes `address` as this machine's:
/// asked again at each route notice of `events`.
fn wait_until_local(events: &RouteEvents, address: &str) -> Result<(), Stop> {
    let mut said = String::new();
    let mut error = None;
    let mut local = || match Command::new("ip").args(["route", "get", address]).output() {
        Ok(output) => {
            said = String::from_utf8_lossy(&output.stdout).trim().to_owned();
            output.stdout.starts_with(b"local ")
        }
        Err(e) => {
            error = Some(format!("cannot run ip: {e}"));
            true
        }
    };
    let routed = events
        .until(Instant::now() + ADDRESS_READY, &mut local)
        .map_err(|e| fail(format!("reading route notices: {e}")))?;
    if let Some(error) = error {
        return Err(fail(error));
    }
    if !routed {
        return Err(fail(format!(
            "{address} was not routed as this machine's within {ADDRESS_READY:?}: {said}"
        )));
    }
    Ok(())
}

/// `ip ARGS` in the calling thread's network namespace; the error says what it said.
fn ip(args: &[&str]) -> Result<(), E2eError> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| trouble!("cannot run ip: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(trouble!(
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}
