//! The files of a skill: the folder view of agentskills.io and MCP (SEP-2640), beside nagents'
//! `SKILL.md` view. A listing is complete or absent, never partial: a skill over a bound keeps
//! its catalog entry and has no listing, with a message saying which bound and by how much.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Most files listed for one skill (SEP-2640's bound).
pub const MAX_SKILL_FILES: usize = 512;
/// Most bytes of all files of one skill together: 16 MiB (SEP-2640's bound).
pub const MAX_SKILL_BYTES: u64 = 16 * 1024 * 1024;
/// Most names a directory source examines beneath one skill folder: files, folders, skipped and
/// hidden names alike. It bounds the work of listing a skill whose files are within the other
/// bounds but whose tree is not (thousands of empty folders, FIFOs or hidden files).
pub const MAX_SKILL_ENTRIES: usize = 4096;
/// Deepest folder a directory source enters beneath a skill folder (the skill folder is 0). It
/// bounds the descriptors one listing holds open.
pub const MAX_SKILL_DEPTH: usize = 32;
/// Longest path of a file in a skill, in bytes (Linux's `PATH_MAX`).
pub const MAX_FILE_PATH_BYTES: usize = 4096;

/// Why a text is not a [`SkillFilePath`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidFilePath {
    #[error("a file path must not be empty")]
    Empty,
    #[error("a file path is longer than {MAX_FILE_PATH_BYTES} bytes")]
    TooLong,
    #[error("a file path must be relative (no leading '/')")]
    Absolute,
    #[error("a file path must not have an empty segment ('//' or a trailing '/')")]
    EmptySegment,
    #[error("a file path must not have a '.' or '..' segment")]
    DotSegment,
    #[error("a file path must not name a hidden file or folder (a segment starting with '.')")]
    Hidden,
    #[error("a file path must not contain a backslash")]
    Backslash,
    #[error("a file path must not contain a NUL character")]
    Nul,
}

/// The path of a file in a skill, relative to the folder holding its `SKILL.md`: `/`-separated
/// segments, none empty, `.`, `..` or hidden (starting with `.`), no leading `/`, no backslash,
/// no NUL, at most 4096 bytes. Such a path can only name something beneath the skill folder.
/// Ordered by code points (the order of listings). Clones share the text.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SkillFilePath(Arc<str>);

impl SkillFilePath {
    pub fn parse(path: impl AsRef<str>) -> Result<Self, InvalidFilePath> {
        let path = path.as_ref();
        check_path(path)?;
        Ok(SkillFilePath(Arc::from(path)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `SKILL.md`, in every skill's listing: one text shared by them all.
    pub(crate) fn skill_md() -> Self {
        static PATH: std::sync::OnceLock<SkillFilePath> = std::sync::OnceLock::new();
        PATH.get_or_init(|| SkillFilePath(Arc::from(crate::SKILL_MD))).clone()
    }

    /// The segments, outermost first; the last is the file's name.
    pub fn segments(&self) -> impl DoubleEndedIterator<Item = &str> + '_ {
        self.0.split('/')
    }

    /// The last segment.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or_default()
    }

    /// The folders above the file, outermost first (empty for a file at the top of the skill).
    pub fn folders(&self) -> impl Iterator<Item = &str> + '_ {
        let end = self.0.rfind('/').unwrap_or(0);
        self.0[..end].split('/').filter(|segment| !segment.is_empty())
    }

    /// The path with `prefix/` removed, when it lies in that folder.
    pub(crate) fn strip_folder(&self, prefix: &str) -> Option<SkillFilePath> {
        let rest = self.0.strip_prefix(prefix)?.strip_prefix('/')?;
        Some(SkillFilePath(Arc::from(rest)))
    }
}

/// Checks one segment; the name of a file or folder in a listing must pass it.
pub(crate) fn check_segment(segment: &str) -> Result<(), InvalidFilePath> {
    match segment {
        "" => Err(InvalidFilePath::EmptySegment),
        "." | ".." => Err(InvalidFilePath::DotSegment),
        _ if segment.starts_with('.') => Err(InvalidFilePath::Hidden),
        _ if segment.contains('\\') => Err(InvalidFilePath::Backslash),
        _ if segment.contains('\0') => Err(InvalidFilePath::Nul),
        _ => Ok(()),
    }
}

fn check_path(path: &str) -> Result<(), InvalidFilePath> {
    if path.is_empty() {
        return Err(InvalidFilePath::Empty);
    }
    if path.len() > MAX_FILE_PATH_BYTES {
        return Err(InvalidFilePath::TooLong);
    }
    if path.starts_with('/') {
        return Err(InvalidFilePath::Absolute);
    }
    path.split('/').try_for_each(check_segment)
}

impl TryFrom<String> for SkillFilePath {
    type Error = InvalidFilePath;

    fn try_from(path: String) -> Result<Self, Self::Error> {
        check_path(&path)?;
        Ok(SkillFilePath(Arc::from(path)))
    }
}

impl std::str::FromStr for SkillFilePath {
    type Err = InvalidFilePath;

    fn from_str(path: &str) -> Result<Self, Self::Err> {
        SkillFilePath::parse(path)
    }
}

impl From<SkillFilePath> for String {
    fn from(path: SkillFilePath) -> Self {
        String::from(&*path.0)
    }
}

impl AsRef<str> for SkillFilePath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SkillFilePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SkillFilePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// Why a text is not a [`Digest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a digest is 'sha256:' and 64 lowercase hexadecimal digits")]
pub struct InvalidDigest;

/// The SHA-256 of a file's bytes, written `sha256:<64 lowercase hex digits>` (the form of the
/// agentskills.io discovery index). One text per digest, so texts compare as digests do.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest([u8; 32]);

impl Digest {
    pub const PREFIX: &str = "sha256:";

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        use sha2::Digest as _;
        Digest(sha2::Sha256::digest(bytes).into())
    }

    /// A digest computed elsewhere (rust-embed's metadata, a streaming hasher).
    pub fn from_sha256(hash: [u8; 32]) -> Self {
        Digest(hash)
    }

    pub fn sha256(&self) -> &[u8; 32] {
        &self.0
    }

    pub fn parse(text: &str) -> Result<Self, InvalidDigest> {
        let hex = text.strip_prefix(Self::PREFIX).ok_or(InvalidDigest)?.as_bytes();
        if hex.len() != 64 {
            return Err(InvalidDigest);
        }
        let nibble = |digit: u8| match digit {
            b'0'..=b'9' => Ok(digit - b'0'),
            b'a'..=b'f' => Ok(digit - b'a' + 10),
            _ => Err(InvalidDigest),
        };
        let mut hash = [0; 32];
        for (byte, pair) in hash.iter_mut().zip(hex.chunks_exact(2)) {
            *byte = nibble(pair[0])? << 4 | nibble(pair[1])?;
        }
        Ok(Digest(hash))
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from(*self))
    }
}

/// Appends `bytes` in lowercase hexadecimal, two digits each (what `{:02x}` writes, without
/// formatting machinery per byte: the digests and tags of a large catalog are many).
pub fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() * 2);
    for &byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::str::FromStr for Digest {
    type Err = InvalidDigest;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Digest::parse(text)
    }
}

impl TryFrom<String> for Digest {
    type Error = InvalidDigest;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        Digest::parse(&text)
    }
}

impl From<Digest> for String {
    fn from(digest: Digest) -> Self {
        let mut text = String::with_capacity(Digest::PREFIX.len() + 2 * digest.0.len());
        text.push_str(Digest::PREFIX);
        push_hex(&mut text, &digest.0);
        text
    }
}

/// One file of a skill as its source listed it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SkillFile {
    pub path: SkillFilePath,
    /// Bytes, as read to compute the digest.
    pub size: u64,
    pub digest: Digest,
    /// Whether the owner may execute it (`S_IXUSR`, as git decides 0755 or 0644).
    pub executable: bool,
}

/// Something beneath a skill folder that is neither listed nor served, and why. Hidden names
/// (starting with `.`) are not reported: leaving files out that way is intended.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SkippedEntry {
    /// Relative to the skill folder, `/`-separated; a name that is not UTF-8 shows U+FFFD.
    pub path: String,
    pub reason: SkipReason,
}

/// Why an entry beneath a skill folder is not served.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum SkipReason {
    /// Never followed, so never served (a copy of its target could be anything on the host).
    #[error("a symbolic link (never followed)")]
    Symlink,
    #[error("a FIFO")]
    Fifo,
    #[error("a socket")]
    Socket,
    #[error("a device")]
    Device,
    #[error("its name is not valid UTF-8")]
    NotUtf8,
    /// Its path cannot be a [`SkillFilePath`] (a backslash, or too long).
    #[error("{0}")]
    InvalidPath(InvalidFilePath),
    /// It was replaced, removed or written while the scan listed or read it; a rescan settles it.
    #[error("it changed while the scan read it")]
    Changed,
    /// It could not be opened or read (e.g. permissions); the text is the system's.
    #[error("it could not be read: {0}")]
    Unreadable(String),
}

/// Why a skill has no file listing. The texts say which bound, by how much, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum FilesUnavailable {
    #[error(
        "the skill has more than {MAX_SKILL_FILES} files (counting stopped at {counted}); files are served \
         only for skills of at most {MAX_SKILL_FILES} files and 16 MiB: remove files from its folder, or \
         hide them (names starting with '.' are left out)"
    )]
    TooManyFiles { counted: usize },
    #[error(
        "the skill's files total more than 16 MiB ({MAX_SKILL_BYTES} bytes): {counted} bytes counted when \
         '{path}' ({size} bytes) was reached; files are served only for skills of at most {MAX_SKILL_FILES} \
         files and 16 MiB: remove large files from its folder, or hide them (names starting with '.' are \
         left out)"
    )]
    TooLarge { counted: u64, path: String, size: u64 },
    #[error(
        "the skill's folder holds more than {MAX_SKILL_ENTRIES} entries (files, folders and anything else, \
         hidden names included; counting stopped at {counted}); files are served only for skills whose \
         folder holds at most {MAX_SKILL_ENTRIES}: remove entries, or move folders out of the skill"
    )]
    TooManyEntries { counted: usize },
    #[error(
        "the folder '{path}' is nested more than {MAX_SKILL_DEPTH} folders deep in the skill; files are \
         served only for skills at most {MAX_SKILL_DEPTH} folders deep: flatten the tree"
    )]
    TooDeep { path: String },
    #[error("two files have the path '{path}'")]
    DuplicatePath { path: SkillFilePath },
    /// The skill folder itself could not be listed (replaced during the scan, permissions).
    #[error("the skill's folder could not be listed: {message}")]
    Unreadable { message: String },
}

/// The files of one skill in code-point order of their paths, or why it has none; and what
/// beneath its folder was skipped. Never a partial listing: over a bound there are no files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileListing {
    files: Result<Vec<SkillFile>, FilesUnavailable>,
    skipped: Vec<SkippedEntry>,
}

impl FileListing {
    /// A listing of `files` (in any order), or no listing when they exceed
    /// [`MAX_SKILL_FILES`] or [`MAX_SKILL_BYTES`] or repeat a path. `skipped` is kept, in path
    /// order, when there is a listing.
    pub fn new(mut files: Vec<SkillFile>, mut skipped: Vec<SkippedEntry>) -> Self {
        files.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        let unavailable = if files.len() > MAX_SKILL_FILES {
            Some(FilesUnavailable::TooManyFiles { counted: files.len() })
        } else if let Some(pair) = files.windows(2).find(|pair| pair[0].path == pair[1].path) {
            Some(FilesUnavailable::DuplicatePath { path: pair[0].path.clone() })
        } else {
            let mut counted = 0u64;
            files.iter().find_map(|file| {
                counted = counted.saturating_add(file.size);
                (counted > MAX_SKILL_BYTES).then(|| FilesUnavailable::TooLarge {
                    counted,
                    path: file.path.to_string(),
                    size: file.size,
                })
            })
        };
        match unavailable {
            Some(reason) => FileListing::unavailable(reason),
            None => {
                skipped.sort_by(|a, b| a.path.cmp(&b.path));
                // Kept for the life of the skill's version: no room to grow.
                files.shrink_to_fit();
                skipped.shrink_to_fit();
                FileListing { files: Ok(files), skipped }
            }
        }
    }

    /// No listing, and why.
    pub fn unavailable(reason: FilesUnavailable) -> Self {
        FileListing { files: Err(reason), skipped: Vec::new() }
    }

    /// The files in path order, or why there are none.
    pub fn files(&self) -> Result<&[SkillFile], &FilesUnavailable> {
        self.files.as_deref()
    }

    /// What was skipped beneath the folder, in path order (empty when there is no listing).
    pub fn skipped(&self) -> &[SkippedEntry] {
        &self.skipped
    }

    /// The listed file at `path`.
    pub fn get(&self, path: &SkillFilePath) -> Option<&SkillFile> {
        let files = self.files.as_ref().ok()?;
        files.binary_search_by(|file| file.path.cmp(path)).ok().map(|index| &files[index])
    }

    /// The skill's version: the SHA-256 of one line per listed file, in the listing's
    /// (code-point) order, `<mode> <sha256 hex> <path>\n` with mode `644`, or `755` for an
    /// executable file — the files, order and modes of the skill's archive, so anyone can
    /// recompute it from an installed folder. `None` without a listing.
    pub fn version(&self) -> Option<Digest> {
        use sha2::Digest as _;
        let files = self.files().ok()?;
        let mut hash = sha2::Sha256::new();
        for file in files {
            hash.update(if file.executable { b"755 " } else { b"644 " });
            hash.update(file.digest.to_string().strip_prefix(Digest::PREFIX).expect("a digest").as_bytes());
            hash.update(b" ");
            hash.update(file.path.as_str().as_bytes());
            hash.update(b"\n");
        }
        Some(Digest(hash.finalize().into()))
    }

    /// The bytes of all listed files (0 without a listing).
    pub fn total_size(&self) -> u64 {
        self.files().map_or(0, |files| files.iter().map(|file| file.size).sum())
    }

    /// The listing of the folder `prefix` inside this one (a nested skill's), when this listing
    /// is complete and that folder was entered: every file and skipped entry beneath it.
    pub(crate) fn within(&self, prefix: &str) -> Option<FileListing> {
        let files = self.files.as_ref().ok()?;
        let inner = files.iter().filter_map(|file| {
            let path = file.path.strip_folder(prefix)?;
            Some(SkillFile { path, ..file.clone() })
        });
        let skipped = self.skipped.iter().filter_map(|entry| {
            let path = entry.path.strip_prefix(prefix)?.strip_prefix('/')?;
            Some(SkippedEntry { path: path.to_owned(), reason: entry.reason.clone() })
        });
        // Already in order, and within the bounds as a subset.
        Some(FileListing { files: Ok(inner.collect()), skipped: skipped.collect() })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_version_is_the_digest_of_the_archive_s_lines() {
        let file = |path: &str, bytes: &[u8], executable| SkillFile {
            path: SkillFilePath::parse(path).unwrap(),
            size: bytes.len() as u64,
            digest: Digest::of(bytes),
            executable,
        };
        // Listed in any order; the version follows the code-point order of the paths. The value is
        // `sha256sum` of "644 <sha256 of a\n> SKILL.md\n755 <sha256 of b\n> scripts/run.sh\n".
        let listing =
            FileListing::new(vec![file("scripts/run.sh", b"b\n", true), file("SKILL.md", b"a\n", false)], Vec::new());
        let version = listing.version().unwrap().to_string();
        assert_eq!(version, "sha256:0fde86fa9f7f0f6cd99d53ae68986a24369ba0c0bf70f1d8eba3c818655b6f1b");
        let moded =
            FileListing::new(vec![file("scripts/run.sh", b"b\n", false), file("SKILL.md", b"a\n", false)], Vec::new());
        assert_ne!(moded.version().unwrap().to_string(), version, "the mode is part of the version");
        assert_eq!(FileListing::unavailable(FilesUnavailable::TooManyFiles { counted: 600 }).version(), None);
    }

    #[test]
    fn paths_are_clean_and_relative() {
        for good in ["SKILL.md", "scripts/run.sh", "a/b/c.d", "name with spaces", "ünïcode/文件", "a..b", "x."] {
            assert_eq!(SkillFilePath::parse(good).unwrap().as_str(), good);
        }
        let cases = [
            ("", InvalidFilePath::Empty),
            ("/etc/passwd", InvalidFilePath::Absolute),
            ("a//b", InvalidFilePath::EmptySegment),
            ("a/", InvalidFilePath::EmptySegment),
            (".", InvalidFilePath::DotSegment),
            ("..", InvalidFilePath::DotSegment),
            ("a/../b", InvalidFilePath::DotSegment),
            ("a/./b", InvalidFilePath::DotSegment),
            (".git/config", InvalidFilePath::Hidden),
            ("a/.env", InvalidFilePath::Hidden),
            ("a\\..\\b", InvalidFilePath::Backslash),
            ("a\0b", InvalidFilePath::Nul),
        ];
        for (bad, error) in cases {
            assert_eq!(SkillFilePath::parse(bad), Err(error), "{bad:?}");
        }
        assert_eq!(SkillFilePath::parse("a/".repeat(2048) + "b"), Err(InvalidFilePath::TooLong));
        assert!(SkillFilePath::parse("a/".repeat(2047) + "bb").is_ok());
        let path = SkillFilePath::parse("a/b/c.txt").unwrap();
        assert_eq!(path.file_name(), "c.txt");
        assert_eq!(path.folders().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(SkillFilePath::parse("c").unwrap().folders().count(), 0);
        assert_eq!(serde_json::to_string(&path).unwrap(), "\"a/b/c.txt\"");
        assert!(serde_json::from_str::<SkillFilePath>("\"../x\"").is_err());
    }

    #[test]
    fn paths_order_by_code_points() {
        let mut paths: Vec<SkillFilePath> =
            ["b", "a/b", "a-c", "a", "é", "z", "Z"].into_iter().map(|p| SkillFilePath::parse(p).unwrap()).collect();
        paths.sort();
        let paths: Vec<&str> = paths.iter().map(SkillFilePath::as_str).collect();
        assert_eq!(paths, ["Z", "a", "a-c", "a/b", "b", "z", "é"]);
    }

    proptest! {
        /// No accepted path leaves the folder it is resolved in: resolved lexically segment by
        /// segment from a base, it never rises above the base, never names it, and never
        /// passes through a hidden name.
        #[test]
        fn accepted_paths_never_escape(segments in proptest::collection::vec(
            prop_oneof![
                Just(String::new()), Just(".".to_owned()), Just("..".to_owned()), Just("...".to_owned()),
                Just(".hidden".to_owned()), Just("a\\b".to_owned()), Just("/".to_owned()),
                Just("\0".to_owned()), "[a-zA-Z0-9._\\-\\\\/ é]{1,6}",
            ],
            1..6,
        )) {
            let text = segments.join("/");
            if let Ok(path) = SkillFilePath::parse(&text) {
                let mut depth = 0usize;
                for segment in path.segments() {
                    prop_assert!(!segment.is_empty() && !segment.starts_with('.'));
                    prop_assert!(!segment.contains(['/', '\\', '\0']));
                    depth += 1;
                }
                prop_assert!(depth >= 1);
                prop_assert!(!text.starts_with('/'));
                prop_assert_eq!(std::path::Path::new(path.as_str()).components().count(), depth);
                prop_assert!(std::path::Path::new(path.as_str()).components()
                    .all(|part| matches!(part, std::path::Component::Normal(_))));
            }
        }

        #[test]
        fn digests_round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let digest = Digest::of(&bytes);
            let text = digest.to_string();
            prop_assert_eq!(text.len(), 7 + 64);
            prop_assert_eq!(Digest::parse(&text), Ok(digest));
        }
    }

    #[test]
    fn digests_are_sha256_in_one_spelling() {
        let empty = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(Digest::of(b"").to_string(), empty);
        assert_eq!(serde_json::to_string(&Digest::of(b"")).unwrap(), format!("\"{empty}\""));
        assert_eq!(Digest::parse(&empty.to_uppercase()), Err(InvalidDigest));
        assert_eq!(Digest::parse(&empty.replace("sha256:", "sha512:")), Err(InvalidDigest));
        assert_eq!(Digest::parse(&empty[..70]), Err(InvalidDigest));
        assert_eq!(Digest::parse(&format!("{empty}0")), Err(InvalidDigest));
    }

    fn file(path: &str, size: u64) -> SkillFile {
        let path = SkillFilePath::parse(path).unwrap();
        SkillFile { path, size, digest: Digest::of(b""), executable: false }
    }

    #[test]
    fn listings_are_ordered_and_bounded() {
        let listing = FileListing::new(vec![file("b", 1), file("a/x", 2), file("a-b", 3)], Vec::new());
        let paths: Vec<&str> = listing.files().unwrap().iter().map(|file| file.path.as_str()).collect();
        assert_eq!(paths, ["a-b", "a/x", "b"]);
        assert_eq!(listing.total_size(), 6);
        assert_eq!(listing.get(&SkillFilePath::parse("a/x").unwrap()).unwrap().size, 2);
        assert!(listing.get(&SkillFilePath::parse("a").unwrap()).is_none());

        let many = (0..=MAX_SKILL_FILES).map(|index| file(&format!("f{index}"), 0)).collect();
        let error = FileListing::new(many, Vec::new()).files().unwrap_err().clone();
        assert_eq!(error, FilesUnavailable::TooManyFiles { counted: 513 });
        assert!(error.to_string().starts_with("the skill has more than 512 files"), "{error}");

        let large = vec![file("a", MAX_SKILL_BYTES), file("b", 1)];
        let error = FileListing::new(large, Vec::new()).files().unwrap_err().to_string();
        assert!(error.contains("16777217 bytes counted when 'b' (1 bytes)"), "{error}");
        assert!(FileListing::new(vec![file("a", MAX_SKILL_BYTES)], Vec::new()).files().is_ok());

        let twice = FileListing::new(vec![file("a", 1), file("a", 2)], Vec::new());
        assert!(matches!(twice.files(), Err(FilesUnavailable::DuplicatePath { .. })));
    }

    #[test]
    fn a_nested_folder_keeps_what_lies_beneath_it() {
        let skipped = |path: &str| SkippedEntry { path: path.to_owned(), reason: SkipReason::Fifo };
        let outer = FileListing::new(
            vec![file("SKILL.md", 1), file("inner/SKILL.md", 2), file("inner/a/b", 3), file("inner-x", 4)],
            vec![skipped("inner/p"), skipped("innerp"), skipped("q")],
        );
        let inner = outer.within("inner").unwrap();
        let paths: Vec<&str> = inner.files().unwrap().iter().map(|file| file.path.as_str()).collect();
        assert_eq!(paths, ["SKILL.md", "a/b"]);
        assert_eq!(inner.skipped(), [skipped("p")]);
    }
}
