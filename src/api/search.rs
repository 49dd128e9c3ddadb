//! `/search`: the catalog's skills ranked by how well they match a query.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, Problem, responses};
use crate::app::App;
use crate::catalog::{ETag, ExcerptPart, QueryError, SearchQuery};

/// Hits answered when the request does not say.
pub const DEFAULT_LIMIT: usize = 20;
/// The most hits one request may ask for.
pub const MAX_LIMIT: usize = 100;

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(search))
}

/// The body of a search's answer (a [`SearchBody`], as JSON) from the current catalog: for the
/// route and for MCP's `search_skills` tool.
pub async fn answer(app: &App, query: &SearchQuery, limit: usize) -> Result<Vec<u8>, ApiError> {
    let snapshot = app.catalog.snapshot();
    let index = app.catalog.search_index(Arc::clone(&snapshot)).await?;
    let catalog = snapshot.ready()?;
    let results = index.search(query, limit);
    let body = SearchBody {
        etag: &catalog.listing.etag,
        total: results.total,
        hits: results
            .hits
            .into_iter()
            .map(|hit| SearchHitBody {
                name: hit.skill.entry.name.as_str(),
                description: &hit.skill.entry.description,
                source: &hit.skill.entry.source,
                etag: &hit.skill.entry.etag,
                score: hit.score,
                excerpt: hit.excerpt,
            })
            .collect(),
    };
    Ok(serde_json::to_vec(&body).expect("search answers serialize"))
}

/// The parameters of a search, as the query string carries them (others are ignored, as every
/// route ignores them).
#[derive(Debug, Deserialize)]
struct RawParams {
    q: Option<String>,
    limit: Option<String>,
}

/// A search's query and limit, valid by construction.
#[derive(Debug)]
pub struct SearchParams {
    pub query: SearchQuery,
    pub limit: usize,
}

impl SearchParams {
    /// Reads the query string of a search.
    pub fn parse(uri: &Uri) -> Result<Self, ApiError> {
        let Query(raw) =
            Query::<RawParams>::try_from_uri(uri).map_err(|rejection| ApiError::InvalidQuery(rejection.body_text()))?;
        let text = raw.q.ok_or_else(|| ApiError::InvalidQuery("the parameter `q` (the query) is required".into()))?;
        let query = SearchQuery::parse(&text).map_err(|error: QueryError| ApiError::InvalidQuery(error.to_string()))?;
        let limit = match raw.limit {
            None => DEFAULT_LIMIT,
            Some(limit) => {
                limit.parse::<usize>().ok().filter(|limit| (1..=MAX_LIMIT).contains(limit)).ok_or_else(|| {
                    ApiError::InvalidQuery(format!("`limit` must be an integer from 1 to {MAX_LIMIT}"))
                })?
            }
        };
        Ok(SearchParams { query, limit })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for SearchParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        SearchParams::parse(&parts.uri)
    }
}

/// The body of `GET /search`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SearchBody<'a> {
    /// The tag of the catalog searched, as `GET /skills` gives it.
    #[schema(value_type = ETag)]
    pub etag: &'a ETag,
    /// How many skills match in all (the hits are the best `limit` of them).
    pub total: usize,
    /// Best first.
    #[schema(value_type = Vec<SearchHitBody>)]
    pub hits: Vec<SearchHitBody<'a>>,
}

/// A skill found: its entry as `GET /skills` lists it (without its location), its score, and an
/// excerpt of where the query matched.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SearchHitBody<'a> {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: &'a str,
    #[schema(value_type = String)]
    pub description: &'a str,
    /// The label of the source that owns the skill.
    #[schema(value_type = String)]
    pub source: &'a str,
    #[schema(value_type = ETag)]
    pub etag: &'a ETag,
    /// BM25 relevance; higher is better. Comparable within one answer only.
    pub score: f32,
    /// A short part of the skill's `SKILL.md` (or description) around the first match, in pieces;
    /// the pieces that match the query are highlighted. Plain text, not HTML.
    pub excerpt: Vec<ExcerptPart>,
}

/// The skills that best match a query, by relevance of the query to their names, descriptions
/// and `SKILL.md` texts (BM25; a term in the name counts most). A skill matches when it contains
/// every term of the query; the last term also matches words it begins, so that results follow
/// typing (`pd` finds `pdf`). When no skill contains every term, skills containing any of them
/// are answered. A skill named exactly as the query comes first.
#[utoipa::path(get, path = "/search", tag = "skills",
    params(
        ("q" = String, Query, description = "The query: words (runs of letters and digits; case does not matter), at most 256 characters; one without a letter or digit matches nothing", max_length = 256),
        ("limit" = Option<u32>, Query, description = "The most hits to answer", minimum = 1, maximum = 100, example = 20),
    ),
    responses(
        (status = 200, description = "The hits, best first", body = SearchBody),
        (status = 400, description = "Invalid query: `q` missing or over 256 characters; `limit` not an integer from 1 to 100; a parameter given twice", body = Problem, content_type = "application/problem+json"),
        responses::Unavailable,
    ))]
async fn search(State(app): State<Arc<App>>, params: SearchParams) -> Result<Response, ApiError> {
    let body = answer(&app, &params.query, params.limit).await?;
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    Ok((headers, body).into_response())
}
