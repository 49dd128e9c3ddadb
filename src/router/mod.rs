//! The one router: every surface's routes (REST, the well-known indexes, the pages, MCP) and the
//! OpenAPI document, behind the same two layers (`gate`): the gate of every route, and the limits
//! of the bounded ones. The server and every test build the application with [`router`].

mod front;
mod gate;
mod openapi;

use std::sync::Arc;

use axum::Router;
use utoipa_axum::router::OpenApiRouter;

pub use front::{Front, FrontFuture, FrontService};
pub use openapi::openapi_document;

use crate::app::App;
use crate::http::{HttpError, Limits};

/// The whole application: every route with its layers (see [`gate`]): the gate around every
/// route, the limits around the bounded ones; the most frequent routes taken before the router
/// through the same layers (see [`front`]).
pub fn router(app: Arc<App>, limits: &Limits) -> Front {
    let (bounded, unbounded) = routers();
    // One limit for the bounded routes, the fast ones among them: one cap for all.
    let limit = gate::LimitLayer::new(limits);
    let router = Router::new()
        // MCP (`/mcp`) answers within the same limits: a stream it opens is the body of an
        // answer already given, which the limits do not hold on to.
        .merge(Router::from(bounded).merge(crate::mcp::router(&app)).layer(limit.clone()))
        .merge(Router::from(unbounded.merge(openapi::router())))
        .fallback(|| async { HttpError::RouteNotFound })
        .layer(gate::GateLayer::new(Arc::clone(&app)))
        .with_state(Arc::clone(&app));
    Front::new(router, &app, &limit)
}

/// The routes of the surfaces answered within the request limits, and those that are not (event
/// streams, the operations routes).
fn routers() -> (OpenApiRouter<Arc<App>>, OpenApiRouter<Arc<App>>) {
    let bounded = OpenApiRouter::new()
        .merge(crate::rest::router())
        .merge(crate::wellknown::router())
        .merge(crate::pages::router());
    (bounded, crate::rest::unbounded())
}
