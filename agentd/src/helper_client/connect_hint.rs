//! What to do when the helper's service socket cannot be reached: the hint names the real
//! cause (nothing there, no permission and why, nobody listening), read from the socket's
//! and its directory's owner, group and mode.

use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::unistd::{Gid, Group, Uid, User};

/// The hint for a failed `connect` to `socket`.
pub(crate) fn connect_hint(socket: &Path, error: &std::io::Error) -> String {
    let shown = socket.display();
    match error.kind() {
        ErrorKind::NotFound => format!(
            "no helper is serving there: start the service (`systemctl start \
             confine-helper.socket` where the package installed it, or `confine-helper serve \
             --socket {shown}`), or drop --helper-socket and helper.socket to let agentd start \
             its own helper"
        ),
        ErrorKind::ConnectionRefused => format!(
            "the socket is there but no helper listens on it (the service stopped): restart it \
             (`systemctl restart confine-helper.socket`, or `confine-helper serve --socket \
             {shown}` again)"
        ),
        ErrorKind::PermissionDenied => permission_hint(socket),
        _ => format!(
            "start it with `confine-helper serve --socket {shown}`, or drop --helper-socket and \
             helper.socket to let agentd start its own helper"
        ),
    }
}

/// Which of the directory or the socket keeps this user out, and what would let it in.
fn permission_hint(socket: &Path) -> String {
    let me = nix::unistd::geteuid();
    let name = User::from_uid(me).ok().flatten().map(|u| u.name);
    let who = match &name {
        Some(name) => format!("{name} (uid {me})"),
        None => format!("uid {me}"),
    };
    let dir = socket.parent().unwrap_or(Path::new("/"));
    let (path, meta) = match std::fs::metadata(dir) {
        Ok(meta) if !may(&meta, me, 0o1) => (dir, meta),
        _ => match std::fs::metadata(socket) {
            Ok(meta) => (socket, meta),
            Err(_) => {
                return format!("{who} may not enter {}", dir.display());
            }
        },
    };
    let group = Group::from_gid(Gid::from_raw(meta.gid()))
        .ok()
        .flatten()
        .map(|g| g.name);
    let mode = meta.mode() & 0o7777;
    let owner = User::from_uid(Uid::from_raw(meta.uid()))
        .ok()
        .flatten()
        .map_or_else(|| meta.uid().to_string(), |u| u.name);
    let shown_group = group.clone().unwrap_or_else(|| meta.gid().to_string());
    let what = format!(
        "{who} may not connect: {} is mode {mode:o}, owner {owner}, group {shown_group}",
        path.display()
    );
    if mode & 0o060 == 0 && path == socket || mode & 0o010 == 0 && path == dir {
        return format!("{what}; only its owner may use it: run agentd as {owner}");
    }
    let in_process = in_session_groups(Gid::from_raw(meta.gid()));
    let in_database = group.as_deref().is_some_and(|name| listed_member(name, me));
    match (in_process, in_database) {
        (false, true) => format!(
            "{what}; you are a member of group {shown_group}, but this session is not yet: log \
             in again (or run agentd under `sg {shown_group}`)"
        ),
        _ => format!(
            "{what}; ask an administrator to add you to group {shown_group} (`adduser {} \
             {shown_group}`), then log in again",
            name.as_deref().unwrap_or("USER")
        ),
    }
}

/// Whether this process holds `gid` among its supplementary groups.
#[cfg(target_os = "linux")]
fn in_session_groups(gid: Gid) -> bool {
    nix::unistd::getgroups().is_ok_and(|groups| groups.contains(&gid))
}

/// Whether this process holds `gid`: on macOS, whose `getgroups` answers from the directory
/// service rather than from the process, only its effective group is trusted here, so a hint
/// may say "log in again" where the group is already held.
#[cfg(target_os = "macos")]
fn in_session_groups(gid: Gid) -> bool {
    nix::unistd::getegid() == gid
}

/// Whether `uid` has the `bits` (of `rwx` = 4, 2, 1) on a file of `meta`, by its mode alone.
fn may(meta: &std::fs::Metadata, uid: Uid, bits: u32) -> bool {
    let mode = meta.mode();
    if uid.is_root() {
        return true;
    }
    let in_group = in_session_groups(Gid::from_raw(meta.gid()))
        || nix::unistd::getegid().as_raw() == meta.gid();
    if meta.uid() == uid.as_raw() {
        mode & (bits << 6) != 0
    } else if in_group {
        mode & (bits << 3) != 0
    } else {
        mode & bits != 0
    }
}

/// Whether the group database lists `uid`'s user as a member of `group` (or it is the user's
/// login group).
fn listed_member(group: &str, uid: Uid) -> bool {
    let (Ok(Some(user)), Ok(Some(group))) = (User::from_uid(uid), Group::from_name(group)) else {
        return false;
    };
    user.gid == group.gid || group.mem.contains(&user.name)
}
