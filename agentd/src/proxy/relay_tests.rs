//! The relay between two in-memory streams: both directions, half-closes, the idle timeout on
//! the paused clock, and the end of both when one side fails.

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, duplex};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::*;

/// A client and a host, with the relay between them running.
fn relayed(
    idle: Duration,
) -> (
    DuplexStream,
    DuplexStream,
    JoinHandle<Result<(), RelayError>>,
) {
    let (client, proxy_client_end) = duplex(1024);
    let (host, proxy_host_end) = duplex(1024);
    let relay = tokio::spawn(relay(proxy_client_end, proxy_host_end, idle));
    (client, host, relay)
}

async fn read_exactly(stream: &mut DuplexStream, n: usize) -> Vec<u8> {
    let mut out = vec![0; n];
    stream.read_exact(&mut out).await.expect("read");
    out
}

#[tokio::test]
async fn bytes_go_both_ways_and_a_half_close_is_passed_on() {
    let (mut client, mut host, relay) = relayed(IDLE_TIMEOUT);
    client.write_all(b"request").await.expect("write");
    assert_eq!(read_exactly(&mut host, 7).await, b"request");
    host.write_all(b"answer").await.expect("write");
    assert_eq!(read_exactly(&mut client, 6).await, b"answer");

    // The client is done sending; the host sees the end and may still answer.
    client.shutdown().await.expect("shutdown");
    let mut rest = Vec::new();
    host.read_to_end(&mut rest)
        .await
        .expect("end of the request");
    assert!(rest.is_empty());
    host.write_all(b"late")
        .await
        .expect("write after the client's end");
    host.shutdown().await.expect("shutdown");
    let mut late = Vec::new();
    client
        .read_to_end(&mut late)
        .await
        .expect("read to the end");
    assert_eq!(late, b"late");
    relay.await.expect("join").expect("both sides finished");
}

/// Sends `bytes` and reads to the end at the same time, as a full-duplex peer does.
async fn send_and_receive(stream: DuplexStream, bytes: &[u8]) -> Vec<u8> {
    let (mut read, mut write) = tokio::io::split(stream);
    let sending = async {
        write.write_all(bytes).await.expect("write");
        write.shutdown().await.expect("shutdown");
    };
    let receiving = async {
        let mut got = Vec::new();
        read.read_to_end(&mut got).await.expect("read");
        got
    };
    tokio::join!(sending, receiving).1
}

#[tokio::test]
async fn many_buffers_each_way_at_once_arrive_whole() {
    let (client, host, relay) = relayed(IDLE_TIMEOUT);
    let upload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let download: Vec<u8> = (0..300_000u32).map(|i| (i % 241) as u8).collect();
    let (host_got, client_got) = crate::test_support::within(async {
        tokio::join!(
            send_and_receive(host, &download),
            send_and_receive(client, &upload)
        )
    })
    .await;
    assert!(host_got == upload, "the upload arrived whole");
    assert!(client_got == download, "the download arrived whole");
    relay.await.expect("join").expect("both sides finished");
}

#[tokio::test(start_paused = true)]
async fn a_connection_silent_both_ways_ends_at_the_idle_timeout_counted_from_the_last_byte() {
    let started = Instant::now();
    let (mut client, mut host, mut relay) = relayed(IDLE_TIMEOUT);
    let moved = started + IDLE_TIMEOUT - Duration::from_secs(60);
    // The paused clock is moved on, as time would pass: nothing is waited for.
    tokio::time::advance(moved - Instant::now()).await;
    client.write_all(b"x").await.expect("write");
    assert_eq!(read_exactly(&mut host, 1).await, b"x");

    let ends = moved + IDLE_TIMEOUT;
    let before = tokio::time::timeout_at(ends - Duration::from_millis(1), &mut relay).await;
    assert!(
        before.is_err(),
        "the relay ended before the idle timeout: {before:?}"
    );
    let ended = relay.await.expect("join");
    assert!(
        matches!(ended, Err(RelayError::Idle(idle)) if idle == IDLE_TIMEOUT),
        "{ended:?}"
    );
    assert_eq!(Instant::now(), ends);
    let mut rest = Vec::new();
    client
        .read_to_end(&mut rest)
        .await
        .expect("the client sees the end");
    assert!(rest.is_empty());
}

#[tokio::test]
async fn a_side_that_is_gone_ends_both_directions() {
    let (mut client, host, relay) = relayed(IDLE_TIMEOUT);
    drop(host);
    // The host's end reads as its end of sending; what the client sends next cannot be
    // delivered, which ends the relay.
    let mut rest = Vec::new();
    client
        .read_to_end(&mut rest)
        .await
        .expect("the host's end is passed on");
    client
        .write_all(b"undeliverable")
        .await
        .expect("written to the proxy");
    let ended = relay.await.expect("join");
    assert!(matches!(ended, Err(RelayError::Io(_))), "{ended:?}");
}
