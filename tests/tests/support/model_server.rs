//! A chat-completions server on 127.0.0.1 for tests, on std's `TcpListener`: it reads each
//! request, keeps it, and answers what the test's handler says — a recorded stream, an error
//! status, or silence until the client gives up and closes the connection. Every wait in it is on
//! a real event (a connection, bytes, the client closing); nothing sleeps.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde_json::Value;

/// What the server answers to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 OK` with this event-stream body, sent as one HTTP chunk per event.
    Stream(Vec<u8>),
    /// An error status with a JSON body.
    Status { code: u16, body: String },
    /// Nothing at all, until the client closes the connection.
    Stall,
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Received {
    /// The request line and headers.
    pub head: String,
    /// The body as JSON (`null` if it is not JSON).
    pub body: Value,
}

/// The answer handler: the request and how many requests came before it.
pub type Handler = dyn Fn(&Received, usize) -> Reply + Send + Sync;

/// A running server; it stops when dropped.
pub struct ModelServer {
    /// The `base_url` agentd is configured with (`http://127.0.0.1:PORT/v1`).
    pub base_url: String,
    address: std::net::SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ModelServer {
    pub fn start(handler: impl Fn(&Received, usize) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the model server");
        let address = listener.local_addr().expect("its address");
        let received = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let thread = {
            let (received, stop) = (received.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    serve(stream, &*handler, &received);
                }
            })
        };
        ModelServer {
            base_url: format!("http://{address}/v1"),
            address,
            received,
            stop,
            thread: Some(thread),
        }
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect(self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(mut stream: TcpStream, handler: &Handler, received: &Mutex<Vec<Received>>) {
    let Some(request) = read_request(&mut stream) else {
        return;
    };
    let count = {
        let mut all = received.lock().expect("lock");
        all.push(request.clone());
        all.len() - 1
    };
    match handler(&request, count) {
        Reply::Stream(body) => {
            let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                            Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
                .to_vec();
            for event in events(&body) {
                out.extend_from_slice(format!("{:x}\r\n", event.len()).as_bytes());
                out.extend_from_slice(event);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
            let _ = stream.write_all(&out);
        }
        Reply::Status { code, body } => {
            let response = format!(
                "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                reason(code),
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
        Reply::Stall => {
            let mut buffer = [0u8; 256];
            while matches!(stream.read(&mut buffer), Ok(n) if n > 0) {}
        }
    }
    let _ = stream.shutdown(Shutdown::Write);
}

/// The body cut after each blank line: one event per HTTP chunk, as a server flushes them.
fn events(body: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut at = 0;
    while at + 1 < body.len() {
        if body[at] == b'\n' && body[at + 1] == b'\n' {
            out.push(&body[start..at + 2]);
            start = at + 2;
            at = start;
        } else {
            at += 1;
        }
    }
    if start < body.len() {
        out.push(&body[start..]);
    }
    out
}

fn reason(code: u16) -> &'static str {
    match code {
        400 => "Bad Request",
        401 => "Unauthorized",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Received> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).ok().filter(|&n| n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        let n = stream.read(&mut chunk).ok().filter(|&n| n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buffer[head_end..head_end + length]).unwrap_or(Value::Null);
    Some(Received { head, body })
}

/// `tests/fixtures/providers/`.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/providers")
}

/// The bytes of a recorded provider stream.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = fixtures_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The assistant messages of a request's history.
pub fn assistant_messages(request: &Received) -> Vec<Value> {
    request.body["messages"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter(|m| m["role"] == "assistant")
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}
