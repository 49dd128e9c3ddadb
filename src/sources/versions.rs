//! What a source with a history answers about a skill's versions: the versions it had (newest
//! first), and the skill as it was at one of them, read through a source of its own
//! ([`Pinned::reader`]) so that the catalog reads and checks a pinned skill's files exactly as it
//! does a current one's.

use std::sync::Arc;

use skillcat_core::{ContentVersion, Digest, FileListing, Skill};

use super::Source;

/// The longest a version may be, in characters (git refuses longer ref names on most file
/// systems).
pub const MAX_VERSION_CHARS: usize = 255;

/// What `?version=` names: a version digest, a commit (7 to 40 hex digits, a prefix of one), or
/// a tag.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VersionSpec {
    Digest(Digest),
    /// Lowercase hex; may also be a tag of that name, which is tried first.
    Commit(String),
    /// Anything else, which only a tag can name (if it is a valid tag name at all).
    Tag(String),
}

/// Why a text cannot name a version: empty, too long, or holding a control character.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a version is 1 to 255 characters without control characters: a digest (sha256: and 64 hex digits), a commit id (7 to 40 hex digits) or a tag name; got {0:?}"
)]
pub struct InvalidVersion(pub String);

impl VersionSpec {
    /// Only what no version can be is invalid; anything else names a version that exists or not
    /// (a text that is neither a digest nor a commit id is a tag's name, found or not).
    pub fn parse(text: &str) -> Result<Self, InvalidVersion> {
        if text.is_empty() || text.chars().count() > MAX_VERSION_CHARS || text.chars().any(char::is_control) {
            return Err(InvalidVersion(text.chars().take(100).collect()));
        }
        if let Ok(digest) = Digest::parse(text) {
            return Ok(VersionSpec::Digest(digest));
        }
        if (7..=40).contains(&text.len()) && text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return Ok(VersionSpec::Commit(text.to_ascii_lowercase()));
        }
        Ok(VersionSpec::Tag(text.to_owned()))
    }

    /// Whether `tag` could be a tag's name: a text no tag can have names no version.
    pub fn tag_name(tag: &str) -> bool {
        gix::validate::reference::name_partial(tag.as_bytes().into()).is_ok()
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
        // A malformed digest or a name no tag can have is a tag that is not found.
        for unfound in
            ["sha256:", "sha256:xyz", &format!("sha256:{}", "AB".repeat(32)), "a..b", "a b", "x.lock", "@{u}"]
        {
            assert_eq!(VersionSpec::parse(unfound), Ok(VersionSpec::Tag(unfound.to_owned())), "{unfound:?}");
            assert!(!VersionSpec::tag_name(unfound), "{unfound:?}");
        }
        assert!(VersionSpec::tag_name("v1.2.0") && VersionSpec::tag_name("release/2026"));
        for bad in ["", "a\u{0}b", "tab\there", "\u{85}", &"t".repeat(256)] {
            assert!(VersionSpec::parse(bad).is_err(), "{bad:?}");
        }
        assert!(VersionSpec::parse(&"é".repeat(255)).is_ok(), "255 characters, more bytes");
    }
}
