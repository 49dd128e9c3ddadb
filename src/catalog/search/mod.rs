//! Full-text search over the catalog: the query and its limit as clients give them, the answer,
//! and the index behind it (`index`).
//!
//! A skill's [`SearchDocument`] (its terms and text) is made once per skill version and kept with
//! the skill, which the next catalog version shares while the skill is unchanged; the index over
//! them ([`SearchIndex`]) is made once per catalog version, on the first search. No request walks
//! or reads the tree: a search is a lookup in the index of the snapshot it was asked of.

mod index;

use std::sync::Arc;

use futures_util::StreamExt as _;
use serde::Serialize;

pub use self::index::{ExcerptPart, MAX_QUERY_CHARS, QueryError, SearchDocument, SearchIndex, SearchQuery};
use super::body::ETag;
use super::snapshot::{CatalogSkill, Snapshot};
use super::views::{blocking, made_in_task};
use super::{CatalogError, LiveCatalog};

/// Skill texts read at once while documents are made.
const CONCURRENT_READS: usize = 16;

/// How many hits a search answers: 1 to [`SearchLimit::MAX`], [`SearchLimit::DEFAULT`] unless
/// asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchLimit(usize);

/// A limit out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`limit` must be an integer from 1 to {}", SearchLimit::MAX)]
pub struct InvalidSearchLimit;

impl SearchLimit {
    pub const DEFAULT: SearchLimit = SearchLimit(20);
    pub const MAX: usize = 100;

    pub fn new(limit: u64) -> Result<Self, InvalidSearchLimit> {
        usize::try_from(limit)
            .ok()
            .filter(|limit| (1..=Self::MAX).contains(limit))
            .map(SearchLimit)
            .ok_or(InvalidSearchLimit)
    }

    pub fn get(self) -> usize {
        self.0
    }
}

impl std::str::FromStr for SearchLimit {
    type Err = InvalidSearchLimit;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.parse::<u64>().map_err(|_| InvalidSearchLimit).and_then(SearchLimit::new)
    }
}

/// The answer to a search of one catalog version.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = SearchBody, description = "The body of `GET /search`.")]
pub struct SearchAnswer {
    /// The tag of the catalog searched, as `GET /skills` gives it.
    pub etag: ETag,
    /// How many skills match in all (the hits are the best `limit` of them).
    pub total: usize,
    /// Best first.
    pub hits: Vec<SearchHit>,
}

/// A skill found: its entry as `GET /skills` lists it (without its location), its score, and an
/// excerpt of where the query matched.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = SearchHitBody)]
pub struct SearchHit {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: String,
    pub description: String,
    /// The label of the source that owns the skill.
    pub source: String,
    pub etag: ETag,
    /// BM25 relevance; higher is better. Comparable within one answer only.
    // Computed in single precision, and kept as the shortest decimal that reads back as that
    // value, so that every encoding of the answer writes the same digits.
    #[schema(value_type = f32)]
    pub score: f64,
    /// A short part of the skill's `SKILL.md` (or description) around the first match, in pieces;
    /// the pieces that match the query are highlighted. Plain text, not HTML.
    pub excerpt: Vec<ExcerptPart>,
}

impl LiveCatalog {
    /// The skills of `snapshot`'s catalog that best match `query`, at most `limit`, best first.
    pub async fn search(
        &self,
        snapshot: &Arc<Snapshot>,
        query: &SearchQuery,
        limit: SearchLimit,
    ) -> Result<SearchAnswer, CatalogError> {
        let index = self.search_index(snapshot).await?;
        let catalog = snapshot.ready()?;
        let results = index.search(query, limit.get());
        let hits = results
            .hits
            .into_iter()
            .map(|hit| SearchHit {
                name: hit.skill.entry.name.to_string(),
                description: hit.skill.entry.description.to_string(),
                source: hit.skill.entry.source.to_string(),
                etag: hit.skill.entry.etag.clone(),
                score: hit.score.to_string().parse().expect("a float's decimal reads back"),
                excerpt: hit.excerpt,
            })
            .collect();
        Ok(SearchAnswer { etag: catalog.listing.etag.clone(), total: results.total, hits })
    }

    /// The search index of `snapshot`'s catalog, made on the first search of that version from
    /// the documents of its skills (each made once per skill version).
    pub async fn search_index(&self, snapshot: &Arc<Snapshot>) -> Result<Arc<SearchIndex>, CatalogError> {
        let cell = snapshot.ready()?.views.of::<SearchIndex>();
        let (live, snapshot) = (self.clone(), Arc::clone(snapshot));
        made_in_task(cell, async move {
            let catalog = snapshot.ready()?;
            let documents: Vec<(Arc<CatalogSkill>, Arc<SearchDocument>)> =
                futures_util::stream::iter(catalog.skills.iter().cloned())
                    .map(|skill| {
                        let live = live.clone();
                        async move {
                            let document = live.search_document(&skill).await;
                            (skill, document)
                        }
                    })
                    .buffered(CONCURRENT_READS)
                    .collect()
                    .await;
            live.metrics().search_index_made();
            blocking(move || SearchIndex::build(documents)).await
        })
        .await
    }

    /// The search document of `skill`, kept with the skill version. A text that cannot be read
    /// now (it changed, and a rescan is under way; or an I/O error) gives a document of the name
    /// and description alone, for this catalog version only.
    async fn search_document(&self, skill: &CatalogSkill) -> Arc<SearchDocument> {
        let made = skill
            .views
            .of::<SearchDocument>()
            .get_or_try_init(|| async {
                let text = self.text(skill).await?;
                self.metrics().search_document_made();
                let (name, description) = (skill.skill.name().as_str(), skill.skill.description());
                Ok::<_, CatalogError>(Arc::new(SearchDocument::new(name, description, Some(&text))))
            })
            .await
            .cloned();
        match made {
            Ok(document) => document,
            Err(error) => {
                if let CatalogError::Read { .. } = error {
                    tracing::warn!(%error, "a skill's text is left out of the search index");
                }
                Arc::new(SearchDocument::new(skill.skill.name().as_str(), skill.skill.description(), None))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_1_to_100() {
        assert_eq!("20".parse::<SearchLimit>().map(SearchLimit::get), Ok(20));
        assert_eq!(SearchLimit::new(100).map(SearchLimit::get), Ok(100));
        for bad in ["0", "101", "-1", "2.0", "", "x", "18446744073709551616"] {
            assert_eq!(bad.parse::<SearchLimit>(), Err(InvalidSearchLimit), "{bad}");
        }
        assert_eq!(InvalidSearchLimit.to_string(), "`limit` must be an integer from 1 to 100");
    }
}
