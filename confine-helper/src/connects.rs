//! What a command's `connect` reaches when its shim answers it: the named Unix sockets of
//! `Policy::unix_sockets`, and, for the network allow-list under Landlock, the proxy.
//!
//! No kernel mechanism of this machine limits `connect` to a list of pathname sockets: mounts
//! do not apply to sockets' connect, and Landlock (up to ABI 7) has no right for it. Nor can
//! Landlock limit TCP to one address: its rules name ports. So the command's every `connect` is
//! handed to its shim (seccomp `USER_NOTIF`, `sys::connect`), which reads the address once from
//! the command's memory, judges that copy here, and connects the command's own socket itself.
//! The address the command may change after the shim read it is never read again, so there is
//! no time between a check and a use; and a listed name is connected to the socket it named
//! when the request was checked, never to what a path looks like later.
//!
//! A Unix socket's address ([`judge_unix`]):
//! - a pathname listed by the request: connected to that socket;
//! - an abstract name: connected as asked where such names are the sandbox's own (bwrap's
//!   network namespace), refused (`EPERM`) where they are the host's;
//! - any other pathname: refused with `EPERM`, the sandbox's denial;
//! - an address the kernel would refuse: the kernel's error (`EINVAL`).
//!
//! An `AF_INET`/`AF_INET6` address ([`judge_inet`]): connected as asked inside bwrap's own
//! network namespace, where only the sandbox's loopback exists; where the command shares the
//! host's (Landlock), only `127.0.0.1:`[`PROXY_PORT`] — which the shim connects to the proxy,
//! not to whatever listens there on the host — and nothing else.

use confine_protocol::PROXY_PORT;
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

    /// The socket's real path when the request was checked: `address` without the family and
    /// the terminating NUL. `None` when nothing was there then. Only the Seatbelt profile names
    /// it, so it is built where that is.
    #[cfg(any(target_os = "macos", test))]
    pub(crate) fn real_path(&self) -> Option<&[u8]> {
        let address = self.address.as_deref()?;
        address.get(FAMILY_LEN..address.len().saturating_sub(1))
    }
}

/// How one command's `connect` calls are judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rules {
    /// The named Unix sockets the request lists.
    pub(crate) listed: Vec<Listed>,
    /// Abstract Unix names and loopback addresses are the sandbox's own (its own network
    /// namespace): connected as asked. Otherwise they are the host's: only the proxy is.
    pub(crate) own_network: bool,
}

/// The `sockaddr_un` of pathname `path`, NUL-terminated.
fn address_of(path: &[u8]) -> Vec<u8> {
    let family = u16::try_from(libc::AF_UNIX).unwrap_or_default();
    let mut address = family.to_ne_bytes().to_vec();
    address.extend_from_slice(path);
    address.push(0);
    address
}

/// What the shim does with one `connect`.
#[cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "the Linux shim's")
)]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict<'a> {
    /// Connect the command's socket to this address.
    Connect(&'a [u8]),
    /// Connect the command's socket to the proxy.
    Proxy,
    /// Answer the command's `connect` with this error.
    Refuse(Errno),
}

/// Bytes of a `sockaddr_in`: family, port, address, padding.
#[cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "the Linux shim's")
)]
const SOCKADDR_IN_LEN: usize = 16;

/// Judges `address`, the bytes the command gave `connect` for an `AF_INET` or `AF_INET6`
/// socket.
#[cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "the Linux shim's")
)]
pub(crate) fn judge_inet<'a>(address: &'a [u8], rules: &Rules) -> Verdict<'a> {
    if rules.own_network {
        return Verdict::Connect(address);
    }
    let inet = u16::try_from(libc::AF_INET)
        .unwrap_or_default()
        .to_ne_bytes();
    let port = PROXY_PORT.to_be_bytes();
    let loopback = std::net::Ipv4Addr::LOCALHOST.octets();
    match address {
        [f0, f1, p0, p1, a0, a1, a2, a3, ..]
            if address.len() >= SOCKADDR_IN_LEN
                && [*f0, *f1] == inet
                && [*p0, *p1] == port
                && [*a0, *a1, *a2, *a3] == loopback =>
        {
            Verdict::Proxy
        }
        _ => Verdict::Refuse(Errno::EPERM),
    }
}

/// Judges `address`, the bytes the command gave `connect` for a Unix socket.
#[cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "the Linux shim's")
)]
pub(crate) fn judge_unix<'a>(address: &'a [u8], rules: &'a Rules) -> Verdict<'a> {
    let listed = &rules.listed;
    let family = match address.get(..FAMILY_LEN) {
        Some(&[a, b]) => i32::from(u16::from_ne_bytes([a, b])),
        _ => return Verdict::Refuse(Errno::EINVAL),
    };
    if family != libc::AF_UNIX || address.len() > SOCKADDR_UN_LEN {
        return Verdict::Refuse(Errno::EINVAL);
    }
    let Some(path) = address.get(FAMILY_LEN..) else {
        return Verdict::Refuse(Errno::EINVAL);
    };
    match path.first() {
        None => Verdict::Refuse(Errno::EINVAL),
        Some(0) if rules.own_network => Verdict::Connect(address),
        Some(0) => Verdict::Refuse(Errno::EPERM),
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

    fn rules(own_network: bool) -> Rules {
        Rules {
            listed: vec![
                Listed::new(b"/var/run/docker.sock".to_vec(), Some(b"/run/docker.sock")),
                Listed::new(b"/run/absent.sock".to_vec(), None),
            ],
            own_network,
        }
    }

    fn inet(port: u16, ip: [u8; 4]) -> Vec<u8> {
        let family = u16::try_from(libc::AF_INET).unwrap().to_ne_bytes();
        [&family[..], &port.to_be_bytes(), &ip, &[0; 8]].concat()
    }

    #[test]
    fn a_listed_name_connects_to_the_socket_it_named_when_checked() {
        let rules = rules(true);
        let real = un(b"/run/docker.sock");
        assert_eq!(
            judge_unix(&un(b"/var/run/docker.sock"), &rules),
            Verdict::Connect(real.as_slice())
        );
        // The name need not be NUL-terminated within the address length.
        let mut bare = un(b"/var/run/docker.sock");
        bare.pop();
        assert_eq!(judge_unix(&bare, &rules), Verdict::Connect(real.as_slice()));
    }

    #[test]
    fn any_other_pathname_is_refused_as_a_denial() {
        let rules = rules(true);
        for other in [
            b"/run/docker.sock".as_slice(),
            b"/var/run/docker.sock/",
            b"var/run/docker.sock",
            b"/var/run/./docker.sock",
            b"/run/user/1000/bus",
        ] {
            assert_eq!(
                judge_unix(&un(other), &rules),
                Verdict::Refuse(Errno::EPERM),
                "{}",
                String::from_utf8_lossy(other)
            );
        }
        // Bytes after the first NUL are not part of the name.
        let mut trailing = un(b"/run/user/1000/bus");
        trailing.extend_from_slice(b"/var/run/docker.sock");
        assert_eq!(judge_unix(&trailing, &rules), Verdict::Refuse(Errno::EPERM));
    }

    #[test]
    fn a_listed_socket_that_was_absent_fails_as_missing() {
        assert_eq!(
            judge_unix(&un(b"/run/absent.sock"), &rules(true)),
            Verdict::Refuse(Errno::ENOENT)
        );
    }

    #[test]
    fn abstract_names_connect_only_inside_a_network_namespace_of_the_sandboxs_own() {
        let mut abstract_name = u16::try_from(libc::AF_UNIX).unwrap().to_ne_bytes().to_vec();
        abstract_name.extend_from_slice(b"\0/tmp/.X11-unix/X0");
        assert_eq!(
            judge_unix(&abstract_name, &rules(true)),
            Verdict::Connect(abstract_name.as_slice())
        );
        assert_eq!(
            judge_unix(&abstract_name, &rules(false)),
            Verdict::Refuse(Errno::EPERM)
        );
    }

    #[test]
    fn malformed_addresses_get_the_kernels_error() {
        let rules = rules(true);
        assert_eq!(judge_unix(&[], &rules), Verdict::Refuse(Errno::EINVAL));
        assert_eq!(judge_unix(&[1], &rules), Verdict::Refuse(Errno::EINVAL));
        // The family alone: no path (an unnamed address cannot be connected to).
        assert_eq!(
            judge_unix(&un(b"")[..FAMILY_LEN], &rules),
            Verdict::Refuse(Errno::EINVAL)
        );
        let mut inet = un(b"/var/run/docker.sock");
        inet[..2].copy_from_slice(&u16::try_from(libc::AF_INET).unwrap().to_ne_bytes());
        assert_eq!(judge_unix(&inet, &rules), Verdict::Refuse(Errno::EINVAL));
        let long = un(&[b'a'; SOCKADDR_UN_LEN]);
        assert_eq!(judge_unix(&long, &rules), Verdict::Refuse(Errno::EINVAL));
    }

    #[test]
    fn inside_its_own_network_namespace_a_command_connects_where_it_asks() {
        let address = inet(8080, [127, 0, 0, 1]);
        assert_eq!(
            judge_inet(&address, &rules(true)),
            Verdict::Connect(address.as_slice())
        );
    }

    #[test]
    fn sharing_the_hosts_network_a_command_reaches_only_the_proxy() {
        let rules = rules(false);
        assert_eq!(
            judge_inet(&inet(PROXY_PORT, [127, 0, 0, 1]), &rules),
            Verdict::Proxy
        );
        for other in [
            inet(PROXY_PORT + 1, [127, 0, 0, 1]),
            inet(PROXY_PORT, [127, 0, 0, 2]),
            inet(PROXY_PORT, [10, 0, 0, 1]),
            inet(80, [93, 184, 216, 34]),
            inet(PROXY_PORT, [127, 0, 0, 1])[..8].to_vec(),
        ] {
            assert_eq!(
                judge_inet(&other, &rules),
                Verdict::Refuse(Errno::EPERM),
                "{other:?}"
            );
        }
        // IPv6, the proxy's port on ::1 included.
        let family = u16::try_from(libc::AF_INET6).unwrap().to_ne_bytes();
        let mut v6 = [&family[..], &PROXY_PORT.to_be_bytes(), &[0; 4]].concat();
        v6.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
        v6.extend_from_slice(&[0; 4]);
        assert_eq!(judge_inet(&v6, &rules), Verdict::Refuse(Errno::EPERM));
    }
}
