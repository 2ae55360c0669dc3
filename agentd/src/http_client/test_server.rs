//! The server side of the HTTP clients' tests: one request read off a connection on 127.0.0.1,
//! head and body, as the clients under test sent it. Every wait is on a real event (a
//! connection, bytes); nothing sleeps to synchronise.

use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// A request as the server received it.
#[derive(Debug)]
pub(crate) struct Received {
    pub(crate) head: String,
    pub(crate) body: Vec<u8>,
}

impl Received {
    pub(crate) fn request_line(&self) -> &str {
        self.head.lines().next().unwrap_or("")
    }

    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the request body is JSON")
    }
}

/// Reads one request (its head, then `Content-Length` bytes of body) from `stream`.
pub(crate) async fn read_request(stream: &mut TcpStream) -> Received {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await.expect("read the request");
        assert!(
            n > 0,
            "the client closed before sending a whole request head"
        );
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buffer[..head_end].to_vec()).expect("UTF-8 head");
    let mut received = Received {
        head,
        body: Vec::new(),
    };
    let length: usize = received
        .header("content-length")
        .expect("a content-length")
        .parse()
        .expect("a number");
    while buffer.len() < head_end + length {
        let n = stream.read(&mut chunk).await.expect("read the body");
        assert!(n > 0, "the client closed before sending the whole body");
        buffer.extend_from_slice(&chunk[..n]);
    }
    received.body = buffer[head_end..head_end + length].to_vec();
    received
}

/// Accepts one connection and reads its request.
pub(crate) async fn accept(listener: &TcpListener) -> (TcpStream, Received) {
    let (mut stream, _) = listener.accept().await.expect("accept");
    let received = read_request(&mut stream).await;
    (stream, received)
}
