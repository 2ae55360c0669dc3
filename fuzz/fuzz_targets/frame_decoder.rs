//! Arbitrary bytes from a peer must never panic the decoder, and whatever decodes must survive a
//! re-encode unchanged.
//!
//! Input layout: the first byte `k` (mod 16) says how many chunk-size bytes follow; the rest is
//! the byte stream. The stream is fed in chunks of those sizes, cycling, where a size byte of 0
//! means "all that is left"; with `k == 0` it is fed in one piece.

#![no_main]

use confine_protocol::frame::HEADER_LEN;
use confine_protocol::{
    FrameDecoder, FrameError, Hello, MAX_FRAME, Reply, Request, decode_payload, encode_frame,
};
use libfuzzer_sys::fuzz_target;

/// If `payload` decodes as `$ty`, its re-encoding must decode to an equal value.
macro_rules! check_round_trip {
    ($ty:ty, $payload:expr) => {
        if let Ok(value) = decode_payload::<$ty>($payload) {
            let frame = encode_frame(&value).expect("a decoded message re-encodes");
            let mut decoder = FrameDecoder::new();
            decoder
                .feed(&frame)
                .expect("a re-encoded frame has a valid prefix");
            let again = decoder
                .next_message::<$ty>()
                .expect("a re-encoded message decodes")
                .expect("a re-encoded frame is complete");
            assert_eq!(again, value);
            assert_eq!(decoder.finish(), Ok(()));
        }
    };
}

fn is_prefix_error(error: &FrameError) -> bool {
    matches!(error, FrameError::Empty | FrameError::TooLarge { .. })
}

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else {
        return;
    };
    let k = usize::from(k % 16).min(rest.len());
    let (sizes, stream) = rest.split_at(k);

    let mut decoder = FrameDecoder::new();
    // The frames handed out, re-framed: must equal the stream's consumed prefix.
    let mut consumed: Vec<u8> = Vec::new();
    let mut fed = 0;
    let mut step = 0;
    'stream: while fed < stream.len() {
        let remaining = stream.len() - fed;
        let len = match sizes.get(step % sizes.len().max(1)) {
            Some(&size) if size != 0 => usize::from(size).min(remaining),
            _ => remaining,
        };
        step += 1;
        let fed_ok = decoder.feed(&stream[fed..fed + len]);
        fed += len;
        if let Err(error) = fed_ok {
            assert!(is_prefix_error(&error), "feed failed with {error:?}");
            break;
        }
        loop {
            match decoder.next_payload() {
                Ok(Some(payload)) => {
                    assert!(!payload.is_empty());
                    assert!(payload.len() <= MAX_FRAME as usize);
                    consumed.extend_from_slice(&(payload.len() as u32).to_le_bytes());
                    consumed.extend_from_slice(&payload);
                    check_round_trip!(Request, &payload);
                    check_round_trip!(Reply, &payload);
                    check_round_trip!(Hello, &payload);
                }
                Ok(None) => break,
                Err(error) => {
                    assert!(
                        is_prefix_error(&error),
                        "next_payload failed with {error:?}"
                    );
                    break 'stream;
                }
            }
        }
        // Everything whole was taken out, so what is left is less than one capped frame.
        assert!(decoder.buffered() < HEADER_LEN + MAX_FRAME as usize);
        assert_eq!(consumed.len() + decoder.buffered(), fed);
        assert_eq!(consumed[..], stream[..consumed.len()]);
        assert_eq!(decoder.finish().is_ok(), decoder.buffered() == 0);
    }
});
