//! The macOS backend: a Seatbelt profile (SBPL) for `/usr/bin/sandbox-exec -p PROFILE -- argv`,
//! generated from what the plan decided.
//!
//! [`profile`] is a pure function of a [`Profile`]: the same input gives the same text, which the
//! snapshots under `src/confine/snapshots/` pin for every mode, network and kind of protected path. It
//! takes paths as given; [`Checked::command`] builds its input from the request's checked parts
//! (the writable roots the helper opened, the repository walk, the denied reads, the temp
//! directory), all canonical (`/tmp` is `/private/tmp` on macOS): Seatbelt matches the paths
//! the kernel resolves, never a symbolic link's name.
//!
//! The profile starts from `(deny default)` and allows what commands need (`seatbelt_rules.rs`
//! names each operation and Mach service with why). SBPL lets the last matching rule win, so
//! the order below is the security property:
//!
//! 1. the base: processes, reads, sysctl reads, the few Mach services every command needs;
//!    nothing read or run through `/.vol` (a file named by its numbers, which no rule names);
//! 2. writes allowed to the writable roots and the command's temp directory (workspace-write
//!    only; `/dev/null` always);
//! 3. every writable root and the temp directory pinned: never removed or renamed (moved away,
//!    its protected paths would leave their rules, which name paths);
//! 4. writes denied again to every protected path (its repository metadata, the request's
//!    protected subpaths, agentd's and the helper's own files), itself and beneath, so a
//!    protected path that does not exist yet cannot be created either (`mkdir .git`);
//! 5. every directory between a writable area and a protected or denied path (or a root inside
//!    another) pinned: it cannot be removed, renamed away or created; hard links are allowed
//!    nowhere (a second name is a path no rule names);
//! 6. reads, writes, mapping and execution denied for the denied reads;
//! 7. the network: nothing unless the policy allows it, except each listed Unix socket and, for
//!    the allow-list, `localhost:3128`; with the network allowed, Unix sockets are still denied
//!    (as `socket(AF_UNIX)` is on Linux) but for the resolver's;
//! 8. last, what acts outside the sandbox, whatever a rule above allows: job creation,
//!    LaunchServices, preference writes, mounts, other processes' task ports, Apple Events, the
//!    pasteboard, the window server, the keychain, other processes' command lines.
//!
//! Every deny names its path by a regex that matches it in any case of its letters (APFS is
//! case-insensitive by default: `.GIT` is `.git`) and also under `/System/Volumes/Data` (the
//! Data volume's firmlinked spelling); allows name their paths as written, so a spelling they
//! miss is denied.
//!
//! Path strings are escaped (`\` and `"`); a path that is not UTF-8, holds a control character,
//! or is not a plain absolute path is refused ([`ProfileError`]) rather than written into a
//! profile that could mean something else.
//!
//! Built for macOS and for the unit tests only: the Linux helper holds no Seatbelt code, while
//! the profile's snapshots still run wherever the tests do.

use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use confine_protocol::{Gap, Mode, PROTECTED_SUBPATHS, PROXY_PORT, Refusal, Spawn};

use super::not_run::NotRun;
use crate::connects::Listed;
use crate::paths;
use crate::protect::{Protection, Root};
pub(crate) use paths_text::ProfileError;
use paths_text::{Reach, any_case, quoted};

/// Where macOS lets a file be named by its device and inode numbers.
const VOLFS: &str = "/.vol";

/// The only `sandbox-exec` the helper runs: the system's, never one found on a search path.
pub(crate) const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// What the command's network may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Net {
    /// Nothing (but the listed Unix sockets).
    Denied,
    /// Everything but Unix sockets.
    Allowed,
    /// Only the allow-list's proxy, `localhost:`[`PROXY_PORT`] (and the listed Unix sockets).
    Proxy,
}

/// What a command's profile says, as the plan decided it; every path absolute and canonical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Profile {
    pub(crate) mode: Mode,
    /// Writable (workspace-write only): the workspace and the extra roots.
    pub(crate) writable: Vec<PathBuf>,
    /// The command's writable temp directory (workspace-write only).
    pub(crate) temp: Option<PathBuf>,
    /// Kept read-only, themselves and everything beneath, whether they exist or not.
    pub(crate) read_only: Vec<PathBuf>,
    /// Directories on the way from a writable root to a read-only or denied path: never
    /// removed, renamed or created.
    pub(crate) pinned: Vec<PathBuf>,
    /// Neither read, written nor executed, themselves and everything beneath.
    pub(crate) deny_read: Vec<PathBuf>,
    pub(crate) network: Net,
    /// The Unix sockets the command may connect to, by their real paths.
    pub(crate) unix_sockets: Vec<PathBuf>,
}

/// How a block names its paths.
#[derive(Debug, Clone, Copy)]
enum Filter {
    /// `(subpath "...")`: the path and everything beneath, as written (an allow: a spelling it
    /// misses is denied).
    Subpath,
    /// An [`any_case`] regex (a deny: every spelling the volume takes for the path).
    AnyCase(Reach),
}

/// One block of path rules: a comment, then one rule `(HEAD FILTER)` per path.
struct Block<'a> {
    comment: &'a str,
    head: &'a str,
    filter: Filter,
    paths: &'a [PathBuf],
    what: &'static str,
}

/// The SBPL text of `p`.
pub(crate) fn profile(p: &Profile) -> Result<String, ProfileError> {
    let writes = match p.mode {
        Mode::ReadOnly => false,
        Mode::WorkspaceWrite => true,
        Mode::DangerFullAccess => return Err(ProfileError::Unconfined),
    };
    let temp: Vec<PathBuf> = p.temp.iter().cloned().collect();
    // Read-only mode writes nothing but /dev/null: no root, no temp directory, and nothing
    // writable to take back.
    fn written(writes: bool, paths: &[PathBuf]) -> &[PathBuf] {
        if writes { paths } else { &[] }
    }
    let areas: Vec<PathBuf> = p.writable.iter().chain(&temp).cloned().collect();
    let blocks = [
        Block {
            comment: "; The workspace-write mode's writable roots and temp directory.",
            head: "allow file-write*",
            filter: Filter::Subpath,
            paths: written(writes, &p.writable),
            what: "writable root",
        },
        Block {
            comment: "",
            head: "allow file-write*",
            filter: Filter::Subpath,
            paths: written(writes, &temp),
            what: "temp directory",
        },
        Block {
            comment: "; Each writable root and the temp directory itself is neither removed nor \
                      renamed:\n; moved away, its protected paths would leave their rules.",
            head: "deny file-write-unlink",
            filter: Filter::AnyCase(Reach::Itself),
            paths: written(writes, &areas),
            what: "writable root",
        },
        Block {
            comment: "; Protected paths stay read-only, even before they exist, in any case.",
            head: "deny file-write*",
            filter: Filter::AnyCase(Reach::Beneath),
            paths: written(writes, &p.read_only),
            what: "protected path",
        },
        Block {
            comment: "; The directories on their way are neither removed, renamed nor made.",
            head: "deny file-write-unlink file-write-create",
            filter: Filter::AnyCase(Reach::Itself),
            paths: written(writes, &p.pinned),
            what: "pinned directory",
        },
        Block {
            comment: "; Denied reads: neither read, written, mapped nor executed, in any case.",
            head: "deny file-read* file-write* file-map-executable process-exec",
            filter: Filter::AnyCase(Reach::Beneath),
            paths: &p.deny_read,
            what: "denied read",
        },
    ];
    let mut out = String::from(rules::BASE);
    // `/.vol/DEVICE/INODE` names any file by its numbers, a spelling no rule of a path names:
    // nothing is read or run that way (writes there are allowed nowhere).
    let _ = writeln!(
        out,
        "; /.vol names a file by its device and inode numbers, which no path rule names.\n\
         (deny file-read* file-map-executable process-exec {})",
        any_case(Path::new(VOLFS), "volfs", Reach::Beneath)?
    );
    for block in blocks {
        if !block.paths.is_empty() && !block.comment.is_empty() {
            let _ = writeln!(out, "{}", block.comment);
        }
        for path in block.paths {
            let filter = match block.filter {
                Filter::Subpath => format!("(subpath {})", quoted(path, block.what)?),
                Filter::AnyCase(reach) => any_case(path, block.what, reach)?,
            };
            let _ = writeln!(out, "({} {filter})", block.head);
        }
    }
    network_rules(p, &mut out)?;
    out.push_str(rules::DENIED);
    Ok(out)
}

/// `sandbox-exec`'s argv: the profile, then the command after `--`, so a program name that
/// starts with `-` is never taken for an option.
pub(crate) fn argv(profile: String, command: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut argv = vec![
        SANDBOX_EXEC.as_bytes().to_vec(),
        b"-p".to_vec(),
        profile.into_bytes(),
        b"--".to_vec(),
    ];
    argv.extend(command.iter().cloned());
    argv
}

/// The network's rules, and the listed Unix sockets' where the network is not allowed whole.
fn network_rules(p: &Profile, out: &mut String) -> Result<(), ProfileError> {
    match p.network {
        Net::Allowed => out.push_str(rules::NETWORK_ALLOWED),
        Net::Denied => out.push_str("; The network is denied.\n(deny network*)\n"),
        Net::Proxy => {
            let _ = writeln!(
                out,
                "; The network is the allow-list's proxy alone, which resolves the names: no \
                 resolver,\n; whose queries would leave by another way.\n(deny network*)\n\
                 (allow network-outbound (remote ip \"localhost:{PROXY_PORT}\"))"
            );
            out.push_str(rules::TLS);
        }
    }
    if p.network != Net::Allowed {
        if !p.unix_sockets.is_empty() {
            out.push_str("; The listed Unix sockets.\n");
        }
        for socket in &p.unix_sockets {
            let path = quoted(socket, "unix socket")?;
            let _ = writeln!(
                out,
                "(allow network-outbound (remote unix-socket (path-literal {path})))"
            );
        }
    }
    Ok(())
}

/// What Seatbelt cannot take away that the Linux backends do; each is part of every Seatbelt
/// run's `Partial` fact.
pub(crate) fn gaps() -> Vec<Gap> {
    vec![
        Gap::SessionServices {
            services: rules::SERVICES.to_owned(),
        },
        Gap::ProcessListing,
        Gap::SharedMemory,
    ]
}

/// The macOS major versions on which the profile has passed the kernel-e2e suite (the macOS leg
/// of `.github/workflows/e2e.yml`, which runs the whole catalogue and the escapes of RFC 0022).
/// A version is added here by the change that records such a run; until then a run on it is
/// `partial`, naming [`Gap::UnverifiedMacos`].
pub(crate) const VERIFIED_MACOS: &[u32] = &[];

/// The gap of a run on macOS `version` (its product version, `15.1.1`), unless its major version
/// is one of `verified`; an unknown version is never verified.
pub(crate) fn unverified(version: Option<&str>, verified: &[u32]) -> Option<Gap> {
    let major = version
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(major) if verified.contains(&major) => None,
        _ => Some(Gap::UnverifiedMacos {
            version: version.unwrap_or("unknown").to_owned(),
        }),
    }
}

/// The `ProductVersion` of a `SystemVersion.plist` (XML): the `<string>` after its key.
pub(crate) fn product_version(plist: &str) -> Option<String> {
    let after = plist.split_once("<key>ProductVersion</key>")?.1;
    let value = after.trim_start().strip_prefix("<string>")?;
    let (version, _) = value.split_once("</string>")?;
    let ok = !version.is_empty() && version.chars().all(|c| c.is_ascii_digit() || c == '.');
    ok.then(|| version.to_owned())
}

/// The running macOS's product version, from the file every macOS has.
#[cfg(target_os = "macos")]
pub(crate) fn running_version() -> Option<String> {
    let plist = std::fs::read_to_string("/System/Library/CoreServices/SystemVersion.plist").ok()?;
    product_version(&plist)
}

/// The allow-list's gap under Seatbelt: the port is the host's.
pub(crate) fn proxy_gap() -> Gap {
    Gap::HostProxyPort { port: PROXY_PORT }
}

/// The request's parts the plan has checked, from which [`Checked::command`] builds the profile.
#[derive(Debug)]
pub(crate) struct Checked<'a> {
    spawn: &'a Spawn,
    roots: &'a [Root],
    protection: Protection,
    own_paths: &'a [PathBuf],
    listed: Option<Vec<Listed>>,
    /// The command's temp directory, by the real path it was checked at, and whether it is
    /// writable.
    pub(crate) temp: Option<(PathBuf, bool)>,
    /// The denied reads that exist, by their real paths.
    pub(crate) deny_read: Vec<PathBuf>,
    /// Whether the command would run as root, whom the profile is not proved for.
    pub(crate) as_root: bool,
    /// The running macOS's product version, when known.
    pub(crate) macos_version: Option<String>,
}

impl<'a> Checked<'a> {
    pub(crate) fn new(
        spawn: &'a Spawn,
        roots: &'a [Root],
        protection: Protection,
        own_paths: &'a [PathBuf],
        listed: Option<Vec<Listed>>,
    ) -> Checked<'a> {
        Checked {
            spawn,
            roots,
            protection,
            own_paths,
            listed,
            temp: None,
            deny_read: Vec::new(),
            as_root: false,
            macos_version: None,
        }
    }

    /// The profile this request gets.
    pub(crate) fn profile(&self) -> Result<Profile, NotRun> {
        let policy = &self.spawn.policy;
        // Root reaches what the profile does not name and no run has proved it against (nvram,
        // sysctl writes, the system's own services): refused rather than confined by a guess.
        if self.as_root {
            return Err(NotRun::Refused(Refusal::SeatbeltAsRoot));
        }
        if policy.local_binding && policy.network != confine_protocol::Network::Allow {
            return Err(NotRun::Refused(Refusal::SeatbeltLocalBinding));
        }
        let network = match (policy.network, self.spawn.proxy) {
            (confine_protocol::Network::Allow, _) => Net::Allowed,
            (confine_protocol::Network::Deny, true) => Net::Proxy,
            (confine_protocol::Network::Deny, false) => Net::Denied,
        };
        // Already the real path: the kernel's for a session's directory, and one opened with no
        // link on its way for a private one. Resolving its name again would follow a link
        // planted there since.
        let temp = match &self.temp {
            Some((path, true)) => Some(path.clone()),
            _ => None,
        };
        let writable: Vec<PathBuf> = self.roots.iter().map(|r| r.path.clone()).collect();
        let mut read_only: Vec<PathBuf> = Vec::new();
        for root in &writable {
            let names = PROTECTED_SUBPATHS.iter().map(PathBuf::from).chain(
                policy
                    .protected
                    .iter()
                    .map(|raw| PathBuf::from(std::ffi::OsStr::from_bytes(raw))),
            );
            for name in names {
                let relative = name.strip_prefix("/").unwrap_or(&name);
                push_new(&mut read_only, root.join(relative));
            }
        }
        let walked = self.protection.read_only.iter().map(|b| &b.path);
        let absent = self.protection.absent.iter().map(|(path, _)| path);
        for path in walked.chain(absent) {
            push_new(&mut read_only, path.clone());
        }
        let own = self.own_paths.iter().cloned();
        let requester = policy
            .never_writable
            .iter()
            .map(|raw| PathBuf::from(std::ffi::OsStr::from_bytes(raw)))
            .filter(|p| p.is_absolute())
            .map(|p| paths::resolve(&p));
        for path in own.chain(requester) {
            push_new(&mut read_only, path);
        }
        let mut areas = writable.clone();
        areas.extend(temp.clone());
        let mut pinned = Vec::new();
        // A root inside another writable area is kept like a protected path: moved, it would
        // carry its protected paths out of their rules.
        for kept in read_only.iter().chain(&self.deny_read).chain(&areas) {
            for dir in on_the_way(&areas, kept) {
                push_new(&mut pinned, dir);
            }
        }
        let unix_sockets = self
            .listed
            .iter()
            .flatten()
            .filter_map(Listed::real_path)
            .map(|p| PathBuf::from(std::ffi::OsStr::from_bytes(p)))
            .collect();
        Ok(Profile {
            mode: policy.mode,
            writable,
            temp,
            read_only,
            pinned,
            deny_read: self.deny_read.clone(),
            network,
            unix_sockets,
        })
    }

    /// `sandbox-exec`'s argv for the request, and what it leaves unenforced.
    pub(crate) fn command(self) -> Result<(Vec<Vec<u8>>, Vec<Gap>), NotRun> {
        let profile_input = self.profile()?;
        let text = profile(&profile_input)
            .map_err(|e| NotRun::Refused(Refusal::SeatbeltProfile { why: e.to_string() }))?;
        // A protected path that does not exist yet is ruled by name like the others: what the
        // Linux backends report missing for it is enforced here.
        let absent: Vec<usize> = self.protection.absent.iter().map(|(_, i)| *i).collect();
        let mut missing: Vec<Gap> = (self.protection.missing.into_iter().enumerate())
            .filter(|(i, _)| !absent.contains(i))
            .map(|(_, sentence)| sentence)
            .collect();
        missing.extend(gaps());
        if let Some(gap) = unverified(self.macos_version.as_deref(), VERIFIED_MACOS) {
            missing.push(gap);
        }
        if profile_input.network == Net::Proxy {
            missing.push(proxy_gap());
        }
        Ok((argv(text, &self.spawn.argv), missing))
    }
}

fn push_new(list: &mut Vec<PathBuf>, path: PathBuf) {
    if !list.contains(&path) {
        list.push(path);
    }
}

/// The directories strictly between the outermost of `areas` that holds `path` and `path`,
/// parents first; none when no area holds it.
fn on_the_way(areas: &[PathBuf], path: &Path) -> Vec<PathBuf> {
    let Some(area) = areas
        .iter()
        .filter(|a| path.starts_with(a) && path != a.as_path())
        .min_by_key(|a| a.components().count())
    else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = path
        .ancestors()
        .skip(1)
        .take_while(|d| *d != area.as_path())
        .map(Path::to_path_buf)
        .collect();
    dirs.reverse();
    dirs
}

#[path = "seatbelt_paths.rs"]
mod paths_text;
#[path = "seatbelt_rules.rs"]
mod rules;

#[cfg(test)]
#[path = "seatbelt_tests.rs"]
mod tests;
