//! What the catalog answers when it cannot give what was asked: the one error of the catalog API,
//! which each surface maps in one place (REST and the pages to problems, MCP to JSON-RPC and tool
//! errors, the command line to its exit status). Messages are for the client: they name skills and
//! files, never internals (a [`CatalogError::Read`] is logged and answered generically).

use skillcat_core::{SkillError, SkillName};

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A name that cannot be a skill's: no skill has it.
    #[error("skill names are 1 to 64 ASCII letters, digits, underscores or hyphens")]
    InvalidName,
    /// The first discovery has not finished.
    #[error("the catalog is not ready yet")]
    NotReady,
    /// A source failed before any good catalog existed: nagents' message.
    #[error("{0}")]
    Unavailable(String),
    #[error("no skill named '{0}' in the catalog")]
    UnknownSkill(SkillName),
    #[error("skill '{name}' has no file '{path}'")]
    UnknownFile { name: SkillName, path: String },
    /// The skill is over a bound on its files (or its source lists none): no listing is served.
    #[error("the files of skill '{name}' are not served: {reason}")]
    FilesUnavailable { name: SkillName, reason: String },
    /// The skill's file changed or vanished since the snapshot was taken; a rescan is under way.
    #[error("Skill '{0}' changed; refresh discovery and retry")]
    Changed(SkillName),
    /// `?version=` that names no version.
    #[error(transparent)]
    InvalidVersion(#[from] crate::sources::InvalidVersion),
    /// A commit prefix that matches several commits of the skill's history.
    #[error("the version '{prefix}' of skill '{name}' is ambiguous: it matches {count} commits")]
    AmbiguousVersion { name: SkillName, prefix: String, count: usize },
    /// No such version of the skill (unknown, no longer in the history, or a commit or tag where
    /// the skill does not exist); never answered with the current version instead.
    #[error("skill '{name}' has no version '{version}': {detail}")]
    VersionNotFound { name: SkillName, version: String, detail: String },
    /// A source could not read a skill for another reason (an I/O error, not staleness).
    #[error("cannot read skill '{name}': {source}")]
    Read { name: SkillName, source: SkillError },
}
