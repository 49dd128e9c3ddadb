//! `/events`: Server-Sent Events, one per catalog version.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::{ConnectInfo, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::Serialize;
use tokio::sync::watch;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;
use crate::auth::{TokenDigest, Tokens};
use crate::catalog::Snapshot;
use crate::http::{Authenticated, HttpError, Problem};
use crate::limits::{StreamRefusal, StreamSlot};
use crate::observability::SseClient;

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
/// ends when the server shuts down, or when the token it was opened with is revoked.
#[utoipa::path(get, path = "/events", tag = "catalog",
    responses(
        (status = 200, description = "`event: catalog` with `data: {\"etag\": ...}`, at connect and on every change",
            body = CatalogEvent, content_type = "text/event-stream"),
        (status = 429, description = "This client has as many streams open as it may", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Every stream slot is taken", body = Problem, content_type = "application/problem+json"),
    ))]
async fn events(
    State(app): State<Arc<App>>,
    authenticated: Option<Extension<Authenticated>>,
    client: Option<Extension<ConnectInfo<SocketAddr>>>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, HttpError> {
    // The server records each connection's peer; without one (a router driven in-process) all
    // streams count as one client's.
    let client = client.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |Extension(ConnectInfo(peer))| peer.ip());
    let slot = app.streams.open(client).map_err(|refusal| match refusal {
        StreamRefusal::Full => HttpError::TooManyStreams,
        StreamRefusal::ClientFull => HttpError::TooManyStreamsForClient,
    })?;
    let stream = EventStream {
        snapshots: app.catalog.subscribe(),
        shutdown: app.shutdown.clone(),
        access: app
            .tokens
            .as_ref()
            .zip(authenticated)
            .map(|(store, Extension(Authenticated(digest)))| (store.subscribe(), digest)),
        first: true,
        _client: app.metrics.sse_client(),
        _slot: slot,
    };
    let stream = futures_util::stream::unfold(stream, |mut stream| async move {
        let event = stream.next().await?;
        Some((Ok(event), stream))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// The state of one event stream.
struct EventStream {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    shutdown: watch::Receiver<bool>,
    /// The tokens and the one this stream was opened with, when tokens are required.
    access: Option<(watch::Receiver<Arc<Tokens>>, TokenDigest)>,
    first: bool,
    /// Counts the stream as a connected client while it lives.
    _client: SseClient,
    /// Holds the stream's place among the capped streams.
    _slot: StreamSlot,
}

impl EventStream {
    /// The next event, or `None` when the stream is to end.
    async fn next(&mut self) -> Option<Event> {
        if *self.shutdown.borrow() || self.revoked_now() {
            return None;
        }
        if !std::mem::take(&mut self.first) {
            tokio::select! {
                changed = self.snapshots.changed() => changed.ok()?,
                () = crate::shutdown::stopped(&mut self.shutdown) => return None,
                () = revoked(self.access.as_mut()) => return None,
            }
        }
        Some(event(&self.snapshots.borrow_and_update()))
    }

    fn revoked_now(&self) -> bool {
        self.access.as_ref().is_some_and(|(tokens, digest)| !tokens.borrow().contains(digest))
    }
}

/// Completes when the token is no longer accepted; never when tokens are not required or can no
/// longer change.
async fn revoked(access: Option<&mut (watch::Receiver<Arc<Tokens>>, TokenDigest)>) {
    if let Some((tokens, digest)) = access
        && tokens.wait_for(|tokens| !tokens.contains(digest)).await.is_ok()
    {
        return;
    }
    std::future::pending().await
}
