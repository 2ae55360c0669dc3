//! The line transport of `agentd acp`: one JSON-RPC message per line, both ways, on stdin and
//! stdout (or on any pair of byte streams: [`super::serve_on`]).
//!
//! Lines are read as bytes, at most [`MAX_LINE`] of them: a longer line is read to its end
//! without being kept and answered with a short error, and agentd reads on. A line is made text
//! with every byte that is not UTF-8 replaced (U+FFFD), so that such a line is answered as any
//! other malformed line is instead of ending the connection, as a reader of text lines would.
//! (JSON-RPC's messages are UTF-8; a line with such bytes cannot be one.)
//!
//! A line that is not JSON is answered here, with a parse error under the id `null` that says
//! where the JSON broke, not what the line held: the ACP crate would answer it with the whole
//! line in the error's `data`, so a megabyte of garbage came back whole. Every other line goes
//! to the crate, which answers what is JSON but no request it knows. The answers given here go
//! into the line writer's queue, in order with the connection's own lines.
//!
//! The crate answers some requests itself — an unknown method, params it cannot read, a request
//! before `initialize` — with the bare name JSON-RPC gives the code as the message (`Method not
//! found`, `Invalid params`) and the reason in `data`, which clients do not show. Such an error
//! is written with a sentence in its message instead, saying what was wrong (the data's text)
//! and what to do ([`worded_error`]); its code and data stay as they are. agentd's own errors
//! carry their sentence from the start (`acp::error`).
//!
//! What a client sent comes back in some errors all the same: the crate's `invalid params`
//! carries the params it could not read (and serde's reason quoting the value), `method not
//! found` the method's name, agentd's `session … not found` the id it was given. So an error
//! response longer than [`MAX_ERROR_LINE`] is written with its message and its data cut to
//! [`ERROR_TEXT_CAP`] each ([`shortened_error`]); its id, which JSON-RPC must return as sent,
//! stays whole.

use std::io;
use std::sync::Arc;

use agent_client_protocol::{Error, ErrorCode, Lines, RawJsonRpcId, RawJsonRpcMessage};
use futures::{Sink, SinkExt, Stream};
use serde_json::json;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};

use super::line_writer::LineSink;
use super::outgoing::Outgoing;

/// The longest line agentd reads as one ACP message, in bytes before its newline: 64 MiB. The
/// largest messages a client sends are a prompt with embedded resources and the answer to an
/// `fs/read_text_file` request, whose file agentd reads only up to 32 MiB itself
/// (`MAX_TEXT_FILE`), leaving room for JSON's escapes.
pub const MAX_LINE: usize = 64 << 20;

/// The longest error response agentd writes whole, in bytes; a longer one is cut.
pub const MAX_ERROR_LINE: usize = 4096;

/// What is kept of a long error response's message, and of its data's JSON text: the start.
const ERROR_TEXT_CAP: usize = 1024;

/// How a response's line starts (and a request's, which goes on `"method"`), as the crate writes
/// them; an update's starts with its method.
const RESPONSE_START: &str = r#"{"jsonrpc":"2.0","id":"#;

/// What an error response holds, as the crate writes it.
const ERROR_START: &str = r#""error":{"#;

/// Where the lines agentd writes go.
type OutgoingLines = std::pin::Pin<Box<dyn Sink<String, Error = io::Error> + Send>>;
/// Where the lines agentd reads come from.
type IncomingLines = std::pin::Pin<Box<dyn Stream<Item = io::Result<String>> + Send>>;

/// The transport over a pair of byte streams, stdin and stdout for `agentd acp`: what `reader`
/// gives, line by line, and the lines agentd writes, into `writer`, whose writer gives the
/// costs of the updates it writes back to `outgoing`.
pub fn lines<R, W>(
    reader: R,
    writer: W,
    outgoing: Arc<Outgoing>,
) -> Lines<OutgoingLines, IncomingLines>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let sink = LineSink::new(writer, outgoing);
    let answers = sink.lines();
    let sink = sink
        .with(|line| std::future::ready(Ok::<_, io::Error>(shortened_error(worded_error(line)))));
    let incoming = futures::stream::unfold(
        (BufReader::new(reader), answers),
        |(mut reader, mut answers)| async move {
            loop {
                let answer = match read_line(&mut reader, MAX_LINE).await {
                    Err(e) => return Some((Err(e), (reader, answers))),
                    Ok(Line::End) => return None,
                    Ok(Line::Text(text)) => {
                        match serde_json::from_str::<serde_json::Value>(&text) {
                            // The crate parses it again: a line is kept no longer than that.
                            Ok(_) => return Some((Ok(text), (reader, answers))),
                            Err(e) => not_json(text.len(), &e),
                        }
                    }
                    Ok(Line::TooLong(bytes)) => too_long(bytes),
                };
                // A writer that has ended takes no answer; the next read ends too.
                let _ = answers.send(answer).await;
            }
        },
    );
    Lines::new(Box::pin(sink), Box::pin(incoming))
}

/// One line read.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A line as text, without its line ending.
    Text(String),
    /// A line over the cap, read and dropped: its length in bytes, without its newline.
    TooLong(u64),
    /// The input has ended.
    End,
}

/// Reads the next line of `reader`, keeping at most `cap` bytes of it: one that is longer is read
/// to its newline (or the input's end) and only counted.
async fn read_line<R>(reader: &mut R, cap: usize) -> io::Result<Line>
where
    R: AsyncBufRead + Unpin,
{
    let mut kept = Vec::new();
    // The bytes of a line over the cap, once it is known to be.
    let mut dropped: Option<u64> = None;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match dropped {
                Some(bytes) => Line::TooLong(bytes),
                None if kept.is_empty() => Line::End,
                None => Line::Text(text_of(kept)),
            });
        }
        // Up to and with the first newline, or all of it when there is none.
        let piece = available
            .split_inclusive(|&b| b == b'\n')
            .next()
            .unwrap_or(available);
        let ends_line = piece.ends_with(b"\n");
        let taken = piece.len();
        let content = taken - usize::from(ends_line);
        match dropped.as_mut() {
            Some(bytes) => *bytes += content as u64,
            None if kept.len() + content > cap => {
                dropped = Some((kept.len() + content) as u64);
                kept = Vec::new();
            }
            None => kept.extend_from_slice(piece),
        }
        reader.consume(taken);
        if ends_line {
            return Ok(match dropped {
                Some(bytes) => Line::TooLong(bytes),
                None => Line::Text(text_of(kept)),
            });
        }
    }
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

/// The answer to a line of `bytes` bytes that is not JSON: a parse error saying where it broke
/// (serde_json's reasons name a position and what was expected, never the input).
fn not_json(bytes: usize, error: &serde_json::Error) -> String {
    answer(
        Error::new(
            ErrorCode::PARSE_ERROR,
            format!(
                "the line ({bytes} bytes) is not JSON: {error}; agentd reads one JSON-RPC message \
                 a line"
            ),
        )
        .data(json!({ "bytes": bytes })),
    )
}

/// The answer to a line over [`MAX_LINE`], of `bytes` bytes, read and dropped.
fn too_long(bytes: u64) -> String {
    answer(
        Error::new(
            ErrorCode::INVALID_REQUEST,
            format!(
                "the line ({bytes} bytes) is longer than agentd's cap on one ACP message ({} MiB); \
                 it was dropped unread: send less in one message (a prompt's resources as links, \
                 say)",
                MAX_LINE >> 20
            ),
        )
        .data(json!({ "bytes": bytes, "cap": MAX_LINE })),
    )
}

/// `line` as agentd writes it: unchanged, unless it is an error response whose message is the
/// bare name JSON-RPC gives its code (`Invalid params`), as the ACP crate answers what it
/// handles itself; then the message is a sentence saying what was wrong — the data's text —
/// and what to do ([`sentence`]).
fn worded_error(line: String) -> String {
    if !line.starts_with(RESPONSE_START) || !line.contains(ERROR_START) {
        return line;
    }
    let Ok(mut response) = serde_json::from_str::<serde_json::Value>(&line) else {
        return line;
    };
    let Some(error) = response.get_mut("error").and_then(|e| e.as_object_mut()) else {
        return line;
    };
    let code = match error.get("code").and_then(serde_json::Value::as_i64) {
        Some(code) => i32::try_from(code).map(ErrorCode::from),
        None => return line,
    };
    let Ok(code) = code else {
        return line;
    };
    let bare = code.to_string();
    if error.get("message").and_then(serde_json::Value::as_str) != Some(bare.as_str()) {
        return line;
    }
    // The crate's reason: the data's text, or the `error` of its object (which also holds the
    // params it could not read, not repeated in the message).
    let detail = match error.get("data") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(text)) => Some(text.clone()),
        Some(serde_json::Value::Object(data)) => match data.get("error") {
            Some(serde_json::Value::String(text)) => Some(text.clone()),
            _ => Some(serde_json::Value::Object(data.clone()).to_string()),
        },
        Some(other) => Some(other.to_string()),
    };
    error.insert(
        "message".to_owned(),
        serde_json::Value::String(sentence(code, &bare, detail.as_deref())),
    );
    serde_json::to_string(&response).unwrap_or(line)
}

/// The message of an error of `code`, whose bare name is `bare`, with the reason `detail` (its
/// data's text): what was wrong and what to do.
fn sentence(code: ErrorCode, bare: &str, detail: Option<&str>) -> String {
    let because = detail.map(|d| format!(": {d}")).unwrap_or_default();
    match code {
        ErrorCode::PARSE_ERROR => {
            format!("the message is not JSON{because}; agentd reads one JSON-RPC message a line")
        }
        ErrorCode::INVALID_REQUEST => format!(
            "the message is not a request agentd can take{because}; send JSON-RPC 2.0 requests \
             of the Agent Client Protocol v1, initialize first"
        ),
        ErrorCode::METHOD_NOT_FOUND => format!(
            "agentd does not serve this method{because}; it speaks the Agent Client Protocol v1: \
             check the method's name and the protocol version the client speaks"
        ),
        ErrorCode::INVALID_PARAMS => format!(
            "the request's params are not what its method takes{because}; send them as the Agent \
             Client Protocol v1 describes that method"
        ),
        ErrorCode::INTERNAL_ERROR => format!(
            "agentd could not handle the request{because}; this is agentd's fault: try again, and \
             report it if it persists"
        ),
        ErrorCode::REQUEST_CANCELLED => {
            format!("the request was cancelled{because}; send it again if it is still wanted")
        }
        ErrorCode::AUTH_REQUIRED => format!(
            "the request needs authentication first{because}; authenticate as the initialize \
             answer's authMethods say"
        ),
        ErrorCode::RESOURCE_NOT_FOUND => {
            format!("what the request names was not found{because}; check the id or path it gives")
        }
        _ => format!("the request failed ({bare}){because}"),
    }
}

/// `line` as agentd writes it: unchanged, unless it is an error response longer than
/// [`MAX_ERROR_LINE`], whose message and data are then cut to their first [`ERROR_TEXT_CAP`]
/// bytes, saying how much was left out.
fn shortened_error(line: String) -> String {
    if line.len() <= MAX_ERROR_LINE || !line.starts_with(RESPONSE_START) {
        return line;
    }
    let Ok(mut response) = serde_json::from_str::<serde_json::Value>(&line) else {
        return line;
    };
    let Some(error) = response.get_mut("error").and_then(|e| e.as_object_mut()) else {
        return line;
    };
    if let Some(serde_json::Value::String(message)) = error.get_mut("message") {
        *message = cut(message);
    }
    if let Some(data) = error.get_mut("data") {
        let text = match &*data {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        if text.len() > ERROR_TEXT_CAP {
            *data = serde_json::Value::String(cut(&text));
        }
    }
    serde_json::to_string(&response).unwrap_or(line)
}

/// The first [`ERROR_TEXT_CAP`] bytes of `text` (never half a character), and how many more
/// there were.
fn cut(text: &str) -> String {
    if text.len() <= ERROR_TEXT_CAP {
        return text.to_owned();
    }
    let mut end = ERROR_TEXT_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… ({} more bytes left out)",
        &text[..end],
        text.len() - end
    )
}

/// `error` as the line of a JSON-RPC response whose request is unknown (id `null`), written as
/// the ACP crate writes its own.
fn answer(error: Error) -> String {
    let response = RawJsonRpcMessage::response(RawJsonRpcId::Null, Err(error));
    serde_json::to_string(&response).unwrap_or_else(|_| {
        // A response of a null id and an error with a text cannot fail to serialize; were it to,
        // the client still learns that a line was refused.
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"a line was refused: it is not a JSON-RPC message agentd can read"}}"#
            .to_owned()
    })
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

    #[tokio::test]
    async fn a_line_over_the_cap_is_read_to_its_end_only_counted_and_the_next_one_is_read() {
        let input: &[u8] = b"short\n0123456789ABC\nnext\n0123456789\r\n0123456789AB";
        // A buffer smaller than the lines: a line is read across several fills.
        let mut reader = BufReader::with_capacity(4, input);
        let mut lines = Vec::new();
        loop {
            let line = read_line(&mut reader, 10).await.expect("read");
            if line == Line::End {
                break;
            }
            lines.push(line);
        }
        assert_eq!(
            lines,
            [
                Line::Text("short".to_owned()),
                Line::TooLong(13),
                Line::Text("next".to_owned()),
                // The cap counts what is before the newline: a carriage return too.
                Line::TooLong(11),
                // Cut off by the end of the input.
                Line::TooLong(12),
            ]
        );
        let mut reader = BufReader::with_capacity(4, &b"0123456789\n"[..]);
        assert_eq!(
            read_line(&mut reader, 10).await.expect("read"),
            Line::Text("0123456789".to_owned()),
            "a line of exactly the cap is kept"
        );
    }

    #[test]
    fn a_long_error_is_cut_and_every_other_line_is_written_as_it_is() {
        let big = "Q".repeat(100_000);
        let invalid = serde_json::json!({
            "jsonrpc": "2.0", "id": 7, "error": {
                "code": -32602, "message": "Invalid params",
                "data": {"error": format!("invalid type: string {big:?}"), "json": {"cwd": big}},
            },
        })
        .to_string();
        let cut = shortened_error(invalid);
        assert!(cut.len() < MAX_ERROR_LINE, "{} bytes", cut.len());
        let cut: serde_json::Value = serde_json::from_str(&cut).expect("JSON");
        assert_eq!(cut["id"], 7);
        assert_eq!(cut["error"]["code"], -32602);
        assert_eq!(cut["error"]["message"], "Invalid params");
        let data = cut["error"]["data"].as_str().expect("the data as text");
        assert!(
            data.starts_with(r#"{"error":"invalid type: string \"QQQ"#),
            "{data:.80}"
        );
        assert!(data.ends_with("more bytes left out)"), "{data}");
        let message = format!(
            r#"{{"jsonrpc":"2.0","id":"x","error":{{"code":-32002,"message":"session {big} not found"}}}}"#
        );
        let cut: serde_json::Value = serde_json::from_str(&shortened_error(message)).expect("JSON");
        let message = cut["error"]["message"].as_str().expect("message");
        assert!(
            message.starts_with("session QQQ") && message.len() < 1100,
            "{message:.80}"
        );
        // The control: a long result, a long update and a short error pass as they are.
        for line in [
            format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"text":"{big}"}}}}"#),
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"error":"{big}"}}}}"#
            ),
            r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"Method not found"}}"#
                .to_owned(),
        ] {
            assert_eq!(shortened_error(line.clone()), line);
        }
    }

    #[test]
    fn a_bare_json_rpc_message_becomes_a_sentence_with_the_reason_and_the_rest_is_kept() {
        let worded = |line: &str| -> serde_json::Value {
            serde_json::from_str(&worded_error(line.to_owned())).expect("JSON")
        };
        let unknown = worded(
            r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"Method not found","data":"no/such"}}"#,
        );
        assert_eq!(unknown["id"], 2);
        assert_eq!(unknown["error"]["code"], -32601);
        assert_eq!(unknown["error"]["data"], "no/such");
        assert_eq!(
            unknown["error"]["message"],
            "agentd does not serve this method: no/such; it speaks the Agent Client Protocol v1: \
             check the method's name and the protocol version the client speaks"
        );
        let params = worded(
            r#"{"jsonrpc":"2.0","id":"p","error":{"code":-32602,"message":"Invalid params","data":{"error":"missing field `cwd`","json":{"mcpServers":[]},"phase":"deserialization"}}}"#,
        );
        assert_eq!(params["error"]["data"]["json"], json!({"mcpServers": []}));
        assert_eq!(
            params["error"]["message"],
            "the request's params are not what its method takes: missing field `cwd`; send them \
             as the Agent Client Protocol v1 describes that method"
        );
        let internal = worded(
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"Internal error"}}"#,
        );
        let message = internal["error"]["message"].as_str().expect("message");
        assert!(
            message.starts_with("agentd could not handle the request; "),
            "{message}"
        );
        for code in [
            -32700, -32600, -32601, -32602, -32603, -32800, -32000, -32002,
        ] {
            let bare = ErrorCode::from(code).to_string();
            let line = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": bare}});
            let worded = worded(&line.to_string());
            assert_ne!(worded["error"]["message"], bare.as_str(), "{code}");
        }
        // The control: agentd's own sentences, results and updates pass as they are.
        for line in [
            r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"unknown sandbox-mode value \"x\"; the values are: read-only"}}"#,
            r#"{"jsonrpc":"2.0","id":5,"result":{"error":{"code":-32602,"message":"Invalid params"}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"error":{"code":-32601,"message":"Method not found"}}}"#,
        ] {
            assert_eq!(worded_error(line.to_owned()), line);
        }
    }

    #[test]
    fn the_answers_to_a_line_that_is_no_message_are_short_and_do_not_echo_it() {
        let line = format!("SECRET {}", "z".repeat(10_000));
        let error = serde_json::from_str::<serde_json::Value>(&line).expect_err("not JSON");
        for (answer, code) in [
            (not_json(line.len(), &error), -32700),
            (too_long(1 << 30), -32600),
        ] {
            assert!(answer.len() < 400, "{answer}");
            assert!(
                !answer.contains("SECRET") && !answer.contains("zzz"),
                "{answer}"
            );
            let answer: serde_json::Value = serde_json::from_str(&answer).expect("JSON");
            assert_eq!(answer["jsonrpc"], "2.0");
            assert_eq!(answer["id"], serde_json::Value::Null);
            assert_eq!(answer["error"]["code"], code, "{answer}");
        }
        assert!(too_long(1 << 30).contains("1073741824 bytes"));
        assert!(too_long(1 << 30).contains("64 MiB"));
    }
}
