//! Malformed HTTP on a raw socket, and clients that stop sending: refused or disconnected, never a
//! server error, and the server survives.

use std::time::{Duration, Instant};

use skillcat::server::MAX_HEADER_BYTES;
use tokio::net::TcpStream;

use super::{LOAD_HEAD, assert_alive, serve_two_skills, serve_two_skills_with};
use crate::support::http::{parse_response, raw_exchange, read_answer, read_to_close, write_all};

#[tokio::test]
async fn malformed_http_is_refused_and_the_server_survives() {
    let (_dir, app) = serve_two_skills().await;
    let huge = |size: usize| {
        format!("GET /skills HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: {}\r\n\r\n", "a".repeat(size))
            .into_bytes()
    };
    let load = |head: &str, body: &str| format!("{LOAD_HEAD}{head}\r\n{body}").into_bytes();
    // What is expected: the status of hyper's (or the API's) answer, `None` for a connection
    // closed without one.
    let cases: Vec<(&str, Vec<u8>, Option<u16>)> = vec![
        ("garbage request line", b"GARBAGE\r\n\r\n".to_vec(), Some(400)),
        ("binary garbage", vec![0, 255, 13, 10, 13, 10, 7, 7], Some(400)),
        ("header without a colon", b"GET /skills HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n".to_vec(), Some(400)),
        ("space before the colon", b"GET /skills HTTP/1.1\r\nHost : x\r\n\r\n".to_vec(), Some(400)),
        ("NUL in a header", b"GET /skills HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n".to_vec(), Some(400)),
        ("unsupported version", b"GET /skills HTTP/9.9\r\nHost: x\r\n\r\n".to_vec(), Some(400)),
        ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(), None),
        ("invalid Content-Length", load("Content-Length: abc\r\n", "{}"), Some(400)),
        ("negative Content-Length", load("Content-Length: -1\r\n", "{}"), Some(400)),
        ("conflicting Content-Lengths", load("Content-Length: 2\r\nContent-Length: 3\r\n", "{}"), Some(400)),
        ("unknown transfer coding", load("Transfer-Encoding: gzip\r\n", "{}"), Some(400)),
        ("bad chunk size", load("Transfer-Encoding: chunked\r\n", "zz\r\n{}\r\n0\r\n\r\n"), Some(400)),
        // Request heads are bounded (`skillcat::server::MAX_HEADER_BYTES`); beyond, hyper answers 431.
        ("header within the bound", huge(MAX_HEADER_BYTES / 2), Some(200)),
        ("header over the bound", huge(MAX_HEADER_BYTES + 1), Some(431)),
        ("1 MiB header", huge(1 << 20), Some(431)),
    ];
    for (what, request, expected) in cases {
        let bytes = raw_exchange(app.address, &request).await;
        let answer = parse_response(&bytes);
        assert_eq!(answer.as_ref().map(|answer| answer.status), expected, "{what}: {answer:?}");
        assert_alive(&app).await;
    }
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_client_that_stops_sending_headers_is_disconnected() {
    let (_dir, app) = serve_two_skills_with(|options| {
        options.header_timeout = Duration::from_millis(300);
    })
    .await;
    // Headers cut off, a request line cut off, nothing at all.
    for partial in [&b"GET /skills HTTP/1.1\r\nHost: x\r\n"[..], b"GET /ski", b""] {
        let stream = TcpStream::connect(app.address).await.expect("connect");
        write_all(&stream, partial).await.expect("write");
        let started = Instant::now();
        let received = read_to_close(&stream, Duration::from_secs(3)).await;
        let received = received.unwrap_or_else(|| panic!("{partial:?}: the connection is still open after 3 s"));
        assert!(started.elapsed() < Duration::from_millis(1500), "{partial:?}: closed after {:?}", started.elapsed());
        if let Some(answer) = parse_response(&received) {
            assert!(answer.status < 500, "{answer:?}");
        }
    }
    // A kept-alive connection that goes quiet after a request is closed the same way.
    let stream = TcpStream::connect(app.address).await.expect("connect");
    write_all(&stream, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
    assert_eq!(read_answer(&stream).await.status, 200);
    let started = Instant::now();
    let rest = read_to_close(&stream, Duration::from_secs(3)).await.expect("the idle connection is closed");
    assert!(started.elapsed() < Duration::from_millis(1500), "closed after {:?}", started.elapsed());
    assert!(parse_response(&rest).is_none_or(|answer| answer.status < 500), "{rest:?}");
    assert_alive(&app).await;
    app.shutdown().await.unwrap();
}

/// A client that sends its request head a byte at a time, never finishing it, holds its
/// connection no longer than one that sends nothing: bytes that arrive are not a request.
#[tokio::test]
async fn a_client_that_trickles_its_head_is_disconnected_as_one_that_sends_nothing() {
    let (_dir, app) = serve_two_skills_with(|options| {
        options.header_timeout = Duration::from_millis(300);
    })
    .await;
    let stream = TcpStream::connect(app.address).await.expect("connect");
    let started = Instant::now();
    let trickle = async {
        let head = b"GET /skills HTTP/1.1\r\nHost: x\r\nX-Slow: ";
        for byte in head.iter().chain(std::iter::repeat(&b'a')) {
            if write_all(&stream, std::slice::from_ref(byte)).await.is_err()
                || started.elapsed() > Duration::from_secs(3)
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let closed = async {
        let received = read_to_close(&stream, Duration::from_secs(3)).await;
        (received, started.elapsed())
    };
    let ((), (received, elapsed)) = tokio::join!(trickle, closed);
    let received = received.expect("the trickling connection is still open after 3 s");
    assert!(elapsed < Duration::from_millis(1500), "closed after {elapsed:?}");
    if let Some(answer) = parse_response(&received) {
        assert!(answer.status < 500, "{answer:?}");
    }
    assert_alive(&app).await;
    app.shutdown().await.unwrap();
}

/// RFC 9112 3.2: an HTTP/1.1 request without `Host`, any request with two, and a `Host` that is
/// not a host and optional port are 400 problems, on every route; HTTP/1.0 needs no `Host`.
#[tokio::test]
async fn a_request_without_exactly_one_valid_host_is_400() {
    let (_dir, app) = serve_two_skills().await;
    // A request head (without the blank line that ends it) and its status.
    let cases: &[(&str, u16)] = &[
        ("GET /skills HTTP/1.1", 400),
        ("GET /healthz HTTP/1.1", 400),
        ("POST /skills/alpha/load HTTP/1.1\r\nContent-Length: 0", 400),
        ("GET http://x/skills HTTP/1.1", 400),
        ("GET /skills HTTP/1.1\r\nHost: x\r\nHost: x", 400),
        ("GET /skills HTTP/1.1\r\nHost: x\r\nHost: y", 400),
        ("GET /readyz HTTP/1.1\r\nHost: x\r\nhost: x", 400),
        ("GET /skills HTTP/1.0\r\nHost: x\r\nHost: x", 400),
        ("GET /skills HTTP/1.1\r\nHost: ", 400),
        ("GET /skills HTTP/1.1\r\nHost: user@x", 400),
        ("GET /skills HTTP/1.1\r\nHost: x y", 400),
        ("GET /skills HTTP/1.1\r\nHost: x/skills", 400),
        ("GET /skills HTTP/1.1\r\nHost: x:port", 400),
        ("GET /skills HTTP/1.1\r\nHost: x:", 200),
        ("GET /skills HTTP/1.1\r\nHost: x", 200),
        ("GET /skills HTTP/1.1\r\nHost: 127.0.0.1:8080", 200),
        ("GET /skills HTTP/1.1\r\nHost: [::1]:8080", 200),
        ("GET /skills HTTP/1.1\r\nHost: skills.example.com", 200),
        ("GET http://x/skills HTTP/1.1\r\nHost: x", 200),
        ("GET /skills HTTP/1.0", 200),
    ];
    for (head, status) in cases {
        let request = format!("{head}\r\nConnection: close\r\n\r\n");
        let answer = parse_response(&raw_exchange(app.address, request.as_bytes()).await);
        let answer = answer.unwrap_or_else(|| panic!("{head:?}: no answer"));
        assert_eq!(answer.status, *status, "{head:?}: {answer:?}");
        if *status == 400 {
            answer.problem(400, "invalid-host");
        }
    }
    assert_alive(&app).await;
    app.shutdown().await.unwrap();
}
