//! One connection served against an in-memory client, on the paused clock: malformed and
//! truncated input of both protocols is answered or closed, never left hanging; refusals are
//! answered in the client's protocol and reported; and connections beyond the bound wait.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncReadExt, DuplexStream, duplex};
use tokio::time::Instant;

use super::*;
use crate::proxy::handshake::MAX_HEAD;
use crate::test_support::within;

/// The hosts a test's resolver was asked for; it never finds one.
#[derive(Default)]
struct Asked(Mutex<Vec<String>>);

impl Asked {
    fn resolver(&self) -> impl Fn(&str, u16) -> io::Result<Vec<SocketAddr>> + Sync + '_ {
        move |host: &str, _port: u16| {
            self.0.lock().expect("lock").push(host.to_owned());
            Err(io::Error::other("no resolver in this test"))
        }
    }

    fn hosts(&self) -> Vec<String> {
        self.0.lock().expect("lock").clone()
    }
}

fn allowing_one() -> Policy {
    Policy::new(["allowed.test"], [] as [&str; 0]).expect("policy")
}

/// What serving one client that sends `input` (and then ends its sending, when `close`) gave:
/// the proxy's answer, the result, the decisions.
struct Served {
    answer: Vec<u8>,
    result: Result<(), ServeError>,
    decisions: Vec<Decision>,
    asked: Vec<String>,
}

async fn serve(input: &[u8], close: bool) -> Served {
    let (mut client, proxy) = duplex(64 * 1024);
    let (policy, asked, decisions) = (allowing_one(), Asked::default(), Mutex::new(Vec::new()));
    let record = |decision: Decision| decisions.lock().expect("lock").push(decision);
    let resolver = asked.resolver();
    let client_side = async {
        client.write_all(input).await.expect("write");
        if close {
            client.shutdown().await.expect("shutdown");
        }
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.expect("read");
        answer
    };
    let (answer, result) = tokio::join!(client_side, serve_one(proxy, &policy, &resolver, &record));
    Served {
        answer,
        result,
        decisions: decisions.into_inner().expect("lock"),
        asked: asked.hosts(),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(start_paused = true)]
async fn a_malformed_http_request_is_answered_400_with_the_reason() {
    for input in [
        &b"hello\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        b"CONNECT allowed.test HTTP/1.1\r\n\r\n",
        b"GET http://allowed.test/ HTTP/1.1\r\nBad Header\r\n\r\n",
    ] {
        let served = serve(input, false).await;
        let answer = text(&served.answer);
        assert!(
            answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{answer}"
        );
        assert!(matches!(served.result, Err(ServeError::BadRequest(_))));
        let reason = served.result.expect_err("bad").to_string();
        let body = answer.rsplit("\r\n\r\n").next().unwrap_or_default();
        assert!(reason.ends_with(body.trim_end()), "{reason} / {body}");
        assert!(served.decisions.is_empty());
        assert!(served.asked.is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn a_head_over_the_bound_is_answered_431_without_waiting_for_its_end() {
    let started = Instant::now();
    let mut input = b"GET http://allowed.test/ HTTP/1.1\r\n".to_vec();
    while input.len() <= MAX_HEAD {
        input.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    let served = serve(&input, false).await;
    assert!(
        text(&served.answer).starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{}",
        text(&served.answer)
    );
    assert!(matches!(
        served.result,
        Err(ServeError::Handshake(HandshakeError::TooLarge))
    ));
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_client_that_stops_mid_request_is_answered_408_at_the_handshake_timeout() {
    let started = Instant::now();
    let served = serve(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: a", false).await;
    assert!(text(&served.answer).starts_with("HTTP/1.1 408 Request Timeout\r\n"));
    assert!(matches!(
        served.result,
        Err(ServeError::Handshake(HandshakeError::Timeout(_)))
    ));
    assert_eq!(started.elapsed(), HANDSHAKE_TIMEOUT);

    let started = Instant::now();
    let silent = serve(b"", false).await;
    assert!(silent.answer.is_empty(), "no protocol, no answer");
    assert!(matches!(
        silent.result,
        Err(ServeError::Handshake(HandshakeError::Timeout(_)))
    ));
    assert_eq!(started.elapsed(), HANDSHAKE_TIMEOUT);
}

#[tokio::test(start_paused = true)]
async fn a_client_that_closes_mid_request_is_let_go_at_once() {
    let served = serve(b"GET http://allowed.test/ HTTP/1.1\r\n", true).await;
    assert!(served.answer.is_empty());
    assert!(matches!(
        served.result,
        Err(ServeError::Handshake(HandshakeError::Closed))
    ));
    assert!(served.decisions.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_refused_connect_is_answered_403_reported_and_never_resolved() {
    let served = serve(b"CONNECT other.test:443 HTTP/1.1\r\n\r\n", false).await;
    assert_eq!(
        text(&served.answer),
        "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: 68\r\nConnection: close\r\n\r\n\
         the network allow-list refuses \"other.test\": not in allowed_domains\n"
    );
    assert!(served.result.is_ok(), "a refusal is not an error");
    assert_eq!(
        served.decisions,
        [Decision {
            host: "other.test".to_owned(),
            port: 443,
            protocol: Protocol::Connect,
            allowed: false,
            reason: Reason::NotAllowed,
        }]
    );
    assert!(served.asked.is_empty(), "a refused name is never resolved");
}

#[tokio::test(start_paused = true)]
async fn an_allowed_host_that_cannot_be_resolved_is_answered_502() {
    let served = serve(b"GET http://allowed.test/x HTTP/1.1\r\n\r\n", false).await;
    assert!(text(&served.answer).starts_with("HTTP/1.1 502 Bad Gateway\r\n"));
    assert!(text(&served.answer).contains("cannot reach allowed.test:80"));
    assert!(matches!(served.result, Err(ServeError::Dial { .. })));
    assert_eq!(served.asked, ["allowed.test"]);
    assert_eq!(served.decisions.len(), 1);
    assert!(served.decisions[0].allowed);
    assert_eq!(served.decisions[0].protocol, Protocol::Http);
}

#[tokio::test(start_paused = true)]
async fn socks5_refusals_get_the_ruleset_reply_and_unresolvable_hosts_host_unreachable() {
    let refused = serve(&[5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 80], false).await;
    assert_eq!(refused.answer, [5, 0, 5, 2, 0, 1, 0, 0, 0, 0, 0, 0]);
    assert!(refused.result.is_ok());
    assert_eq!(refused.decisions[0].host, "127.0.0.1");
    assert_eq!(refused.decisions[0].protocol, Protocol::Socks5);
    assert_eq!(refused.decisions[0].reason, Reason::AddressNotListed);

    let mut allowed = vec![5, 1, 0, 5, 1, 0, 3, 12];
    allowed.extend_from_slice(b"allowed.test");
    allowed.extend_from_slice(&443u16.to_be_bytes());
    let unresolved = serve(&allowed, false).await;
    assert_eq!(unresolved.answer, [5, 0, 5, 4, 0, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(unresolved.asked, ["allowed.test"]);
}

#[tokio::test(start_paused = true)]
async fn a_socks4_client_is_rejected_in_socks4() {
    let served = serve(&[4, 1, 0, 80, 127, 0, 0, 1, 0], false).await;
    assert_eq!(served.answer, crate::proxy::socks5::SOCKS4_REJECTED);
    assert!(matches!(
        served.result,
        Err(ServeError::Socks(SocksError::Socks4))
    ));
}

/// A small deterministic generator of test input.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[tokio::test(start_paused = true)]
async fn no_input_hangs_or_panics_and_every_answer_is_in_a_protocol() {
    let mut socks = vec![5, 2, 0, 2, 5, 1, 0, 3, 12];
    socks.extend_from_slice(b"allowed.test\x01\xbb");
    let seeds: [&[u8]; 4] = [
        b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\nearly",
        b"GET http://allowed.test:8080/p?q HTTP/1.1\r\nProxy-Connection: x\r\n\r\n",
        b"GET http://[::1]/ HTTP/1.0\n\n",
        &socks,
    ];
    let mut random = XorShift(0x5eed_1234_abcd_0001);
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    for seed in seeds {
        // Every truncation, and mutations of a byte or two.
        inputs.extend((0..=seed.len()).map(|cut| seed[..cut].to_vec()));
        for _ in 0..200 {
            let mut mutated = seed.to_vec();
            for _ in 0..=random.below(2) {
                let at = random.below(mutated.len());
                mutated[at] = random.next() as u8;
            }
            inputs.push(mutated);
        }
    }
    for _ in 0..300 {
        let length = random.below(80);
        let mut bytes: Vec<u8> = (0..length).map(|_| random.next() as u8).collect();
        if let Some(first) = bytes.first_mut() {
            *first = [*first, 5, b'C', b'G'][random.below(4)];
        }
        inputs.push(bytes);
    }
    for input in &inputs {
        let started = Instant::now();
        let served = within(serve(input, true)).await;
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "waited on {:?}",
            text(input)
        );
        let answer = &served.answer;
        let in_a_protocol = answer.is_empty()
            || answer.starts_with(b"HTTP/1.1 ")
            || answer.first() == Some(&5)
            || answer.as_slice() == crate::proxy::socks5::SOCKS4_REJECTED;
        assert!(
            in_a_protocol,
            "{:?} answered {:?}",
            text(input),
            text(answer)
        );
        for decision in served.decisions.iter().filter(|d| d.allowed) {
            let host = decision.host.to_ascii_lowercase();
            assert_eq!(host.strip_suffix('.').unwrap_or(&host), "allowed.test");
        }
    }
}

/// How long a second client waits for its answer while a first one stays silent, with
/// `limit` connections at once.
async fn second_client_waits(limit: usize) -> Duration {
    let started = Instant::now();
    let (_silent, first) = duplex(1024);
    let (mut second_client, second) = duplex(1024);
    second_client
        .write_all(b"nonsense\r\n\r\n")
        .await
        .expect("write");
    let incoming = futures::stream::iter([Ok::<DuplexStream, io::Error>(first), Ok(second)]);
    let resolver = |_: &str, _: u16| -> io::Result<Vec<SocketAddr>> {
        Err(io::Error::other("no resolver in this test"))
    };
    let serving = serve_bounded(
        incoming,
        limit,
        Arc::new(allowing_one()),
        Arc::new(resolver),
        Arc::new(|_: Decision| {}),
    );
    let reading = async {
        let mut answer = Vec::new();
        second_client.read_to_end(&mut answer).await.expect("read");
        (answer, started.elapsed())
    };
    let bound = HANDSHAKE_TIMEOUT * 2;
    let (served, (answer, waited)) =
        tokio::time::timeout(bound, async { tokio::join!(serving, reading) })
            .await
            .expect("both clients were served in time");
    served.expect("the stream of clients ended");
    assert!(
        text(&answer).starts_with("HTTP/1.1 400 "),
        "{}",
        text(&answer)
    );
    waited
}

#[tokio::test(start_paused = true)]
async fn a_client_beyond_the_bound_waits_for_a_free_slot() {
    assert_eq!(
        second_client_waits(1).await,
        HANDSHAKE_TIMEOUT,
        "the second client is served once the first one's handshake has timed out"
    );
    assert_eq!(
        second_client_waits(2).await,
        Duration::ZERO,
        "within the bound, at once"
    );
}
