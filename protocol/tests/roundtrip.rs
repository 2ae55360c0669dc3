//! Randomized round trips: random messages of every type go through `encode_frame`, then through
//! a `FrameDecoder` fed in random-sized chunks, and must come out equal.
//!
//! The generator is seeded, so a failure reproduces: the panic message names the seed, and
//! `ROUNDTRIP_SEED=<seed> cargo test -p confine-protocol --test roundtrip` replays it. Without the
//! variable the fixed default seed keeps CI deterministic.

mod support;

use std::fmt::Debug;

use confine_protocol::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use support::{Rng, chunk_len, hello, reply, request, seed};

const ITERATIONS: usize = 2_000;
const DEFAULT_SEED: u64 = 0x5eed_c0f1_ae00_0001;

fn base_seed() -> u64 {
    seed("ROUNDTRIP_SEED", DEFAULT_SEED)
}

/// Feeds `stream` in random chunks and takes every message out as soon as it is complete.
fn decode_chunked<T: DeserializeOwned>(rng: &mut Rng, stream: &[u8]) -> Result<Vec<T>, String> {
    let mut decoder = FrameDecoder::new();
    let mut out = Vec::new();
    let mut at = 0;
    while at < stream.len() {
        let len = chunk_len(rng, stream.len() - at);
        decoder
            .feed(&stream[at..at + len])
            .map_err(|e| format!("feed at byte {at}: {e}"))?;
        at += len;
        while let Some(message) = decoder
            .next_message()
            .map_err(|e| format!("next_message after byte {at}: {e}"))?
        {
            out.push(message);
        }
    }
    decoder.finish().map_err(|e| format!("finish: {e}"))?;
    Ok(out)
}

/// Round-trips `ITERATIONS` random values one frame at a time, then the same values again as
/// runs of several frames in one stream, so frame boundaries fall inside chunks as well.
fn round_trip<T>(type_name: &str, stream_salt: u64, generate: fn(&mut Rng) -> T)
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let base = base_seed();
    let seed = base ^ stream_salt;
    let mut rng = Rng(seed);
    let context = |iteration: usize| {
        format!(
            "{type_name} iteration {iteration}; reproduce with ROUNDTRIP_SEED={base:#x} cargo \
             test -p confine-protocol --test roundtrip"
        )
    };

    let mut batch: Vec<T> = Vec::new();
    let mut batch_len = 1 + rng.below(8);
    let mut stream: Vec<u8> = Vec::new();
    for iteration in 0..ITERATIONS {
        let value = generate(&mut rng);
        let frame = encode_frame(&value)
            .unwrap_or_else(|e| panic!("encode failed: {e}; {}\n{value:?}", context(iteration)));
        let decoded: Vec<T> = decode_chunked(&mut rng, &frame)
            .unwrap_or_else(|e| panic!("{e}; {}\n{value:?}", context(iteration)));
        assert!(
            decoded.len() == 1 && decoded[0] == value,
            "decoded {decoded:?}, want {value:?}; {}",
            context(iteration)
        );
        stream.extend_from_slice(&frame);
        batch.push(value);
        if batch.len() == batch_len || iteration == ITERATIONS - 1 {
            let decoded: Vec<T> = decode_chunked(&mut rng, &stream)
                .unwrap_or_else(|e| panic!("{e}; batch ending at {}", context(iteration)));
            assert!(
                decoded == batch,
                "batch of {} differs; {}",
                batch.len(),
                context(iteration)
            );
            batch.clear();
            stream.clear();
            batch_len = 1 + rng.below(8);
        }
    }
}

#[test]
fn random_hellos_survive_encoding_and_chunked_decoding() {
    round_trip("Hello", 0x4865_6c6c_6f00_0000, hello);
}

#[test]
fn random_requests_survive_encoding_and_chunked_decoding() {
    round_trip("Request", 0x5265_7175_6573_7400, request);
}

#[test]
fn random_replies_survive_encoding_and_chunked_decoding() {
    round_trip("Reply", 0x5265_706c_7900_0000, reply);
}

#[test]
fn the_generators_reach_every_variant() {
    let mut rng = Rng(base_seed());
    let mut requests = [false; 4];
    let mut replies = [false; 5];
    for _ in 0..ITERATIONS {
        requests[match request(&mut rng) {
            Request::Spawn(_) => 0,
            Request::Cancel(_) => 1,
            Request::Info => 2,
            Request::Hints(_) => 3,
        }] = true;
        replies[match reply(&mut rng) {
            Reply::Started(_) => 0,
            Reply::Exited(_) => 1,
            Reply::RunnerFailed(_) => 2,
            Reply::Refused(_) => 3,
            Reply::Info(_) => 4,
        }] = true;
    }
    assert_eq!(requests, [true; 4]);
    assert_eq!(replies, [true; 5]);
}
