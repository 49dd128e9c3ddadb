//! `/skills`: the catalog, one skill, its content and budgeted loads.

use std::sync::Arc;

use axum::body::{Body as RequestBody, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use skillcat_core::{ContentVersion, SkillDiscoverer, SkillLoadResult, TokenLimit, budget_skill_content};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, Problem};
use super::http::{SkillPath, precondition_holds, prepared};
use crate::catalog::{Catalog, CatalogBody, CatalogSkill, CatalogState, Content, SkillEntry, Snapshot, skill_etag};
use crate::server::App;

/// The largest request body accepted.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(list_skills))
        .routes(routes!(get_skill))
        .routes(routes!(skill_content))
        .routes(routes!(load_skill))
}

/// The current catalog, or why there is none.
pub fn ready(snapshot: &Snapshot) -> Result<&Catalog, ApiError> {
    match &snapshot.state {
        CatalogState::Ready(catalog) => Ok(catalog),
        CatalogState::Starting => Err(ApiError::NotReady),
        CatalogState::Failed(message) => Err(ApiError::CatalogUnavailable(message.clone())),
    }
}

fn find<'a>(catalog: &'a Catalog, SkillPath(name): &SkillPath) -> Result<&'a CatalogSkill, ApiError> {
    catalog.get(name).map(|skill| &**skill).ok_or_else(|| ApiError::SkillNotFound(name.to_string()))
}

/// The skill's content now, refused (409) unless it is exactly the version the catalog lists.
/// A content read earlier is reused while no file event arrived since (see `ContentCache`).
async fn current_content(app: &App, skill: &CatalogSkill) -> Result<Arc<Content>, ApiError> {
    let catalog = &app.catalog;
    // Taken before reading: an event during the read makes the next request read again.
    let stamp = catalog.change_stamp();
    if let Some(content) = catalog.contents().get(&skill.entry.etag, stamp) {
        return Ok(content);
    }
    let content = catalog.sources().composite.load(&skill.skill).await.inspect_err(|error| {
        // The file vanished or changed under the source: the snapshot is stale as well.
        if error.is_stale() {
            catalog.request_rescan();
        }
    })?;
    if skill_etag(&skill.entry.source, &skill.skill, Some(ContentVersion::of(&content))) != skill.entry.etag {
        catalog.request_rescan();
        return Err(ApiError::Changed(skill.skill.name().to_string()));
    }
    Ok(catalog.contents().insert(&skill.entry.etag, content, stamp))
}

/// The catalog: every skill in name order, the descriptors other sources hide, and what was
/// skipped.
#[utoipa::path(get, path = "/skills", tag = "skills",
    params(
        ("If-None-Match" = Option<String>, Header, description = "A tag from an earlier answer; 304 if still current"),
    ),
    responses(
        (status = 200, description = "The catalog", body = CatalogBody,
            headers(("ETag" = String, description = "Strong tag of the catalog"))),
        (status = 304, description = "The client's copy is current"),
        (status = 503, description = "A source failed, or the first discovery is still running", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_skills(State(app): State<Arc<App>>, headers: HeaderMap) -> Result<Response, ApiError> {
    let snapshot = app.catalog.snapshot();
    let catalog = ready(&snapshot)?;
    Ok(prepared(&headers, &catalog.listing, "application/json"))
}

/// One skill, as `GET /skills` lists it.
#[utoipa::path(get, path = "/skills/{name}", tag = "skills",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
        ("If-None-Match" = Option<String>, Header, description = "A tag from an earlier answer; 304 if still current"),
    ),
    responses(
        (status = 200, description = "The skill", body = SkillEntry,
            headers(("ETag" = String, description = "The skill's tag"))),
        (status = 304, description = "The client's copy is current"),
        (status = 400, description = "Invalid skill name", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such skill", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The catalog is unavailable", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_skill(State(app): State<Arc<App>>, name: SkillPath, headers: HeaderMap) -> Result<Response, ApiError> {
    let snapshot = app.catalog.snapshot();
    let skill = find(ready(&snapshot)?, &name)?;
    Ok(prepared(&headers, &skill.body, "application/json"))
}

/// The skill's whole `SKILL.md`, read now.
#[utoipa::path(get, path = "/skills/{name}/content", tag = "skills",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
        ("If-None-Match" = Option<String>, Header, description = "A tag from an earlier answer; 304 if still current"),
    ),
    responses(
        (status = 200, description = "The content", body = String, content_type = "text/markdown; charset=utf-8",
            headers(("ETag" = String, description = "The skill's tag"))),
        (status = 304, description = "The client's copy is current"),
        (status = 400, description = "Invalid skill name", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such skill", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The skill changed or vanished; refresh discovery and retry", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "An If-Match header does not name the skill's current tag", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The catalog is unavailable", body = Problem, content_type = "application/problem+json"),
    ))]
async fn skill_content(State(app): State<Arc<App>>, name: SkillPath, headers: HeaderMap) -> Result<Response, ApiError> {
    let snapshot = app.catalog.snapshot();
    let skill = find(ready(&snapshot)?, &name)?;
    if !precondition_holds(&headers, &skill.entry.etag) {
        return Err(ApiError::PreconditionFailed);
    }
    let etag = HeaderValue::from_str(skill.entry.etag.as_str()).expect("tags are visible ASCII");
    if super::http::not_modified(&headers, &skill.entry.etag) {
        return Ok((axum::http::StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response());
    }
    let content = current_content(&app, skill).await?;
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("text/markdown; charset=utf-8")),
        (header::ETAG, etag),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    Ok((headers, content.body()).into_response())
}

/// The body of `POST /skills/{name}/load`; an empty body, a missing or a null `token_limit` take
/// the default.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadRequest {
    /// The budget in estimated tokens (4 UTF-8 bytes each).
    #[schema(minimum = 1, maximum = 100000, default = 10000)]
    pub token_limit: Option<u32>,
}

/// nagents' `SkillLoadResult`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LoadResult {
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: String,
    pub location: String,
    /// The content cut to at most `4 * token_limit` UTF-8 bytes, never inside a character.
    pub content: String,
    pub truncated: bool,
    #[schema(minimum = 0)]
    pub estimated_tokens: u64,
    #[schema(minimum = 1, maximum = 100000)]
    pub token_limit: u32,
}

/// Reads the body of a load: empty, or a JSON object with an optional integer `token_limit`.
async fn load_request(headers: &HeaderMap, body: RequestBody) -> Result<TokenLimit, ApiError> {
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES).await.map_err(|error| {
        let too_large =
            std::error::Error::source(&error).is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
        if too_large { ApiError::PayloadTooLarge } else { ApiError::MalformedJson("the body could not be read".into()) }
    })?;
    if bytes.is_empty() {
        return Ok(TokenLimit::DEFAULT);
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(ApiError::UnsupportedMediaType);
    }
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|error| ApiError::MalformedJson(error.to_string()))?;
    let serde_json::Value::Object(fields) = value else {
        return Err(ApiError::InvalidBody("the body must be a JSON object".into()));
    };
    if let Some(unknown) = fields.keys().find(|key| *key != "token_limit") {
        return Err(ApiError::InvalidBody(format!("unknown field '{unknown}'; the only field is token_limit")));
    }
    match fields.get("token_limit") {
        None | Some(serde_json::Value::Null) => Ok(TokenLimit::DEFAULT),
        Some(limit) => limit
            .as_u64()
            .filter(|_| limit.is_u64())
            .and_then(|limit| TokenLimit::new(limit).ok())
            .ok_or_else(|| ApiError::InvalidBody("token_limit must be an integer between 1 and 100000".into())),
    }
}

/// The skill's content within a token budget, as nagents' `budget_skill_content` gives it.
#[utoipa::path(post, path = "/skills/{name}/load", tag = "skills",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
    ),
    request_body(content = LoadRequest, content_type = "application/json", description = "Optional: an empty body (or no token_limit) takes the default limit of 10000"),
    responses(
        (status = 200, description = "The budgeted load", body = LoadResult),
        (status = 400, description = "Invalid skill name or malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such skill", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The skill changed or vanished; refresh discovery and retry", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "An If-Match header does not name the skill's current tag", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "A body that is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "token_limit is not an integer from 1 to 100000, or an unknown field", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The catalog is unavailable", body = Problem, content_type = "application/problem+json"),
    ))]
async fn load_skill(
    State(app): State<Arc<App>>,
    name: SkillPath,
    headers: HeaderMap,
    body: RequestBody,
) -> Result<Response, ApiError> {
    let limit = load_request(&headers, body).await?;
    let snapshot = app.catalog.snapshot();
    let skill = find(ready(&snapshot)?, &name)?;
    if !precondition_holds(&headers, &skill.entry.etag) {
        return Err(ApiError::PreconditionFailed);
    }
    let content = current_content(&app, skill).await?;
    let body = match content.load(limit.get()) {
        Some(body) => body,
        None => {
            let result: SkillLoadResult = budget_skill_content(&skill.skill, &content.text, limit);
            let body = Bytes::from(serde_json::to_vec(&result).map_err(|_| ApiError::Internal)?);
            content.store_load(limit.get(), body.clone());
            body
        }
    };
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
    ];
    Ok((headers, body).into_response())
}
