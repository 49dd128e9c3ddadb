//! `/skills/{name}/versions`: a skill's versions, newest first, a page at a time.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use skillcat_core::SkillName;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;
use crate::catalog::{VersionEntry, Versions};
use crate::http::{HttpError, Problem, SkillPath, responses};

/// Versions per page unless `limit` says otherwise, and the most it may say.
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(list_versions))
}

#[derive(Debug, Deserialize)]
struct RawPage {
    limit: Option<String>,
    cursor: Option<String>,
}

/// `limit` and `cursor`, checked.
struct Page {
    limit: usize,
    /// The hex digits of the last version of the page before.
    after: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for Page {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let Query(raw) = Query::<RawPage>::try_from_uri(&parts.uri)
            .map_err(|rejection| HttpError::InvalidQuery(rejection.body_text()))?;
        let limit = match raw.limit {
            None => DEFAULT_LIMIT,
            Some(text) => text
                .parse()
                .ok()
                .filter(|limit| (1..=MAX_LIMIT).contains(limit))
                .ok_or_else(|| HttpError::InvalidQuery(format!("`limit` is an integer from 1 to {MAX_LIMIT}")))?,
        };
        let after = match raw.cursor {
            None => None,
            Some(cursor)
                if cursor.len() == 64 && cursor.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f')) =>
            {
                Some(cursor)
            }
            Some(_) => {
                return Err(HttpError::InvalidQuery(
                    "`cursor` is the `next_cursor` of a page: 64 lowercase hex digits".to_owned(),
                ));
            }
        };
        Ok(Page { limit, after })
    }
}

/// The body of `GET /skills/{name}/versions`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct VersionsBody<'a> {
    #[schema(value_type = String)]
    name: &'a SkillName,
    versions: Vec<VersionBody<'a>>,
    /// Present when there are more versions: give it as `cursor` for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

/// One version of a skill.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct VersionBody<'a> {
    /// The digest of the skill's folder at this version (as `version` in `GET /skills/{name}`).
    #[schema(value_type = String, pattern = "^sha256:[0-9a-f]{64}$")]
    version: String,
    /// The newest commit of the source's history that has it (40 hex digits); `null` for a
    /// source without a history (a folder, the builtin skills).
    commit: Option<&'a str>,
    /// That commit's time (RFC 3339, UTC).
    #[schema(example = "2026-11-30T12:00:00Z")]
    committed_at: Option<String>,
    /// The tags pointing at commits of the history that have it.
    tags: &'a [String],
    /// Whether the current catalog serves this version.
    current: bool,
}

impl<'a> VersionBody<'a> {
    fn of(entry: &'a VersionEntry) -> Self {
        let time = |seconds: i64| {
            let time = SystemTime::UNIX_EPOCH + Duration::from_secs(seconds.max(0).unsigned_abs());
            humantime::format_rfc3339_seconds(time).to_string()
        };
        VersionBody {
            version: entry.version.to_string(),
            commit: entry.commit.as_deref(),
            committed_at: entry.committed_at.map(time),
            tags: &entry.tags,
            current: entry.current,
        }
    }
}

/// The skill's versions, newest first: for a skill of a git source, the distinct versions along
/// its ref's first-parent history (bounded by the source's `history`), each with the newest commit
/// that has it; for other sources, the current version alone. A skill the catalog no longer has
/// keeps its history, with none current.
#[utoipa::path(get, path = "/skills/{name}/versions", tag = "skills",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
        ("limit" = Option<u32>, Query, description = "The most versions to answer", minimum = 1, maximum = 1000, example = 100),
        ("cursor" = Option<String>, Query, description = "The `next_cursor` of the page before", pattern = "^[0-9a-f]{64}$"),
    ),
    responses(
        (status = 200, description = "The versions, newest first", body = VersionsBody),
        (status = 400, description = "Invalid skill name; `limit` not an integer from 1 to 1000; a `cursor` that is not 64 lowercase hex digits", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The versions changed since the cursor was given (say, by a force-push), or it was never given: list them again without a cursor (`stale-cursor`)", body = Problem, content_type = "application/problem+json"),
        responses::UnknownSkill,
        responses::Unavailable,
    ))]
async fn list_versions(
    State(app): State<Arc<App>>,
    SkillPath(name): SkillPath,
    page: Page,
) -> Result<Response, HttpError> {
    let Versions { name, entries } = app.catalog.versions(&name).await?;
    let start = match &page.after {
        None => 0,
        Some(after) => {
            let at = entries.iter().position(|entry| entry.version.to_string().ends_with(after.as_str()));
            at.ok_or(HttpError::StaleCursor)? + 1
        }
    };
    let shown = &entries[start..entries.len().min(start + page.limit)];
    let next_cursor = (start + shown.len() < entries.len())
        .then(|| shown.last().map(|entry| entry.version.to_string()[skillcat_core::Digest::PREFIX.len()..].to_owned()))
        .flatten();
    let body = VersionsBody { name: &name, versions: shown.iter().map(VersionBody::of).collect(), next_cursor };
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    Ok((headers, serde_json::to_vec(&body).expect("versions serialize")).into_response())
}
