//! The REST API: the catalog (`/skills`, one skill, its content and budgeted loads), a skill's
//! files and archive, the manifest, search, change events, and the operations routes. Each module
//! is a resource with its own router; handlers call the catalog API and answer prepared bodies or
//! JSON, with errors mapped by `crate::http::HttpError`.

mod events;
mod files;
mod hooks;
mod manifest;
mod ops;
mod search;
mod skills;
mod target;
mod versions;

use std::sync::Arc;

use utoipa_axum::router::OpenApiRouter;

use crate::app::App;

pub use skills::{listing, load};

/// The routes answered within the request limits.
pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .merge(skills::router())
        .merge(versions::router())
        .merge(search::router())
        .merge(files::router())
        .merge(manifest::router())
        .merge(hooks::router())
}

/// The routes outside the request limits: event streams (long-lived by design) and the operations
/// routes (a probe must not fail because the server is busy).
pub fn unbounded() -> OpenApiRouter<Arc<App>> {
    events::router().merge(ops::router())
}
