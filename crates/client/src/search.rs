//! Searching the remote catalog: `GET /search`.

use reqwest::header::ACCEPT;
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use skillcat_core::SkillName;

use crate::discoverer::RemoteSkillDiscoverer;
use crate::error::ClientError;
use crate::retry;

/// The most hits one search may ask for.
pub const MAX_SEARCH_LIMIT: u32 = 100;

/// The largest search answer read (100 hits of at most a few KiB each).
const MAX_ANSWER_BYTES: u64 = 4 << 20;

/// The answer to a search: the best hits and how many skills matched in all.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SearchResults {
    /// The tag of the catalog searched, as [`RemoteCatalog::etag`](crate::RemoteCatalog::etag).
    pub etag: String,
    pub total: usize,
    /// Best first.
    pub hits: Vec<SearchHit>,
}

/// A skill found.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SearchHit {
    pub name: SkillName,
    pub description: String,
    /// The label of the source that owns the skill.
    pub source: String,
    /// The skill's tag, as the catalog lists it.
    pub etag: String,
    /// Relevance; higher is better, comparable within one answer only.
    pub score: f64,
    /// Where the query matched, in pieces; those that match it are highlighted.
    pub excerpt: Vec<ExcerptPart>,
}

impl SearchHit {
    /// The excerpt as plain text.
    pub fn excerpt_text(&self) -> String {
        self.excerpt.iter().map(|part| part.text.as_str()).collect()
    }
}

/// A piece of an excerpt.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct ExcerptPart {
    pub text: String,
    /// Whether this piece matches the query.
    #[serde(default)]
    pub highlight: bool,
}

#[derive(Deserialize)]
struct WireResults {
    etag: String,
    total: usize,
    hits: Vec<WireHit>,
}

#[derive(Deserialize)]
struct WireHit {
    name: String,
    description: String,
    source: String,
    etag: String,
    score: f64,
    excerpt: Vec<ExcerptPart>,
}

impl RemoteSkillDiscoverer {
    /// The skills that best match `query` (`GET /search`), at most `limit` of them (1 to
    /// [`MAX_SEARCH_LIMIT`]; `None`: the server's default, 20). The server ranks them by
    /// relevance to their names, descriptions and `SKILL.md` texts. A query without a letter or
    /// digit matches nothing; one over 256 characters is [`Rejected`](ClientError::Rejected).
    pub async fn search(&self, query: &str, limit: Option<u32>) -> Result<SearchResults, ClientError> {
        if let Some(limit) = limit
            && !(1..=MAX_SEARCH_LIMIT).contains(&limit)
        {
            return Err(ClientError::Config(format!("a search limit is 1 to {MAX_SEARCH_LIMIT}, not {limit}")));
        }
        let settings = &self.shared.settings;
        let mut url = settings.url("search");
        {
            let mut pairs = url.query_pairs_mut();
            pairs.append_pair("q", query);
            if let Some(limit) = limit {
                pairs.append_pair("limit", &limit.to_string());
            }
        }
        let response =
            retry::send(settings, || settings.request(Method::GET, url.clone()).header(ACCEPT, "application/json"))
                .await?;
        if response.status() != StatusCode::OK {
            return Err(ClientError::from_response(response, None).await);
        }
        let body = crate::download::read_at_most(response, MAX_ANSWER_BYTES)
            .await?
            .ok_or_else(|| ClientError::InvalidResponse("the search answer is too large".into()))?;
        let wire: WireResults = serde_json::from_slice(&body)
            .map_err(|error| ClientError::InvalidResponse(format!("the search answer: {error}")))?;
        let hits = wire
            .hits
            .into_iter()
            .map(|hit| {
                let name = SkillName::parse(&hit.name)
                    .map_err(|error| ClientError::InvalidResponse(format!("a search hit's name: {error}")))?;
                Ok(SearchHit {
                    name,
                    description: hit.description,
                    source: hit.source,
                    etag: hit.etag,
                    score: hit.score,
                    excerpt: hit.excerpt,
                })
            })
            .collect::<Result<_, ClientError>>()?;
        Ok(SearchResults { etag: wire.etag, total: wire.total, hits })
    }
}
