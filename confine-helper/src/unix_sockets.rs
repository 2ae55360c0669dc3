//! Named Unix sockets a command may connect to (`Policy::unix_sockets`), and how one `connect`
//! of the command is judged.
//!
//! No kernel mechanism of this machine limits `connect` to a list of pathname sockets: mounts
//! do not apply to sockets' connect, and Landlock (up to ABI 7) has no right for it. So the
//! command's every `connect` is handed to its shim (seccomp `USER_NOTIF`, `sys::connect`),
//! which reads the address once from the command's memory, judges that copy here, and connects
//! the command's own socket itself, to the path the helper resolved when the request came. The
//! address the command may change after the shim read it is never read again, so there is no
//! time between a check and a use; and a listed name is connected to the socket it named when
//! the request was checked, never to what a path looks like later.
//!
//! Judged here, on the address's bytes:
//! - a pathname listed by the request: connected to that socket;
//! - an abstract name: connected as asked. Such names live in the network namespace of the
//!   socket, which is the sandbox's own (the helper refuses `unix_sockets` without one), so
//!   only sockets of the sandbox itself are reached;
//! - any other pathname: refused with `EPERM`, the sandbox's denial;
//! - an address the kernel would refuse: the kernel's error (`EINVAL`).

use nix::errno::Errno;
use nix::libc;

/// The bytes of a `sockaddr_un` before `sun_path`: the family.
const FAMILY_LEN: usize = 2;
/// The largest address `connect` takes for a Unix socket: `sizeof(struct sockaddr_un)`.
pub(crate) const SOCKADDR_UN_LEN: usize = 110;
/// The longest pathname a `sockaddr_un` holds, without its terminating NUL.
pub(crate) const MAX_PATH_LEN: usize = SOCKADDR_UN_LEN - FAMILY_LEN - 1;

/// One socket the request lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    /// The name as the request gives it, which the command connects to.
    pub(crate) name: Vec<u8>,
    /// The `sockaddr_un` the shim connects to: the socket's real path when the request was
    /// checked. `None` when nothing was there then: a connect fails with `ENOENT`.
    pub(crate) address: Option<Vec<u8>>,
}

impl Listed {
    /// A listed `name` whose socket lies at `real` (an absolute path of at most
    /// [`MAX_PATH_LEN`] bytes without NUL), or that does not exist (`None`).
    pub(crate) fn new(name: Vec<u8>, real: Option<&[u8]>) -> Listed {
        Listed {
            name,
            address: real.map(address_of),
        }
    }
}

/// The `sockaddr_un` of pathname `path`, NUL-terminated.
fn address_of(path: &[u8]) -> Vec<u8> {
    let family = u16::try_from(libc::AF_UNIX).unwrap_or_default();
    let mut address = family.to_ne_bytes().to_vec();
    address.extend_from_slice(path);
    address.push(0);
    address
}

/// What the shim does with one `connect` of a Unix socket.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict<'a> {
    /// Connect the command's socket to this address.
    Connect(&'a [u8]),
    /// Answer the command's `connect` with this error.
    Refuse(Errno),
}

/// Judges `address`, the bytes the command gave `connect` for a Unix socket.
pub(crate) fn judge<'a>(address: &'a [u8], listed: &'a [Listed]) -> Verdict<'a> {
    let family = match address.get(..FAMILY_LEN) {
        Some(&[a, b]) => i32::from(u16::from_ne_bytes([a, b])),
        _ => return Verdict::Refuse(Errno::EINVAL),
    };
    if family != libc::AF_UNIX || address.len() > SOCKADDR_UN_LEN {
        return Verdict::Refuse(Errno::EINVAL);
    }
    let path = &address[FAMILY_LEN..];
    match path.first() {
        None => Verdict::Refuse(Errno::EINVAL),
        Some(0) => Verdict::Connect(address),
        Some(_) => {
            let name = path.split(|b| *b == 0).next().unwrap_or(path);
            match listed.iter().find(|l| l.name == name) {
                Some(Listed {
                    address: Some(real),
                    ..
                }) => Verdict::Connect(real),
                Some(Listed { address: None, .. }) => Verdict::Refuse(Errno::ENOENT),
                None => Verdict::Refuse(Errno::EPERM),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn un(path: &[u8]) -> Vec<u8> {
        address_of(path)
    }

    fn docker() -> Vec<Listed> {
        vec![
            Listed::new(b"/var/run/docker.sock".to_vec(), Some(b"/run/docker.sock")),
            Listed::new(b"/run/absent.sock".to_vec(), None),
        ]
    }

    #[test]
    fn a_listed_name_connects_to_the_socket_it_named_when_checked() {
        let listed = docker();
        assert_eq!(
            judge(&un(b"/var/run/docker.sock"), &listed),
            Verdict::Connect(un(b"/run/docker.sock").as_slice())
        );
        // The name need not be NUL-terminated within the address length.
        let mut bare = un(b"/var/run/docker.sock");
        bare.pop();
        assert_eq!(
            judge(&bare, &listed),
            Verdict::Connect(un(b"/run/docker.sock").as_slice())
        );
    }

    #[test]
    fn any_other_pathname_is_refused_as_a_denial() {
        let listed = docker();
        for other in [
            b"/run/docker.sock".as_slice(),
            b"/var/run/docker.sock/",
            b"var/run/docker.sock",
            b"/var/run/./docker.sock",
            b"/run/user/1000/bus",
        ] {
            assert_eq!(
                judge(&un(other), &listed),
                Verdict::Refuse(Errno::EPERM),
                "{}",
                String::from_utf8_lossy(other)
            );
        }
        // Bytes after the first NUL are not part of the name.
        let mut trailing = un(b"/run/user/1000/bus");
        trailing.extend_from_slice(b"/var/run/docker.sock");
        assert_eq!(judge(&trailing, &listed), Verdict::Refuse(Errno::EPERM));
    }

    #[test]
    fn a_listed_socket_that_was_absent_fails_as_missing() {
        assert_eq!(
            judge(&un(b"/run/absent.sock"), &docker()),
            Verdict::Refuse(Errno::ENOENT)
        );
    }

    #[test]
    fn abstract_names_connect_as_asked_within_the_sandbox_namespace() {
        let mut abstract_name = u16::try_from(libc::AF_UNIX).unwrap().to_ne_bytes().to_vec();
        abstract_name.extend_from_slice(b"\0/tmp/.X11-unix/X0");
        assert_eq!(
            judge(&abstract_name, &docker()),
            Verdict::Connect(abstract_name.as_slice())
        );
    }

    #[test]
    fn malformed_addresses_get_the_kernels_error() {
        let listed = docker();
        assert_eq!(judge(&[], &listed), Verdict::Refuse(Errno::EINVAL));
        assert_eq!(judge(&[1], &listed), Verdict::Refuse(Errno::EINVAL));
        // The family alone: no path (an unnamed address cannot be connected to).
        assert_eq!(
            judge(&un(b"")[..FAMILY_LEN], &listed),
            Verdict::Refuse(Errno::EINVAL)
        );
        let mut inet = un(b"/var/run/docker.sock");
        inet[..2].copy_from_slice(&u16::try_from(libc::AF_INET).unwrap().to_ne_bytes());
        assert_eq!(judge(&inet, &listed), Verdict::Refuse(Errno::EINVAL));
        let long = un(&[b'a'; SOCKADDR_UN_LEN]);
        assert_eq!(judge(&long, &listed), Verdict::Refuse(Errno::EINVAL));
    }
}
