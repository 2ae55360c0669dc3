//! The route request's bytes, every kind of answer the parser may meet, and the kernel's own
//! answer for loopback. Addresses of an interface, and the addresses beside them, are asked about
//! in a network namespace of the tests' own (`local::tests`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use nix::errno::Errno;

use super::netlink::{parse, request};
use super::*;

const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

/// An answer: a header of `kind` and `sequence`, then `payload`.
fn answer(kind: u16, sequence: u32, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(16 + payload.len()).expect("a short answer");
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&length.to_ne_bytes());
    bytes.extend_from_slice(&kind.to_ne_bytes());
    bytes.extend_from_slice(&0u16.to_ne_bytes());
    bytes.extend_from_slice(&sequence.to_ne_bytes());
    bytes.extend_from_slice(&4242u32.to_ne_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// A `struct rtmsg` of `family` and route type `kind`, with one attribute after it.
fn route(family: u8, kind: u8) -> Vec<u8> {
    let mut rtmsg = vec![family, 32, 0, 0, 254, 2, 0, kind, 0, 0, 0, 0];
    rtmsg.extend_from_slice(&8u16.to_ne_bytes());
    rtmsg.extend_from_slice(&1u16.to_ne_bytes());
    rtmsg.extend_from_slice(&[10, 77, 0, 1]);
    rtmsg
}

#[test]
fn an_ipv4_request_names_the_address_tcp_and_the_port() {
    let bytes = request(IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1)), 0x1f90);
    let mut expected = Vec::new();
    expected.extend_from_slice(&52u32.to_ne_bytes());
    expected.extend_from_slice(&26u16.to_ne_bytes()); // RTM_GETROUTE
    expected.extend_from_slice(&1u16.to_ne_bytes()); // NLM_F_REQUEST
    expected.extend_from_slice(&1u32.to_ne_bytes());
    expected.extend_from_slice(&0u32.to_ne_bytes());
    expected.extend_from_slice(&[AF_INET, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    // RTA_DST
    expected.extend_from_slice(&8u16.to_ne_bytes());
    expected.extend_from_slice(&1u16.to_ne_bytes());
    expected.extend_from_slice(&[10, 77, 0, 1]);
    // RTA_IP_PROTO: TCP, padded to four bytes.
    expected.extend_from_slice(&5u16.to_ne_bytes());
    expected.extend_from_slice(&27u16.to_ne_bytes());
    expected.extend_from_slice(&[6, 0, 0, 0]);
    // RTA_DPORT: in network order, padded.
    expected.extend_from_slice(&6u16.to_ne_bytes());
    expected.extend_from_slice(&29u16.to_ne_bytes());
    expected.extend_from_slice(&[0x1f, 0x90, 0, 0]);
    assert_eq!(bytes, expected);
}

#[test]
fn an_ipv6_request_carries_the_whole_address() {
    let ip: Ipv6Addr = "fd77::1".parse().expect("v6");
    let bytes = request(IpAddr::V6(ip), 443);
    assert_eq!(bytes.len(), 16 + 12 + 20 + 8 + 8);
    assert_eq!(&bytes[..4], &64u32.to_ne_bytes());
    assert_eq!(&bytes[16..18], &[AF_INET6, 128]);
    assert_eq!(
        bytes[28..32],
        [20u16.to_ne_bytes(), 1u16.to_ne_bytes()].concat()
    );
    assert_eq!(&bytes[32..48], &ip.octets());
}

#[test]
fn a_route_answer_gives_its_type() {
    for kind in [RouteType::LOCAL, RouteType::UNICAST, RouteType::BROADCAST] {
        let bytes = answer(24, 1, &route(AF_INET, kind.0));
        assert_eq!(parse(&bytes, AF_INET), Ok(kind));
    }
    assert!(RouteType::UNICAST.leaves_machine());
    for kind in [
        RouteType::LOCAL,
        RouteType::BROADCAST,
        RouteType::ANYCAST,
        RouteType::MULTICAST,
        RouteType(9),
    ] {
        assert!(!kind.leaves_machine(), "{kind}");
    }
}

#[test]
fn an_error_answer_is_the_kernels_errno() {
    let mut payload = (-(Errno::ENETUNREACH as i32)).to_ne_bytes().to_vec();
    payload.extend_from_slice(&request(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), 80)[..16]);
    assert_eq!(
        parse(&answer(2, 1, &payload), AF_INET),
        Err(RouteError::NoRoute(Errno::ENETUNREACH))
    );
    assert_eq!(
        RouteError::NoRoute(Errno::ENETUNREACH).to_string(),
        "the kernel has no route to it (ENETUNREACH: Network is unreachable)"
    );
}

#[test]
fn every_other_answer_is_malformed_never_a_route() {
    let good = answer(24, 1, &route(AF_INET, 1));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("shorter than a header", good[..10].to_vec()),
        (
            "length beyond what was read",
            good[..good.len() - 1].to_vec(),
        ),
        ("another request's", answer(24, 2, &route(AF_INET, 1))),
        ("an acknowledgement", answer(2, 1, &0i32.to_ne_bytes())),
        ("an error without its number", answer(2, 1, &[1, 2])),
        ("a short route", answer(24, 1, &route(AF_INET, 1)[..11])),
        ("another family", answer(24, 1, &route(AF_INET6, 2))),
        ("another message type", answer(3, 1, &route(AF_INET, 1))),
    ];
    for (what, bytes) in cases {
        match parse(&bytes, AF_INET) {
            Err(RouteError::Malformed(_)) => {}
            other => panic!("{what}: {other:?}"),
        }
    }
    // A length field that says less than a header.
    let mut short = good.clone();
    short[..4].copy_from_slice(&8u32.to_ne_bytes());
    assert!(matches!(
        parse(&short, AF_INET),
        Err(RouteError::Malformed(_))
    ));
}

#[test]
fn the_kernel_routes_loopback_locally() {
    assert_eq!(
        lookup(IpAddr::V4(Ipv4Addr::LOCALHOST), 80),
        Ok(RouteType::LOCAL)
    );
    assert_eq!(
        lookup(IpAddr::V4(Ipv4Addr::new(127, 8, 9, 10)), 80),
        Ok(RouteType::LOCAL)
    );
    if std::path::Path::new("/proc/sys/net/ipv6").exists() {
        assert_eq!(
            lookup(IpAddr::V6(Ipv6Addr::LOCALHOST), 80),
            Ok(RouteType::LOCAL)
        );
    }
}
