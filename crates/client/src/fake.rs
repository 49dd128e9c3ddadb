//! A scripted HTTP/1.1 server on port 0 for the unit tests: it answers requests with the given
//! replies in order and records every request's head.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// What the server does with the next request.
#[derive(Clone)]
pub enum Reply {
    /// Answers with this status, extra headers and body, then closes the connection.
    Answer { status: u16, headers: Vec<(&'static str, String)>, body: Vec<u8> },
    /// Closes the connection without answering.
    Hang,
    /// Keeps the connection open for a long while without answering.
    Silent,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply::Answer { status, headers: Vec::new(), body: Vec::new() }
    }

    pub fn bytes(status: u16, body: impl Into<Vec<u8>>) -> Reply {
        Reply::Answer { status, headers: Vec::new(), body: body.into() }
    }

    pub fn json(status: u16, body: serde_json::Value) -> Reply {
        let headers = vec![("content-type", "application/json".to_owned())];
        Reply::Answer { status, headers, body: body.to_string().into_bytes() }
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        if let Reply::Answer { headers, .. } = &mut self {
            headers.push((name, value.into()));
        }
        self
    }
}

/// A request as received: its request line and its headers, names in lower case.
#[derive(Debug, Clone)]
pub struct Request {
    pub line: String,
    pub headers: Vec<(String, String)>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }
}

pub struct FakeServer {
    pub address: SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
    task: tokio::task::JoinHandle<()>,
}

/// Which reply a request gets.
enum Script {
    /// The next one; a 500 once they run out.
    InOrder(VecDeque<Reply>),
    /// The one for its request target (such as `/skills/a/files/x`); a 404 for any other.
    ByTarget(Vec<(String, Reply)>),
}

impl Script {
    fn reply(&mut self, request: &Request) -> Reply {
        match self {
            Script::InOrder(replies) => replies.pop_front().unwrap_or_else(|| Reply::status(500)),
            Script::ByTarget(routes) => {
                let target = request.line.split(' ').nth(1).unwrap_or_default();
                let found = routes.iter().find(|(route, _)| route == target);
                found.map_or_else(|| Reply::status(404), |(_, reply)| reply.clone())
            }
        }
    }
}

impl FakeServer {
    /// Serves `replies` in order; once they run out, every request gets a 500.
    pub async fn start(replies: Vec<Reply>) -> FakeServer {
        FakeServer::serve(Script::InOrder(VecDeque::from(replies))).await
    }

    /// Answers each request target with its reply, as often as it is asked (for requests sent
    /// concurrently, whose order is not known); any other target gets a 404.
    pub async fn routes(routes: Vec<(&str, Reply)>) -> FakeServer {
        let routes = routes.into_iter().map(|(target, reply)| (target.to_owned(), reply)).collect();
        FakeServer::serve(Script::ByTarget(routes)).await
    }

    async fn serve(mut script: Script) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let Some(request) = read_request(&mut stream).await else { continue };
                let reply = script.reply(&request);
                recorded.lock().unwrap().push(request);
                match reply {
                    Reply::Answer { status, headers, body } => {
                        let mut head = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len());
                        for (name, value) in headers {
                            head.push_str(&format!("{name}: {value}\r\n"));
                        }
                        head.push_str("connection: close\r\n\r\n");
                        let _ = stream.write_all(head.as_bytes()).await;
                        let _ = stream.write_all(&body).await;
                        let _ = stream.shutdown().await;
                    }
                    Reply::Hang => drop(stream),
                    Reply::Silent => {
                        tokio::spawn(async move {
                            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
                            drop(stream);
                        });
                    }
                }
            }
        });
        FakeServer { address, requests, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request's head (and skips its body).
async fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 4096];
    let end = loop {
        if let Some(end) = bytes.windows(4).position(|window| window == b"\r\n\r\n") {
            break end;
        }
        let read = stream.read(&mut buffer).await.ok().filter(|read| *read > 0)?;
        bytes.extend_from_slice(&buffer[..read]);
    };
    let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let line = lines.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize =
        headers.iter().find(|(name, _)| name == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = bytes.len() - (end + 4);
    while body < length {
        let read = stream.read(&mut buffer).await.ok().filter(|read| *read > 0)?;
        body += read;
    }
    Some(Request { line, headers })
}

/// A server for watch mode: `GET /skills` answers `catalog` (a complete HTTP answer), and
/// `GET /events` announces `etag` once and then stays silent with the connection open. Counts
/// both kinds of request.
pub struct EventServer {
    pub address: SocketAddr,
    pub catalogs: Arc<std::sync::atomic::AtomicUsize>,
    pub streams: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl EventServer {
    pub async fn start(catalog: String, etag: &str) -> EventServer {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let (catalogs, streams) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (catalog_count, stream_count) = (Arc::clone(&catalogs), Arc::clone(&streams));
        let event = format!("event: catalog\ndata: {}\n\n", serde_json::json!({ "etag": etag }));
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (catalog, event) = (catalog.clone(), event.clone());
                let (catalog_count, stream_count) = (Arc::clone(&catalog_count), Arc::clone(&stream_count));
                tokio::spawn(async move {
                    let Some(request) = read_request(&mut stream).await else { return };
                    if request.line.starts_with("GET /events ") {
                        stream_count.fetch_add(1, Ordering::SeqCst);
                        let head =
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\r\n";
                        let _ = stream.write_all(head.as_bytes()).await;
                        let _ = stream.write_all(event.as_bytes()).await;
                        std::future::pending::<()>().await;
                    } else {
                        catalog_count.fetch_add(1, Ordering::SeqCst);
                        let _ = stream.write_all(catalog.as_bytes()).await;
                        let _ = stream.shutdown().await;
                    }
                });
            }
        });
        EventServer { address, catalogs, streams, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }
}

impl Drop for EventServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
