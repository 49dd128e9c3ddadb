//! The catalog API every surface calls: the live catalog (`live`: the published [`Snapshot`],
//! kept current from the sources) and what it answers, in domain types — the listing and each
//! skill's entry ([`Catalog`], [`CatalogSkill`]), contents and budgeted loads ([`Content`]),
//! files read and checked against the listing, archives, search answers, the publication
//! decisions of the agentskills.io surfaces ([`Publication`]), and the views kept with each
//! version ([`Views`]). One error type, [`CatalogError`]; it knows no route, status or protocol.
//!
//! The bodies every HTTP surface answers alike are prepared here once per version
//! ([`PreparedBody`]: bytes, strong tag, gzip form); a surface's own encodings are made by the
//! surface and kept in the version's views.

mod body;
mod contents;
mod error;
mod files;
mod live;
mod offline;
mod publish;
mod search;
mod snapshot;
mod views;

pub use body::{ETag, GzipBody, PreparedBody};
pub use contents::Content;
pub use error::CatalogError;
pub use files::{FileEntry, FilesBody, SkillFiles, SkippedFile, media_type};
pub use live::{LiveCatalog, LiveOptions, VerifiedFile, VersionEntry, Versions};
pub use offline::OfflineCatalog;
pub use publish::{LeftOut, Publication, Published, PublishedView};
pub use search::{
    ExcerptPart, InvalidSearchLimit, MAX_QUERY_CHARS, QueryError, SearchAnswer, SearchHit, SearchIndex, SearchLimit,
    SearchQuery,
};
pub use snapshot::{
    Catalog, CatalogBody, CatalogFailure, CatalogSkill, CatalogState, DiagnosticEntry, ShadowedEntry, SkillEntry,
    Snapshot,
};
pub use views::{Views, blocking, made_in_task};
