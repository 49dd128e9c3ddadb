//! Answers in one shape, whether reqwest or a raw socket received them, and HTTP/1.1 written byte
//! for byte on a socket: for what a client library would refuse to send or would normalize away
//! (malformed requests, dot segments, a body that never finishes).

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::net::TcpStream;

/// An answer: status, headers (names in lower case) and the whole body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let body = String::from_utf8_lossy(&self.body);
        let body =
            if body.len() > 500 { format!("{}…", &body[..body.floor_char_boundary(500)]) } else { body.into() };
        write!(formatter, "{} {:?} {body:?}", self.status, self.headers)
    }
}

impl Answer {
    pub async fn from(response: reqwest::Response) -> Answer {
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
            .collect();
        let body = response.bytes().await.expect("read the body").to_vec();
        Answer { status, headers, body }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("UTF-8 body")
    }

    /// Checks that this is an RFC 9457 problem of `status` and `kind`; returns it.
    pub fn problem(&self, status: u16, kind: &str) -> Value {
        assert_eq!(self.status, status, "status of {self:?}");
        assert_eq!(self.header("content-type"), Some("application/problem+json"), "{self:?}");
        let problem = self.json();
        assert_eq!(problem["type"], format!("urn:skillcat:problem:{kind}"), "{problem}");
        assert_eq!(problem["status"], status, "{problem}");
        assert!(problem["title"].as_str().is_some_and(|title| !title.is_empty()), "{problem}");
        assert!(problem["detail"].is_string(), "{problem}");
        problem
    }
}

// tokio's `io-util` is not enabled for this package, so sockets are driven with `try_read` and
// `try_write`.

pub async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(written) => bytes = &bytes[written..],
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

async fn read_some(stream: &TcpStream, buffer: &mut [u8]) -> std::io::Result<usize> {
    loop {
        stream.readable().await?;
        match stream.try_read(buffer) {
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            result => return result,
        }
    }
}

/// Writes `request` on a fresh connection and reads until the server closes it (at most 5 s).
/// Write errors are ignored: a server may close before reading everything, which is its right.
pub async fn raw_exchange(address: SocketAddr, request: &[u8]) -> Vec<u8> {
    let stream = TcpStream::connect(address).await.expect("connect");
    let _ = write_all(&stream, request).await;
    read_to_close(&stream, Duration::from_secs(5)).await.expect("the server closes the connection within 5 s")
}

/// Reads until EOF or a reset; `None` if the connection is still open after `limit`.
pub async fn read_to_close(stream: &TcpStream, limit: Duration) -> Option<Vec<u8>> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 8192];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, read_some(stream, &mut buffer)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(received),
            Ok(Ok(read)) => received.extend_from_slice(&buffer[..read]),
        }
    }
}

/// Reads one whole answer from `stream` (at most 5 s), whether or not the server then closes.
pub async fn read_answer(stream: &TcpStream) -> Answer {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let complete = parse_response(&received).filter(|answer| {
            answer.header("content-length").is_some_and(|length| answer.body.len() >= length.parse().unwrap())
        });
        if let Some(answer) = complete {
            return answer;
        }
        let read = tokio::time::timeout(Duration::from_secs(5), read_some(stream, &mut buffer))
            .await
            .expect("an answer within 5 s")
            .expect("read");
        assert!(read > 0, "the connection closed without an answer: {:?}", String::from_utf8_lossy(&received));
        received.extend_from_slice(&buffer[..read]);
    }
}

/// Reads exactly an interim `100 Continue` (its head and nothing more) from `stream`, at most 5 s.
pub async fn read_continue(stream: &TcpStream) {
    const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
    let mut received = Vec::new();
    let mut byte = [0u8; 1];
    while received.len() < CONTINUE.len() {
        let read = tokio::time::timeout(Duration::from_secs(5), read_some(stream, &mut byte))
            .await
            .expect("100 Continue within 5 s")
            .expect("read");
        assert!(read == 1, "the connection closed: {:?}", String::from_utf8_lossy(&received));
        received.push(byte[0]);
    }
    assert_eq!(received, CONTINUE, "{:?}", String::from_utf8_lossy(&received));
}

/// Parses the first response in `bytes` (`None` if the server answered nothing).
pub fn parse_response(bytes: &[u8]) -> Option<Answer> {
    let end = bytes.windows(4).position(|window| window == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&bytes[..end]).expect("ASCII head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let status = status_line.split(' ').nth(1)?.parse().expect("a status code");
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let rest = &bytes[end + 4..];
    let length: Option<usize> =
        headers.iter().find(|(name, _)| name == "content-length").map(|(_, value)| value.parse().unwrap());
    let chunked = headers.iter().any(|(name, value)| name == "transfer-encoding" && value.contains("chunked"));
    let body = match (length, chunked) {
        (Some(length), _) => rest[..length.min(rest.len())].to_vec(),
        (None, true) => dechunk(rest),
        (None, false) => rest.to_vec(),
    };
    Some(Answer { status, headers, body })
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|window| window == b"\r\n").expect("a chunk size line");
        let size_text = std::str::from_utf8(&rest[..line_end]).expect("ASCII");
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).expect("hex size");
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
        rest = &rest[line_end + 2 + size + 2..];
    }
}

/// A request written byte for byte on a fresh connection (`Connection: close`), and its answer.
pub async fn raw_request(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(String, Vec<u8>)],
    body: &[u8],
) -> Answer {
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n").into_bytes();
    for (name, value) in headers {
        request.extend_from_slice(name.as_bytes());
        request.extend_from_slice(b": ");
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
    }
    if !body.is_empty() {
        request.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    request.extend_from_slice(b"\r\n");
    request.extend_from_slice(body);
    let bytes = raw_exchange(address, &request).await;
    parse_response(&bytes).unwrap_or_else(|| panic!("no answer to {method} {path}"))
}
