//! Length-prefixed framing: a u32 little-endian payload length, then one postcard message.
//!
//! The decoder is sans-IO: callers feed it whatever bytes arrived and take whole payloads out.
//! Every malformed input is an error the caller must answer by closing the connection; nothing
//! is skipped or repaired.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The largest payload either side accepts. Checked on the length prefix, before any buffer grows.
pub const MAX_FRAME: u32 = 1 << 20;

/// Bytes of the length prefix.
pub const HEADER_LEN: usize = 4;

/// Why a frame or its payload was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("zero-length frame")]
    Empty,
    #[error("frame of {len} bytes exceeds the {MAX_FRAME}-byte cap")]
    TooLarge { len: u64 },
    #[error("connection closed inside a frame ({buffered} bytes buffered)")]
    Truncated { buffered: usize },
    #[error("undecodable message: {0}")]
    Decode(String),
    #[error("message has {0} trailing bytes")]
    TrailingBytes(usize),
    #[error("message cannot be encoded: {0}")]
    Encode(String),
}

/// Encodes one message as a complete frame (prefix included).
pub fn encode_frame<T: Serialize>(message: &T) -> Result<Vec<u8>, FrameError> {
    let mut out = postcard::to_extend(message, vec![0u8; HEADER_LEN])
        .map_err(|e| FrameError::Encode(e.to_string()))?;
    let Some((prefix, payload)) = out.split_first_chunk_mut::<HEADER_LEN>() else {
        return Err(FrameError::Encode(
            "the length prefix is missing".to_owned(),
        ));
    };
    let len = payload.len();
    if len == 0 {
        return Err(FrameError::Empty);
    }
    if len as u64 > u64::from(MAX_FRAME) {
        return Err(FrameError::TooLarge { len: len as u64 });
    }
    *prefix = (len as u32).to_le_bytes();
    Ok(out)
}

/// Decodes one payload; the message must use every byte.
pub fn decode_payload<T: DeserializeOwned>(payload: &[u8]) -> Result<T, FrameError> {
    let (value, rest) =
        postcard::take_from_bytes(payload).map_err(|e| FrameError::Decode(e.to_string()))?;
    if !rest.is_empty() {
        return Err(FrameError::TrailingBytes(rest.len()));
    }
    Ok(value)
}

/// Accumulates bytes and yields whole payloads.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    start: usize,
}

impl FrameDecoder {
    /// A decoder with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes that arrived. Rejects them at once if they carry a bad length prefix, so a
    /// peer cannot make the buffer grow past one capped frame.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), FrameError> {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
        self.check_header()
    }

    /// The next complete payload, if one is buffered.
    pub fn next_payload(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        let Some(len) = self.check_header_len()? else {
            return Ok(None);
        };
        let body = self.start + HEADER_LEN;
        let Some(payload) = self.buf.get(body..body + len) else {
            return Ok(None);
        };
        let payload = payload.to_vec();
        self.start = body + len;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > MAX_FRAME as usize {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(Some(payload))
    }

    /// The next complete message, decoded.
    pub fn next_message<T: DeserializeOwned>(&mut self) -> Result<Option<T>, FrameError> {
        match self.next_payload()? {
            Some(payload) => decode_payload(&payload).map(Some),
            None => Ok(None),
        }
    }

    /// Bytes buffered that do not yet form a frame.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Call when the peer closed: an unfinished frame is an error.
    pub fn finish(&self) -> Result<(), FrameError> {
        match self.buffered() {
            0 => Ok(()),
            buffered => Err(FrameError::Truncated { buffered }),
        }
    }

    fn check_header(&self) -> Result<(), FrameError> {
        self.check_header_len().map(drop)
    }

    fn check_header_len(&self) -> Result<Option<usize>, FrameError> {
        let Some(header) = self
            .buf
            .get(self.start..)
            .and_then(<[u8]>::first_chunk::<HEADER_LEN>)
        else {
            return Ok(None);
        };
        let len = u32::from_le_bytes(*header);
        if len == 0 {
            return Err(FrameError::Empty);
        }
        if len > MAX_FRAME {
            return Err(FrameError::TooLarge {
                len: u64::from(len),
            });
        }
        Ok(Some(len as usize))
    }
}
