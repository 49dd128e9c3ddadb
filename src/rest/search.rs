//! `/search`: the catalog's skills ranked by how well they match a query; `/api/search`: the same
//! search in the shape the `skills` CLI's `find` reads (skills.sh's API), so that
//! `SKILLS_API_URL=<this server> npx skills find <query>` lists this catalog.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;
use crate::catalog::{SearchAnswer, SearchLimit, SearchQuery};
use crate::http::{Headers, HttpError, Problem, base_url, responses};

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(search)).routes(routes!(find))
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

/// The body of `GET /api/search`, as the `skills` CLI reads it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FindBody {
    /// Best first (the CLI shows them by `installs`, most first, and keeps this order between
    /// equals).
    pub skills: Vec<FindHit>,
}

/// A skill found, as `npx skills find` prints it (`<source>@<name>` and its installs) and installs
/// it (`npx skills add <source> --skill <name>`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FindHit {
    /// The path of the skill's page, relative to the server (the CLI appends it to its API URL).
    #[schema(example = "ui/skills/pdf")]
    pub id: String,
    #[schema(example = "pdf", pattern = "^[a-z0-9]+(-[a-z0-9]+)*$")]
    pub name: String,
    /// Downloads by installers (archives, and `SKILL.md` files through either well-known index)
    /// from this replica since it started.
    pub installs: u64,
    /// The server's base URL, which `npx skills add` installs from through the well-known
    /// indexes: the public URL when configured, else the URL this request reached the server at.
    #[schema(example = "https://skills.example.com")]
    pub source: String,
}

/// The search of `GET /search`, answered as the `skills` CLI's `find` reads it: only the skills
/// the well-known indexes publish (what `npx skills add` can install), each with where to install
/// it from and its installs on this replica.
#[utoipa::path(get, path = "/api/search", tag = "installers",
    params(
        ("q" = String, Query, description = "The query, as for `GET /search`", max_length = 256),
        ("limit" = Option<u32>, Query, description = "The most hits to answer", minimum = 1, maximum = 100, example = 10),
    ),
    responses(
        (status = 200, description = "The installable hits, best first", body = FindBody),
        (status = 400, description = "Invalid query, as for `GET /search`", body = Problem, content_type = "application/problem+json"),
        responses::Unavailable,
    ))]
async fn find(
    State(app): State<Arc<App>>,
    Headers(headers): Headers,
    params: SearchParams,
) -> Result<Response, HttpError> {
    let snapshot = app.catalog.snapshot();
    let published = app.catalog.published(&snapshot).await?;
    // Hits the indexes leave out are dropped: ask for as many as a search answers.
    let answer = app
        .catalog
        .search(&snapshot, &params.query, SearchLimit::new(SearchLimit::MAX as u64).expect("in range"))
        .await?;
    let source = base_url(&app, &headers);
    let skills = (answer.hits.into_iter())
        .filter_map(|hit| {
            let name = skillcat_core::SpecName::parse(&hit.name).ok()?;
            published.position(&name)?;
            Some(FindHit {
                id: format!("ui/skills/{}", hit.name),
                installs: app.metrics.skill_loads(&hit.name).installs(),
                name: hit.name,
                source: source.clone().into_owned(),
            })
        })
        .take(params.limit.get())
        .collect();
    let body = serde_json::to_vec(&FindBody { skills }).expect("answers serialize");
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    Ok((headers, body).into_response())
}
