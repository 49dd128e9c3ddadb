//! `/skills`: the catalog, one skill, its content and budgeted loads.

use std::marker::PhantomData;
use std::sync::Arc;

use axum::extract::{FromRequest as _, FromRequestParts as _, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use skillcat_core::{SkillName, TokenLimit};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::target::{Target, VersionQuery};
use crate::app::App;
use crate::catalog::{CatalogBody, CatalogSkill, SkillEntry};
use crate::http::{
    BoundedBody, Headers, HttpError, Problem, SkillPath, not_modified, precondition_holds, prepared, responses,
};
use crate::json::{self, InvalidJson};
use crate::observability::Surface;

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(list_skills))
        .routes(routes!(get_skill))
        .routes(routes!(skill_content))
        .routes(routes!(load_skill))
}

/// The catalog: every skill in name order, the descriptors other sources hide, and what was
/// skipped.
#[utoipa::path(get, path = "/skills", tag = "skills",
    params(
        ("If-None-Match" = Option<String>, Header, description = "Tags from earlier answers; 304 if one is current"),
    ),
    responses(
        (status = 200, description = "The catalog", body = CatalogBody,
            headers(("ETag" = String, description = "Strong tag of the catalog (the body's etag); the gzip representation has its own"))),
        (status = 304, description = "The client's copy is current"),
        responses::RepresentationPreconditionFailed,
        responses::Unavailable,
    ))]
async fn list_skills(State(app): State<Arc<App>>, Headers(headers): Headers) -> Result<Response, HttpError> {
    listing(&app, &headers)
}

/// The answer of `GET /skills`, the route's and the router's fast path's (`crate::router`).
pub fn listing(app: &App, headers: &HeaderMap) -> Result<Response, HttpError> {
    let snapshot = app.catalog.snapshot();
    prepared(headers, &snapshot.ready()?.listing, "application/json")
}

/// One skill, as `GET /skills` lists it.
#[utoipa::path(get, path = "/skills/{name}", tag = "skills",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
        ("version" = Option<String>, Query, description = "Read the skill as it was at this version: a version digest (`sha256:<hex>`), a commit (7 to 40 hex digits) or a tag. The answer is immutable: tagged with the version, cacheable for a year. A version the skill does not have is 404 `version-not-found`", min_length = 1, max_length = 255, pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"),
        ("If-None-Match" = Option<String>, Header, description = "Tags from earlier answers; 304 if one is current"),
    ),
    responses(
        (status = 200, description = "The skill", body = SkillEntry,
            headers(("ETag" = String, description = "The skill's tag; the gzip representation has its own"))),
        (status = 304, description = "The client's copy is current"),
        responses::InvalidName,
        responses::UnknownSkill,
        responses::RepresentationPreconditionFailed,
        responses::Unavailable,
    ))]
async fn get_skill(
    State(app): State<Arc<App>>,
    SkillPath(name): SkillPath,
    Headers(headers): Headers,
    query: VersionQuery,
) -> Result<Response, HttpError> {
    let target = match Target::of(&app, &name, query, headers).await? {
        Ok(target) => target,
        Err(unmodified) => return Ok(unmodified),
    };
    target.answer(prepared(&target.headers, &target.skill.body, "application/json"))
}

/// The skill's whole `SKILL.md`, read now.
#[utoipa::path(get, path = "/skills/{name}/content", tag = "skills",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
        ("version" = Option<String>, Query, description = "Read the skill as it was at this version: a version digest (`sha256:<hex>`), a commit (7 to 40 hex digits) or a tag. The answer is immutable: tagged with the version, cacheable for a year. A version the skill does not have is 404 `version-not-found`", min_length = 1, max_length = 255, pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"),
        ("If-None-Match" = Option<String>, Header, description = "Tags from earlier answers; 304 if one is current"),
    ),
    responses(
        (status = 200, description = "The content", body = String, content_type = "text/markdown; charset=utf-8",
            headers(("ETag" = String, description = "The skill's tag"))),
        (status = 304, description = "The client's copy is current"),
        responses::InvalidName,
        responses::UnknownSkill,
        responses::Changed,
        responses::PreconditionFailed,
        responses::Unavailable,
    ))]
async fn skill_content(
    State(app): State<Arc<App>>,
    SkillPath(name): SkillPath,
    Headers(headers): Headers,
    query: VersionQuery,
) -> Result<Response, HttpError> {
    let target = match Target::of(&app, &name, query, headers).await? {
        Ok(target) => target,
        Err(unmodified) => return Ok(unmodified),
    };
    target.loaded(&app, Surface::Content, content(&app, &target.skill, &target.headers).await)
}

/// The whole `SKILL.md` of `skill`, conditional on its tag.
async fn content(app: &App, skill: &CatalogSkill, headers: &HeaderMap) -> Result<Response, HttpError> {
    let tag = &skill.body;
    if !precondition_holds(headers, &tag.etag_header) {
        return Err(HttpError::PreconditionFailed);
    }
    if not_modified(headers, &tag.etag_header) {
        return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, tag.etag_header.clone())]).into_response());
    }
    let content = app.catalog.content(skill).await?;
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("text/markdown; charset=utf-8")),
        (header::ETAG, tag.etag_header.clone()),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    Ok((headers, content.body()).into_response())
}

/// The body of `POST /skills/{name}/load`; an empty body, a missing or a null `token_limit` take
/// the default.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadRequest {
    /// The budget in estimated tokens (4 UTF-8 bytes each).
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 100000, default = 10000)]
    #[serde(default)]
    pub token_limit: Option<TokenLimit>,
}

/// Reads the body of a load: empty, or a JSON object with an optional integer `token_limit`.
/// A body that is not JSON is a 400; JSON of another shape, or other values, a 422.
fn load_request(headers: &HeaderMap, bytes: &[u8]) -> Result<TokenLimit, HttpError> {
    if bytes.is_empty() {
        return Ok(TokenLimit::DEFAULT);
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(HttpError::UnsupportedMediaType);
    }
    // A well-formed body is read once; any other is read again to say what is wrong with it.
    if let Ok(Object(request)) = serde_json::from_slice::<Object<LoadRequest>>(bytes) {
        return Ok(request.token_limit.unwrap_or_default());
    }
    let malformed = |error: serde_json::Error| HttpError::MalformedJson(error.to_string());
    // The syntax first, then the shape: a body cut short is malformed even where its start
    // already names a field twice.
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map_err(malformed)?;
    let Object(request): Object<LoadRequest> =
        json::decode(&mut serde_json::Deserializer::from_slice(bytes)).map_err(|error| match error {
            InvalidJson::Syntax(error) => malformed(error),
            InvalidJson::Value(what) => HttpError::InvalidBody(what),
        })?;
    Ok(request.token_limit.unwrap_or_default())
}

/// A JSON object read as `T`: serde's derived structs also accept an array of their fields'
/// values, which a request body must not be.
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visitor<T> {
            type Value = T;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }

        deserializer.deserialize_map(Visitor(PhantomData)).map(Object)
    }
}

/// The skill's content within a token budget, as nagents' `budget_skill_content` gives it.
#[utoipa::path(post, path = "/skills/{name}/load", tag = "skills",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
        ("version" = Option<String>, Query, description = "Read the skill as it was at this version: a version digest (`sha256:<hex>`), a commit (7 to 40 hex digits) or a tag. The answer is immutable: tagged with the version, cacheable for a year. A version the skill does not have is 404 `version-not-found`", min_length = 1, max_length = 255, pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"),
    ),
    request_body(content = LoadRequest, content_type = "application/json", description = "Optional: an empty body (or no token_limit) takes the default limit of 10000"),
    responses(
        (status = 200, description = "The budgeted load", body = skillcat_core::SkillLoadResult),
        (status = 400, description = "Invalid skill name, malformed JSON; with `version`, a malformed or ambiguous version", body = Problem, content_type = "application/problem+json"),
        responses::UnknownSkill,
        responses::Changed,
        responses::PreconditionFailed,
        (status = 408, description = "The body did not arrive within the body deadline (a few seconds), or the request took longer than the request timeout", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB; a Content-Length over it is refused before 100 Continue", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "A body that is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "token_limit is not an integer from 1 to 100000, or an unknown field", body = Problem, content_type = "application/problem+json"),
        responses::Unavailable,
    ))]
async fn load_skill(
    State(app): State<Arc<App>>,
    SkillPath(name): SkillPath,
    request: Request,
) -> Result<Response, HttpError> {
    load(&app, &name, request).await
}

/// The answer of `POST /skills/{name}/load` for the route's `{name}`, the route's and the router's
/// fast path's (`crate::router`): the request read as the route's extractors read it (its
/// headers, `?version=`, then its body within its bounds), then the load.
pub async fn load(app: &App, name: &SkillName, request: Request) -> Result<Response, HttpError> {
    let (mut parts, body) = request.into_parts();
    let Ok(Headers(headers)) = Headers::from_request_parts(&mut parts, &()).await;
    let query = VersionQuery::from_request_parts(&mut parts, &()).await?;
    let BoundedBody(body) = BoundedBody::from_request(Request::from_parts(parts, body), &()).await?;
    let limit = load_request(&headers, &body)?;
    // A load is not a read of a representation the client may hold: only `If-Match` applies.
    let mut headers = headers;
    headers.remove(header::IF_NONE_MATCH);
    let target = match Target::of(app, name, query, headers).await? {
        Ok(target) => target,
        Err(unmodified) => return Ok(unmodified),
    };
    let skill = &target.skill;
    if !precondition_holds(&target.headers, &skill.body.etag_header) {
        return Err(HttpError::PreconditionFailed);
    }
    let body = app.catalog.content(skill).await?.load_json(limit);
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
    ];
    target.loaded(app, Surface::Load, Ok((headers, body).into_response()))
}
