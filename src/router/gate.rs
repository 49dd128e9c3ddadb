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
//! work in the order the layers did, with no allocation of their own but the request id: the
//! gate's `call` is the way in (`request_id`, `request_span`, `admit`), its future's `poll` the way
//! out (`problem_for_bare_errors`, `html_for_browsers`, the id, `record`), each a function of its
//! own.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::body::HttpBody;
use axum::extract::MatchedPath;
use axum::http::{HeaderName, HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use bytes::BytesMut;
use tower::{Layer, Service};

use crate::app::App;
use crate::auth::Waiting;
use crate::http::auth::Refused;
use crate::http::{
    BodyDeadline, HttpError, Limits, Problem, auth, browser_target, check_host, check_uri_length,
    problem_for_bare_errors,
};
use crate::observability::Metrics;
use crate::pages;

const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The layer of every route: see the module documentation.
#[derive(Clone)]
pub(super) struct GateLayer {
    app: Arc<App>,
    route: Option<&'static str>,
}

impl GateLayer {
    /// The gate of the router's routes: a request's route is the one the router matched.
    pub(super) fn new(app: Arc<App>) -> Self {
        GateLayer { app, route: None }
    }

    /// The gate of a route taken before the router (`super::front`): its route template is known.
    pub(super) fn of_route(app: Arc<App>, route: &'static str) -> Self {
        GateLayer { app, route: Some(route) }
    }
}

impl<S> Layer<S> for GateLayer {
    type Service = Gate<S>;

    fn layer(&self, inner: S) -> Gate<S> {
        Gate { inner, app: Arc::clone(&self.app), route: self.route, peer: None }
    }
}

#[derive(Clone)]
pub struct Gate<S> {
    inner: S,
    app: Arc<App>,
    route: Option<&'static str>,
    /// The connection's peer, for a gate served to one connection (`super::front`); the router's
    /// gate, shared by every connection, reads the request's `ConnectInfo` instead.
    peer: Option<SocketAddr>,
}

impl<S> Gate<S> {
    /// This gate for the requests of the connection from `peer`.
    pub(super) fn for_peer(&mut self, peer: SocketAddr) {
        self.peer = Some(peer);
    }
}

/// The route template of a request, as the OpenAPI document spells it apart from axum's
/// catch-all (`{*path}`): the router's match, or the route of a gate in front of the router.
#[derive(Clone)]
enum Route {
    Matched(MatchedPath),
    Known(&'static str),
    Unmatched,
}

impl Route {
    fn of<B>(known: Option<&'static str>, request: &Request<B>) -> Self {
        match known {
            Some(route) => Route::Known(route),
            None => request
                .extensions()
                .get::<MatchedPath>()
                .map_or(Route::Unmatched, |matched| Route::Matched(matched.clone())),
        }
    }

    fn matched(&self) -> Option<&str> {
        match self {
            Route::Matched(matched) => Some(matched.as_str()),
            Route::Known(route) => Some(route),
            Route::Unmatched => None,
        }
    }

    fn label(&self) -> &str {
        self.matched().unwrap_or("unmatched")
    }
}

impl<S, B> Service<Request<B>> for Gate<S>
where
    S: Service<Request<B>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = GateFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    /// The request's way in: its id, its span, then (inside the span) admission, then the route,
    /// with a panic caught.
    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let started = Instant::now();
        let route = Route::of(self.route, &request);
        let id = request_id(&request);
        let span = request_span(&request, &route, &id);
        let mut browser = None;
        let state = span.in_scope(|| {
            tracing::debug!("started processing request");
            match admit(&self.app, &mut request, route.matched(), self.peer, &mut browser) {
                Ok(()) => match std::panic::catch_unwind(AssertUnwindSafe(|| self.inner.call(request))) {
                    Ok(future) => State::Running { future },
                    Err(_panic) => State::Answered { response: Some(HttpError::Internal.into_response()) },
                },
                Err(Refused { error, wait: None }) => State::Answered { response: Some(error.into_response()) },
                Err(Refused { error, wait: Some((delay, waiting)) }) => State::Waiting {
                    delay: tokio::time::sleep(delay),
                    response: Some(error.into_response()),
                    _waiting: waiting,
                },
            }
        });
        GateFuture { state, started, route, id, browser, span, app: Arc::clone(&self.app) }
    }
}

/// The client's own request id (kept, and sent back), or a new one.
fn request_id<B>(request: &Request<B>) -> HeaderValue {
    match request.headers().get(X_REQUEST_ID) {
        Some(id) => id.clone(),
        None => next_request_id(),
    }
}

/// The request's span. A debug span, so that at the default `info` its fields are not formatted
/// for every request; `RUST_LOG=skillcat::router=debug` shows it and its lines.
fn request_span<B>(request: &Request<B>, route: &Route, id: &HeaderValue) -> tracing::Span {
    tracing::debug_span!(
        "request",
        method = %request.method(),
        route = route.label(),
        request_id = id.to_str().unwrap_or_default(),
    )
}

/// Admission, outside the limits so that a request without credentials never takes a slot: the
/// head first (as hyper's own checks of it), then the credentials. From the head on, a browser
/// gets its errors as pages (`browser`: where it went), the login page for a 401 among them.
fn admit<B>(
    app: &App,
    request: &mut Request<B>,
    route: Option<&str>,
    peer: Option<SocketAddr>,
    browser: &mut Option<String>,
) -> Result<(), Refused> {
    check_host(request.version(), request.headers())?;
    check_uri_length(request.uri())?;
    *browser = browser_target(request);
    auth::check(app, request, route, peer)
}

pin_project_lite::pin_project! {
    pub struct GateFuture<F> {
        #[pin]
        state: State<F>,
        started: Instant,
        route: Route,
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
        // A refusal whose answer waits out its client's penalty.
        Waiting { #[pin] delay: tokio::time::Sleep, response: Option<Response>, _waiting: Waiting },
    }
}

impl<F> Future for GateFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    /// The answer's way out: the route's answer (a panic caught), errors as problems (as pages
    /// for a browser), the request id and `nosniff`, then the metrics.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.enter();
        let response = match this.state.project() {
            StateProjection::Running { future } => match std::panic::catch_unwind(AssertUnwindSafe(|| future.poll(cx)))
            {
                Ok(Poll::Pending) => return Poll::Pending,
                Ok(Poll::Ready(Ok(response))) => problem_for_bare_errors(response),
                // The panic's message went to the panic hook; the client gets a generic answer.
                Err(_panic) => HttpError::Internal.into_response(),
            },
            StateProjection::Answered { response } => response.take().expect("a gate future is polled to its end once"),
            StateProjection::Waiting { delay, response, .. } => {
                ready!(delay.poll(cx));
                response.take().expect("a gate future is polled to its end once")
            }
        };
        let mut response = html_for_browsers(this.browser.as_deref(), response);
        // Moved, not cloned: a clone of a value made from a slice allocates.
        let id = std::mem::replace(this.id, HeaderValue::from_static(""));
        let headers = response.headers_mut();
        headers.entry(X_REQUEST_ID).or_insert(id);
        // No answer is ever sniffed into another type (a problem that echoes a path, say).
        headers.entry(header::X_CONTENT_TYPE_OPTIONS).or_insert(HeaderValue::from_static("nosniff"));
        record(&this.app.metrics, this.route.matched(), response.status(), this.started.elapsed());
        Poll::Ready(Ok(response))
    }
}

/// The request in the metrics, labelled with its route template as the OpenAPI document spells it
/// (`{path}`, not axum's catch-all `{*path}`). A 5xx is an expected state here (not ready, a
/// failed source, at capacity); real internal errors are logged where they happen.
fn record(metrics: &Metrics, route: Option<&str>, status: StatusCode, elapsed: Duration) {
    let route = route.unwrap_or("unmatched");
    // Byte pairs, not `str::contains`, whose searcher costs more to set up than a route is long.
    match route.as_bytes().windows(2).any(|pair| pair == b"{*") {
        true => metrics.request(&route.replace("{*", "{"), status.as_u16(), elapsed),
        false => metrics.request(route, status.as_u16(), elapsed),
    }
    tracing::debug!(status = status.as_u16(), latency = ?elapsed, "finished processing request");
}

/// The error answer for browsers: a browser (see [`browser_target`]) gets every problem as an HTML
/// page, with the same status and headers; every other client keeps the problem document.
fn html_for_browsers(target: Option<&str>, response: Response) -> Response {
    let (Some(path), Some(problem)) = (target, response.extensions().get::<Problem>()) else {
        return response;
    };
    let page = pages::error_page(problem, path);
    let (mut parts, _) = response.into_parts();
    let mut html = pages::html(page);
    parts.headers.remove(header::CONTENT_LENGTH);
    for (name, value) in html.headers_mut().drain().filter_map(|(name, value)| Some((name?, value))) {
        parts.headers.insert(name, value);
    }
    // An error page is never kept.
    parts.headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Response::from_parts(parts, html.into_body())
}

/// A request id unique within the process: a random-enough prefix and a counter, written on the
/// stack without the formatting machinery (which cost more than the rest of the id), then into
/// the thread's [`ID_ARENA`].
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
    let id = ID_ARENA.with_borrow_mut(|arena| {
        let id = &buffer[..prefix.len() + digits.len()];
        if arena.capacity() - arena.len() < id.len() {
            *arena = BytesMut::with_capacity(ID_ARENA_BYTES);
        }
        arena.extend_from_slice(id);
        arena.split().freeze()
    });
    HeaderValue::from_maybe_shared(id).expect("hex digits, decimal digits and hyphens")
}

/// The size of an [`ID_ARENA`]: about a hundred ids.
const ID_ARENA_BYTES: usize = 4096;

thread_local! {
    /// Where a thread writes its request ids, each a slice of one shared allocation rather than an
    /// allocation of its own; an arena is freed with the last id in it.
    static ID_ARENA: std::cell::RefCell<BytesMut> = std::cell::RefCell::new(BytesMut::new());
}

/// The layer of the bounded routes: see the module documentation.
#[derive(Clone)]
pub struct LimitLayer {
    slots: Arc<Slots>,
    request_timeout: Duration,
    body_timeout: Duration,
}

impl LimitLayer {
    pub(super) fn new(limits: &Limits) -> Self {
        LimitLayer {
            // One count for every bounded route and method together (axum layers each of
            // them separately): the cap holds for all of them.
            slots: Arc::new(Slots { taken: AtomicUsize::new(0), cap: limits.concurrency }),
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
pub struct Limit<S> {
    inner: S,
    limits: LimitLayer,
}

impl<S, B> Service<Request<B>> for Limit<S>
where
    S: Service<Request<B>, Response = Response, Error = Infallible>,
    B: HttpBody,
{
    type Response = Response;
    type Error = Infallible;
    type Future = LimitFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        // At capacity the request is refused at once rather than queued.
        let Some(permit) = Slots::take(&self.limits.slots) else {
            return LimitFuture::Refused { response: Some(HttpError::Overloaded.into_response()) };
        };
        // For `BoundedBody`, which reads request bodies within it. A request that has ended with
        // its head (most: a GET, a revalidation) has no body to read, and is spared the extension.
        if !request.body().is_end_stream() {
            request.extensions_mut().insert(BodyDeadline(self.limits.body_timeout));
        }
        LimitFuture::Running {
            future: tokio::time::timeout(self.limits.request_timeout, self.inner.call(request)),
            _permit: permit,
        }
    }
}

/// The bounded routes' concurrency cap: requests in flight, counted. A request over the cap is
/// refused, never queued, so this needs no queue of waiters (a semaphore's, whose lock every
/// release takes).
struct Slots {
    taken: AtomicUsize,
    cap: usize,
}

impl Slots {
    /// A slot, held until the guard is dropped; `None` at the cap.
    fn take(slots: &Arc<Slots>) -> Option<Slot> {
        let taken = slots
            .taken
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |taken| (taken < slots.cap).then_some(taken + 1));
        taken.ok().map(|_| Slot(Arc::clone(slots)))
    }
}

/// A slot under the cap (see [`Slots::take`]).
pub struct Slot(Arc<Slots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.taken.fetch_sub(1, Ordering::Release);
    }
}

pin_project_lite::pin_project! {
    #[project = LimitProjection]
    pub enum LimitFuture<F> {
        Running { #[pin] future: tokio::time::Timeout<F>, _permit: Slot },
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
                Poll::Ready(Err(_elapsed)) => Poll::Ready(Ok(HttpError::Timeout.into_response())),
            },
            LimitProjection::Refused { response } => {
                Poll::Ready(Ok(response.take().expect("a limit future is polled to its end once")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids written across several arenas are all different, and each stays as written after its
    /// arena is full and the next ones are written.
    #[test]
    fn request_ids_are_unique_and_intact_across_arenas() {
        let ids: Vec<HeaderValue> = (0..3 * ID_ARENA_BYTES / 20).map(|_| next_request_id()).collect();
        let texts: Vec<&str> = ids.iter().map(|id| id.to_str().expect("ASCII")).collect();
        let prefix = texts[0].rsplit_once('-').expect("a prefix").0;
        let mut counters = Vec::new();
        for text in &texts {
            let (own, counter) = text.rsplit_once('-').expect("a prefix and a counter");
            assert_eq!(own, prefix, "{text}");
            counters.push(counter.parse::<u64>().expect("a decimal counter"));
        }
        assert!(counters.windows(2).all(|pair| pair[0] < pair[1]), "{counters:?}");
    }

    /// The concurrency cap: slots up to the cap, none beyond, one again once one is dropped.
    #[test]
    fn slots_are_taken_up_to_the_cap() {
        let slots = Arc::new(Slots { taken: AtomicUsize::new(0), cap: 2 });
        let first = Slots::take(&slots).expect("a first slot");
        let second = Slots::take(&slots).expect("a second slot");
        assert!(Slots::take(&slots).is_none(), "none over the cap");
        drop(first);
        let third = Slots::take(&slots).expect("a slot once one is free");
        assert!(Slots::take(&slots).is_none());
        drop((second, third));
        assert_eq!(slots.taken.load(Ordering::Relaxed), 0);
    }
}
