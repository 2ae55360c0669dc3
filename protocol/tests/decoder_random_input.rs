//! Randomized hostile input for the frame decoder, in the normal suite (the coverage-guided
//! target `fuzz/fuzz_targets/frame_decoder.rs` checks the same properties for longer): random
//! bytes, and streams of valid frames with random damage, each fed to a `FrameDecoder` in random
//! chunks, every payload then decoded as the helper decodes a peer's (`Hello`, `Request`) and as
//! agentd decodes the helper's (`Reply`).
//!
//! What must hold: nothing panics; how the bytes are chunked changes nothing (the payloads and
//! the error are those of the bytes fed at once); the frames before the first damaged byte come
//! out as they went in; whatever decodes re-encodes to an equal value; and decoding holds heap in
//! proportion to the payload's bytes, never to a length the payload claims.
//!
//! Seeded: a failure names its seed, and `DECODER_SEED=<seed> cargo test -p confine-protocol
//! --test decoder_random_input` replays it. Without the variable the default seed keeps CI
//! deterministic.

mod support;

use std::fmt::Debug;

use confine_protocol::frame::HEADER_LEN;
use confine_protocol::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use support::stream::{Outcome, at_once, drain};
use support::{Rng, chunk_len, hello, reply, request, seed};

const ITERATIONS: usize = 3_000;
const DEFAULT_SEED: u64 = 0x5eed_dec0_de00_0001;

/// Heap bytes a decode may hold per payload byte: the widest element of a decoded list (an
/// `EnvVar`, two `Vec`s) is 48 bytes and takes at least 2 payload bytes, a `Vec` grown element by
/// element holds at most twice its elements, and the element contents are payload bytes.
const ALLOC_PER_PAYLOAD_BYTE: usize = 64;
/// What a decode may hold besides: an error's message.
const ALLOC_SLACK: usize = 4096;

#[global_allocator]
static ALLOCATOR: support::heap::Counting = support::heap::Counting;

/// `decode_payload::<T>(payload)` and the most heap it held at once.
fn measured_decode<T: DeserializeOwned>(payload: &[u8]) -> (Result<T, FrameError>, usize) {
    support::heap::measured(|| decode_payload::<T>(payload))
}

// ---------------------------------------------------------------------------------------------
// The properties.
// ---------------------------------------------------------------------------------------------

/// Feeds `stream` in random chunks, taking payloads out after each, as the helper's read loop
/// does; checks the decoder's bookkeeping on the way.
fn chunked(rng: &mut Rng, stream: &[u8], context: &str) -> Outcome {
    let mut decoder = FrameDecoder::new();
    let mut payloads = Vec::new();
    let mut fed = 0;
    while fed < stream.len() {
        let len = chunk_len(rng, stream.len() - fed);
        let result = decoder
            .feed(&stream[fed..fed + len])
            .and_then(|()| drain(&mut decoder, &mut payloads));
        fed += len;
        if let Err(error) = result {
            assert!(
                matches!(error, FrameError::Empty | FrameError::TooLarge { .. }),
                "framing failed with {error:?}; {context}"
            );
            return Outcome {
                payloads,
                end: Err(error),
            };
        }
        let consumed: usize = payloads.iter().map(|p| HEADER_LEN + p.len()).sum();
        assert_eq!(consumed + decoder.buffered(), fed, "{context}");
        assert!(
            decoder.buffered() < HEADER_LEN + MAX_FRAME as usize,
            "{context}"
        );
    }
    Outcome {
        payloads,
        end: Ok(decoder.buffered()),
    }
}

/// Decodes `payload` as `T` within the heap bound; what decodes must re-encode and decode again
/// to an equal value.
fn decode_checked<T>(payload: &[u8], context: &str) -> Option<T>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let (decoded, held) = measured_decode::<T>(payload);
    let bound = ALLOC_PER_PAYLOAD_BYTE * payload.len() + ALLOC_SLACK;
    assert!(
        held <= bound,
        "decoding {} payload bytes held {held} heap bytes (bound {bound}); {context}",
        payload.len()
    );
    let value = decoded.ok()?;
    let frame = encode_frame(&value)
        .unwrap_or_else(|e| panic!("a decoded {value:?} does not re-encode: {e}; {context}"));
    assert_eq!(
        decode_payload::<T>(&frame[HEADER_LEN..]).as_ref(),
        Ok(&value),
        "{context}"
    );
    Some(value)
}

/// Every payload as each of the three types; a `Hello` through the handshake check too.
fn decode_every_way(payloads: &[Vec<u8>], context: &str) {
    let ours = Hello::ours("decoder_random_input");
    for payload in payloads {
        if let Some(peer) = decode_checked::<Hello>(payload, context) {
            let same = peer.protocol_version == PROTOCOL_VERSION && peer.schema_hash == SCHEMA_HASH;
            assert_eq!(check_hello(&ours, &peer).is_ok(), same, "{context}");
        }
        decode_checked::<Request>(payload, context);
        decode_checked::<Reply>(payload, context);
    }
}

/// Feeds `stream` in random chunks, checks the outcome is that of feeding it at once, and
/// decodes every payload every way.
fn check_stream(rng: &mut Rng, stream: &[u8], context: &str) -> Outcome {
    let outcome = chunked(rng, stream, context);
    assert_eq!(
        outcome,
        at_once(stream),
        "chunking changed the outcome; {context}"
    );
    decode_every_way(&outcome.payloads, context);
    outcome
}

fn context(base: u64, iteration: usize) -> String {
    format!(
        "iteration {iteration}; reproduce with DECODER_SEED={base:#x} cargo test -p \
         confine-protocol --test decoder_random_input"
    )
}

// ---------------------------------------------------------------------------------------------
// Input.
// ---------------------------------------------------------------------------------------------

/// Length prefixes around the edges the decoder checks.
fn edge_prefix(rng: &mut Rng) -> u32 {
    rng.pick(&[0, 1, 2, 5, 127, 128, MAX_FRAME, MAX_FRAME + 1, u32::MAX])
}

/// Random bytes, often shaped like frames: a small plausible prefix, then random payload bytes.
fn random_stream(rng: &mut Rng) -> Vec<u8> {
    let mut stream = Vec::new();
    for _ in 0..1 + rng.below(4) {
        let len = rng.below(64);
        match rng.below(4) {
            0 => {}
            1 => stream.extend_from_slice(&edge_prefix(rng).to_le_bytes()),
            _ => stream.extend_from_slice(&(len as u32).to_le_bytes()),
        }
        stream.extend((0..len).map(|_| rng.next_u64() as u8));
    }
    stream
}

/// Which type a frame of the stream holds.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Hello,
    Request,
    Reply,
}

/// A valid message of a random type, framed.
fn random_frame(rng: &mut Rng) -> (Kind, Vec<u8>) {
    let (kind, frame) = match rng.below(3) {
        0 => (Kind::Hello, encode_frame(&hello(rng))),
        1 => (Kind::Request, encode_frame(&request(rng))),
        _ => (Kind::Reply, encode_frame(&reply(rng))),
    };
    (kind, frame.expect("a generated message encodes"))
}

/// Damages `stream` in 1 to 4 places; returns the index of the first byte that may differ.
fn damage(rng: &mut Rng, stream: &mut Vec<u8>) -> usize {
    let mut first = stream.len();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(stream.len() + 1);
        let end = (at + 1 + rng.below(16)).min(stream.len());
        match rng.below(7) {
            0 if at < stream.len() => stream[at] ^= 1 << rng.below(8),
            1 if at < stream.len() => stream[at] = rng.pick(&[0, 1, 0x7f, 0x80, 0xff]),
            2 => {
                let bytes: Vec<u8> = (0..1 + rng.below(8))
                    .map(|_| rng.next_u64() as u8)
                    .collect();
                stream.splice(at..at, bytes);
            }
            3 => {
                stream.drain(at..end);
            }
            4 => stream.truncate(at),
            5 => {
                let copy = stream[at..end].to_vec();
                stream.splice(at..at, copy);
            }
            _ => {
                let prefix = edge_prefix(rng).to_le_bytes();
                let end = (at + HEADER_LEN).min(stream.len());
                stream.splice(at..end, prefix);
            }
        }
        first = first.min(at);
    }
    first
}

// ---------------------------------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------------------------------

#[test]
fn random_bytes_in_random_chunks_never_panic_and_decode_as_when_fed_at_once() {
    let base = seed("DECODER_SEED", DEFAULT_SEED);
    let mut rng = Rng(base ^ 0x6279_7465_7300_0000);
    for iteration in 0..ITERATIONS {
        let stream = random_stream(&mut rng);
        check_stream(&mut rng, &stream, &context(base, iteration));
    }
}

#[test]
fn damaged_streams_of_valid_frames_keep_every_frame_before_the_damage() {
    let base = seed("DECODER_SEED", DEFAULT_SEED);
    let mut rng = Rng(base ^ 0x6461_6d61_6765_0000);
    for iteration in 0..ITERATIONS / 3 {
        let context = context(base, iteration);
        let mut sent = Vec::new();
        let mut stream = Vec::new();
        for _ in 0..1 + rng.below(5) {
            let (kind, frame) = random_frame(&mut rng);
            stream.extend_from_slice(&frame);
            sent.push((kind, frame, stream.len()));
        }
        let first_damaged = damage(&mut rng, &mut stream);
        let outcome = check_stream(&mut rng, &stream, &context);
        let intact = sent.iter().take_while(|(_, _, end)| *end <= first_damaged);
        for (i, (kind, frame, _)) in intact.enumerate() {
            let payload = outcome.payloads.get(i).unwrap_or_else(|| {
                panic!("intact frame {i} (a {kind:?}) did not come out; {context}")
            });
            assert_eq!(
                payload[..],
                frame[HEADER_LEN..],
                "intact frame {i}; {context}"
            );
            let decodes = match kind {
                Kind::Hello => decode_payload::<Hello>(payload).is_ok(),
                Kind::Request => decode_payload::<Request>(payload).is_ok(),
                Kind::Reply => decode_payload::<Reply>(payload).is_ok(),
            };
            assert!(decodes, "intact frame {i} is no {kind:?}; {context}");
        }
    }
}

#[test]
fn a_list_or_string_claiming_more_than_the_payload_holds_allocates_nothing_for_the_claim() {
    // A varint of 2^35 - 1, then the few bytes that follow.
    let huge = [0xff, 0xff, 0xff, 0xff, 0x7f];
    let spawn_argv = [&[0u8, 1][..], &huge, b"abc"].concat();
    let hello_software = [&[6u8, 1][..], &huge, b"abc"].concat();
    let info_backends = [&[4u8, 0, 1][..], &huge, &[1, 1, 0, 0]].concat();
    let exited_missing = [&[1u8, 1, 0, 0, 0, 0, 0, 1, 1][..], &huge].concat();
    for (name, payload) in [
        ("Spawn.argv", &spawn_argv),
        ("Hello.software", &hello_software),
        ("HelperInfo.backends", &info_backends),
        ("Enforcement::Partial.missing", &exited_missing),
    ] {
        let bound = ALLOC_PER_PAYLOAD_BYTE * payload.len() + ALLOC_SLACK;
        let (request, held_request) = measured_decode::<Request>(payload);
        let (hello, held_hello) = measured_decode::<Hello>(payload);
        let (reply, held_reply) = measured_decode::<Reply>(payload);
        for held in [held_request, held_hello, held_reply] {
            assert!(
                held <= bound,
                "{name}: held {held} heap bytes (bound {bound})"
            );
        }
        assert!(
            request.is_err() && hello.is_err() && reply.is_err(),
            "{name}: a claim past the payload's end must not decode"
        );
    }
}
