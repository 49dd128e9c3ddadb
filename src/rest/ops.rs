//! Operations: liveness, readiness and metrics.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;
use crate::catalog::{CatalogError, CatalogState};
use crate::http::{HttpError, Problem};

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(healthz)).routes(routes!(readyz)).routes(routes!(metrics))
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Status {
    #[schema(example = "ok")]
    pub status: &'static str,
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "Alive", body = Status)))]
async fn healthz() -> axum::Json<Status> {
    axum::Json(Status { status: "ok" })
}

/// Readiness: the first discovery is done and the server is not shutting down. A failed source
/// still counts as ready: the server answers, with 503 problems that say why.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = Status),
        (status = 503, description = "Starting or shutting down", body = Problem, content_type = "application/problem+json"),
    ))]
async fn readyz(State(app): State<Arc<App>>) -> Result<axum::Json<Status>, HttpError> {
    if *app.shutdown.borrow() {
        return Err(HttpError::ShuttingDown);
    }
    match app.catalog.snapshot().state {
        CatalogState::Starting => Err(CatalogError::NotReady.into()),
        _ => Ok(axum::Json(Status { status: "ready" })),
    }
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", body = String, content_type = "text/plain; version=0.0.4")))]
async fn metrics(State(app): State<Arc<App>>) -> Response {
    let content_type = [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"))];
    (content_type, app.metrics.render()).into_response()
}
