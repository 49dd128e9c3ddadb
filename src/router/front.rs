//! The way into the application: the two most frequent requests, `GET /skills` (most often a
//! revalidation answered 304) and `POST /skills/{name}/load`, are taken to their route before
//! axum's router, everything else goes through it.
//!
//! Routing a request costs more than answering a 304 from a prepared body: the router matches the
//! path, records the match, clones the route's boxed service and boxes its future. A fast route is
//! the same route without that: the same [`Gate`] (request id, span, `Host` and target checks,
//! authentication, panics caught, problems, error pages, metrics under the route's template), the
//! same [`Limit`] (the one count of the bounded routes' requests in flight, the request timeout,
//! the body deadline) and the same handler code (`rest::listing`, `rest::load`), with the route
//! known from the request line. A request the fast route would read differently from the router
//! (another method, a percent-encoded name) goes through the router.
//!
//! A fast route's request is also spared two things the router needs: its body stays hyper's own
//! (boxed only when a load reads it), and it carries no `ConnectInfo`, since its gate is told the
//! connection's peer instead ([`Front::for_peer`]). Each would cost allocations in every 304.

use std::cell::RefCell;
use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{ConnectInfo, Request};
use axum::http::Method;
use axum::response::{IntoResponse as _, Response};
use axum::routing::future::RouteFuture;
use tower::{Layer as _, Service};

use super::gate::{Gate, GateFuture, GateLayer, Limit, LimitFuture, LimitLayer};
use crate::app::App;
use crate::http::{HttpError, SkillPath};

/// The routes taken before the router, as the OpenAPI document names them.
const LISTING: &str = "/skills";
const LOAD: &str = "/skills/{name}/load";

/// The application's service: the fast routes, then the router.
#[derive(Clone)]
pub struct Front {
    router: Router,
    listing: Gate<Limit<Listing>>,
    load: Gate<Limit<Load>>,
    /// The peer of the one connection this serves, once [`Front::for_peer`] has said it.
    peer: Option<SocketAddr>,
}

impl Front {
    /// `router` behind the fast routes, which pass the same gate (for `app`) and the same limits
    /// (`limit`, the layer of the router's bounded routes).
    pub(super) fn new(router: Router, app: &Arc<App>, limit: &LimitLayer) -> Self {
        let gate = |route| GateLayer::of_route(Arc::clone(app), route);
        Front {
            router,
            listing: gate(LISTING).layer(limit.layer(Listing(Arc::clone(app)))),
            load: gate(LOAD).layer(limit.layer(Load(Arc::clone(app)))),
            peer: None,
        }
    }

    /// This service for the requests of one connection, from `peer`, as hyper calls it. The fast
    /// routes' gates are told the peer; a request for the router carries it as `ConnectInfo`,
    /// where the routes that count their clients (event streams, MCP, the login form) and the
    /// router's gate read it. A fast route's request carries no extension for it.
    pub fn for_peer(&self, peer: SocketAddr) -> FrontService {
        let mut front = self.clone();
        front.listing.for_peer(peer);
        front.load.for_peer(peer);
        front.peer = Some(peer);
        FrontService(RefCell::new(front))
    }
}

/// A connection's [`Front`] as hyper's service: called in place. tower's adapter would clone the
/// whole service for every request (an `Arc` count up and down for each route's gate, limit and
/// handler) and hold the request in a future of its own until its first poll.
pub struct FrontService(RefCell<Front>);

impl<B> hyper::service::Service<Request<B>> for FrontService
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = FrontFuture;

    /// `Front` is always ready (see its `poll_ready`), and hyper calls a connection's service for
    /// one request at a time, so the cell is never borrowed twice.
    fn call(&self, request: Request<B>) -> FrontFuture {
        self.0.borrow_mut().call(request)
    }
}

/// Which fast route answers `method` and `path`, if one does.
fn fast_route<'a>(method: &Method, path: &'a str) -> Option<FastRoute<'a>> {
    match *method {
        Method::GET if path == LISTING => Some(FastRoute::Listing),
        Method::POST => load_name(path).map(FastRoute::Load),
        _ => None,
    }
}

/// The `{name}` of `/skills/{name}/load`. The router percent-decodes it: a name with a `%` is
/// left to the router.
fn load_name(path: &str) -> Option<&str> {
    let name = path.strip_prefix("/skills/")?.strip_suffix("/load")?;
    (!name.is_empty() && !name.bytes().any(|byte| byte == b'/' || byte == b'%')).then_some(name)
}

#[derive(Debug, PartialEq, Eq)]
enum FastRoute<'a> {
    Listing,
    Load(&'a str),
}

impl<B> Service<Request<B>> for Front
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = FrontFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The router, the gate, the limit and the handlers are always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<B>) -> FrontFuture {
        match fast_route(request.method(), request.uri().path()) {
            Some(FastRoute::Listing) => FrontFuture::Listing { future: self.listing.call(request) },
            Some(FastRoute::Load(_)) => FrontFuture::Load { future: self.load.call(request) },
            None => {
                if let Some(peer) = self.peer {
                    request.extensions_mut().insert(ConnectInfo(peer));
                }
                FrontFuture::Router { future: self.router.call(request) }
            }
        }
    }
}

pin_project_lite::pin_project! {
    #[project = FrontProjection]
    pub enum FrontFuture {
        Listing { #[pin] future: GateFuture<LimitFuture<Ready<Result<Response, Infallible>>>> },
        Load { #[pin] future: GateFuture<LimitFuture<BoxedAnswer>> },
        Router { #[pin] future: RouteFuture<Infallible> },
    }
}

impl Future for FrontFuture {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            FrontProjection::Listing { future } => future.poll(cx),
            FrontProjection::Load { future } => future.poll(cx),
            FrontProjection::Router { future } => future.poll(cx),
        }
    }
}

/// `GET /skills`: [`crate::rest::listing`].
#[derive(Clone)]
pub(super) struct Listing(Arc<App>);

impl<B> Service<Request<B>> for Listing {
    type Response = Response;
    type Error = Infallible;
    type Future = Ready<Result<Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    /// The body, which a `GET` does not read, is never boxed.
    fn call(&mut self, request: Request<B>) -> Self::Future {
        ready(Ok(crate::rest::listing(&self.0, request.headers()).into_response()))
    }
}

type BoxedAnswer = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// `POST /skills/{name}/load`: the name read as the route's [`SkillPath`] reads it, then
/// [`crate::rest::load`].
#[derive(Clone)]
pub(super) struct Load(Arc<App>);

impl<B> Service<Request<B>> for Load
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxedAnswer;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let app = Arc::clone(&self.0);
        let request = request.map(Body::new);
        Box::pin(async move {
            // `Front` routes only loads here: without a name this is no route.
            let name = load_name(request.uri().path()).map(str::to_owned).ok_or(HttpError::RouteNotFound);
            let answer = match name.and_then(SkillPath::of) {
                Ok(SkillPath(name)) => crate::rest::load(&app, &name, request).await,
                Err(error) => Err(error),
            };
            Ok(answer.into_response())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_the_router_reads_alike_takes_a_fast_route() {
        assert_eq!(fast_route(&Method::GET, "/skills"), Some(FastRoute::Listing));
        assert_eq!(fast_route(&Method::POST, "/skills/pdf/load"), Some(FastRoute::Load("pdf")));
        // The name's own checks are the route's (400 invalid-name), made on the fast route too.
        assert_eq!(fast_route(&Method::POST, "/skills/not.a.name/load"), Some(FastRoute::Load("not.a.name")));
        for (method, path) in [
            (Method::HEAD, "/skills"),
            (Method::POST, "/skills"),
            (Method::GET, "/skills/"),
            (Method::GET, "/skills/pdf/load"),
            (Method::POST, "/skills//load"),
            (Method::POST, "/skills/a/b/load"),
            (Method::POST, "/skills/p%64f/load"),
            (Method::POST, "/skills/pdf/load/"),
            (Method::PUT, "/skills/pdf/load"),
        ] {
            assert_eq!(fast_route(&method, path), None, "{method} {path}");
        }
    }
}
