//! What a source with a history answers about a skill's versions: the versions it had (newest
//! first), and the skill as it was at one of them, read through a source of its own
//! ([`Pinned::reader`]) so that the catalog reads and checks a pinned skill's files exactly as it
//! does a current one's.

use std::sync::Arc;

use skillcat_core::{ContentVersion, Digest, FileListing, Skill};

use super::Source;

/// The longest a tag name may be (git refuses longer ref names on most file systems).
const MAX_TAG_BYTES: usize = 255;

/// What `?version=` names: a version digest, a commit (7 to 40 hex digits, a prefix of one), or
/// a tag.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VersionSpec {
    Digest(Digest),
    /// Lowercase hex; may also be a tag of that name, which is tried first.
    Commit(String),
    Tag(String),
}

/// Why a text names no version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a version is a digest (sha256: and 64 hex digits), a commit id (7 to 40 hex digits) or a tag name; got {0:?}")]
pub struct InvalidVersion(pub String);

impl VersionSpec {
    pub fn parse(text: &str) -> Result<Self, InvalidVersion> {
        let invalid = || InvalidVersion(text.chars().take(100).collect());
        if text.starts_with(Digest::PREFIX) {
            return Digest::parse(text).map(VersionSpec::Digest).map_err(|_| invalid());
        }
        if (7..=40).contains(&text.len()) && text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return Ok(VersionSpec::Commit(text.to_ascii_lowercase()));
        }
        if text.len() > MAX_TAG_BYTES || gix::validate::reference::name_partial(text.as_bytes().into()).is_err() {
            return Err(invalid());
        }
        Ok(VersionSpec::Tag(text.to_owned()))
    }
}

impl std::fmt::Display for VersionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VersionSpec::Digest(digest) => digest.fmt(f),
            VersionSpec::Commit(text) | VersionSpec::Tag(text) => f.write_str(text),
        }
    }
}

/// One version of a skill in a source's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    pub version: Digest,
    /// The newest commit of the history that has it (40 hex digits).
    pub commit: String,
    /// That commit's time, in seconds since the epoch.
    pub committed_at: i64,
    /// The tags pointing at commits of the history that have it, sorted.
    pub tags: Vec<String>,
}

/// Why a source with a history has no such version of a skill.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// No version, commit or tag of the history: `detail` says which (for the client).
    #[error("{0}")]
    NotFound(String),
    /// A commit prefix that matches several commits of the history.
    #[error("{prefix} matches {count} commits; give more digits")]
    Ambiguous { prefix: String, count: usize },
    /// The history could not be read (a broken mirror): the source's message.
    #[error("{0}")]
    Unreadable(String),
}

/// A skill as it was at one version, and a source that reads exactly that version's files.
pub struct Pinned {
    pub skill: Skill,
    /// Of its `SKILL.md`.
    pub content: ContentVersion,
    pub listing: Arc<FileListing>,
    pub version: Digest,
    /// The commit it was read from (40 hex digits).
    pub commit: String,
    /// Serves this skill, at this version, and nothing else.
    pub reader: Arc<dyn Source>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_digests_commit_prefixes_or_tag_names() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        assert!(matches!(VersionSpec::parse(&digest), Ok(VersionSpec::Digest(_))));
        assert_eq!(VersionSpec::parse("ABCDEF0"), Ok(VersionSpec::Commit("abcdef0".to_owned())));
        assert_eq!(VersionSpec::parse("v1.2.0"), Ok(VersionSpec::Tag("v1.2.0".to_owned())));
        assert_eq!(VersionSpec::parse("release/2026"), Ok(VersionSpec::Tag("release/2026".to_owned())));
        // Six hex digits are too few for a commit, but make a tag name.
        assert_eq!(VersionSpec::parse("abcdef"), Ok(VersionSpec::Tag("abcdef".to_owned())));
        for bad in [
            "",
            "sha256:",
            "sha256:xyz",
            &format!("sha256:{}", "AB".repeat(32)),
            "a..b",
            "a b",
            "x.lock",
            "/x",
            "a\u{0}b",
            "a~1",
            "@{u}",
            &"t".repeat(300),
        ] {
            assert!(VersionSpec::parse(bad).is_err(), "{bad:?}");
        }
    }
}
