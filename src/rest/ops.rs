//! Operations: liveness, readiness and metrics.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;
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

/// Readiness: the server can serve a catalog and is not shutting down. A good catalog counts
/// while later scans fail (it is served on, with the failure); a server whose every scan so far
/// failed (a duplicate name in the files it started with, say) is not ready, so that a rolling
/// update never puts it in front of clients in place of a healthy one.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = Status),
        (status = 503, description = "Starting, shutting down, or no good catalog yet (`catalog-unavailable`, with the source's failure as the detail)", body = Problem, content_type = "application/problem+json"),
    ))]
async fn readyz(State(app): State<Arc<App>>) -> Result<axum::Json<Status>, HttpError> {
    if *app.shutdown.borrow() {
        return Err(HttpError::ShuttingDown);
    }
    app.catalog.snapshot().ready()?;
    Ok(axum::Json(Status { status: "ready" }))
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", body = String, content_type = "text/plain; version=0.0.4")))]
async fn metrics(State(app): State<Arc<App>>) -> Response {
    let content_type = [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"))];
    (content_type, app.metrics.render()).into_response()
}
