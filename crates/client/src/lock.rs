//! The lock file: which version of each skill is installed, and from which server.
//!
//! ```json
//! {"lockfile_version": 1, "skills": {"<name>": {"source": "<base url>", "version": "sha256:..."}}}
//! ```
//!
//! Written with sorted keys, two-space indents and one trailing newline, so the same lock is the
//! same bytes whoever writes it (`skillcat download --lock`, nagents' Python client).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use skillcat_core::{Digest, SkillName};

/// The only format this client reads and writes.
const LOCKFILE_VERSION: u32 = 1;
/// The largest lock file read; a lock of ten thousand skills is about 2 MiB.
const MAX_LOCK_BYTES: u64 = 64 << 20;

/// A lock: for each skill name, the server it comes from and its version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lock {
    skills: BTreeMap<SkillName, LockedSkill>,
}

/// One skill of a [`Lock`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedSkill {
    /// The server's base URL as given to the client, without a trailing `/`.
    pub source: String,
    /// The skill's version: the digest of its folder.
    pub version: Digest,
}

impl LockedSkill {
    /// An entry for a skill of the server at `source` (a trailing `/` is dropped).
    pub fn new(source: &str, version: Digest) -> Self {
        LockedSkill { source: source_text(source), version }
    }
}

/// A base URL as a lock records it: as given, without surrounding space or a trailing `/`.
pub(crate) fn source_text(source: &str) -> String {
    source.trim().trim_end_matches('/').to_owned()
}

// The fields in the order they are written: sorted, as the lock's bytes are.
#[derive(Serialize, Deserialize)]
struct WireLock {
    lockfile_version: u32,
    skills: BTreeMap<SkillName, LockedSkill>,
}

/// Why a lock file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    #[error("cannot read the lock file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not a lock this client understands (malformed JSON, an invalid name or version, another
    /// `lockfile_version`).
    #[error("the lock file {} is not valid: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    /// Writing failed; the lock file is as it was.
    #[error("cannot write the lock file {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Lock {
    /// An empty lock.
    pub fn new() -> Self {
        Lock::default()
    }

    /// Reads the lock at `path`.
    pub fn read(path: impl AsRef<Path>) -> Result<Lock, LockError> {
        let path = path.as_ref();
        let read = |source| LockError::Read { path: path.to_owned(), source };
        let file = std::fs::File::open(path).map_err(read)?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_LOCK_BYTES + 1), &mut bytes).map_err(read)?;
        if bytes.len() as u64 > MAX_LOCK_BYTES {
            return Err(LockError::Invalid { path: path.to_owned(), reason: "it is larger than 64 MiB".into() });
        }
        Lock::parse(&bytes).map_err(|reason| LockError::Invalid { path: path.to_owned(), reason })
    }

    /// Reads the lock at `path`, or gives an empty one if there is no file there.
    pub fn read_or_new(path: impl AsRef<Path>) -> Result<Lock, LockError> {
        match Lock::read(path) {
            Err(LockError::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(Lock::new()),
            other => other,
        }
    }

    /// Parses a lock's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Lock, String> {
        let wire: WireLock = serde_json::from_slice(bytes).map_err(|error| error.to_string())?;
        if wire.lockfile_version != LOCKFILE_VERSION {
            return Err(format!(
                "lockfile_version is {}; this skillcat reads version {LOCKFILE_VERSION}",
                wire.lockfile_version
            ));
        }
        Ok(Lock { skills: wire.skills })
    }

    /// The lock's bytes: sorted keys, two-space indents, one trailing newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Borrowed<'a> {
            lockfile_version: u32,
            skills: &'a BTreeMap<SkillName, LockedSkill>,
        }
        let wire = Borrowed { lockfile_version: LOCKFILE_VERSION, skills: &self.skills };
        let mut bytes = serde_json::to_vec_pretty(&wire).expect("a lock serializes");
        bytes.push(b'\n');
        bytes
    }

    /// Writes the lock to `path` atomically: into a new file beside it, synced, then renamed
    /// over it. On failure the file at `path` is as it was.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), LockError> {
        let path = path.as_ref();
        let failed = |source| LockError::Write { path: path.to_owned(), source };
        let name = path.file_name().ok_or_else(|| failed(std::io::ErrorKind::InvalidInput.into()))?;
        let parent = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let mut temporary = std::ffi::OsString::from(".");
        temporary.push(name);
        temporary.push(format!(".{}-{:016x}.tmp", std::process::id(), fastrand::u64(..)));
        let temporary = parent.join(temporary);
        let written = (|| {
            let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&temporary)?;
            file.write_all(&self.to_bytes())?;
            file.sync_all()?;
            std::fs::rename(&temporary, path)
        })();
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(failed(error));
        }
        // The rename is durable once the folder is synced; a failure here loses nothing written.
        if let Ok(folder) = std::fs::File::open(parent) {
            let _ = folder.sync_all();
        }
        Ok(())
    }

    /// The locked skills, in name order.
    pub fn skills(&self) -> &BTreeMap<SkillName, LockedSkill> {
        &self.skills
    }

    /// The entry of `name`.
    pub fn get(&self, name: &str) -> Option<&LockedSkill> {
        self.skills.get(name)
    }

    /// Sets the entry of `name`, returning the one it replaces.
    pub fn insert(&mut self, name: SkillName, skill: LockedSkill) -> Option<LockedSkill> {
        self.skills.insert(name, skill)
    }

    /// Removes the entry of `name`.
    pub fn remove(&mut self, name: &str) -> Option<LockedSkill> {
        self.skills.remove(name)
    }

    /// The sources the lock names, each once, in order.
    pub fn sources(&self) -> Vec<&str> {
        let mut sources: Vec<&str> = self.skills.values().map(|skill| skill.source.as_str()).collect();
        sources.sort_unstable();
        sources.dedup();
        sources
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    const B: &str = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    fn name(text: &str) -> SkillName {
        SkillName::parse(text).unwrap()
    }

    #[test]
    fn a_lock_is_written_with_sorted_keys_and_stable_bytes() {
        let mut lock = Lock::new();
        lock.insert(name("zeta"), LockedSkill::new("http://b.example/api/", Digest::parse(B).unwrap()));
        lock.insert(name("alpha"), LockedSkill::new(" http://a.example ", Digest::parse(A).unwrap()));
        let expected = format!(
            "{{\n  \"lockfile_version\": 1,\n  \"skills\": {{\n    \"alpha\": {{\n      \"source\": \"http://a.example\",\n      \"version\": \"{A}\"\n    }},\n    \"zeta\": {{\n      \"source\": \"http://b.example/api\",\n      \"version\": \"{B}\"\n    }}\n  }}\n}}\n"
        );
        assert_eq!(String::from_utf8(lock.to_bytes()).unwrap(), expected);
        assert_eq!(Lock::parse(expected.as_bytes()).unwrap(), lock);
        assert_eq!(lock.sources(), ["http://a.example", "http://b.example/api"]);
        assert_eq!(Lock::new().to_bytes(), b"{\n  \"lockfile_version\": 1,\n  \"skills\": {}\n}\n");
    }

    #[test]
    fn writing_replaces_the_file_whole_and_leaves_nothing_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("skills.lock");
        assert_eq!(Lock::read_or_new(&path).unwrap(), Lock::new());
        assert!(matches!(Lock::read(&path), Err(LockError::Read { .. })));
        let mut lock = Lock::new();
        lock.insert(name("alpha"), LockedSkill::new("http://a", Digest::parse(A).unwrap()));
        lock.write(&path).unwrap();
        lock.insert(name("beta"), LockedSkill::new("http://a", Digest::parse(B).unwrap()));
        lock.write(&path).unwrap();
        assert_eq!(Lock::read(&path).unwrap(), lock);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|entry| entry.unwrap().file_name()).collect();
        assert_eq!(names, ["skills.lock"]);
        // Into a folder that does not exist: an error, nothing written.
        assert!(matches!(lock.write(dir.path().join("missing/skills.lock")), Err(LockError::Write { .. })));
    }

    #[test]
    fn anything_but_a_version_1_lock_of_valid_names_and_digests_is_refused() {
        let entry = |name: &str, version: &str| {
            format!(
                r#"{{"lockfile_version": 1, "skills": {{"{name}": {{"source": "http://a", "version": "{version}"}}}}}}"#
            )
        };
        assert!(Lock::parse(entry("alpha", A).as_bytes()).is_ok());
        for bad in [
            entry("bad name", A),
            entry("alpha", "sha256:00"),
            entry("alpha", "v1"),
            entry("alpha", A).replace("\"lockfile_version\": 1", "\"lockfile_version\": 2"),
            entry("alpha", A).replace("\"source\"", "\"origin\""),
            "[]".to_owned(),
            String::new(),
        ] {
            assert!(Lock::parse(bad.as_bytes()).is_err(), "{bad}");
        }
        let error = Lock::parse(entry("alpha", A).replace(": 1,", ": 2,").as_bytes()).unwrap_err();
        assert!(error.contains("lockfile_version is 2"), "{error}");
    }
}
