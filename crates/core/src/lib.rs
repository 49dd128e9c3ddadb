//! The skills protocol of skillcat, with the semantics of nagents' `nagents.skills`: validated
//! descriptors, `SKILL.md` metadata parsing, token budgets, the bounded prompt manifest, and the
//! directory, builtin and composite discoverers. Beside nagents' view of a skill as its
//! `SKILL.md`, the directory and builtin sources list the files of each skill's folder
//! ([`FileListing`], carried by [`Discovery::files`]) and read them safely. No HTTP here.
//!
//! ```
//! use skillcat_core::{Skill, TokenLimit, budget_skill_content, parse_skill_metadata, render_skill_manifest};
//!
//! let content = "---\nname: greet\ndescription: Greets people.\n---\n# Greet\nSay hello.\n";
//! let skill = parse_skill_metadata(content, "/skills/greet/SKILL.md", "greet").unwrap();
//! assert_eq!(skill.description(), "Greets people.");
//! assert!(render_skill_manifest([&skill]).contains("<skill name=\"greet\""));
//! let load = budget_skill_content(&skill, content, TokenLimit::new(4).unwrap());
//! assert!(load.truncated && load.content.len() <= 16);
//! ```

#![forbid(unsafe_code)]

mod budget;
mod builtin;
mod composite;
mod directory;
mod discover;
mod files;
mod manifest;
mod metadata;
mod order;
pub mod pystr;
mod references;
mod skill;
mod tree;

pub use budget::{
    DEFAULT_SKILL_TOKEN_LIMIT, InvalidTokenLimit, MAX_SKILL_TOKEN_LIMIT, SkillLoadResult, TokenLimit,
    budget_skill_content, estimate_skill_tokens,
};
pub use builtin::BuiltinSkillDiscoverer;
pub use composite::{
    CompositeDiscovery, CompositeSkillDiscoverer, SourceError, SourcedDiagnostic, SourcedSkill, compose,
};
pub use directory::{
    AbsoluteRoot, DEFAULT_MAX_DEPTH, DEFAULT_MAX_ENTRIES, DirectorySkillDiscoverer, FolderObserver, MAX_FILE_BYTES,
};
pub use discover::{ContentVersion, Discovery, SkillDiscoverer, SkillError, skill_catalog};
pub use files::{
    Digest, FileListing, FilesUnavailable, InvalidDigest, InvalidFilePath, MAX_FILE_PATH_BYTES, MAX_SKILL_BYTES,
    MAX_SKILL_DEPTH, MAX_SKILL_ENTRIES, MAX_SKILL_FILES, SkillFile, SkillFilePath, SkipReason, SkippedEntry, push_hex,
};
pub use manifest::{MAX_SKILL_MANIFEST_TOKENS, render_skill_manifest};
pub use metadata::{FALLBACK_DESCRIPTION, MetadataError, MetadataErrorKind, parse_skill_metadata};
pub use references::explicit_skill_names;
pub use skill::{
    InvalidSkill, InvalidSpecName, MAX_DESCRIPTION_CHARS, MAX_LOCATION_CHARS, MAX_SPEC_NAME_CHARS, NameProblem,
    SharedText, Skill, SkillName, SpecName,
};
pub use tree::{
    ListedTree, TreeEntry, TreeEntryKind, TreeError, TreeRoot, TreeSkill, TreeStore, TreeWalk, WalkMemo, list_tree,
    walk_tree, walk_tree_memo,
};

/// The name of the file that makes a folder a skill, at the top of the folder.
pub const SKILL_MD: &str = "SKILL.md";
