//! The files of a remote skill as `GET /skills/{name}/files` lists them, validated before
//! anything is fetched or written: the server is not trusted to name paths.

use std::collections::HashSet;

use serde::Deserialize;
use skillcat_core::{
    Digest, FileListing, MAX_SKILL_BYTES, MAX_SKILL_DEPTH, MAX_SKILL_FILES, SkillFile, SkillFilePath, SkillName,
};

use crate::error::ClientError;

/// One file of a remote skill, as its listing names it. The path is a [`SkillFilePath`], so it
/// can only name something beneath the skill's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteFile {
    pub path: SkillFilePath,
    /// Bytes; a read that answers another number of bytes is refused.
    pub size: u64,
    /// SHA-256 of the bytes; a read whose bytes hash otherwise is refused.
    pub digest: Digest,
    /// The `Content-Type` the server answers for it (from the extension).
    pub media_type: String,
    /// Written with mode 0755 when downloaded (otherwise 0644).
    pub executable: bool,
}

/// Something beneath the skill's folder on the server that is neither listed nor served (a
/// symlink, a FIFO...), with the server's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkippedFile {
    /// As the server reports it, relative to the skill's folder; only shown, never used as a path.
    pub path: String,
    pub reason: String,
}

/// The files of one version of a skill, in code-point order of their paths, within the bounds
/// every skillcat server keeps (at most 512 files and 16 MiB together), with distinct paths none
/// of which is a folder of another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFileListing {
    name: SkillName,
    etag: String,
    /// The version the listing names itself (servers before versions name none).
    listed_version: Option<Digest>,
    /// The version these files make, recomputed here.
    version: Digest,
    files: Vec<RemoteFile>,
    skipped: Vec<SkippedFile>,
}

#[derive(Deserialize)]
struct WireListing {
    name: String,
    etag: String,
    #[serde(default)]
    version: Option<String>,
    files: Vec<WireFile>,
    #[serde(default)]
    skipped: Vec<WireSkipped>,
}

#[derive(Deserialize)]
struct WireFile {
    path: String,
    size: u64,
    digest: String,
    media_type: String,
    executable: bool,
}

#[derive(Deserialize)]
struct WireSkipped {
    path: String,
    reason: String,
}

impl RemoteFileListing {
    /// Parses a `GET /skills/{name}/files` body for the skill `name` at version `etag` (the tag
    /// the request was guarded with; `None` for a pinned listing, which is checked by its
    /// version instead). Any path that is not a [`SkillFilePath`], any listing beyond the
    /// bounds, with a path twice or a file where another file's folder would be, or whose files
    /// make another version than it names, is an invalid answer: nothing of it is used.
    pub(crate) fn parse(body: &[u8], name: &SkillName, etag: Option<&str>) -> Result<RemoteFileListing, ClientError> {
        let invalid = |what: String| ClientError::InvalidResponse(format!("the file listing of '{name}' {what}"));
        let wire: WireListing =
            serde_json::from_slice(body).map_err(|error| invalid(format!("is not valid: {error}")))?;
        if wire.name != name.as_str() {
            return Err(invalid(format!("names another skill, {:?}", wire.name)));
        }
        if let Some(etag) = etag.filter(|etag| wire.etag != *etag) {
            return Err(invalid(format!("is of another version ({:?}, not {etag:?})", wire.etag)));
        }
        let listed_version = match &wire.version {
            Some(text) => {
                Some(Digest::parse(text).map_err(|error| invalid(format!("names a bad version {text:?}: {error}")))?)
            }
            None => None,
        };
        if wire.files.len() > MAX_SKILL_FILES {
            return Err(invalid(format!("has {} files, more than {MAX_SKILL_FILES}", wire.files.len())));
        }
        let mut files = Vec::with_capacity(wire.files.len());
        let mut total = 0u64;
        for file in wire.files {
            let path = SkillFilePath::parse(&file.path)
                .map_err(|error| invalid(format!("names an unsafe path {:?}: {error}", file.path)))?;
            if path.folders().count() > MAX_SKILL_DEPTH {
                return Err(invalid(format!("names a path more than {MAX_SKILL_DEPTH} folders deep, {path:?}")));
            }
            let digest = Digest::parse(&file.digest)
                .map_err(|error| invalid(format!("has a bad digest for {path:?}: {error}")))?;
            total = total.saturating_add(file.size);
            if total > MAX_SKILL_BYTES {
                return Err(invalid(format!("adds up to more than {MAX_SKILL_BYTES} bytes")));
            }
            files.push(RemoteFile {
                path,
                size: file.size,
                digest,
                media_type: file.media_type,
                executable: file.executable,
            });
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let paths: HashSet<&str> = files.iter().map(|file| file.path.as_str()).collect();
        if paths.len() != files.len() {
            let twice = files.windows(2).find(|pair| pair[0].path == pair[1].path).map(|pair| &pair[0].path);
            return Err(invalid(format!("names a path twice, {twice:?}")));
        }
        for file in &files {
            let text = file.path.as_str();
            let folders = text.match_indices('/').map(|(end, _)| &text[..end]);
            if let Some(folder) = folders.into_iter().find(|folder| paths.contains(folder)) {
                return Err(invalid(format!("names {folder:?} both as a file and as a folder")));
            }
        }
        let version = version_of(&files);
        if let Some(listed) = listed_version.filter(|listed| *listed != version) {
            return Err(invalid(format!("names version {listed}, but its files make {version}")));
        }
        let skipped =
            wire.skipped.into_iter().map(|entry| SkippedFile { path: entry.path, reason: entry.reason }).collect();
        Ok(RemoteFileListing { name: name.clone(), etag: wire.etag, listed_version, version, files, skipped })
    }

    /// The skill these files belong to.
    pub fn name(&self) -> &SkillName {
        &self.name
    }

    /// The skill's tag: the version of the skill (its descriptor and every file) listed.
    pub fn etag(&self) -> &str {
        &self.etag
    }

    /// The skill's version as these files make it (recomputed from the listed paths, digests
    /// and modes, never taken from the server's word): what [`installed_version`](crate::installed_version)
    /// gives for the folder they are downloaded into.
    pub fn version(&self) -> Digest {
        self.version
    }

    /// The version the server says the listing is of, if it says (it was checked to be
    /// [`version`](Self::version)).
    pub fn listed_version(&self) -> Option<Digest> {
        self.listed_version
    }

    /// The files, in code-point order of their paths.
    pub fn files(&self) -> &[RemoteFile] {
        &self.files
    }

    /// What the server left out, and why.
    pub fn skipped(&self) -> &[SkippedFile] {
        &self.skipped
    }

    /// The file at `path`.
    pub fn get(&self, path: &SkillFilePath) -> Option<&RemoteFile> {
        self.files.binary_search_by(|file| file.path.cmp(path)).ok().map(|index| &self.files[index])
    }

    /// The bytes of all files together.
    pub fn total_size(&self) -> u64 {
        self.files.iter().map(|file| file.size).sum()
    }
}

/// The version of a checked listing's files, as core defines it (a checked listing is within
/// every bound, so core always has a listing of it).
pub(crate) fn version_of(files: &[RemoteFile]) -> Digest {
    let files = files
        .iter()
        .map(|file| SkillFile {
            path: file.path.clone(),
            size: file.size,
            digest: file.digest,
            executable: file.executable,
        })
        .collect();
    FileListing::new(files, Vec::new()).version().expect("a checked listing is within the bounds")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    const DIGEST: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn file(path: &str, size: u64) -> Value {
        json!({"path": path, "size": size, "digest": DIGEST, "media_type": "text/plain", "executable": false})
    }

    fn parse(files: Vec<Value>) -> Result<RemoteFileListing, ClientError> {
        let body = json!({"name": "alpha", "etag": "\"a1\"", "files": files, "skipped": []});
        RemoteFileListing::parse(body.to_string().as_bytes(), &SkillName::parse("alpha").unwrap(), Some("\"a1\""))
    }

    #[test]
    fn a_listing_is_parsed_into_checked_paths_and_digests_in_path_order() {
        let mut run = file("scripts/run.py", 12);
        run["executable"] = json!(true);
        run["media_type"] = json!("text/x-python");
        let body = json!({"name": "alpha", "etag": "\"a1\"", "files": [file("SKILL.md", 3), run, file("a b/ü.txt", 0)],
            "skipped": [{"path": "link", "reason": "a symbolic link (never followed)"}]});
        let listing =
            RemoteFileListing::parse(body.to_string().as_bytes(), &SkillName::parse("alpha").unwrap(), Some("\"a1\""))
                .unwrap();
        let paths: Vec<&str> = listing.files().iter().map(|file| file.path.as_str()).collect();
        assert_eq!(paths, ["SKILL.md", "a b/ü.txt", "scripts/run.py"]);
        let run = listing.get(&SkillFilePath::parse("scripts/run.py").unwrap()).unwrap();
        assert!(run.executable && run.media_type == "text/x-python" && run.size == 12);
        assert_eq!(run.digest.to_string(), DIGEST);
        assert_eq!((listing.total_size(), listing.etag(), listing.name().as_str()), (15, "\"a1\"", "alpha"));
        assert_eq!(listing.skipped()[0].path, "link");
    }

    #[test]
    fn a_listing_naming_anything_outside_the_skill_folder_is_refused_whole() {
        // Each would write outside the folder, or somewhere a later path could be made to
        // resolve through, if it were used as a path.
        for path in [
            "../evil",
            "a/../../evil",
            "/etc/passwd",
            "./x",
            "a//b",
            "a/",
            "",
            ".hidden",
            "a/.git/config",
            "a\\..\\b",
            "a\0b",
            "C:\\evil",
        ] {
            let error = parse(vec![file("SKILL.md", 1), file(path, 1)]).unwrap_err();
            assert!(error.to_string().contains("unsafe path"), "{path:?}: {error}");
        }
        let deep = format!("{}x", "d/".repeat(MAX_SKILL_DEPTH + 1));
        assert!(parse(vec![file(&deep, 1)]).unwrap_err().to_string().contains("folders deep"));
        assert!(parse(vec![file(&format!("{}x", "d/".repeat(MAX_SKILL_DEPTH)), 1)]).is_ok());
    }

    #[test]
    fn a_listing_that_cannot_be_one_folder_or_is_beyond_the_bounds_is_refused() {
        let twice = parse(vec![file("a.txt", 1), file("SKILL.md", 1), file("a.txt", 1)]).unwrap_err();
        assert!(twice.to_string().contains("twice"), "{twice}");
        // A file and a folder of the same name: writing one would have to go through the other.
        let both = parse(vec![file("a", 1), file("a/b", 1)]).unwrap_err();
        assert!(both.to_string().contains("both as a file and as a folder"), "{both}");
        assert!(parse(vec![file("a/b", 1), file("a/b/c/d", 1)]).is_err());
        assert!(parse(vec![file("ab", 1), file("a/b", 1), file("a.b", 1)]).is_ok());

        let many: Vec<Value> = (0..=MAX_SKILL_FILES).map(|index| file(&format!("f{index}"), 0)).collect();
        assert!(parse(many[1..].to_vec()).is_ok());
        assert!(parse(many).unwrap_err().to_string().contains("more than 512"));
        let half = MAX_SKILL_BYTES / 2;
        assert!(parse(vec![file("a", half), file("b", half)]).is_ok());
        assert!(parse(vec![file("a", half), file("b", half + 1)]).is_err());
        assert!(parse(vec![file("a", u64::MAX), file("b", u64::MAX)]).is_err());
    }

    #[test]
    fn a_listing_s_version_is_recomputed_from_its_lines_and_must_match_what_it_names() {
        let mut run = file("scripts/run.py", 0);
        run["executable"] = json!(true);
        let hex = DIGEST.strip_prefix("sha256:").unwrap();
        let lines = format!("644 {hex} SKILL.md\n755 {hex} scripts/run.py\n");
        let expected = Digest::of(lines.as_bytes());
        let listing = parse(vec![run.clone(), file("SKILL.md", 0)]).unwrap();
        assert_eq!((listing.version(), listing.listed_version()), (expected, None));

        let name = SkillName::parse("alpha").unwrap();
        let named = |version: &str| {
            let body = json!({"name": "alpha", "etag": "\"a1\"", "version": version, "files": [file("SKILL.md", 0), run.clone()]});
            RemoteFileListing::parse(body.to_string().as_bytes(), &name, None)
        };
        assert_eq!(named(&expected.to_string()).unwrap().listed_version(), Some(expected));
        let error = named(DIGEST).unwrap_err();
        assert!(error.to_string().contains("but its files make"), "{error}");
        assert!(named("v1").is_err());
    }

    #[test]
    fn a_listing_of_another_skill_or_version_or_with_bad_fields_is_refused() {
        let name = SkillName::parse("alpha").unwrap();
        let good = json!({"name": "alpha", "etag": "\"a1\"", "files": [file("SKILL.md", 1)]});
        assert!(RemoteFileListing::parse(good.to_string().as_bytes(), &name, Some("\"a1\"")).is_ok());
        assert!(RemoteFileListing::parse(good.to_string().as_bytes(), &name, Some("\"a2\"")).is_err());
        let mut other = good.clone();
        other["name"] = json!("beta");
        assert!(RemoteFileListing::parse(other.to_string().as_bytes(), &name, Some("\"a1\"")).is_err());
        let mut digest = good.clone();
        digest["files"][0]["digest"] = json!("md5:00");
        assert!(RemoteFileListing::parse(digest.to_string().as_bytes(), &name, Some("\"a1\"")).is_err());
        let mut negative = good.clone();
        negative["files"][0]["size"] = json!(-1);
        assert!(RemoteFileListing::parse(negative.to_string().as_bytes(), &name, Some("\"a1\"")).is_err());
        for body in [&b"<html>"[..], b"{}", b"[]"] {
            let error = RemoteFileListing::parse(body, &name, Some("\"a1\"")).unwrap_err();
            assert!(matches!(error, ClientError::InvalidResponse(_)), "{error:?}");
        }
    }
}
