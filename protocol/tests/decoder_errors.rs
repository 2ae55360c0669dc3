//! Every way a peer can send something malformed, and what the decoder and handshake answer.

use confine_protocol::frame::HEADER_LEN;
use confine_protocol::*;

fn frame_of(payload: &[u8]) -> Vec<u8> {
    let mut frame = u32::try_from(payload.len()).unwrap().to_le_bytes().to_vec();
    frame.extend_from_slice(payload);
    frame
}

fn payload_of<T: serde::Serialize>(message: &T) -> Vec<u8> {
    encode_frame(message).unwrap()[HEADER_LEN..].to_vec()
}

/// The index of the first byte where two encodings differ: locates a field in the wire layout
/// without hard-coding offsets.
fn first_difference(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .expect("the encodings differ")
}

fn decode_error<T: serde::de::DeserializeOwned + std::fmt::Debug>(payload: &[u8]) -> FrameError {
    let mut decoder = FrameDecoder::new();
    decoder.feed(&frame_of(payload)).unwrap();
    decoder
        .next_message::<T>()
        .expect_err("the payload must not decode")
}

fn postcard_error(error: postcard::Error) -> FrameError {
    FrameError::Decode(error.to_string())
}

fn minimal_spawn() -> Spawn {
    Spawn {
        id: 1,
        argv: vec![b"true".to_vec()],
        cwd: b"/".to_vec(),
        env: Vec::new(),
        policy: Policy::read_only(),
        backend: BackendChoice::Auto,
        limits: Limits::none(),
        stdio: Stdio {
            stdin: StdioSpec::Null,
            stdout: StdioSpec::Null,
            stderr: StdioSpec::Null,
        },
        proxy: false,
    }
}

// ---------------------------------------------------------------------------------------------
// Framing.
// ---------------------------------------------------------------------------------------------

#[test]
fn an_empty_decoder_yields_nothing_and_finishes_cleanly() {
    let mut decoder = FrameDecoder::new();
    assert_eq!(decoder.next_payload(), Ok(None));
    assert_eq!(decoder.buffered(), 0);
    assert_eq!(decoder.finish(), Ok(()));
}

#[test]
fn a_frame_truncated_inside_its_body_fails_at_finish() {
    let frame = encode_frame(&Request::Spawn(minimal_spawn())).unwrap();
    let mut decoder = FrameDecoder::new();
    decoder.feed(&frame[..frame.len() - 1]).unwrap();
    assert_eq!(decoder.next_payload(), Ok(None));
    assert_eq!(
        decoder.finish(),
        Err(FrameError::Truncated {
            buffered: frame.len() - 1
        })
    );
}

#[test]
fn a_frame_truncated_inside_its_length_prefix_fails_at_finish() {
    let mut decoder = FrameDecoder::new();
    decoder.feed(&[5, 0]).unwrap();
    assert_eq!(decoder.next_payload(), Ok(None));
    assert_eq!(decoder.finish(), Err(FrameError::Truncated { buffered: 2 }));
}

#[test]
fn a_decoder_that_handed_out_every_frame_finishes_cleanly() {
    let mut decoder = FrameDecoder::new();
    decoder
        .feed(&encode_frame(&Request::Info).unwrap())
        .unwrap();
    assert_eq!(decoder.next_message::<Request>(), Ok(Some(Request::Info)));
    assert_eq!(decoder.buffered(), 0);
    assert_eq!(decoder.finish(), Ok(()));
}

#[test]
fn a_zero_length_prefix_is_rejected_at_feed() {
    let mut decoder = FrameDecoder::new();
    assert_eq!(decoder.feed(&[0, 0, 0, 0]), Err(FrameError::Empty));
}

#[test]
fn a_prefix_one_past_max_frame_is_rejected_at_feed_before_the_body_arrives() {
    let mut decoder = FrameDecoder::new();
    let prefix = (MAX_FRAME + 1).to_le_bytes();
    assert_eq!(
        decoder.feed(&prefix),
        Err(FrameError::TooLarge {
            len: u64::from(MAX_FRAME) + 1
        })
    );
    assert_eq!(
        decoder.buffered(),
        HEADER_LEN,
        "nothing beyond the prefix may be buffered"
    );
}

#[test]
fn a_prefix_of_u32_max_is_rejected_at_feed_before_the_body_arrives() {
    let mut decoder = FrameDecoder::new();
    let mut bytes = u32::MAX.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"some body");
    assert_eq!(
        decoder.feed(&bytes),
        Err(FrameError::TooLarge {
            len: u64::from(u32::MAX)
        })
    );
    assert_eq!(
        decoder.buffered(),
        bytes.len(),
        "only what was fed may be buffered"
    );
}

#[test]
fn a_bad_prefix_fed_one_byte_at_a_time_is_rejected_on_its_last_byte() {
    let mut decoder = FrameDecoder::new();
    let prefix = u32::MAX.to_le_bytes();
    for byte in &prefix[..HEADER_LEN - 1] {
        assert_eq!(decoder.feed(&[*byte]), Ok(()));
    }
    assert_eq!(
        decoder.feed(&prefix[HEADER_LEN - 1..]),
        Err(FrameError::TooLarge {
            len: u64::from(u32::MAX)
        })
    );
    assert_eq!(decoder.buffered(), HEADER_LEN);
}

#[test]
fn a_prefix_of_exactly_max_frame_is_accepted_and_waits_for_the_body() {
    let mut decoder = FrameDecoder::new();
    assert_eq!(decoder.feed(&MAX_FRAME.to_le_bytes()), Ok(()));
    assert_eq!(decoder.next_payload(), Ok(None));
    assert_eq!(decoder.buffered(), HEADER_LEN);
}

#[test]
fn a_bad_prefix_behind_a_valid_frame_is_rejected_once_the_valid_frame_is_taken() {
    let mut bytes = encode_frame(&Request::Info).unwrap();
    bytes.extend_from_slice(&0u32.to_le_bytes());
    let mut decoder = FrameDecoder::new();
    decoder.feed(&bytes).unwrap();
    assert_eq!(decoder.next_message::<Request>(), Ok(Some(Request::Info)));
    assert_eq!(decoder.next_payload(), Err(FrameError::Empty));
}

#[test]
fn trailing_bytes_after_a_valid_message_are_rejected() {
    let mut payload = payload_of(&Request::Cancel(Cancel { id: 1, grace_ms: 2 }));
    payload.extend_from_slice(&[0, 0]);
    assert_eq!(
        decode_error::<Request>(&payload),
        FrameError::TrailingBytes(2)
    );
    assert_eq!(
        decode_payload::<Request>(&payload),
        Err(FrameError::TrailingBytes(2))
    );
}

#[test]
fn a_message_cut_short_inside_its_payload_is_rejected() {
    let payload = payload_of(&Request::Cancel(Cancel { id: 1, grace_ms: 2 }));
    assert_eq!(
        decode_error::<Request>(&payload[..payload.len() - 1]),
        postcard_error(postcard::Error::DeserializeUnexpectedEnd)
    );
}

#[test]
fn an_unknown_request_variant_index_is_rejected() {
    assert_eq!(
        decode_error::<Request>(&[6]),
        postcard_error(postcard::Error::SerdeDeCustom)
    );
}

#[test]
fn a_request_variant_index_of_0xffff_is_rejected() {
    // 0xFFFF as a postcard varint: 7 bits at a time, low group first.
    assert_eq!(
        decode_error::<Request>(&[0xff, 0xff, 0x03]),
        postcard_error(postcard::Error::SerdeDeCustom)
    );
}

#[test]
fn a_variant_index_varint_that_overflows_u32_is_rejected() {
    assert_eq!(
        decode_error::<Request>(&[0xff, 0xff, 0xff, 0xff, 0x7f]),
        postcard_error(postcard::Error::DeserializeBadVarint)
    );
}

#[test]
fn an_unknown_reply_variant_index_is_rejected() {
    assert_eq!(
        decode_error::<Reply>(&[5]),
        postcard_error(postcard::Error::SerdeDeCustom)
    );
}

#[test]
fn an_unknown_mode_inside_a_spawn_is_rejected() {
    let read_only = payload_of(&Request::Spawn(minimal_spawn()));
    let mut danger = minimal_spawn();
    danger.policy.mode = Mode::DangerFullAccess;
    let at = first_difference(&read_only, &payload_of(&Request::Spawn(danger)));
    assert_eq!(read_only[at], 0, "the mode byte of ReadOnly");

    let mut payload = read_only;
    payload[at] = 3;
    assert_eq!(
        decode_error::<Request>(&payload),
        postcard_error(postcard::Error::SerdeDeCustom)
    );
}

#[test]
fn an_option_tag_of_2_is_rejected() {
    let none = payload_of(&Request::Spawn(minimal_spawn()));
    let mut with_root = minimal_spawn();
    with_root.policy.workspace_root = Some(Vec::new());
    let at = first_difference(&none, &payload_of(&Request::Spawn(with_root)));
    assert_eq!(none[at], 0, "the Option tag of None");

    let mut payload = none;
    payload[at] = 2;
    assert_eq!(
        decode_error::<Request>(&payload),
        postcard_error(postcard::Error::DeserializeBadOption)
    );
}

#[test]
fn a_bool_byte_of_2_is_rejected() {
    let report = |usable| {
        Reply::Info(HelperInfo {
            software: String::new(),
            pid: 1,
            backends: vec![BackendReport {
                backend: Backend::Bwrap,
                usable,
                detail: String::new(),
                layers: Vec::new(),
                fingerprint: None,
            }],
            landlock_abi: None,
            grant: Grant {
                max_mode: Mode::ReadOnly,
                network: Network::Deny,
                sources: Vec::new(),
                broken: None,
            },
        })
    };
    let unusable = payload_of(&report(false));
    let at = first_difference(&unusable, &payload_of(&report(true)));

    let mut payload = unusable;
    payload[at] = 2;
    assert_eq!(
        decode_error::<Reply>(&payload),
        postcard_error(postcard::Error::DeserializeBadBool)
    );
}

#[test]
fn bad_utf8_in_a_string_field_is_rejected() {
    let payload = payload_of(&Reply::Refused(Refused {
        id: 1,
        reason: Refusal::CeilingBroken {
            why: "ab".to_owned(),
        },
    }));
    let at = payload.len() - 2;
    assert_eq!(&payload[at..], b"ab");

    let mut bad = payload;
    bad[at..].copy_from_slice(&[0xff, 0xfe]);
    assert_eq!(
        decode_error::<Reply>(&bad),
        postcard_error(postcard::Error::DeserializeBadUtf8)
    );
}

#[test]
fn bad_utf8_in_the_hello_software_is_rejected() {
    let mut payload = payload_of(&Hello::ours("x"));
    *payload.last_mut().unwrap() = 0x80;
    assert_eq!(
        decode_error::<Hello>(&payload),
        postcard_error(postcard::Error::DeserializeBadUtf8)
    );
}

#[test]
fn non_utf8_bytes_in_a_bytes_field_are_accepted() {
    let mut spawn = minimal_spawn();
    spawn.argv = vec![vec![0xff, 0xfe, 0x80, 0x00]];
    let frame = encode_frame(&Request::Spawn(spawn.clone())).unwrap();
    let mut decoder = FrameDecoder::new();
    decoder.feed(&frame).unwrap();
    assert_eq!(
        decoder.next_message::<Request>(),
        Ok(Some(Request::Spawn(spawn)))
    );
}

/// A Hello whose payload is exactly `payload_len` bytes.
fn hello_with_payload_len(payload_len: usize) -> Hello {
    // Measured with postcard directly: encode_frame refuses the overshoot of the first guess.
    let mut hello = Hello::ours("");
    let overhead = postcard::to_allocvec(&hello).unwrap().len();
    let mut software_len = payload_len - overhead;
    loop {
        hello.software = "s".repeat(software_len);
        let len = postcard::to_allocvec(&hello).unwrap().len();
        if len == payload_len {
            return hello;
        }
        // The string's length varint grows with the string; shrink by the difference.
        software_len -= len - payload_len;
    }
}

#[test]
fn a_message_of_exactly_max_frame_bytes_encodes_and_decodes() {
    let hello = hello_with_payload_len(MAX_FRAME as usize);
    let frame = encode_frame(&hello).unwrap();
    assert_eq!(frame.len(), HEADER_LEN + MAX_FRAME as usize);
    let mut decoder = FrameDecoder::new();
    decoder.feed(&frame).unwrap();
    assert_eq!(decoder.next_message::<Hello>(), Ok(Some(hello)));
}

#[test]
fn encoding_a_message_one_byte_over_max_frame_fails() {
    let mut hello = hello_with_payload_len(MAX_FRAME as usize);
    hello.software.push('s');
    assert_eq!(
        encode_frame(&hello),
        Err(FrameError::TooLarge {
            len: u64::from(MAX_FRAME) + 1
        })
    );
}

#[test]
fn encoding_a_far_oversized_spawn_fails() {
    let mut spawn = minimal_spawn();
    spawn.argv = vec![vec![0u8; 2 * MAX_FRAME as usize]];
    assert!(matches!(
        encode_frame(&Request::Spawn(spawn)),
        Err(FrameError::TooLarge { len }) if len > u64::from(MAX_FRAME)
    ));
}

#[test]
fn several_frames_in_one_feed_come_out_in_order() {
    let requests = vec![
        Request::Info,
        Request::Spawn(minimal_spawn()),
        Request::Cancel(Cancel {
            id: 1,
            grace_ms: 500,
        }),
        Request::Info,
    ];
    let stream: Vec<u8> = requests
        .iter()
        .flat_map(|r| encode_frame(r).unwrap())
        .collect();
    let mut decoder = FrameDecoder::new();
    decoder.feed(&stream).unwrap();
    let mut decoded = Vec::new();
    while let Some(request) = decoder.next_message::<Request>().unwrap() {
        decoded.push(request);
    }
    assert_eq!(decoded, requests);
    assert_eq!(decoder.finish(), Ok(()));
}

#[test]
fn a_frame_split_byte_by_byte_decodes() {
    let request = Request::Spawn(minimal_spawn());
    let frame = encode_frame(&request).unwrap();
    let mut decoder = FrameDecoder::new();
    for (i, byte) in frame.iter().enumerate() {
        decoder.feed(&[*byte]).unwrap();
        if i + 1 < frame.len() {
            assert_eq!(
                decoder.next_payload(),
                Ok(None),
                "complete after only {} bytes",
                i + 1
            );
        }
    }
    assert_eq!(decoder.next_message::<Request>(), Ok(Some(request)));
    assert_eq!(decoder.finish(), Ok(()));
}

#[test]
fn frames_keep_decoding_after_more_than_max_frame_bytes_went_through() {
    // Exercises the decoder's compaction of consumed bytes while a partial frame is buffered.
    let big = hello_with_payload_len(MAX_FRAME as usize - 10);
    let small = Hello::ours("small");
    let mut stream = encode_frame(&big).unwrap();
    let small_frame = encode_frame(&small).unwrap();
    stream.extend_from_slice(&small_frame);
    stream.extend_from_slice(&small_frame[..3]);

    let mut decoder = FrameDecoder::new();
    decoder.feed(&stream).unwrap();
    assert_eq!(decoder.next_message::<Hello>(), Ok(Some(big)));
    assert_eq!(decoder.next_message::<Hello>(), Ok(Some(small.clone())));
    assert_eq!(decoder.next_message::<Hello>(), Ok(None));
    assert_eq!(decoder.buffered(), 3);
    decoder.feed(&small_frame[3..]).unwrap();
    assert_eq!(decoder.next_message::<Hello>(), Ok(Some(small)));
    assert_eq!(decoder.finish(), Ok(()));
}

// ---------------------------------------------------------------------------------------------
// Handshake.
// ---------------------------------------------------------------------------------------------

#[test]
fn check_hello_accepts_our_own_greeting() {
    let ours = Hello::ours("agentd 0.1.0");
    assert_eq!(check_hello(&ours, &ours.clone()), Ok(()));
}

#[test]
fn check_hello_accepts_a_peer_running_different_software_on_the_same_protocol() {
    assert_eq!(
        check_hello(
            &Hello::ours("agentd 0.1.0"),
            &Hello::ours("confine-helper 0.9.3")
        ),
        Ok(())
    );
}

#[test]
fn check_hello_rejects_a_different_protocol_version() {
    let ours = Hello::ours("agentd 0.1.0");
    let peer = Hello {
        protocol_version: PROTOCOL_VERSION + 1,
        ..Hello::ours("confine-helper")
    };
    let mismatch = check_hello(&ours, &peer).unwrap_err();
    assert_eq!(mismatch.our_version, PROTOCOL_VERSION);
    assert_eq!(mismatch.peer_version, PROTOCOL_VERSION + 1);
}

#[test]
fn check_hello_rejects_a_different_schema_hash() {
    let ours = Hello::ours("agentd 0.1.0");
    let peer = Hello {
        schema_hash: SCHEMA_HASH ^ 1,
        ..Hello::ours("confine-helper")
    };
    let mismatch = check_hello(&ours, &peer).unwrap_err();
    assert_eq!(mismatch.our_hash, SCHEMA_HASH);
    assert_eq!(mismatch.peer_hash, SCHEMA_HASH ^ 1);
}

#[test]
fn a_refusal_is_read_as_one_and_never_matches_a_protocol_that_names_its_reason() {
    let reason = "confine-helper service: uid 1001 has reached the cap on connections per user, 16";
    let refusal = Hello::refusal(reason);
    assert_eq!(refusal.refused(), Some(reason));
    // The control: a greeting of this protocol is no refusal.
    assert_eq!(Hello::ours("confine-helper").refused(), None);
    // A peer that does not look for refusals still refuses the pair, and says why.
    let mismatch = check_hello(&Hello::ours("agentd 0.1.0"), &refusal).unwrap_err();
    assert!(mismatch.to_string().contains(reason), "{mismatch}");
    // It decodes as any greeting does: the same frame, whatever the build.
    let frame = encode_frame(&refusal).expect("encode");
    let mut decoder = FrameDecoder::new();
    decoder.feed(&frame).expect("feed");
    assert_eq!(decoder.next_message::<Hello>(), Ok(Some(refusal)));
}

#[test]
fn the_mismatch_message_names_both_sides_versions_hashes_and_software() {
    let ours = Hello {
        protocol_version: 1,
        schema_hash: 0xaaaa,
        software: "agentd 0.1.0".into(),
    };
    let peer = Hello {
        protocol_version: 2,
        schema_hash: 0xbbbb,
        software: "confine-helper 0.2.0".into(),
    };
    let message = check_hello(&ours, &peer).unwrap_err().to_string();
    for needle in [
        "agentd 0.1.0",
        "v1",
        "000000000000aaaa",
        "confine-helper 0.2.0",
        "v2",
        "000000000000bbbb",
    ] {
        assert!(
            message.contains(needle),
            "{message:?} does not mention {needle:?}"
        );
    }
}

#[test]
fn a_hello_survives_the_wire() {
    let hello = Hello::ours("confine-helper 0.1.0");
    let mut decoder = FrameDecoder::new();
    decoder.feed(&encode_frame(&hello).unwrap()).unwrap();
    assert_eq!(decoder.next_message::<Hello>(), Ok(Some(hello)));
}
