//! `hyper-floor ADDR`: answers every request on http://ADDR with the same fixed
//! `304 Not Modified` (the headers skillcat's 304 of `GET /skills` carries, but its request id), over
//! keep-alive HTTP/1.1 with `TCP_NODELAY`, served as skillcat serves its connections: one thread
//! per worker (`TOKIO_WORKER_THREADS`, else one per core), each a current-thread Tokio runtime
//! accepting from the one listener and running one task per connection it accepted. No routing,
//! no checks, no metrics: the least a hyper server of that shape does per request. Prints
//! `serving address=ADDR` once listening; stops on SIGINT or SIGTERM.

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

/// One serving thread's accept loop.
async fn serve(listener: std::net::TcpListener) -> std::io::Result<()> {
    let listener = TcpListener::from_std(listener)?;
    let mut http = hyper::server::conn::http1::Builder::new();
    http.keep_alive(true);
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let connection = http.serve_connection(TokioIo::new(stream), service_fn(not_modified));
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
}

fn current_thread() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

fn main() -> std::io::Result<()> {
    let address = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8080".to_owned());
    let workers = match std::env::var("TOKIO_WORKER_THREADS") {
        Ok(count) => count.parse().map_err(|_| std::io::Error::other("TOKIO_WORKER_THREADS: not a count"))?,
        Err(_) => std::thread::available_parallelism()?.get(),
    };
    let listener = std::net::TcpListener::bind(&address)?;
    listener.set_nonblocking(true)?;
    println!("serving address={}", listener.local_addr()?);
    for _ in 0..workers {
        let listener = listener.try_clone()?;
        let runtime = current_thread()?;
        std::thread::spawn(move || runtime.block_on(serve(listener)));
    }
    current_thread()?.block_on(async {
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        tokio::select! {
            _ = interrupt.recv() => Ok(()),
            _ = terminate.recv() => Ok(()),
        }
    })
}
