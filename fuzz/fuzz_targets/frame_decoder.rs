//! The helper's read path under arbitrary bytes from a peer: a `FrameDecoder` fed in arbitrary
//! chunkings, each payload decoded with `decode_payload` as the helper decodes it (a `Hello`,
//! checked with `check_hello`, then `Request`s) and as agentd decodes the helper's (`Reply`).
//!
//! What must hold, whatever the bytes:
//! - nothing panics;
//! - how the bytes are chunked changes nothing: the payloads, the first error and what stays
//!   buffered are those of the same bytes fed at once;
//! - the decoder never buffers a whole frame it could hand out, nor more than one capped frame,
//!   and the payloads it hands out are exactly the stream's bytes, re-framed;
//! - whatever decodes re-encodes, and that encoding decodes to an equal value;
//! - decoding allocates in proportion to the payload's bytes, never to a length it claims.
//!
//! Input layout: the first byte `k` (mod 16) says how many chunk-size bytes follow; the rest is
//! the byte stream. The stream is fed in chunks of those sizes, cycling, where a size byte of 0
//! means "all that is left"; with `k == 0` it is fed in one piece.

#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use confine_protocol::frame::HEADER_LEN;
use confine_protocol::{
    FrameDecoder, FrameError, Hello, MAX_FRAME, Reply, Request, check_hello, decode_payload,
    encode_frame,
};
use libfuzzer_sys::fuzz_target;

#[path = "../../protocol/tests/support/stream.rs"]
mod stream;
use stream::{Outcome, at_once, drain};

/// Heap bytes a decode may hold per payload byte: the widest element of a decoded list (an
/// `EnvVar`, two `Vec`s) is 48 bytes and takes at least 2 payload bytes, a `Vec` grown element by
/// element holds at most twice its elements, and the element contents are payload bytes.
const ALLOC_PER_PAYLOAD_BYTE: usize = 64;
/// What a decode may hold besides: an error's message.
const ALLOC_SLACK: usize = 4096;

/// The system allocator, counting the bytes live now and the most live since the last reset.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn note_alloc(size: usize) {
    let live = LIVE.fetch_add(size, Ordering::Relaxed) + size;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every call is passed to `System` unchanged; the counters only observe the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_alloc(layout.size());
        // SAFETY: the caller's contract for `alloc` is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_alloc(new_size);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract for `realloc` is `System.realloc`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Decodes `payload` as `T`, asserting the allocation bound; a decoded value must survive a
/// re-encode and a second decode unchanged.
fn decode_checked<T>(payload: &[u8]) -> Option<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let decoded = decode_payload::<T>(payload);
    let held = PEAK.load(Ordering::Relaxed) - before;
    let bound = ALLOC_PER_PAYLOAD_BYTE * payload.len() + ALLOC_SLACK;
    assert!(
        held <= bound,
        "decoding {} payload bytes held {held} heap bytes (bound {bound})",
        payload.len()
    );
    let value = decoded.ok()?;
    let frame = encode_frame(&value).expect("a decoded message re-encodes");
    let mut decoder = FrameDecoder::new();
    decoder
        .feed(&frame)
        .expect("a re-encoded frame has a valid prefix");
    let again = decoder
        .next_message::<T>()
        .expect("a re-encoded message decodes")
        .expect("a re-encoded frame is complete");
    assert_eq!(again, value);
    assert_eq!(decoder.finish(), Ok(()));
    Some(value)
}

/// The errors a decoder reports about a length prefix, the only ones framing can give.
fn is_prefix_error(error: &FrameError) -> bool {
    matches!(error, FrameError::Empty | FrameError::TooLarge { .. })
}

fn chunked(stream: &[u8], sizes: &[u8]) -> Outcome {
    let mut decoder = FrameDecoder::new();
    let mut payloads = Vec::new();
    let mut fed = 0;
    let mut step = 0;
    while fed < stream.len() {
        let remaining = stream.len() - fed;
        let len = match sizes.get(step % sizes.len().max(1)) {
            Some(&size) if size != 0 => usize::from(size).min(remaining),
            _ => remaining,
        };
        step += 1;
        let before = payloads.len();
        let result = decoder
            .feed(&stream[fed..fed + len])
            .and_then(|()| drain(&mut decoder, &mut payloads));
        fed += len;
        if let Err(error) = result {
            assert!(is_prefix_error(&error), "framing failed with {error:?}");
            // After a bad prefix the connection is closed: nothing more is read.
            return Outcome {
                payloads,
                end: Err(error),
            };
        }
        for payload in &payloads[before..] {
            assert!(!payload.is_empty());
            assert!(payload.len() <= MAX_FRAME as usize);
        }
        // Everything whole was taken out, so what is left is less than one capped frame.
        assert!(decoder.buffered() < HEADER_LEN + MAX_FRAME as usize);
        let consumed: usize = payloads.iter().map(|p| HEADER_LEN + p.len()).sum();
        assert_eq!(consumed + decoder.buffered(), fed);
        assert_eq!(decoder.finish().is_ok(), decoder.buffered() == 0);
    }
    Outcome {
        payloads,
        end: Ok(decoder.buffered()),
    }
}

/// The stream the payloads make when framed again.
fn reframed(payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for payload in payloads {
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(payload);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else {
        return;
    };
    let k = usize::from(k % 16).min(rest.len());
    let (sizes, stream) = rest.split_at(k);

    let outcome = chunked(stream, sizes);
    assert_eq!(outcome, at_once(stream), "chunking changed the outcome");
    let consumed = reframed(&outcome.payloads);
    assert_eq!(consumed[..], stream[..consumed.len()]);

    // The helper decodes a greeting first, then requests; agentd decodes replies. Which one a
    // payload is depends on its place and direction, not its bytes: try each.
    let ours = Hello::ours("confine-helper fuzz");
    for payload in &outcome.payloads {
        if let Some(peer) = decode_checked::<Hello>(payload) {
            let same = peer.protocol_version == ours.protocol_version
                && peer.schema_hash == ours.schema_hash;
            match check_hello(&ours, &peer) {
                Ok(()) => assert!(same, "accepted {peer:?}"),
                Err(mismatch) => {
                    assert!(!same, "refused {peer:?}");
                    assert_eq!(mismatch.peer_version, peer.protocol_version);
                    assert_eq!(mismatch.peer_hash, peer.schema_hash);
                }
            }
        }
        decode_checked::<Request>(payload);
        decode_checked::<Reply>(payload);
    }
});
