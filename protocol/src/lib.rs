//! The wire protocol between `agentd` and `confine-helper`.
//!
//! A connection is a stream of frames (see [`frame`]). Each side first sends a bare [`Hello`];
//! both check it with [`check_hello`] and close on a mismatch. A service that refuses a
//! connection sends a refusal ([`Hello::refusal`]) in place of its greeting and closes. After
//! the greetings agentd sends [`Request`]s and the helper answers with [`Reply`]s. A `Spawn`
//! frame carries the command's stdio descriptors as SCM_RIGHTS ancillary data on the same
//! `sendmsg`, so output never flows through the helper. Any protocol error closes the
//! connection: nothing is guessed.
//!
//! Beside the wire, [`environment`] holds the rules for a command's environment that both sides
//! apply, so that they cannot differ.

#![warn(clippy::too_many_lines)]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

/// Declares wire types: emits them unchanged, and their token text as the constant `$name`,
/// one part of [`SCHEMA_TEXT`].
macro_rules! wire {
    ($name:ident; $($item:item)*) => {
        $($item)*

        /// The token text of this file's wire types, in declaration order: one part of
        /// [`crate::SCHEMA_TEXT`].
        pub const $name: &str = stringify!($($item)*);
    };
}

pub mod environment;
pub mod frame;
mod messages;
mod outcome;
pub mod pattern;
mod policy;
pub mod vocabulary;

pub use frame::{FrameDecoder, FrameError, MAX_FRAME, decode_payload, encode_frame};
pub use messages::*;
pub use outcome::*;
pub use policy::*;
pub use vocabulary::UnknownWord;

/// Subpaths of every writable root that stay read-only in confined modes: code planted there
/// would run later, outside the sandbox. `.git` means a whole repository: the git directory it
/// names (also through a `.git` file or `commondir`), the `.git` entries of its submodules and
/// linked worktrees; see the helper's `git` module. A request's `Policy::protected` adds to
/// them. What does not exist yet cannot be kept from being created and is reported as missing
/// enforcement.
pub const PROTECTED_SUBPATHS: [&str; 1] = [".git"];

/// The port of the proxy bridge inside a sandbox that has one ([`Spawn::proxy`]), on
/// `127.0.0.1`: the port of `HTTP_PROXY` and `ALL_PROXY` there.
pub const PROXY_PORT: u16 = 3128;

/// The file name of the file reader and writer agentd runs confined (crate `file-io`), installed
/// beside the helper: agentd looks for it there, and the helper executes exactly that program
/// by a descriptor inside a bwrap sandbox. Not on the wire: a request names it by its path.
pub const FILE_IO_PROGRAM: &str = "confine-file-io";

/// Bumped on every change that is not purely additive at the end of the handshake.
pub const PROTOCOL_VERSION: u32 = 10;

/// The protocol version of a refusal: a [`Hello`] with it, sent in place of a service's
/// greeting, says that nothing will be served on this connection, and its `software` says why,
/// for a person to read (see [`Hello::refusal`]). No protocol ever had this version, so a peer
/// that does not know refusals refuses the pair as a mismatch, whose message names that
/// `software`, the reason, all the same.
pub const REFUSAL_VERSION: u32 = 0;

/// The token text of every wire type, in declaration order, in the three files that declare
/// them: the policy, the outcomes, the messages.
pub const SCHEMA_TEXT: [&str; 3] = [
    POLICY_SCHEMA_TEXT,
    OUTCOME_SCHEMA_TEXT,
    MESSAGES_SCHEMA_TEXT,
];

/// FNV-1a (64-bit) of [`SCHEMA_TEXT`], its parts one after the other: the message definitions
/// themselves.
pub const SCHEMA_HASH: u64 = fnv1a64(&SCHEMA_TEXT);

const fn fnv1a64(mut parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    while let [part, rest @ ..] = parts {
        let mut bytes = part.as_bytes();
        while let [byte, rest @ ..] = bytes {
            hash ^= *byte as u64;
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            bytes = rest;
        }
        parts = rest;
    }
    hash
}

impl Hello {
    /// This build's greeting; `software` names the sender, e.g. `confine-helper 0.1.0`.
    pub fn ours(software: &str) -> Hello {
        Hello {
            protocol_version: PROTOCOL_VERSION,
            schema_hash: SCHEMA_HASH,
            software: software.to_owned(),
        }
    }

    /// A refusal carrying `reason` ([`REFUSAL_VERSION`]): a service that will not serve a
    /// connection sends it instead of its greeting and closes, without reading anything.
    pub fn refusal(reason: &str) -> Hello {
        Hello {
            protocol_version: REFUSAL_VERSION,
            schema_hash: 0,
            software: reason.to_owned(),
        }
    }

    /// Why the peer refused the connection, when this greeting is a refusal.
    pub fn refused(&self) -> Option<&str> {
        (self.protocol_version == REFUSAL_VERSION).then_some(self.software.as_str())
    }
}

/// The two sides of a handshake do not speak the same protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "protocol mismatch: {peer_software} speaks protocol v{peer_version} (schema {peer_hash:016x}), \
     {our_software} speaks v{our_version} (schema {our_hash:016x}); install matching versions of \
     agentd and confine-helper"
)]
pub struct Mismatch {
    pub our_software: String,
    pub our_version: u32,
    pub our_hash: u64,
    pub peer_software: String,
    pub peer_version: u32,
    pub peer_hash: u64,
}

/// Accepts the peer's greeting only if it speaks exactly this build's protocol.
pub fn check_hello(ours: &Hello, peer: &Hello) -> Result<(), Mismatch> {
    if ours.protocol_version == peer.protocol_version && ours.schema_hash == peer.schema_hash {
        return Ok(());
    }
    Err(Mismatch {
        our_software: ours.software.clone(),
        our_version: ours.protocol_version,
        our_hash: ours.schema_hash,
        peer_software: peer.software.clone(),
        peer_version: peer.protocol_version,
        peer_hash: peer.schema_hash,
    })
}
