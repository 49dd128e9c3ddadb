//! The two layers of the router, each one service with its own future.
//!
//! Every route passes the [`Gate`]: request id, request span, metrics, the checks of the request
//! head (`Host`, target length), authentication, problem bodies for the framework's bare errors
//! and panic catching. The bounded routes also pass the [`Limit`]: the concurrency cap (503 at
//! capacity), the request timeout and the body deadline.
//!
//! axum clones a route's whole service for every request and boxes each layer added with
//! `Router::layer` or `middleware::from_fn` again, so a stack of small layers costs dozens of
//! allocations per request (most of a 304's instructions went to them). These two do the same
//! work in the order the layers did, with no allocation of their own but the request id.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse as _, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::{Layer, Service};

use super::error::{ApiError, browser_target, html_for_browsers};
use super::{Limits, auth, check_host, check_uri_length, http::BodyDeadline, problem_for_bare_errors};
use crate::app::App;

const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The layer of every route: see the module documentation.
#[derive(Clone)]
pub(super) struct GateLayer {
    app: Arc<App>,
}

impl GateLayer {
    pub(super) fn new(app: Arc<App>) -> Self {
        GateLayer { app }
    }
}

impl<S> Layer<S> for GateLayer {
    type Service = Gate<S>;

    fn layer(&self, inner: S) -> Gate<S> {
        Gate { inner, app: Arc::clone(&self.app) }
    }
}

#[derive(Clone)]
pub(super) struct Gate<S> {
    inner: S,
    app: Arc<App>,
}

impl<S> Service<Request> for Gate<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = GateFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        let started = Instant::now();
        let route = request.extensions().get::<MatchedPath>().cloned();
        // A client's own id is kept (and sent back); otherwise one is made.
        let id = match request.headers().get(X_REQUEST_ID) {
            Some(id) => id.clone(),
            None => next_request_id(),
        };
        // A debug span, so that at the default `info` its fields are not formatted for every
        // request; `RUST_LOG=skillcat::api=debug` shows it and the lines below.
        let span = tracing::debug_span!(
            "request",
            method = %request.method(),
            route = route.as_ref().map_or("unmatched", MatchedPath::as_str),
            request_id = id.to_str().unwrap_or_default(),
        );
        let mut browser = None;
        let admitted = span.in_scope(|| {
            tracing::debug!("started processing request");
            // The head first (as hyper's own checks of it), then the credentials; outside the
            // limits, so that a request without credentials never takes a slot.
            check_host(request.version(), request.headers())
                .and_then(|()| check_uri_length(request.uri()))
                .and_then(|()| {
                    // From here on a browser gets its errors as pages, the login page for a 401
                    // among them.
                    browser = browser_target(&request);
                    auth::check(&self.app, &mut request)
                })
                .map(|()| std::panic::catch_unwind(AssertUnwindSafe(|| self.inner.call(request))))
        });
        let state = match admitted {
            Ok(Ok(future)) => State::Running { future },
            Ok(Err(_panic)) => State::Answered { response: Some(ApiError::Internal.into_response()) },
            Err(refused) => State::Answered { response: Some(refused.into_response()) },
        };
        GateFuture { state, started, route, id, browser, span, app: Arc::clone(&self.app) }
    }
}

pin_project_lite::pin_project! {
    pub(super) struct GateFuture<F> {
        #[pin]
        state: State<F>,
        started: Instant,
        route: Option<MatchedPath>,
        id: HeaderValue,
        // Where a browser's request went, for its error page; `None` for other clients.
        browser: Option<String>,
        span: tracing::Span,
        app: Arc<App>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProjection]
    enum State<F> {
        Running { #[pin] future: F },
        Answered { response: Option<Response> },
    }
}

impl<F> Future for GateFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.enter();
        let mut response = match this.state.project() {
            StateProjection::Running { future } => {
                match std::panic::catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
                    Ok(Poll::Pending) => return Poll::Pending,
                    Ok(Poll::Ready(Ok(response))) => problem_for_bare_errors(response),
                    // The panic's message went to the panic hook; the client gets a generic answer.
                    Err(_panic) => ApiError::Internal.into_response(),
                }
            }
            StateProjection::Answered { response } => response.take().expect("a gate future is polled to its end once"),
        };
        response = html_for_browsers(this.browser.as_deref(), response);
        // Moved, not cloned: a clone of a value made from a slice allocates.
        let id = std::mem::replace(this.id, HeaderValue::from_static(""));
        response.headers_mut().entry(X_REQUEST_ID).or_insert(id);
        let elapsed = this.started.elapsed();
        let status = response.status();
        // Labelled with the template as the OpenAPI document spells it (`{path}`, not axum's
        // catch-all `{*path}`).
        let route = this.route.as_ref().map_or("unmatched", MatchedPath::as_str);
        match route.contains("{*") {
            true => this.app.metrics.request(&route.replace("{*", "{"), status.as_u16(), elapsed),
            false => this.app.metrics.request(route, status.as_u16(), elapsed),
        }
        // A 5xx is an expected state here (not ready, a failed source, at capacity); real
        // internal errors are logged where they happen.
        tracing::debug!(status = status.as_u16(), latency = ?elapsed, "finished processing request");
        Poll::Ready(Ok(response))
    }
}

/// A request id unique within the process: a random-enough prefix and a counter, written on the
/// stack without the formatting machinery (which cost more than the rest of the id): one
/// allocation, the header value's.
fn next_request_id() -> HeaderValue {
    static PREFIX: OnceLock<String> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // `{pid:x}-{nanos:x}-`, at most 26 bytes.
    let prefix = PREFIX.get_or_init(|| {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        format!("{:x}-{:x}-", std::process::id(), nanos & 0xffff_ffff)
    });
    let mut id = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (id % 10) as u8;
        id /= 10;
        if id == 0 {
            break;
        }
    }
    let digits = &digits[start..];
    let mut buffer = [0u8; 64];
    let prefix = prefix.as_bytes();
    buffer[..prefix.len()].copy_from_slice(prefix);
    buffer[prefix.len()..prefix.len() + digits.len()].copy_from_slice(digits);
    HeaderValue::from_bytes(&buffer[..prefix.len() + digits.len()]).expect("hex digits, decimal digits and hyphens")
}

/// The layer of the bounded routes: see the module documentation.
#[derive(Clone)]
pub(super) struct LimitLayer {
    slots: Arc<Semaphore>,
    request_timeout: Duration,
    body_timeout: Duration,
}

impl LimitLayer {
    pub(super) fn new(limits: &Limits) -> Self {
        LimitLayer {
            // One semaphore for every bounded route and method together (axum layers each of
            // them separately): the cap holds for all of them.
            slots: Arc::new(Semaphore::new(limits.concurrency)),
            request_timeout: limits.request_timeout,
            body_timeout: limits.body_timeout,
        }
    }
}

impl<S> Layer<S> for LimitLayer {
    type Service = Limit<S>;

    fn layer(&self, inner: S) -> Limit<S> {
        Limit { inner, limits: self.clone() }
    }
}

#[derive(Clone)]
pub(super) struct Limit<S> {
    inner: S,
    limits: LimitLayer,
}

impl<S> Service<Request> for Limit<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = LimitFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        // At capacity the request is refused at once rather than queued.
        let Ok(permit) = Arc::clone(&self.limits.slots).try_acquire_owned() else {
            return LimitFuture::Refused { response: Some(ApiError::Overloaded.into_response()) };
        };
        // For `BoundedBody`, which reads request bodies within it.
        request.extensions_mut().insert(BodyDeadline(self.limits.body_timeout));
        LimitFuture::Running {
            future: tokio::time::timeout(self.limits.request_timeout, self.inner.call(request)),
            _permit: permit,
        }
    }
}

pin_project_lite::pin_project! {
    #[project = LimitProjection]
    pub(super) enum LimitFuture<F> {
        Running { #[pin] future: tokio::time::Timeout<F>, _permit: OwnedSemaphorePermit },
        Refused { response: Option<Response> },
    }
}

impl<F> Future for LimitFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            LimitProjection::Running { future, .. } => match future.poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Ok(answer)) => Poll::Ready(answer),
                Poll::Ready(Err(_elapsed)) => Poll::Ready(Ok(ApiError::Timeout.into_response())),
            },
            LimitProjection::Refused { response } => {
                Poll::Ready(Ok(response.take().expect("a limit future is polled to its end once")))
            }
        }
    }
}
