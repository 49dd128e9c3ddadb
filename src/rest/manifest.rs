//! `/manifest`: the bounded prompt manifest, byte for byte nagents' `render_skill_manifest`.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;
use crate::http::{Headers, HttpError, prepared, responses};

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(manifest))
}

/// The prompt manifest of the catalog: escaped descriptors in name order within 10,000
/// estimated tokens, with an omission notice when they do not all fit.
#[utoipa::path(get, path = "/manifest", tag = "catalog",
    params(
        ("If-None-Match" = Option<String>, Header, description = "Tags from earlier answers; 304 if one is current"),
    ),
    responses(
        (status = 200, description = "The manifest", body = String, content_type = "text/plain; charset=utf-8",
            headers(("ETag" = String, description = "Strong tag of the manifest; the gzip representation has its own"))),
        (status = 304, description = "The client's copy is current"),
        responses::RepresentationPreconditionFailed,
        responses::Unavailable,
    ))]
async fn manifest(State(app): State<Arc<App>>, Headers(headers): Headers) -> Result<Response, HttpError> {
    let snapshot = app.catalog.snapshot();
    prepared(&headers, &snapshot.ready()?.manifest, "text/plain; charset=utf-8")
}
