//! `/events`: Server-Sent Events, one per catalog version.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::catalog::Snapshot;
use crate::server::App;

const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(events))
}

/// The data of a `catalog` event.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CatalogEvent {
    /// The catalog's tag (as `GET /skills` answers it), or null while the catalog is unavailable.
    pub etag: Option<String>,
}

fn event(snapshot: &Snapshot) -> Event {
    let data = CatalogEvent { etag: snapshot.etag().map(|etag| etag.as_str().to_owned()) };
    Event::default().event("catalog").json_data(data).expect("events serialize")
}

/// A `catalog` event at once and on every change; comments keep the connection alive. The stream
/// ends when the server shuts down.
#[utoipa::path(get, path = "/events", tag = "catalog",
    responses(
        (status = 200, description = "`event: catalog` with `data: {\"etag\": ...}`, at connect and on every change",
            body = CatalogEvent, content_type = "text/event-stream"),
    ))]
async fn events(State(app): State<Arc<App>>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let snapshots = app.catalog.subscribe();
    let shutdown = app.shutdown.clone();
    let client = app.metrics.sse_client();
    let stream = futures_util::stream::unfold(
        (snapshots, shutdown, true, client),
        |(mut snapshots, mut shutdown, first, client)| async move {
            if *shutdown.borrow() {
                return None;
            }
            if !first {
                tokio::select! {
                    changed = snapshots.changed() => changed.ok()?,
                    () = crate::catalog::stopped(&mut shutdown) => return None,
                }
            }
            let event = event(&snapshots.borrow_and_update());
            Some((Ok(event), (snapshots, shutdown, false, client)))
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
}
