//! Skills compiled into the binary from a `rust-embed` folder.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use rust_embed::RustEmbed;

use crate::discover::{ContentVersion, Discovery, SkillDiscoverer, SkillError, skill_catalog};
use crate::files::{Digest, FileListing, SkillFile, SkillFilePath, SkipReason, SkippedEntry};
use crate::metadata::parse_skill_metadata;
use crate::skill::{Skill, SkillName};

/// Discovers `<folder>/SKILL.md` for every top-level folder of the embedded tree `E`, in folder
/// name order. Locations are `builtin:<folder>/SKILL.md`. Invalid metadata is an error, not a
/// diagnostic: builtin skills ship with the binary and must all be valid.
///
/// The files of a skill are every embedded file under `<folder>/` but hidden ones (a segment
/// starting with `.`), with rust-embed's SHA-256 of each; none is executable (rust-embed keeps
/// no file modes).
pub struct BuiltinSkillDiscoverer<E> {
    catalog: Mutex<Arc<BTreeMap<SkillName, Entry>>>,
    embed: PhantomData<fn() -> E>,
}

/// A current skill: its descriptor, its folder in the embedded tree, and its files.
struct Entry {
    skill: Skill,
    folder: String,
    files: Arc<FileListing>,
}

impl<E: RustEmbed> BuiltinSkillDiscoverer<E> {
    pub fn new() -> Self {
        BuiltinSkillDiscoverer { catalog: Mutex::default(), embed: PhantomData }
    }

    fn read(path: &str) -> Result<String, SkillError> {
        let file = E::get(path).ok_or_else(|| SkillError::Io {
            context: format!("builtin:{path}"),
            source: std::io::ErrorKind::NotFound.into(),
        })?;
        String::from_utf8(file.data.into_owned()).map_err(|error| SkillError::Io {
            context: format!("builtin:{path}"),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, error.utf8_error()),
        })
    }

    /// The bytes of the file at `path` of `skill`, which must be this source's current
    /// descriptor and `path` one of its listed files, as the binary holds them.
    pub fn file_bytes(
        &self,
        skill: &Skill,
        path: &SkillFilePath,
    ) -> Result<std::borrow::Cow<'static, [u8]>, SkillError> {
        let catalog = Arc::clone(&self.catalog.lock().unwrap_or_else(PoisonError::into_inner));
        let entry = match catalog.get(skill.name()) {
            Some(entry) if entry.skill == *skill => entry,
            _ => return Err(SkillError::NotInCatalog { name: skill.name().clone(), catalog: "builtin" }),
        };
        let changed = || SkillError::Changed { name: skill.name().clone() };
        entry.files.get(path).ok_or_else(changed)?;
        Ok(E::get(&format!("{}/{path}", entry.folder)).ok_or_else(changed)?.data)
    }

    /// As [`file_bytes`](Self::file_bytes), copied, at most `max_bytes` (more is
    /// [`SkillError::Changed`], as for a directory source).
    pub fn read_file_blocking(
        &self,
        skill: &Skill,
        path: &SkillFilePath,
        max_bytes: u64,
    ) -> Result<Vec<u8>, SkillError> {
        let data = self.file_bytes(skill, path)?;
        if data.len() as u64 > max_bytes {
            return Err(SkillError::Changed { name: skill.name().clone() });
        }
        Ok(data.into_owned())
    }

    /// As [`read_file_blocking`](Self::read_file_blocking); embedded files are in memory, so
    /// this does not leave the executor.
    pub async fn read_file(&self, skill: &Skill, path: &SkillFilePath, max_bytes: u64) -> Result<Vec<u8>, SkillError> {
        self.read_file_blocking(skill, path, max_bytes)
    }
}

/// The listing of one folder from the paths inside it (relative to it); `file` gives the size
/// and digest of a path.
fn list_folder<'a>(
    paths: impl IntoIterator<Item = &'a str>,
    file: impl Fn(&str) -> Option<(u64, Digest)>,
) -> FileListing {
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for path in paths {
        if path.split('/').any(|segment| segment.starts_with('.')) {
            continue;
        }
        match SkillFilePath::parse(path) {
            Ok(path) => {
                if let Some((size, digest)) = file(path.as_str()) {
                    files.push(SkillFile { path, size, digest, executable: false });
                }
            }
            Err(invalid) => {
                skipped.push(SkippedEntry { path: path.to_owned(), reason: SkipReason::InvalidPath(invalid) })
            }
        }
    }
    FileListing::new(files, skipped)
}

impl<E: RustEmbed> Default for BuiltinSkillDiscoverer<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> std::fmt::Debug for BuiltinSkillDiscoverer<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltinSkillDiscoverer").finish_non_exhaustive()
    }
}

#[async_trait]
impl<E: RustEmbed> SkillDiscoverer for BuiltinSkillDiscoverer<E> {
    async fn scan(&self) -> Result<Discovery, SkillError> {
        // Every embedded path, by its top-level folder.
        let mut tree: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for path in E::iter() {
            if let Some((folder, inside)) = path.split_once('/') {
                tree.entry(folder.to_owned()).or_default().push(inside.to_owned());
            }
        }
        let mut found = Vec::new();
        let mut read = BTreeMap::new();
        for (folder, inside) in tree {
            if !inside.iter().any(|path| path == crate::SKILL_MD) {
                continue;
            }
            let content = Self::read(&format!("{folder}/SKILL.md"))?;
            let skill = parse_skill_metadata(&content, &format!("builtin:{folder}/SKILL.md"), &folder)?;
            let files = list_folder(inside.iter().map(String::as_str), |path| {
                let file = E::get(&format!("{folder}/{path}"))?;
                Some((file.data.len() as u64, Digest::from_sha256(file.metadata.sha256_hash())))
            });
            read.insert(skill.name().clone(), (folder, ContentVersion::of(&content), Arc::new(files)));
            found.push(skill);
        }
        let catalog = skill_catalog(found)?;
        let versions = catalog.keys().map(|name| read[name].1).collect();
        let files = catalog.keys().map(|name| Arc::clone(&read[name].2)).collect();
        let entries = catalog.values().map(|skill| {
            let (folder, _, files) = read.remove(skill.name()).expect("every skill was read");
            (skill.name().clone(), Entry { skill: skill.clone(), folder, files })
        });
        *self.catalog.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(entries.collect());
        Ok(Discovery { skills: catalog.into_values().collect(), versions, files, diagnostics: Vec::new() })
    }

    async fn load(&self, skill: &Skill) -> Result<String, SkillError> {
        let catalog = Arc::clone(&self.catalog.lock().unwrap_or_else(PoisonError::into_inner));
        match catalog.get(skill.name()) {
            Some(entry) if entry.skill == *skill => Self::read(&format!("{}/SKILL.md", entry.folder)),
            _ => Err(SkillError::NotInCatalog { name: skill.name().clone(), catalog: "builtin" }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::{FilesUnavailable, InvalidFilePath, MAX_SKILL_FILES};

    #[derive(RustEmbed)]
    #[folder = "tests/builtin-skills/"]
    struct TestSkills;

    fn path(text: &str) -> SkillFilePath {
        SkillFilePath::parse(text).unwrap()
    }

    #[tokio::test]
    async fn builtin_skills_list_every_embedded_file_but_hidden_ones() {
        let source = BuiltinSkillDiscoverer::<TestSkills>::new();
        let discovery = source.scan().await.unwrap();
        let names: Vec<&str> = discovery.skills.iter().map(|skill| skill.name().as_str()).collect();
        assert_eq!(names, ["alpha", "beta"]);
        assert_eq!(discovery.files.len(), 2);
        let alpha = &discovery.files[0];
        let paths: Vec<&str> = alpha.files().unwrap().iter().map(|file| file.path.as_str()).collect();
        assert_eq!(paths, ["SKILL.md", "references/guide.md", "scripts/run.sh"]);
        assert!(alpha.skipped().is_empty());
        assert!(TestSkills::get("alpha/.hidden-notes").is_some(), "embedded, and left out by the listing");
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/builtin-skills/alpha");
        for file in alpha.files().unwrap() {
            let bytes = std::fs::read(folder.join(file.path.as_str())).unwrap();
            assert_eq!((file.size, file.digest, file.executable), (bytes.len() as u64, Digest::of(&bytes), false));
            let read = source.read_file(&discovery.skills[0], &file.path, file.size).await.unwrap();
            assert_eq!(read, bytes);
        }
        let beta: Vec<&str> = discovery.files[1].files().unwrap().iter().map(|file| file.path.as_str()).collect();
        assert_eq!(beta, ["SKILL.md"]);
    }

    #[tokio::test]
    async fn builtin_reads_only_listed_files_of_the_current_descriptor() {
        let source = BuiltinSkillDiscoverer::<TestSkills>::new();
        let discovery = source.scan().await.unwrap();
        let alpha = &discovery.skills[0];
        let changed = |result: Result<Vec<u8>, SkillError>| matches!(result, Err(SkillError::Changed { .. }));
        assert!(changed(source.read_file_blocking(alpha, &path("references/missing.md"), 100)));
        assert!(changed(source.read_file_blocking(alpha, &path("references/guide.md"), 3)), "over max_bytes");
        // Embedded, but hidden, or in another skill.
        let hidden = SkillFilePath::parse(".hidden-notes");
        assert_eq!(hidden, Err(InvalidFilePath::Hidden));
        assert!(changed(source.read_file_blocking(&discovery.skills[1], &path("scripts/run.sh"), 100)));
        let stale = Skill::new("alpha", "another description", alpha.location()).unwrap();
        let error = source.read_file_blocking(&stale, &path("SKILL.md"), 100).unwrap_err();
        assert!(matches!(error, SkillError::NotInCatalog { .. }), "{error}");
    }

    #[test]
    fn builtin_listings_skip_what_cannot_be_a_path_and_keep_the_bounds() {
        let digest = Digest::of(b"");
        let listing = list_folder(["SKILL.md", "a\\b", ".git/x", "x/.y", "ok/z"], |_| Some((0, digest)));
        let paths: Vec<&str> = listing.files().unwrap().iter().map(|file| file.path.as_str()).collect();
        assert_eq!(paths, ["SKILL.md", "ok/z"]);
        let skipped =
            SkippedEntry { path: "a\\b".to_owned(), reason: SkipReason::InvalidPath(InvalidFilePath::Backslash) };
        assert_eq!(listing.skipped(), [skipped]);

        let many: Vec<String> = (0..=MAX_SKILL_FILES).map(|index| format!("f{index}")).collect();
        let listing = list_folder(many.iter().map(String::as_str), |_| Some((0, digest)));
        assert!(matches!(listing.files(), Err(FilesUnavailable::TooManyFiles { counted: 513 })));
    }
}
