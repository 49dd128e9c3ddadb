//! What every handler shares.

use std::sync::Arc;

use tokio::sync::watch;

use crate::auth::{TokenStore, WebhookSecret};
use crate::catalog::LiveCatalog;
use crate::config::PublicUrl;
use crate::limits::{AnswerBytes, StreamSlots};
use crate::observability::Metrics;

/// The application state: one per server, shared by every request as `Arc<App>`.
pub struct App {
    pub catalog: LiveCatalog,
    pub metrics: Arc<Metrics>,
    /// The bearer tokens, when requests must carry one.
    pub tokens: Option<TokenStore>,
    /// Flips to true when shutdown starts: readiness fails and event streams end.
    pub shutdown: watch::Receiver<bool>,
    /// The event streams open, capped in all and per client.
    pub streams: Arc<StreamSlots>,
    /// Room for the answers held whole in memory until sent.
    pub answers: Arc<AnswerBytes>,
    /// The secret of `POST /hooks/git`, when webhooks are enabled.
    pub webhook_secret: Option<WebhookSecret>,
    /// The URL clients reach the server at, when configured; otherwise each request's own
    /// (`crate::http::base_url`).
    pub public_url: Option<PublicUrl>,
}
