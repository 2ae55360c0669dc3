//! Raw socket I/O the tokio stream does not offer: writing with SCM_RIGHTS attached.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use tokio::io::Interest;
use tokio::net::UnixStream;

/// A vanished peer must surface as an error on this write, not as a SIGPIPE to all of agentd.
#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
const SEND_FLAGS: MsgFlags = MsgFlags::MSG_NOSIGNAL;
// Elsewhere the Rust runtime's SIGPIPE disposition (ignored) gives the same result.
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
const SEND_FLAGS: MsgFlags = MsgFlags::empty();

/// Writes all of `bytes`, with `fds` attached to the first chunk.
///
/// The kernel delivers ancillary data with the bytes of the `sendmsg` that carried it, so the
/// descriptors ride on the frame's first bytes and the helper receives them with the frame
/// header; the remainder of a partial write is sent without them.
pub async fn send_with_fds(stream: &UnixStream, bytes: &[u8], fds: &[OwnedFd]) -> io::Result<()> {
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let mut unsent = bytes;
    while !unsent.is_empty() {
        stream.writable().await?;
        let attach = unsent.len() == bytes.len() && !raw.is_empty();
        let result = stream.try_io(Interest::WRITABLE, || {
            let iov = [IoSlice::new(unsent)];
            let rights = [ControlMessage::ScmRights(&raw)];
            let cmsgs: &[ControlMessage] = if attach { &rights } else { &[] };
            sendmsg::<()>(stream.as_raw_fd(), &iov, cmsgs, SEND_FLAGS, None)
                .map_err(io::Error::from)
        });
        match result {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            // A write never reports more bytes than it was given.
            Ok(n) => unsent = unsent.get(n..).unwrap_or_default(),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The first `n` bytes of `buf`, which a read has just filled: an error if the read claimed
/// more than the buffer holds.
pub fn filled(buf: &[u8], n: usize) -> io::Result<&[u8]> {
    buf.get(..n)
        .ok_or_else(|| io::ErrorKind::InvalidData.into())
}

/// Reads whatever is available, waiting until something is.
pub async fn read_some(stream: &UnixStream, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        stream.readable().await?;
        match stream.try_read(buf) {
            Ok(n) => return Ok(n),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
}
