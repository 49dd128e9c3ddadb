//! What every HTTP surface shares: the errors as problems and their one mapping to statuses, the
//! checks of a request's head, authentication, conditional requests and content negotiation of
//! prepared bodies, file answers, and the bounds of the bounded routes. The surfaces (REST, the
//! pages, the well-known indexes, MCP's transport) import this, never each other; the router
//! (`crate::router`) puts it in front of them.

mod accept;
pub mod auth;
mod base;
mod conditional;
mod error;
mod extract;
mod file;
mod head;

use std::time::Duration;

pub use accept::{accepts_gzip, browser_target};
pub use auth::Authenticated;
pub use base::base_url;
pub use conditional::{not_modified, precondition_holds, prepared};
pub use error::{HttpError, Problem, problem_for_bare_errors, responses};
pub use extract::{BodyDeadline, BoundedBody, Headers, SkillPath, bounded_body, name_and_path};
pub use file::serve_file;
pub use head::{check_host, check_uri_length};

/// The longest request target (path and query) answered. Every route's target is far shorter (a
/// skill name has at most 64 characters); a longer one gets a 414 problem. A request head over the
/// server's bound (`server::MAX_HEADER_BYTES`) is refused by hyper before it reaches the router, a
/// 431 without a body; hyper's own 414 (targets over 65534 bytes) lies beyond that bound.
pub const MAX_URI_BYTES: usize = 16 * 1024;

/// The largest request body accepted.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Limits of the bounded (non-streaming) routes.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Requests in progress at once; more are refused with 503 rather than queued.
    pub concurrency: usize,
    /// The longest a request may take.
    pub request_timeout: Duration,
    /// The longest a request body (at most 64 KiB) may take to arrive once the handler reads it:
    /// a client that sends it slowly would hold its place among the requests in progress.
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { concurrency: 1024, request_timeout: Duration::from_secs(10), body_timeout: Duration::from_secs(3) }
    }
}
