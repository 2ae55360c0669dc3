//! What a frame decoder makes of a whole stream, fed at once: the reference that chunked feeding
//! must match. Shared by the randomized decoder test and the `frame_decoder` fuzz target.

use confine_protocol::{FrameDecoder, FrameError};

/// What a decoder made of a stream: its payloads, then the error that stopped it (the
/// connection is closed there, whatever was buffered) or the bytes it still buffers.
#[derive(Debug, PartialEq)]
pub struct Outcome {
    pub payloads: Vec<Vec<u8>>,
    pub end: Result<usize, FrameError>,
}

/// Takes every whole payload out of `decoder`; `Err` when it reports a bad prefix.
pub fn drain(decoder: &mut FrameDecoder, payloads: &mut Vec<Vec<u8>>) -> Result<(), FrameError> {
    while let Some(payload) = decoder.next_payload()? {
        payloads.push(payload);
    }
    Ok(())
}

/// `stream` fed to a fresh decoder in one piece.
pub fn at_once(stream: &[u8]) -> Outcome {
    let mut decoder = FrameDecoder::new();
    let mut payloads = Vec::new();
    let end = decoder
        .feed(stream)
        .and_then(|()| drain(&mut decoder, &mut payloads))
        .map(|()| decoder.buffered());
    Outcome { payloads, end }
}
