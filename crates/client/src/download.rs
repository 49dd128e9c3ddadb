//! The folder view of a remote skill: its file listing, one file's verified bytes, and the whole
//! folder downloaded atomically.

use std::path::{Path, PathBuf};

use futures_util::{StreamExt as _, TryStreamExt as _};
use reqwest::header::{ACCEPT, HeaderValue, IF_MATCH};
use reqwest::{Method, StatusCode};
use skillcat_core::{Digest, Skill, SkillName};

use crate::discoverer::RemoteSkillDiscoverer;
use crate::error::ClientError;
use crate::files::{RemoteFile, RemoteFileListing};
use crate::install;
use crate::retry;

/// The most of a listing's body that is read: 512 entries of 4 KiB paths and the skipped
/// entries (at most 4096 names examined per skill) fit many times over.
const MAX_LISTING_BYTES: usize = 16 * 1024 * 1024;
/// Files fetched at once by a download.
const CONCURRENT_READS: usize = 4;

/// What [`RemoteSkillDiscoverer::download`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Downloaded {
    /// The folder written (the target as given).
    pub path: PathBuf,
    pub name: SkillName,
    /// The skill's tag, as the catalog lists it (for a pinned skill, as its pinned listing
    /// names it).
    pub etag: String,
    /// The version downloaded: the digest of its files, recomputed from the listing they were
    /// checked against (what [`installed_version`](crate::installed_version) gives for the
    /// folder written).
    pub version: Digest,
    pub files: usize,
    pub bytes: u64,
    /// An existing folder was replaced.
    pub replaced: bool,
    /// Where the replaced folder was left because it could not be removed (say, a read-only
    /// folder in it); the new folder is in place all the same.
    pub leftover: Option<PathBuf>,
}

impl RemoteSkillDiscoverer {
    /// The files of `skill`, exactly the version the last discovery listed
    /// (`GET /skills/{name}/files` with `If-Match` naming the skill's tag, as
    /// [`content`](Self::content)).
    ///
    /// Every path is parsed as a [`SkillFilePath`](skillcat_core::SkillFilePath) and the
    /// listing is checked whole (bounds, no path twice, no file where a folder of another is):
    /// a listing that fails is an [`InvalidResponse`](ClientError::InvalidResponse), never
    /// partly used. A skill over a bound of what servers serve is
    /// [`FilesUnavailable`](ClientError::FilesUnavailable); a stale descriptor is
    /// [`Stale`](ClientError::Stale) as for loads.
    ///
    /// A pinned skill's files are its pinned version's (`?version=V`), listed once and checked:
    /// they must make that version.
    pub async fn files(&self, skill: &Skill) -> Result<RemoteFileListing, ClientError> {
        if let Some(pinned) = self.pinned_for(skill).await? {
            return Ok(self.pinned_listing(&pinned).await?.clone());
        }
        let tag = self.shared.current_tag(skill)?;
        let settings = &self.shared.settings;
        let url = settings.skill_url(skill.name(), ["files"]);
        let response = retry::send(settings, || {
            settings.request(Method::GET, url.clone()).header(IF_MATCH, tag.clone()).header(ACCEPT, "application/json")
        })
        .await?;
        match response.status() {
            StatusCode::OK => {}
            StatusCode::UNPROCESSABLE_ENTITY => {
                let problem = crate::error::Problem::read(response).await;
                return Err(ClientError::FilesUnavailable { name: skill.name().clone(), problem });
            }
            _ => return Err(ClientError::from_response(response, Some(skill.name())).await),
        }
        let body = read_at_most(response, MAX_LISTING_BYTES as u64).await?.ok_or_else(|| {
            ClientError::InvalidResponse(format!("the file listing of '{}' is too large", skill.name()))
        })?;
        let etag = tag.to_str().map_err(|_| ClientError::InvalidResponse("bad skill tag".into()))?;
        RemoteFileListing::parse(&body, skill.name(), Some(etag))
    }

    /// The bytes of `file` of `skill` (`GET /skills/{name}/files/{path}` with `If-Match` naming
    /// the file's digest), checked against the listing: a body of another size or SHA-256 is
    /// [`Corrupt`](ClientError::Corrupt) and its bytes are dropped. A file that changed or
    /// vanished on the server (412, 409, 404) is [`Stale`](ClientError::Stale): list again.
    /// A pinned skill's file is read at its pinned version (`?version=V`); a 404 is then
    /// [`VersionNotFound`](ClientError::VersionNotFound).
    pub async fn read_file(&self, skill: &Skill, file: &RemoteFile) -> Result<Vec<u8>, ClientError> {
        let settings = &self.shared.settings;
        let segments = std::iter::once("files").chain(file.path.segments());
        let pinned = self.pinned_for(skill).await?;
        let url = match &pinned {
            Some(pinned) => self.pinned_url(pinned, segments),
            None => settings.skill_url(skill.name(), segments),
        };
        let tag = HeaderValue::from_str(&format!("\"{}\"", file.digest)).expect("a digest is a valid header value");
        let response = retry::send(settings, || {
            let request = settings.request(Method::GET, url.clone());
            // A pinned file never changes: its digest is checked below, not asked of the server.
            if pinned.is_some() { request } else { request.header(IF_MATCH, tag.clone()) }
        })
        .await?;
        if response.status() != StatusCode::OK {
            return Err(match &pinned {
                Some(pinned) => ClientError::from_pinned_response(response, skill.name(), &pinned.pin).await,
                None => ClientError::from_response(response, Some(skill.name())).await,
            });
        }
        let corrupt =
            |reason: String| ClientError::Corrupt { name: skill.name().clone(), path: file.path.clone(), reason };
        let bytes = read_at_most(response, file.size)
            .await?
            .ok_or_else(|| corrupt(format!("more than the {} bytes listed", file.size)))?;
        if bytes.len() as u64 != file.size {
            return Err(corrupt(format!("{} bytes, not the {} listed", bytes.len(), file.size)));
        }
        let digest = Digest::of(&bytes);
        if digest != file.digest {
            return Err(corrupt(format!("its bytes hash to {digest}, not {}", file.digest)));
        }
        Ok(bytes)
    }

    /// Downloads the folder of `skill` (the version the last discovery listed, or its pinned
    /// version) into `target`,
    /// all or nothing: every file is fetched and verified against the listing first, then
    /// written into a hidden staging folder beside `target` (files 0644, or 0755 when
    /// executable; folders 0755), synced, and renamed onto `target` in one step. An existing
    /// `target` is refused (before anything is fetched) unless `replace`, and then only if it is
    /// a folder, which is swapped out atomically where the filesystem can (`RENAME_EXCHANGE`)
    /// and removed. On any failure the staging folder is removed and `target` is as it was.
    ///
    /// The parent of `target` must exist. Paths come from the server, which is not trusted with
    /// them: a listing naming anything outside the folder is refused whole, and every file is
    /// created with `O_EXCL|O_NOFOLLOW` relative to its open parent inside the staging folder.
    pub async fn download(
        &self,
        skill: &Skill,
        target: impl AsRef<Path>,
        replace: bool,
    ) -> Result<Downloaded, ClientError> {
        let target = target.as_ref().to_owned();
        let checked = target.clone();
        blocking(&target, move || install::check_target(&checked, replace)).await?;
        let listing = self.files(skill).await?;
        if listing.files().iter().all(|file| file.path.as_str() != "SKILL.md") {
            return Err(ClientError::InvalidResponse(format!(
                "the file listing of '{}' has no SKILL.md",
                skill.name()
            )));
        }
        let files: Vec<(RemoteFile, Vec<u8>)> = futures_util::stream::iter(listing.files())
            .map(|file| async move { Ok::<_, ClientError>((file.clone(), self.read_file(skill, file).await?)) })
            .buffered(CONCURRENT_READS)
            .try_collect()
            .await?;
        let written = target.clone();
        let installed = blocking(&target, move || install::install(&written, &files, replace)).await?;
        Ok(Downloaded {
            path: target,
            name: listing.name().clone(),
            etag: listing.etag().to_owned(),
            version: listing.version(),
            files: listing.files().len(),
            bytes: listing.total_size(),
            replaced: installed.replaced,
            leftover: installed.leftover,
        })
    }
}

/// The body, or `None` if it is longer than `limit` bytes (the rest is not read).
pub(crate) async fn read_at_most(mut response: reqwest::Response, limit: u64) -> Result<Option<Vec<u8>>, ClientError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ClientError::Transport)? {
        if (body.len() + chunk.len()) as u64 > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// Runs filesystem work about `target` off the async threads.
async fn blocking<T: Send + 'static>(
    target: &Path,
    work: impl FnOnce() -> Result<T, ClientError> + Send + 'static,
) -> Result<T, ClientError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        // The runtime is shutting down; the work (and its cleanup) did not run or ran to its end.
        Err(error) => Err(ClientError::Io {
            target: target.to_owned(),
            action: "writing on the runtime's blocking threads".into(),
            source: std::io::Error::other(error),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::*;
    use crate::RetryPolicy;
    use crate::fake::{FakeServer, Reply};

    const TAG: &str = "\"alpha-1\"";

    fn catalog() -> Reply {
        let skill = json!({"name": "alpha", "description": "The alpha skill", "location": "/srv/alpha/SKILL.md",
            "source": "/srv", "etag": TAG});
        Reply::json(200, json!({"etag": "\"c1\"", "skills": [skill], "shadowed": [], "diagnostics": []}))
    }

    fn entry(path: &str, bytes: &[u8], executable: bool) -> Value {
        json!({"path": path, "size": bytes.len(), "digest": Digest::of(bytes).to_string(),
            "media_type": "application/octet-stream", "executable": executable})
    }

    fn listing(files: &[Value]) -> Reply {
        Reply::json(200, json!({"name": "alpha", "etag": TAG, "files": files, "skipped": []})).header("etag", TAG)
    }

    /// A server whose catalog has the skill `alpha` with `files`, each served with its bytes.
    async fn serving(files: &[(&str, &[u8], bool)]) -> FakeServer {
        let entries: Vec<Value> =
            files.iter().map(|(path, bytes, executable)| entry(path, bytes, *executable)).collect();
        let mut routes = vec![("/skills", catalog()), ("/skills/alpha/files", listing(&entries))];
        let targets: Vec<String> =
            files.iter().map(|(path, _, _)| format!("/skills/alpha/files/{}", path.replace(' ', "%20"))).collect();
        for ((_, bytes, _), target) in files.iter().zip(&targets) {
            routes.push((target, Reply::bytes(200, *bytes)));
        }
        FakeServer::routes(routes).await
    }

    async fn discovered(server: &FakeServer) -> (RemoteSkillDiscoverer, Skill) {
        let policy = RetryPolicy::new(1, Duration::from_millis(1), Duration::from_millis(5));
        let remote = RemoteSkillDiscoverer::builder(server.url()).retry_policy(policy).build().unwrap();
        let skill = remote.catalog().await.unwrap().skills()[0].clone();
        (remote, skill)
    }

    /// Every path beneath `dir`, sorted, folders with a trailing `/`.
    fn tree(dir: &Path) -> Vec<String> {
        fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let entry = entry.unwrap();
                let name = format!("{prefix}{}", entry.file_name().to_str().unwrap());
                if entry.file_type().unwrap().is_dir() {
                    out.push(format!("{name}/"));
                    walk(&entry.path(), &format!("{name}/"), out);
                } else {
                    out.push(name);
                }
            }
        }
        let mut out = Vec::new();
        walk(dir, "", &mut out);
        out.sort();
        out
    }

    #[tokio::test]
    async fn files_are_listed_under_the_skill_tag_and_read_under_their_digest() {
        let server = serving(&[("SKILL.md", b"# A\n", false), ("scripts/run me.sh", b"#!/bin/sh\n", true)]).await;
        let (remote, skill) = discovered(&server).await;
        let listing = remote.files(&skill).await.unwrap();
        assert_eq!(listing.files().len(), 2);
        let script = &listing.files()[1];
        assert!(script.executable && script.path.as_str() == "scripts/run me.sh");
        assert_eq!(remote.read_file(&skill, script).await.unwrap(), b"#!/bin/sh\n");
        let requests = server.requests();
        assert_eq!(requests[1].line, "GET /skills/alpha/files HTTP/1.1");
        assert_eq!(requests[1].header("if-match"), Some(TAG));
        assert_eq!(requests[2].line, "GET /skills/alpha/files/scripts/run%20me.sh HTTP/1.1");
        assert_eq!(requests[2].header("if-match"), Some(format!("\"{}\"", script.digest).as_str()));
    }

    #[tokio::test]
    async fn bytes_that_do_not_match_the_listing_are_an_error_and_never_returned() {
        let listed = entry("a.txt", b"four", false);
        let routes = |body: &[u8]| {
            vec![
                ("/skills", catalog()),
                ("/skills/alpha/files", listing(std::slice::from_ref(&listed))),
                ("/skills/alpha/files/a.txt", Reply::bytes(200, body)),
            ]
        };
        // Same size, other bytes; fewer bytes; more bytes (not read beyond the size listed).
        for (body, reason) in
            [(&b"fore"[..], "hash to"), (b"fou", "3 bytes, not the 4"), (b"fourty", "more than the 4")]
        {
            let server = FakeServer::routes(routes(body)).await;
            let (remote, skill) = discovered(&server).await;
            let file = remote.files(&skill).await.unwrap().files()[0].clone();
            let error = remote.read_file(&skill, &file).await.unwrap_err();
            assert!(matches!(&error, ClientError::Corrupt { path, .. } if path.as_str() == "a.txt"), "{error:?}");
            assert!(error.to_string().contains(reason), "{error}");
            assert!(!error.is_stale());
        }
    }

    #[tokio::test]
    async fn a_download_with_a_corrupt_file_leaves_nothing_and_keeps_the_old_folder() {
        // The listing promises other bytes for b.txt than the server sends.
        let entries = [entry("SKILL.md", b"# A\n", false), entry("b.txt", b"BBBB", false)];
        let tampered = FakeServer::routes(vec![
            ("/skills", catalog()),
            ("/skills/alpha/files", listing(&entries)),
            ("/skills/alpha/files/SKILL.md", Reply::bytes(200, &b"# A\n"[..])),
            ("/skills/alpha/files/b.txt", Reply::bytes(200, &b"bbbb"[..])),
        ])
        .await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("alpha")).unwrap();
        std::fs::write(dir.path().join("alpha/old.txt"), "old").unwrap();
        let (remote, skill) = discovered(&tampered).await;
        for (target, replace) in [("alpha", true), ("fresh", false)] {
            let error = remote.download(&skill, dir.path().join(target), replace).await.unwrap_err();
            assert!(matches!(error, ClientError::Corrupt { .. }), "{error:?}");
            assert_eq!(tree(dir.path()), ["alpha/", "alpha/old.txt"]);
        }
    }

    #[tokio::test]
    async fn a_listing_naming_paths_outside_the_folder_writes_nothing_anywhere() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("project/.agents/skills");
        std::fs::create_dir_all(&parent).unwrap();
        let before = tree(dir.path());
        // Each would land outside the target (or overwrite through a name) if it were joined.
        let hostile = [
            "../escaped.txt",
            "../../../escaped.txt",
            "scripts/../../escaped.txt",
            "/tmp/escaped.txt",
            ".git/hooks/post-checkout",
            "..",
            "a\\..\\..\\escaped.txt",
        ];
        for path in hostile {
            let escape = std::path::absolute(parent.join(path)).unwrap();
            let entries = [entry("SKILL.md", b"# A\n", false), entry(path, b"pwned", true)];
            let server = FakeServer::routes(vec![
                ("/skills", catalog()),
                ("/skills/alpha/files", listing(&entries)),
                ("/skills/alpha/files/SKILL.md", Reply::bytes(200, &b"# A\n"[..])),
            ])
            .await;
            let (remote, skill) = discovered(&server).await;
            let error = remote.download(&skill, parent.join("alpha"), false).await.unwrap_err();
            assert!(error.to_string().contains("unsafe path"), "{path:?}: {error}");
            assert_eq!(tree(dir.path()), before, "{path:?}");
            assert!(!escape.exists() || path == "..", "{path:?}");
            // Refused whole: not one file was fetched.
            assert!(server.requests().iter().all(|request| !request.line.contains("/files/")), "{path:?}");
        }
    }

    #[tokio::test]
    async fn a_download_writes_the_folder_with_its_modes_and_refuses_an_existing_target_before_fetching() {
        let server =
            serving(&[("SKILL.md", b"# A\n", false), ("bin/tool", b"\x7fELF", true), ("docs/a/b.md", b"b", false)])
                .await;
        let (remote, skill) = discovered(&server).await;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("alpha");
        let done = remote.download(&skill, &target, false).await.unwrap();
        assert_eq!((done.files, done.bytes, done.replaced, done.etag.as_str()), (3, 9, false, TAG));
        assert_eq!(
            tree(dir.path()),
            [
                "alpha/",
                "alpha/SKILL.md",
                "alpha/bin/",
                "alpha/bin/tool",
                "alpha/docs/",
                "alpha/docs/a/",
                "alpha/docs/a/b.md"
            ]
        );
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |path: &str| std::fs::metadata(target.join(path)).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode("bin/tool"), mode("SKILL.md"), mode("docs/a"), mode("")), (0o755, 0o644, 0o755, 0o755));

        let requests = server.requests().len();
        let error = remote.download(&skill, &target, false).await.unwrap_err();
        assert!(matches!(error, ClientError::TargetExists { folder: true, .. }), "{error:?}");
        assert_eq!(server.requests().len(), requests, "refused before any request");
        std::fs::write(target.join("local-edit"), "x").unwrap();
        let done = remote.download(&skill, &target, true).await.unwrap();
        assert!(done.replaced && done.leftover.is_none());
        assert!(!target.join("local-edit").exists());
        assert_eq!(tree(dir.path()).len(), 7);
    }

    #[tokio::test]
    async fn a_skill_over_the_bounds_and_a_stale_descriptor_are_their_own_errors() {
        let problem = json!({"type": "urn:skillcat:problem:files-unavailable", "title": "Files unavailable",
            "status": 422, "detail": "the skill has more than 512 files"});
        let unavailable = Reply::json(422, problem).header("content-type", "application/problem+json");
        let server = FakeServer::start(vec![catalog(), unavailable, Reply::status(412), Reply::status(409)]).await;
        let (remote, skill) = discovered(&server).await;
        let error = remote.files(&skill).await.unwrap_err();
        let ClientError::FilesUnavailable { problem, .. } = &error else { panic!("{error:?}") };
        assert_eq!(problem.skillcat_kind(), Some("files-unavailable"));
        assert!(error.to_string().contains("more than 512 files"), "{error}");
        assert!(remote.files(&skill).await.unwrap_err().is_stale());
        let file = RemoteFile {
            path: "a.txt".parse().unwrap(),
            size: 1,
            digest: Digest::of(b"a"),
            media_type: String::new(),
            executable: false,
        };
        assert!(remote.read_file(&skill, &file).await.unwrap_err().is_stale());
    }
}
