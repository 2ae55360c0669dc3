//! The proxy end to end on real loopback sockets: a listener served by [`serve_listener`], a
//! resolver that maps `allowed.test` and `other.test` to 127.0.0.1, an echo host and an HTTP
//! origin there, and clients of each protocol. Every refusal is followed by a control through
//! the same proxy that succeeds, and the host is shown to have been reached by the control only.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::*;
use crate::test_support::within;

/// A host on 127.0.0.1 that counts the connections it accepts, and either echoes what each
/// sends or answers one HTTP request and reports its head.
struct Upstream {
    port: u16,
    accepted: mpsc::UnboundedReceiver<Vec<u8>>,
    task: JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Upstream {
    /// Reports each connection as it is accepted (an empty report), then echoes.
    async fn echo() -> Upstream {
        Upstream::start(false).await
    }

    /// Reports each request head, then answers `hello`.
    async fn origin() -> Upstream {
        Upstream::start(true).await
    }

    async fn start(http: bool) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let (report, accepted) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let report = report.clone();
                if !http {
                    let _ = report.send(Vec::new());
                }
                tokio::spawn(async move {
                    if http {
                        let head = read_head(&mut stream).await;
                        let _ = report.send(head);
                        let _ = stream
                            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
                            .await;
                    } else {
                        let (mut read, mut write) = stream.split();
                        let _ = tokio::io::copy(&mut read, &mut write).await;
                    }
                });
            }
        });
        Upstream {
            port,
            accepted,
            task,
        }
    }

    /// What the host reported, in order, with nothing more to come now.
    fn reports(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Ok(report) = self.accepted.try_recv() {
            out.push(report);
        }
        out
    }
}

/// Reads up to and including the first empty line, a byte at a time so as not to read past it.
async fn read_head(stream: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read_u8().await {
            Ok(byte) => head.push(byte),
            Err(_) => break,
        }
    }
    head
}

/// The proxy on a loopback listener, and what it decided and resolved.
struct Proxy {
    address: SocketAddr,
    decisions: Arc<Mutex<Vec<Decision>>>,
    asked: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<io::Result<()>>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    async fn start(policy: Policy) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let decisions = Arc::new(Mutex::new(Vec::new()));
        let asked = Arc::new(Mutex::new(Vec::new()));
        let record = {
            let decisions = Arc::clone(&decisions);
            move |decision: Decision| decisions.lock().expect("lock").push(decision)
        };
        let resolver = {
            let asked = Arc::clone(&asked);
            move |host: &str, port: u16| -> io::Result<Vec<SocketAddr>> {
                asked.lock().expect("lock").push(host.to_owned());
                match host {
                    "allowed.test" | "other.test" => {
                        Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))])
                    }
                    _ => Err(io::Error::other(format!(
                        "{host} is not in the test's table"
                    ))),
                }
            }
        };
        let task = tokio::spawn(serve_listener(
            Arc::new(listener),
            Arc::new(policy),
            Arc::new(resolver),
            Arc::new(record),
        ));
        Proxy {
            address,
            decisions,
            asked,
            task,
        }
    }

    /// The policy of these tests: `allowed.test` only, and the test hosts are on loopback.
    async fn allowing_allowed_test() -> Proxy {
        let policy = Policy::new(["allowed.test"], [] as [&str; 0]).expect("policy");
        Proxy::start(policy.allowing_local_addresses()).await
    }

    async fn client(&self) -> TcpStream {
        TcpStream::connect(self.address)
            .await
            .expect("connect to the proxy")
    }

    fn decisions(&self) -> Vec<Decision> {
        self.decisions.lock().expect("lock").clone()
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().expect("lock").clone()
    }
}

/// A `CONNECT` to `host:port`: the stream and the proxy's answer head.
async fn tunnel(proxy: &Proxy, host: &str, port: u16, early: &[u8]) -> (TcpStream, String) {
    let mut client = proxy.client().await;
    let mut request =
        format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n").into_bytes();
    request.extend_from_slice(early);
    client.write_all(&request).await.expect("write");
    let head = read_head(&mut client).await;
    (client, String::from_utf8_lossy(&head).into_owned())
}

async fn echoed(client: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
    client.write_all(bytes).await.expect("write");
    let mut out = vec![0; bytes.len()];
    client.read_exact(&mut out).await.expect("read the echo");
    out
}

async fn rest(client: &mut TcpStream) -> String {
    let mut out = Vec::new();
    client.read_to_end(&mut out).await.expect("read to the end");
    String::from_utf8_lossy(&out).into_owned()
}

fn allowed(host: &str, port: u16, protocol: Protocol) -> Decision {
    Decision {
        host: host.to_owned(),
        port,
        protocol,
        allowed: true,
        reason: Reason::Allowed(Pattern::Exact("allowed.test".to_owned())),
    }
}

#[tokio::test]
async fn a_connect_to_an_allowed_host_is_established_and_relayed() {
    within(async {
        let upstream = Upstream::echo().await;
        let proxy = Proxy::allowing_allowed_test().await;
        let (mut client, head) = tunnel(&proxy, "allowed.test", upstream.port, b"").await;
        assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
        assert_eq!(echoed(&mut client, b"ping").await, b"ping");
        assert_eq!(
            proxy.decisions(),
            [allowed("allowed.test", upstream.port, Protocol::Connect)]
        );
        assert_eq!(proxy.asked(), ["allowed.test"]);
    })
    .await;
}

#[tokio::test]
async fn bytes_sent_right_behind_the_connect_reach_the_host() {
    within(async {
        let upstream = Upstream::echo().await;
        let proxy = Proxy::allowing_allowed_test().await;
        let (mut client, head) = tunnel(&proxy, "allowed.test", upstream.port, b"early").await;
        assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
        let mut out = [0; 5];
        client
            .read_exact(&mut out)
            .await
            .expect("the early bytes echoed");
        assert_eq!(&out, b"early");
    })
    .await;
}

#[tokio::test]
async fn a_connect_to_a_host_not_allowed_gets_403_and_reaches_nothing() {
    within(async {
        let mut upstream = Upstream::echo().await;
        let proxy = Proxy::allowing_allowed_test().await;
        let (mut client, head) = tunnel(&proxy, "other.test", upstream.port, b"").await;
        assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{head}");
        assert_eq!(
            rest(&mut client).await,
            "the network allow-list refuses \"other.test\": not in allowed_domains\n"
        );

        // The control: through the same proxy, the allowed name reaches the host.
        let (mut control, head) = tunnel(&proxy, "allowed.test", upstream.port, b"").await;
        assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
        assert_eq!(echoed(&mut control, b"control").await, b"control");
        assert_eq!(
            upstream.reports().len(),
            1,
            "only the control reached the host"
        );
        assert_eq!(
            proxy.asked(),
            ["allowed.test"],
            "the refused name was never resolved"
        );
        let decisions = proxy.decisions();
        assert_eq!(
            decisions[0],
            Decision {
                host: "other.test".to_owned(),
                port: upstream.port,
                protocol: Protocol::Connect,
                allowed: false,
                reason: Reason::NotAllowed,
            }
        );
        assert!(decisions[1].allowed);
    })
    .await;
}

#[tokio::test]
async fn an_absolute_form_get_is_forwarded_in_origin_form_and_a_refused_one_is_not() {
    within(async {
        let mut origin = Upstream::origin().await;
        let proxy = Proxy::allowing_allowed_test().await;
        let port = origin.port;

        let mut refused = proxy.client().await;
        let request = format!("GET http://other.test:{port}/ HTTP/1.1\r\nHost: other.test\r\n\r\n");
        refused.write_all(request.as_bytes()).await.expect("write");
        let answer = rest(&mut refused).await;
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
        assert!(answer.ends_with("refuses \"other.test\": not in allowed_domains\n"));

        let mut client = proxy.client().await;
        let request = format!(
            "GET http://allowed.test:{port}/path?q=1 HTTP/1.1\r\nHost: allowed.test:{port}\r\n\
             Proxy-Authorization: Basic eDp5\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n"
        );
        client.write_all(request.as_bytes()).await.expect("write");
        assert_eq!(
            rest(&mut client).await,
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
        );
        let heads: Vec<String> = origin
            .reports()
            .iter()
            .map(|h| String::from_utf8_lossy(h).into_owned())
            .collect();
        assert_eq!(
            heads,
            [format!(
                "GET /path?q=1 HTTP/1.1\r\nHost: allowed.test:{port}\r\nAccept: */*\r\n\
                 Connection: close\r\n\r\n"
            )],
            "the origin saw the allowed request only"
        );
        let decisions = proxy.decisions();
        assert_eq!(decisions.len(), 2);
        assert_eq!(
            (decisions[0].protocol, decisions[0].allowed),
            (Protocol::Http, false)
        );
        assert_eq!(decisions[1], allowed("allowed.test", port, Protocol::Http));
    })
    .await;
}

/// A SOCKS5 CONNECT with `address` (its type byte first): the stream and the reply.
async fn socks5(proxy: &Proxy, address: &[u8], port: u16) -> (TcpStream, Vec<u8>) {
    let mut client = proxy.client().await;
    client.write_all(&[5, 1, 0]).await.expect("greeting");
    let mut method = [0; 2];
    client.read_exact(&mut method).await.expect("method");
    assert_eq!(method, [5, 0], "no authentication chosen");
    let mut request = vec![5, 1, 0];
    request.extend_from_slice(address);
    request.extend_from_slice(&port.to_be_bytes());
    client.write_all(&request).await.expect("request");
    let mut reply = vec![0; 10];
    client.read_exact(&mut reply).await.expect("reply");
    (client, reply)
}

fn domain(name: &str) -> Vec<u8> {
    let mut address = vec![3, u8::try_from(name.len()).expect("short")];
    address.extend_from_slice(name.as_bytes());
    address
}

#[tokio::test]
async fn socks5_to_an_allowed_domain_is_relayed() {
    within(async {
        let upstream = Upstream::echo().await;
        let proxy = Proxy::allowing_allowed_test().await;
        let (mut client, reply) = socks5(&proxy, &domain("allowed.test"), upstream.port).await;
        assert_eq!(reply, [5, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(echoed(&mut client, b"over socks").await, b"over socks");
        assert_eq!(
            proxy.decisions(),
            [allowed("allowed.test", upstream.port, Protocol::Socks5)]
        );
    })
    .await;
}

#[tokio::test]
async fn socks5_to_an_ip_literal_is_refused_by_the_ruleset() {
    within(async {
        let mut upstream = Upstream::echo().await;
        let proxy = Proxy::allowing_allowed_test().await;
        for address in [
            vec![1, 127, 0, 0, 1],
            domain("127.0.0.1"),
            domain("2130706433"),
        ] {
            let (mut client, reply) = socks5(&proxy, &address, upstream.port).await;
            assert_eq!(reply, [5, 2, 0, 1, 0, 0, 0, 0, 0, 0], "{address:?}");
            assert_eq!(rest(&mut client).await, "", "closed after the refusal");
        }
        let (mut control, reply) = socks5(&proxy, &domain("allowed.test"), upstream.port).await;
        assert_eq!(reply[1], 0, "the control succeeds");
        assert_eq!(echoed(&mut control, b"control").await, b"control");
        assert_eq!(
            upstream.reports().len(),
            1,
            "only the control reached the host"
        );
        let refused: Vec<(String, Reason)> = proxy
            .decisions()
            .into_iter()
            .filter(|d| !d.allowed)
            .map(|d| (d.host, d.reason))
            .collect();
        assert_eq!(
            refused,
            [
                ("127.0.0.1".to_owned(), Reason::AddressNotListed),
                ("127.0.0.1".to_owned(), Reason::AddressNotListed),
                ("2130706433".to_owned(), Reason::NotAName),
            ]
        );
    })
    .await;
}

#[tokio::test]
async fn an_ip_literal_listed_exactly_is_reached_without_resolving() {
    within(async {
        let mut upstream = Upstream::echo().await;
        let policy = Policy::new(["127.0.0.1"], [] as [&str; 0]).expect("policy");
        // Listed, and still this machine: refused unless local addresses are allowed too.
        let strict = Proxy::start(policy.clone()).await;
        let (_, reply) = socks5(&strict, &[1, 127, 0, 0, 1], upstream.port).await;
        assert_eq!(reply[1], 2, "connection not allowed by ruleset");
        assert_eq!(
            strict.decisions()[0].reason,
            Reason::LocalAddresses(vec![LocalAddress {
                ip: [127, 0, 0, 1].into(),
                why: Local::Loopback,
            }])
        );
        assert!(upstream.reports().is_empty());

        let lenient = Proxy::start(policy.allowing_local_addresses()).await;
        let (mut client, reply) = socks5(&lenient, &[1, 127, 0, 0, 1], upstream.port).await;
        assert_eq!(reply[1], 0);
        assert_eq!(echoed(&mut client, b"literal").await, b"literal");
        assert!(lenient.asked().is_empty());
        assert!(strict.asked().is_empty());
    })
    .await;
}

#[tokio::test]
async fn an_allowed_name_that_leads_to_loopback_is_refused_unless_the_policy_allows_it() {
    within(async {
        let mut upstream = Upstream::echo().await;
        let policy = Policy::new(["allowed.test"], [] as [&str; 0]).expect("policy");
        let strict = Proxy::start(policy.clone()).await;
        let (mut client, head) = tunnel(&strict, "allowed.test", upstream.port, b"").await;
        assert!(head.starts_with("HTTP/1.1 403 "), "{head}");
        let body = rest(&mut client).await;
        assert!(
            body.contains(
                "leads only to this machine or its link, where an allowed host may not lead: \
                 127.0.0.1 (loopback)"
            ),
            "{body}"
        );
        let decision = &strict.decisions()[0];
        assert!(!decision.allowed);
        assert_eq!(
            decision.reason,
            Reason::LocalAddresses(vec![LocalAddress {
                ip: [127, 0, 0, 1].into(),
                why: Local::Loopback,
            }])
        );
        assert!(upstream.reports().is_empty());

        let lenient = Proxy::start(policy.allowing_local_addresses()).await;
        let (mut control, head) = tunnel(&lenient, "allowed.test", upstream.port, b"").await;
        assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
        assert_eq!(echoed(&mut control, b"control").await, b"control");
        assert_eq!(upstream.reports().len(), 1);
    })
    .await;
}

#[tokio::test]
async fn an_allowed_host_that_refuses_the_connection_is_told_to_the_client() {
    within(async {
        // A port bound and never listened on, held to the end: a connection to it is refused,
        // and no other test can listen there meanwhile. (A listener dropped at once would not
        // do: a child another test forks meanwhile holds a copy of it until it executes its
        // program, and the port listens on until then.)
        let closed = tokio::net::TcpSocket::new_v4().expect("socket");
        closed
            .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("bind");
        let closed_port = closed.local_addr().expect("address").port();
        let proxy = Proxy::allowing_allowed_test().await;
        let (_, reply) = socks5(&proxy, &domain("allowed.test"), closed_port).await;
        assert_eq!(reply[1], 5, "connection refused");
        let (mut client, head) = tunnel(&proxy, "allowed.test", closed_port, b"").await;
        assert!(head.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{head}");
        assert!(
            rest(&mut client)
                .await
                .contains("cannot reach allowed.test")
        );
    })
    .await;
}

#[tokio::test]
async fn connecting_passes_over_an_address_its_caller_does_not_admit() {
    within(async {
        let mut passed_over = Upstream::echo().await;
        let mut admitted = Upstream::echo().await;
        let addresses =
            [passed_over.port, admitted.port].map(|port| SocketAddr::from(([127, 0, 0, 1], port)));
        let deadline = tokio::time::Instant::now() + upstream::CONNECT_TIMEOUT;
        let first = addresses[0];
        let refuse_first = |address: SocketAddr| {
            if address != first {
                return Ok(());
            }
            Err(upstream::DialError::Local {
                address,
                why: Local::Loopback,
            })
        };
        let mut stream = upstream::connect(&addresses, deadline, refuse_first)
            .await
            .expect("the second address");
        stream.write_all(b"x").await.expect("write");
        let mut byte = [0u8];
        stream.read_exact(&mut byte).await.expect("the echo");
        assert!(
            passed_over.reports().is_empty(),
            "the first was connected to"
        );
        assert_eq!(admitted.reports().len(), 1);

        // The control of the refusal: with none admitted, nothing is reached, and the error is
        // the last address's.
        let none = |address: SocketAddr| {
            Err(upstream::DialError::Local {
                address,
                why: Local::Loopback,
            })
        };
        match upstream::connect(&addresses, deadline, none).await {
            Err(upstream::DialError::Local { address, .. }) => assert_eq!(address, addresses[1]),
            other => panic!("{other:?}"),
        }
        assert!(passed_over.reports().is_empty());
        assert!(admitted.reports().is_empty(), "no second connection");
    })
    .await;
}
