//! The line transport of `agentd acp`: one JSON-RPC message per line, both ways, on stdin and
//! stdout (or on any pair of byte streams: [`super::serve_on`]).
//!
//! Lines are read as bytes and made text with every byte that is not UTF-8 replaced (U+FFFD),
//! so that a line that is not UTF-8 is answered as any other malformed line is — with a
//! JSON-RPC error, or ignored — instead of ending the connection, as a reader of text lines
//! would. (JSON-RPC's messages are UTF-8; a line with such bytes cannot be one.)

use std::io;

use agent_client_protocol::Lines;
use futures::{Sink, Stream};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};

use super::line_writer::LineSink;

/// Where the lines agentd writes go.
type Outgoing = std::pin::Pin<Box<dyn Sink<String, Error = io::Error> + Send>>;
/// Where the lines agentd reads come from.
type Incoming = std::pin::Pin<Box<dyn Stream<Item = io::Result<String>> + Send>>;

/// The transport over a pair of byte streams, stdin and stdout for `agentd acp`: what `reader`
/// gives, line by line, and the lines agentd writes, into `writer`.
pub fn lines<R, W>(reader: R, writer: W) -> Lines<Outgoing, Incoming>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let incoming = futures::stream::unfold(BufReader::new(reader), |mut reader| async move {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) => None,
            Ok(_) => Some((Ok(text_of(line)), reader)),
            Err(e) => Some((Err(e), reader)),
        }
    });
    Lines::new(Box::pin(LineSink::new(writer)), Box::pin(incoming))
}

/// One line as text, without its line ending, bytes that are not UTF-8 replaced.
fn text_of(mut line: Vec<u8>) -> String {
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    match String::from_utf8(line) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_text_without_its_ending_and_bytes_not_utf8_are_replaced() {
        assert_eq!(text_of(b"{\"a\":1}\n".to_vec()), "{\"a\":1}");
        assert_eq!(text_of(b"{}\r\n".to_vec()), "{}");
        assert_eq!(text_of(b"last".to_vec()), "last");
        assert_eq!(text_of(b"\xff\xfe x\n".to_vec()), "\u{fffd}\u{fffd} x");
        assert_eq!(text_of("é".as_bytes().to_vec()), "é");
    }
}
