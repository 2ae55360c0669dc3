//! Why the helper drops its connection.

use confine_protocol::FrameError;

/// Why the helper drops a connection; the text is what its log line says.
#[derive(Debug, thiserror::Error)]
pub(super) enum Closed {
    #[error("closed by peer")]
    ByPeer,
    #[error("read failed: {0}")]
    Read(nix::Error),
    #[error("write failed: {0}")]
    Write(nix::Error),
    #[error("protocol error: too many descriptors in one message")]
    TooManyFds,
    #[error("protocol error: descriptors sent without a Spawn")]
    UnclaimedFds,
    #[error("protocol error: Spawn {spawn} declared {wanted} descriptors, {arrived} arrived")]
    MissingFds {
        spawn: u64,
        wanted: usize,
        arrived: usize,
    },
    #[error("protocol error: {0}")]
    Protocol(FrameError),
    #[error("protocol error in greeting: {0}")]
    Greeting(FrameError),
    #[error("refused: {0}")]
    Refused(confine_protocol::Mismatch),
    #[error("no greeting within 10 s")]
    NoGreeting,
    #[error("a frame was left half-sent for 30 s")]
    Stalled,
    /// Greeted, then this many seconds with no command running and nothing sent.
    #[error("idle for {0} s with no command running (--idle-limit); closed to free its place")]
    Idle(u64),
    #[error("cannot encode a reply: {0}")]
    Encode(FrameError),
    #[error("the peer does not read its replies")]
    NotReading,
}
