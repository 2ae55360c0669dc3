//! The SOCKS5 negotiation and request against an in-memory client: what is read, what is
//! answered, and how each malformed or unserved request ends.

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, duplex};

use super::*;
use crate::proxy::handshake::HANDSHAKE_TIMEOUT;

/// A client that has sent `bytes`, and the proxy's end of it.
async fn client_sent(bytes: &[u8]) -> (DuplexStream, Handshake<DuplexStream>) {
    let (mut client, proxy) = duplex(4096);
    client.write_all(bytes).await.expect("write");
    (client, Handshake::new(proxy, HANDSHAKE_TIMEOUT))
}

/// Everything the proxy answered, once its end is gone.
async fn answered(mut client: DuplexStream, proxy: Handshake<DuplexStream>) -> Vec<u8> {
    drop(proxy);
    let mut out = Vec::new();
    client.read_to_end(&mut out).await.expect("read");
    out
}

fn connect(address: &[u8]) -> Vec<u8> {
    let mut bytes = vec![5, 2, 0x02, 0x00, 5, 1, 0];
    bytes.extend_from_slice(address);
    bytes.extend_from_slice(&8080u16.to_be_bytes());
    bytes
}

fn domain(name: &[u8]) -> Vec<u8> {
    let mut address = vec![3, u8::try_from(name.len()).expect("short")];
    address.extend_from_slice(name);
    address
}

#[tokio::test]
async fn a_connect_to_a_domain_is_read_after_no_auth_is_chosen() {
    let (client, mut proxy) = client_sent(&connect(&domain(b"allowed.test"))).await;
    let request = request(&mut proxy).await.expect("a request");
    assert_eq!(
        request,
        Request {
            host: "allowed.test".to_owned(),
            port: 8080
        }
    );
    assert_eq!(answered(client, proxy).await, [5, 0]);
}

#[tokio::test]
async fn addresses_are_read_in_their_usual_text_form() {
    let (_client, mut proxy) = client_sent(&connect(&[1, 127, 0, 0, 1])).await;
    assert_eq!(request(&mut proxy).await.expect("v4").host, "127.0.0.1");

    let mut v6 = vec![4];
    v6.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().expect("v6").octets());
    let (_client, mut proxy) = client_sent(&connect(&v6)).await;
    assert_eq!(request(&mut proxy).await.expect("v6").host, "2001:db8::1");

    let (_client, mut proxy) = client_sent(&connect(&domain(b"caf\xe9.test"))).await;
    assert_eq!(
        request(&mut proxy).await.expect("bytes").host,
        "caf\u{fffd}.test"
    );
}

#[tokio::test]
async fn a_client_without_the_no_auth_method_is_told_none_is_acceptable() {
    for greeting in [&[5u8, 1, 0x02][..], &[5, 0][..]] {
        let (client, mut proxy) = client_sent(greeting).await;
        let error = request(&mut proxy).await.expect_err("no method");
        assert!(matches!(error, SocksError::NoAcceptableMethod), "{error}");
        assert_eq!(answered(client, proxy).await, [5, 0xff]);
    }
}

#[tokio::test]
async fn bind_udp_and_unknown_commands_are_not_supported() {
    for command in [2u8, 3, 0, 9] {
        let mut bytes = vec![5, 1, 0, 5, command, 0, 1, 127, 0, 0, 1];
        bytes.extend_from_slice(&53u16.to_be_bytes());
        let (client, mut proxy) = client_sent(&bytes).await;
        let error = request(&mut proxy).await.expect_err("not connect");
        assert!(
            matches!(error, SocksError::Command(c) if c == command),
            "{error}"
        );
        assert_eq!(
            answered(client, proxy).await,
            [5, 0, 5, 0x07, 0, 1, 0, 0, 0, 0, 0, 0]
        );
    }
}

#[tokio::test]
async fn an_unknown_address_type_is_not_supported() {
    let (client, mut proxy) = client_sent(&[5, 1, 0, 5, 1, 0, 2, 1, 2, 3, 4]).await;
    let error = request(&mut proxy).await.expect_err("address type");
    assert!(matches!(error, SocksError::AddressType(2)), "{error}");
    assert_eq!(
        answered(client, proxy).await,
        [5, 0, 5, 0x08, 0, 1, 0, 0, 0, 0, 0, 0]
    );
}

#[tokio::test]
async fn a_request_of_another_version_ends_the_connection() {
    let (client, mut proxy) = client_sent(&[5, 1, 0, 4, 1, 0, 1, 127, 0, 0, 1, 0, 80]).await;
    let error = request(&mut proxy).await.expect_err("version");
    assert!(matches!(error, SocksError::Version(4)), "{error}");
    assert_eq!(answered(client, proxy).await, [5, 0]);
}

#[tokio::test]
async fn a_request_cut_short_ends_when_the_client_closes() {
    let full = connect(&domain(b"allowed.test"));
    for cut in [1, 2, 3, 5, 8, 10, full.len() - 1] {
        let (mut client, mut proxy) = client_sent(&full[..cut]).await;
        client.shutdown().await.expect("shutdown");
        let error = request(&mut proxy).await.expect_err("cut short");
        assert!(
            matches!(error, SocksError::Handshake(HandshakeError::Closed)),
            "{cut}: {error}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_silent_client_ends_at_the_handshake_timeout() {
    let started = tokio::time::Instant::now();
    let (_client, mut proxy) = client_sent(&[5, 1, 0, 5, 1]).await;
    let error = request(&mut proxy).await.expect_err("silent");
    assert!(
        matches!(error, SocksError::Handshake(HandshakeError::Timeout(_))),
        "{error}"
    );
    assert_eq!(started.elapsed(), HANDSHAKE_TIMEOUT);
}

#[test]
fn a_reply_carries_its_code_and_an_unspecified_address() {
    assert_eq!(Reply::NotAllowed.bytes(), [5, 2, 0, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(Reply::Succeeded.bytes()[1], 0);
    assert_eq!(Reply::HostUnreachable.bytes()[1], 4);
}
