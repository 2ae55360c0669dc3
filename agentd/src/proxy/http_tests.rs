//! Request heads as the proxy reads them: tunnels, forwarded requests in origin-form, and
//! every malformed head refused with its reason.

use super::*;

fn forward(head: &str) -> (String, u16, String) {
    let request = parse(head.as_bytes()).expect("a valid request");
    let Kind::Forward(out) = request.kind else {
        panic!("not a forwarded request: {request:?}");
    };
    (
        request.host,
        request.port,
        String::from_utf8(out).expect("UTF-8"),
    )
}

#[test]
fn connect_names_host_and_port() {
    let request = parse(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    assert_eq!(
        request,
        Ok(Request {
            host: "example.com".to_owned(),
            port: 443,
            kind: Kind::Connect
        })
    );
    let v6 = parse(b"CONNECT [2001:db8::1]:8443 HTTP/1.0\n\n").expect("bracketed IPv6");
    assert_eq!((v6.host.as_str(), v6.port), ("[2001:db8::1]", 8443));
}

#[test]
fn connect_without_a_valid_port_is_refused() {
    let cases: &[(&str, BadRequest)] = &[
        ("example.com", BadRequest::ConnectTarget),
        ("example.com:", BadRequest::ConnectTarget),
        ("example.com:0", BadRequest::Authority),
        ("example.com:65536", BadRequest::Authority),
        ("example.com:+443", BadRequest::Authority),
        ("example.com:0443x", BadRequest::Authority),
        ("example.com:000443", BadRequest::Authority),
        ("2001:db8::1:443", BadRequest::Authority),
        ("[2001:db8::1]443", BadRequest::Authority),
        ("[2001:db8::1", BadRequest::Authority),
        (":443", BadRequest::Authority),
        ("user@example.com:443", BadRequest::Credentials),
    ];
    for (target, error) in cases {
        let head = format!("CONNECT {target} HTTP/1.1\r\n\r\n");
        assert_eq!(parse(head.as_bytes()), Err(error.clone()), "{target}");
    }
}

#[test]
fn an_absolute_url_is_forwarded_in_origin_form_with_its_own_host() {
    let (host, port, out) = forward(
        "GET http://Example.com:8080/a/b?q=1#frag HTTP/1.1\r\n\
         Host: elsewhere.test\r\n\
         User-Agent: test/1\r\n\
         Accept:   */*  \r\n\
         \r\n",
    );
    assert_eq!((host.as_str(), port), ("Example.com", 8080));
    assert_eq!(
        out,
        "GET /a/b?q=1 HTTP/1.1\r\nHost: Example.com:8080\r\nUser-Agent: test/1\r\n\
         Accept: */*\r\nConnection: close\r\n\r\n"
    );
}

#[test]
fn hop_by_hop_and_proxy_headers_are_not_forwarded() {
    let (_, _, out) = forward(
        "POST http://example.com/upload HTTP/1.1\r\n\
         Proxy-Authorization: Basic c2VjcmV0\r\n\
         proxy-connection: keep-alive\r\n\
         Connection: keep-alive, X-Trace\r\n\
         Keep-Alive: timeout=5\r\n\
         X-Trace: 1\r\n\
         Content-Length: 4\r\n\
         Transfer-Encoding: identity\r\n\
         Proxy: x\r\n\
         \r\n",
    );
    assert_eq!(
        out,
        "POST /upload HTTP/1.1\r\nHost: example.com\r\nContent-Length: 4\r\n\
         Transfer-Encoding: identity\r\nProxy: x\r\nConnection: close\r\n\r\n"
    );
}

#[test]
fn a_url_without_port_or_path_gets_port_80_and_slash() {
    assert_eq!(
        forward("GET http://example.com HTTP/1.0\r\n\r\n"),
        (
            "example.com".to_owned(),
            80,
            "GET / HTTP/1.0\r\nHost: example.com\r\nConnection: close\r\n\r\n".to_owned()
        )
    );
    let (_, port, out) = forward("HEAD HTTP://example.com:?x=1 HTTP/1.1\r\n\r\n");
    assert_eq!(port, 80);
    assert!(
        out.starts_with("HEAD /?x=1 HTTP/1.1\r\nHost: example.com\r\n"),
        "{out}"
    );
    let (_, _, out) = forward("GET http://example.com:80/ HTTP/1.1\r\n\r\n");
    assert!(
        out.starts_with("GET / HTTP/1.1\r\nHost: example.com\r\n"),
        "{out}"
    );
    let (host, port, _) = forward("GET http://[::1]:8080/ HTTP/1.1\r\n\r\n");
    assert_eq!((host.as_str(), port), ("[::1]", 8080));
}

#[test]
fn header_values_that_are_not_utf8_are_forwarded_unchanged() {
    let request = parse(b"GET http://example.com/ HTTP/1.1\r\nX-Name: caf\xe9\r\n\r\n")
        .expect("obs-text in a value");
    let Kind::Forward(out) = request.kind else {
        panic!("not forwarded");
    };
    assert!(out.windows(12).any(|w| w == b"X-Name: caf\xe9"));
}

/// Checks that each head of `cases` is refused with its reason.
fn assert_refused(cases: &[(&[u8], BadRequest)]) {
    for (head, error) in cases {
        assert_eq!(
            parse(head),
            Err(error.clone()),
            "{}",
            String::from_utf8_lossy(head)
        );
    }
}

#[test]
fn malformed_request_lines_are_refused_with_their_reason() {
    // The request line: its shape, its version, its bytes.
    let cases: &[(&[u8], BadRequest)] = &[
        (b"\r\n\r\n", BadRequest::RequestLine),
        (b"GET\r\n\r\n", BadRequest::RequestLine),
        (b"GET http://example.com/\r\n\r\n", BadRequest::RequestLine),
        (
            b"GET  http://example.com/ HTTP/1.1\r\n\r\n",
            BadRequest::RequestLine,
        ),
        (
            b"GET http://example.com/ HTTP/1.1 x\r\n\r\n",
            BadRequest::RequestLine,
        ),
        (
            b"G(T http://example.com/ HTTP/1.1\r\n\r\n",
            BadRequest::RequestLine,
        ),
        (
            b"GET http://example.com/ HTTP/2\r\n\r\n",
            BadRequest::Version,
        ),
        (
            b"GET http://example.com/ http/1.1\r\n\r\n",
            BadRequest::Version,
        ),
        (
            b"GET http://ex\xc3\xa4mple.com/ HTTP/1.1\r\n\r\n",
            BadRequest::NotAscii,
        ),
        (
            b"GET http://example.com/\x0b HTTP/1.1\r\n\r\n",
            BadRequest::NotAscii,
        ),
    ];
    assert_refused(cases);
}

#[test]
fn malformed_header_lines_are_refused_with_their_reason() {
    // The header lines: their shape and their framing.
    let cases: &[(&[u8], BadRequest)] = &[
        (
            b"GET http://example.com/ HTTP/1.1\r\nNoColon\r\n\r\n",
            BadRequest::Header,
        ),
        (
            b"GET http://example.com/ HTTP/1.1\r\nName : v\r\n\r\n",
            BadRequest::Header,
        ),
        (
            b"GET http://example.com/ HTTP/1.1\r\n: v\r\n\r\n",
            BadRequest::Header,
        ),
        (
            b"GET http://example.com/ HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
            BadRequest::Framing,
        ),
        (
            b"GET http://example.com/ HTTP/1.1\r\nA: b\rc\r\n\r\n",
            BadRequest::Framing,
        ),
        (
            b"GET http://example.com/ HTTP/1.1\r\nA: b\0\r\n\r\n",
            BadRequest::Framing,
        ),
    ];
    assert_refused(cases);
}

#[test]
fn targets_the_proxy_cannot_forward_are_refused_with_their_reason() {
    // The target: its form, its scheme, its authority.
    let cases: &[(&[u8], BadRequest)] = &[
        (
            b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
            BadRequest::OriginForm,
        ),
        (b"OPTIONS * HTTP/1.1\r\n\r\n", BadRequest::OriginForm),
        (
            b"GET https://example.com/ HTTP/1.1\r\n\r\n",
            BadRequest::Https,
        ),
        (
            b"GET ftp://example.com/ HTTP/1.1\r\n\r\n",
            BadRequest::Scheme,
        ),
        (b"GET example.com/ HTTP/1.1\r\n\r\n", BadRequest::Scheme),
        (
            b"GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n",
            BadRequest::Credentials,
        ),
        (b"GET http:///path HTTP/1.1\r\n\r\n", BadRequest::Authority),
        (
            b"GET http://example.com:99999/ HTTP/1.1\r\n\r\n",
            BadRequest::Authority,
        ),
    ];
    assert_refused(cases);
}

#[test]
fn the_proxy_answers_with_a_complete_one_line_response() {
    let answer = response(403, "Forbidden", "not here");
    assert_eq!(
        String::from_utf8(answer).expect("UTF-8"),
        "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: 9\r\nConnection: close\r\n\r\nnot here\n"
    );
    assert_eq!(
        BadRequest::TooLarge.status(),
        (431, "Request Header Fields Too Large")
    );
    assert_eq!(BadRequest::Version.status().0, 505);
    assert_eq!(BadRequest::Header.status().0, 400);
}
