//! The proxy bridge inside a sandbox that has one (`Spawn::proxy`, RFC 0016): the only way out
//! of a sandbox whose network is an allow-list.
//!
//! The sandbox has its own, empty network namespace, so nothing it connects to leaves it. The
//! bridge listens on `127.0.0.1:`[`PROXY_PORT`] there and, for every connection made to it,
//! makes a Unix socketpair, sends one end to the requester over the control socket the request
//! brought (`SCM_RIGHTS`, with one byte), and relays the connection through the other. It
//! decides nothing: the requester's proxy reads the client's request from that end, and allows
//! or refuses it by its own list. The bridge runs under the same layers as the command (the
//! namespaces, seccomp, Landlock), in a process of its own that is not the command's child, and
//! it ends with the sandbox.
//!
//! What a command can do with it is what it can do with `127.0.0.1:PROXY_PORT` anyway: the
//! control socket carries socket ends the bridge made, and the requester checks each is a
//! socket before it serves it.

use std::io::{self, IoSlice, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use confine_protocol::PROXY_PORT;
use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};

/// Connections relayed at once; one more is closed at once (the requester's proxy has its own,
/// lower bound).
const MAX_RELAYS: usize = 512;

/// Listens on the bridge's port and starts the bridge in its own process; returns once it
/// listens, so the command can use it from its first instruction. `control` is the socket's
/// descriptor number as `enter` got it.
pub(crate) fn start(control: RawFd) -> io::Result<()> {
    let control = crate::sys::inherited_socket(control)?;
    let listener = TcpListener::bind(("127.0.0.1", PROXY_PORT))?;
    let listening: OwnedFd = listener.into();
    crate::sys::detach(&[&listening, &control], || {
        // In the bridge's process the two descriptors are 3 and 4.
        match serve(3, 4) {
            Ok(()) => 0,
            Err(_) => 1,
        }
    })
    // Both are closed here when they go out of scope: the command holds neither.
}

/// The namespace backend's bridge, in a process of its own that the shim started under the
/// command's layers with the control socket at 3 and a pipe at 4: listens, says so with one
/// byte on the pipe (the shim starts the command only then), and serves. The exit code.
pub(crate) fn serve_here() -> std::ffi::c_int {
    let listening = (|| -> io::Result<()> {
        let listener = TcpListener::bind(("127.0.0.1", PROXY_PORT))?;
        let ready = crate::sys::inherited_pipe(4)?;
        nix::unistd::write(&ready, b"l")?;
        drop(ready);
        let control = UnixStream::from(crate::sys::inherited_socket(3)?);
        serve_on(&listener, &control)
    })();
    i32::from(listening.is_err())
}

/// Accepts connections on `listener` until the control socket's peer is gone.
fn serve(listener: RawFd, control: RawFd) -> io::Result<()> {
    let listener = TcpListener::from(crate::sys::inherited_socket(listener)?);
    let control = UnixStream::from(crate::sys::inherited_socket(control)?);
    serve_on(&listener, &control)
}

/// Accepts connections on `listener`, each relayed through a socket end sent on `control`.
fn serve_on(listener: &TcpListener, control: &UnixStream) -> io::Result<()> {
    let relays = Arc::new(AtomicUsize::new(0));
    loop {
        let (client, _) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if relays.load(Ordering::Acquire) >= MAX_RELAYS {
            continue;
        }
        let (ours, theirs) = UnixStream::pair()?;
        let fds = [theirs.as_raw_fd()];
        // The requester gone (EPIPE) ends the bridge: nothing can be served any more.
        sendmsg::<()>(
            control.as_raw_fd(),
            &[IoSlice::new(b"c")],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::MSG_NOSIGNAL,
            None,
        )?;
        drop(theirs);
        relays.fetch_add(1, Ordering::AcqRel);
        let held = relays.clone();
        let spawned = std::thread::Builder::new().spawn(move || {
            relay(client, ours);
            held.fetch_sub(1, Ordering::AcqRel);
        });
        if spawned.is_err() {
            // No thread for it: the connection was dropped with the closure.
            relays.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Copies both ways until each side has ended, passing each end of file on as a shutdown.
fn relay(client: TcpStream, proxy: UnixStream) {
    let (Ok(client_back), Ok(proxy_back)) = (client.try_clone(), proxy.try_clone()) else {
        return;
    };
    let upstream = std::thread::Builder::new().spawn(move || {
        copy(&client, &proxy);
        let _ = proxy.shutdown(Shutdown::Write);
    });
    copy(&proxy_back, &client_back);
    let _ = client_back.shutdown(Shutdown::Write);
    if let Ok(upstream) = upstream {
        let _ = upstream.join();
    }
}

fn copy(mut from: impl Read, mut to: impl Write) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                // A count past the buffer is a broken reader: the copy ends.
                let Some(read) = buf.get(..n) else { return };
                if to.write_all(read).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
