//! The files of a skill as the catalog serves them: the listing (with media types), and the
//! archive of the folder, both prepared once per skill version.

use std::io::Write as _;
use std::sync::{Arc, OnceLock};

use serde::Serialize;
use skillcat_core::{Digest, FileListing, SkillFile, SkillFilePath};

use super::body::{ETag, PreparedBody};

/// The files of one version of a skill, and the answers made of them. Most skills of a large
/// catalog are never asked for their files, so the answers' cells are made with the first of
/// them: a skill holds one pointer until then.
#[derive(Debug)]
pub struct SkillFiles {
    pub listing: Arc<FileListing>,
    answers: OnceLock<Box<Answers>>,
}

/// The answers made of one version of a skill's files, each on first use.
#[derive(Debug, Default)]
pub(super) struct Answers {
    /// `GET /skills/{name}/files`.
    body: OnceLock<PreparedBody>,
    /// `GET /skills/{name}/archive` (it reads every file).
    pub(super) archive: tokio::sync::OnceCell<Arc<PreparedBody>>,
    /// The digest of that archive, for the discovery index, which needs every skill's digest
    /// but none of their bytes.
    pub(super) archive_digest: tokio::sync::OnceCell<Digest>,
}

impl SkillFiles {
    pub(super) fn new(listing: Arc<FileListing>) -> Self {
        SkillFiles { listing, answers: OnceLock::new() }
    }

    /// The cells of the answers, made on first use.
    pub(super) fn answers(&self) -> &Answers {
        self.answers.get_or_init(Box::default)
    }

    /// The listing's answer; `None` when the skill is over a bound (the listing says which).
    pub fn body(&self, name: &str, etag: &ETag) -> Option<&PreparedBody> {
        let files = self.listing.files().ok()?;
        Some(self.answers().body.get_or_init(|| {
            let body = FilesBody {
                name,
                etag,
                version: self.listing.version().expect("a listing has a version"),
                files: files.iter().map(FileEntry::of).collect(),
                skipped: self
                    .listing
                    .skipped()
                    .iter()
                    .map(|entry| SkippedFile { path: &entry.path, reason: entry.reason.to_string() })
                    .collect(),
            };
            PreparedBody::new(serde_json::to_vec(&body).expect("listings serialize"), etag.clone())
        }))
    }
}

/// The bytes a skill's files contribute to its tag: every path, digest and mode, or why there is
/// no listing.
pub(super) fn fingerprint(listing: Option<&FileListing>) -> Vec<u8> {
    let Some(listing) = listing else {
        return b"no listing".to_vec();
    };
    match listing.files() {
        Ok(files) => {
            let mut bytes = Vec::with_capacity(files.len() * 64);
            for file in files {
                bytes.extend_from_slice(file.path.as_str().as_bytes());
                bytes.push(0);
                bytes.extend_from_slice(file.digest.sha256());
                bytes.push(u8::from(file.executable));
            }
            bytes
        }
        Err(unavailable) => format!("unavailable: {unavailable}").into_bytes(),
    }
}

/// The media type of a file, from its extension (`application/octet-stream` when unknown);
/// text is UTF-8.
pub fn media_type(path: &SkillFilePath) -> String {
    let guess = mime_guess::from_path(path.as_str()).first_or_octet_stream();
    if guess.type_() == mime_guess::mime::TEXT && guess.get_param(mime_guess::mime::CHARSET).is_none() {
        format!("{}; charset=utf-8", guess.essence_str())
    } else {
        guess.to_string()
    }
}

/// The body of `GET /skills/{name}/files`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FilesBody<'a> {
    pub name: &'a str,
    /// The skill's tag, as `GET /skills` lists it: it covers every file.
    #[schema(value_type = ETag)]
    pub etag: &'a ETag,
    /// The skill's version, as `GET /skills/{name}` gives it: the digest of these files' lines
    /// `<mode> <sha256 hex> <path>\n`.
    #[schema(value_type = String, example = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", pattern = "^sha256:[0-9a-f]{64}$")]
    pub version: Digest,
    /// In code-point order of their paths.
    #[schema(value_type = Vec<FileEntry>)]
    pub files: Vec<FileEntry<'a>>,
    /// What is beneath the skill's folder and never served (symlinks, special files, names that
    /// are no clean path), with why.
    #[schema(value_type = Vec<SkippedFile>)]
    pub skipped: Vec<SkippedFile<'a>>,
}

/// One served file.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FileEntry<'a> {
    /// Relative to the skill's folder, `/`-separated.
    #[schema(value_type = String, example = "scripts/run.py")]
    pub path: &'a str,
    pub size: u64,
    #[schema(value_type = String, example = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")]
    pub digest: &'a Digest,
    #[schema(example = "text/markdown; charset=utf-8")]
    pub media_type: String,
    pub executable: bool,
}

impl<'a> FileEntry<'a> {
    fn of(file: &'a SkillFile) -> Self {
        FileEntry {
            path: file.path.as_str(),
            size: file.size,
            digest: &file.digest,
            media_type: media_type(&file.path),
            executable: file.executable,
        }
    }
}

/// An entry beneath a skill's folder that is not served.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SkippedFile<'a> {
    #[schema(value_type = String)]
    pub path: &'a str,
    pub reason: String,
}

/// The zip of a skill's files: `SKILL.md` at the root, entries in path order, fixed timestamps
/// and modes, so the same files give the same bytes on every replica. `read` gives each file's
/// bytes (already checked against its digest). Gives the archive and its digest.
pub(super) fn archive<E>(
    files: &[SkillFile],
    mut read: impl FnMut(&SkillFile) -> Result<Vec<u8>, E>,
) -> Result<(PreparedBody, Digest), E> {
    use zip::write::SimpleFileOptions;
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for file in files {
        let bytes = read(file)?;
        let options = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .last_modified_time(zip::DateTime::default())
            .unix_permissions(if file.executable { 0o755 } else { 0o644 });
        writer.start_file(file.path.as_str(), options).expect("writing to memory succeeds");
        writer.write_all(&bytes).expect("writing to memory succeeds");
    }
    let bytes = writer.finish().expect("writing to memory succeeds").into_inner();
    let digest = Digest::of(&bytes);
    Ok((PreparedBody::new(bytes, ETag::quoted(&digest.to_string())), digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, bytes: &[u8], executable: bool) -> (SkillFile, Vec<u8>) {
        let file = SkillFile {
            path: SkillFilePath::parse(path).unwrap(),
            size: bytes.len() as u64,
            digest: Digest::of(bytes),
            executable,
        };
        (file, bytes.to_vec())
    }

    #[test]
    fn archives_are_the_same_bytes_for_the_same_files() {
        let entries = [file("SKILL.md", b"---\nname: a\n---\n", false), file("scripts/run.sh", b"echo hi\n", true)];
        let files: Vec<SkillFile> = entries.iter().map(|(file, _)| file.clone()).collect();
        let read = |wanted: &SkillFile| {
            Ok::<_, ()>(entries.iter().find(|(file, _)| file.path == wanted.path).unwrap().1.clone())
        };
        let (first, digest) = archive(&files, read).unwrap();
        let (second, _) = archive(&files, read).unwrap();
        assert_eq!(digest, Digest::of(&first.bytes));
        assert_eq!(first.bytes, second.bytes);
        assert_eq!(first.etag, second.etag);
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(first.bytes.to_vec())).unwrap();
        let names: Vec<String> =
            (0..zip.len()).map(|index| zip.by_index(index).unwrap().name().unwrap().into_owned()).collect();
        assert_eq!(names, ["SKILL.md", "scripts/run.sh"]);
        let script = zip.by_name("scripts/run.sh").unwrap();
        assert_eq!(script.unix_mode().map(|mode| mode & 0o777), Some(0o755));
        drop(script);
        assert_eq!(zip.by_name("SKILL.md").unwrap().unix_mode().map(|mode| mode & 0o777), Some(0o644));
        assert_eq!(first.etag.as_str(), format!("\"{}\"", Digest::of(&first.bytes)));
    }

    #[test]
    fn media_types_come_from_extensions() {
        let of = |path: &str| media_type(&SkillFilePath::parse(path).unwrap());
        assert_eq!(of("SKILL.md"), "text/markdown; charset=utf-8");
        assert_eq!(of("scripts/run.py"), "text/plain; charset=utf-8");
        assert_eq!(of("scripts/run.sh"), "application/x-sh");
        assert_eq!(of("assets/logo.png"), "image/png");
        assert_eq!(of("LICENSE"), "application/octet-stream");
    }
}
