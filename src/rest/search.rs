//! `/search`: the catalog's skills ranked by how well they match a query.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;
use crate::catalog::{SearchAnswer, SearchLimit, SearchQuery};
use crate::http::{HttpError, Problem, responses};

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(search))
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
    pub limit: SearchLimit,
}

impl SearchParams {
    /// Reads the query string of a search.
    pub fn parse(uri: &Uri) -> Result<Self, HttpError> {
        let Query(raw) = Query::<RawParams>::try_from_uri(uri)
            .map_err(|rejection| HttpError::InvalidQuery(rejection.body_text()))?;
        let text = raw.q.ok_or_else(|| HttpError::InvalidQuery("the parameter `q` (the query) is required".into()))?;
        let query = SearchQuery::parse(&text).map_err(|error| HttpError::InvalidQuery(error.to_string()))?;
        let limit = match raw.limit {
            None => SearchLimit::DEFAULT,
            Some(limit) => limit
                .parse()
                .map_err(|error: crate::catalog::InvalidSearchLimit| HttpError::InvalidQuery(error.to_string()))?,
        };
        Ok(SearchParams { query, limit })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for SearchParams {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        SearchParams::parse(&parts.uri)
    }
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
        (status = 200, description = "The hits, best first", body = SearchAnswer),
        (status = 400, description = "Invalid query: `q` missing or over 256 characters; `limit` not an integer from 1 to 100; a parameter given twice", body = Problem, content_type = "application/problem+json"),
        responses::Unavailable,
    ))]
async fn search(State(app): State<Arc<App>>, params: SearchParams) -> Result<Response, HttpError> {
    let answer = app.catalog.search(&app.catalog.snapshot(), &params.query, params.limit).await?;
    let body = serde_json::to_vec(&answer).expect("search answers serialize");
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    Ok((headers, body).into_response())
}
