//! `hyper-floor ADDR`: answers every request on http://ADDR with the same fixed
//! `304 Not Modified` (the headers skillcat's 304 of `GET /skills` carries, but its request id), over
//! keep-alive HTTP/1.1 with `TCP_NODELAY`, one task per connection on a multi-threaded Tokio
//! runtime (`TOKIO_WORKER_THREADS` threads). No routing, no checks, no metrics: the least a
//! hyper server does per request. Prints `serving address=ADDR` once listening; stops on SIGINT
//! or SIGTERM.

use std::convert::Infallible;

use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CACHE_CONTROL, ETAG, HeaderValue, VARY};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};

async fn not_modified(_request: Request<Incoming>) -> Result<Response<Empty<Bytes>>, Infallible> {
    let mut response = Response::new(Empty::new());
    *response.status_mut() = StatusCode::NOT_MODIFIED;
    let headers = response.headers_mut();
    headers.insert(ETAG, HeaderValue::from_static("\"00000000000000000000000000000000\""));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(VARY, HeaderValue::from_static("accept-encoding"));
    Ok(response)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let address = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8080".to_owned());
    let listener = TcpListener::bind(&address).await?;
    println!("serving address={}", listener.local_addr()?);
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut http = hyper::server::conn::http1::Builder::new();
    http.keep_alive(true);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => accepted?,
            _ = interrupt.recv() => return Ok(()),
            _ = terminate.recv() => return Ok(()),
        };
        stream.set_nodelay(true)?;
        let connection = http.serve_connection(TokioIo::new(stream), service_fn(not_modified));
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
}
