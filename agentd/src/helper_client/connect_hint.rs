//! What to do when the helper's service socket cannot be reached: the hint names the real
//! cause (nothing there, no permission and why, nobody listening), read from the socket's
//! and its directory's owner, group and mode.

use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::unistd::{AccessFlags, Gid, Group, Uid, User, access};

/// The hint for a failed `connect` to `socket`.
pub(crate) fn connect_hint(socket: &Path, error: &std::io::Error) -> String {
    let shown = socket.display();
    match error.kind() {
        ErrorKind::NotFound => format!(
            "no helper is serving there: start the service (`systemctl start \
             confine-helper.socket` where the package installed it, or `confine-service \
             --socket {shown}`), or drop --helper-socket and helper.socket to let agentd start \
             its own helper"
        ),
        ErrorKind::ConnectionRefused => format!(
            "the socket is there but no helper listens on it (the service stopped): restart it \
             (`systemctl restart confine-helper.socket`, or `confine-service --socket \
             {shown}` again)"
        ),
        ErrorKind::PermissionDenied => permission_hint(socket),
        _ => format!(
            "start it with `confine-service --socket {shown}`, or drop --helper-socket and \
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
        // The kernel's own answer (as the denial classifier asks it), not one worked out from
        // the mode bits.
        Ok(meta) if access(dir, AccessFlags::X_OK).is_err() => (dir, meta),
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
    // Connecting takes write permission on the socket, search permission on its directory.
    if mode & 0o020 == 0 && path == socket || mode & 0o010 == 0 && path == dir {
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

/// Whether this process holds `gid`: its effective group, or among its supplementary groups
/// (which need not list the effective one).
#[cfg(target_os = "linux")]
fn in_session_groups(gid: Gid) -> bool {
    nix::unistd::getegid() == gid
        || nix::unistd::getgroups().is_ok_and(|groups| groups.contains(&gid))
}

/// Whether this process holds `gid`: on macOS, whose `getgroups` answers from the directory
/// service rather than from the process, only its effective group is trusted here, so a hint
/// may say "log in again" where the group is already held.
#[cfg(target_os = "macos")]
fn in_session_groups(gid: Gid) -> bool {
    nix::unistd::getegid() == gid
}

/// Whether the group database lists `uid`'s user as a member of `group` (or it is the user's
/// login group).
fn listed_member(group: &str, uid: Uid) -> bool {
    let (Ok(Some(user)), Ok(Some(group))) = (User::from_uid(uid), Group::from_name(group)) else {
        return false;
    };
    user.gid == group.gid || group.mem.contains(&user.name)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::{UnixListener, UnixStream};

    use super::*;
    use crate::test_support::Scratch;

    fn hint_of_connect(socket: &Path) -> String {
        let error = UnixStream::connect(socket).expect_err("nothing accepts there");
        connect_hint(socket, &error)
    }

    #[test]
    fn nothing_there_and_nobody_listening_have_their_own_hints() {
        let scratch = Scratch::new("connect-hint-cause");
        let socket = scratch.0.join("helper.sock");
        assert!(hint_of_connect(&socket).starts_with("no helper is serving there"));
        drop(UnixListener::bind(&socket).expect("bind"));
        assert!(
            hint_of_connect(&socket).starts_with("the socket is there but no helper listens"),
            "a socket left by a stopped service"
        );
    }

    #[test]
    fn a_socket_its_group_may_only_read_is_its_owners_alone() {
        let scratch = Scratch::new("connect-hint-mode");
        let socket = scratch.0.join("helper.sock");
        let _listener = UnixListener::bind(&socket).expect("bind");
        let socket_gid = std::fs::metadata(&socket).expect("socket").gid();
        assert_eq!(
            socket_gid,
            nix::unistd::getegid().as_raw(),
            "made in our group"
        );
        let hint_with = |mode: u32| {
            std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(mode))
                .expect("chmod");
            connect_hint(&socket, &std::io::Error::from(ErrorKind::PermissionDenied))
        };
        let owner = User::from_uid(nix::unistd::geteuid())
            .ok()
            .flatten()
            .map_or_else(|| nix::unistd::geteuid().to_string(), |u| u.name);
        let only_owner = format!("only its owner may use it: run agentd as {owner}");
        // Read without write does not let the group connect.
        let read_only = hint_with(0o640);
        assert!(read_only.contains("is mode 640"), "{read_only}");
        assert!(read_only.ends_with(&only_owner), "{read_only}");
        // The control: a group that may write is told about the group.
        let group = hint_with(0o660);
        assert!(!group.contains("only its owner"), "{group}");
        assert!(group.contains("group"), "{group}");
        // The socket's group is this process's effective group: it is held already, whatever
        // the supplementary groups list.
        assert!(!group.contains("this session is not yet"), "{group}");
    }
}
