//! The live catalog: the current snapshot in memory, kept current by watching the sources.

mod contents;
mod live;
mod snapshot;

pub use contents::{Content, ContentCache};
pub(crate) use live::stopped;
pub use live::{LiveCatalog, LiveOptions};
pub use snapshot::{
    Body, Catalog, CatalogBody, CatalogSkill, CatalogState, DiagnosticEntry, ETag, ShadowedEntry, SkillEntry, Snapshot,
    skill_etag,
};
