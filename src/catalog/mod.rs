//! The live catalog: the current snapshot in memory, kept current by watching the sources, and
//! the skills' contents, read and verified against it.

mod contents;
mod error;
mod files;
mod live;
mod search;
mod snapshot;
mod views;
mod wellknown;

pub use contents::Content;
pub use error::CatalogError;
pub use files::{FileEntry, FilesBody, SkillFiles, SkippedFile, media_type};
pub use live::{LiveCatalog, LiveOptions};
pub use search::{ExcerptPart, MAX_QUERY_CHARS, QueryError, SearchHit, SearchIndex, SearchQuery, SearchResults};
pub use snapshot::{
    Catalog, CatalogBody, CatalogFailure, CatalogSkill, CatalogState, DiagnosticEntry, ETag, PreparedBody,
    ShadowedEntry, SkillEntry, Snapshot,
};
pub use wellknown::{
    ArtifactType, DISCOVERY_SCHEMA, DiscoveryEntry, DiscoveryIndex, LeftOut, LegacyEntry, LegacyIndex,
    in_discovery_index, in_legacy_index,
};
