//! Skills in folders on disk, discovered without ever following a symlink beneath a root.

mod guarded;
mod path;
mod walk;

use std::ffi::OsStr;
use std::num::NonZeroUsize;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

pub use self::guarded::MAX_FILE_BYTES;
pub use self::path::AbsoluteRoot;
use self::walk::Found;
use crate::discover::{Discovery, SkillDiscoverer, SkillError, sorted_catalog};
use crate::metadata::parse_skill_metadata;
use crate::skill::{Skill, SkillName};

pub const DEFAULT_MAX_ENTRIES: usize = 10_000;
pub const DEFAULT_MAX_DEPTH: usize = 16;

/// Discovers `SKILL.md` files under explicitly configured roots.
///
/// Roots are made absolute lexically and walked in order. Every entry (directories and symlinks
/// included) counts against `max_entries`; a directory whose listing does not fit in what remains
/// yields nothing and ends the walk. Folders deeper than `max_depth` (the root is 0) are not
/// entered. Symlinks beneath a root are never followed; the root itself may be one, and is
/// resolved once per scan. Skipped files are reported as diagnostics, at most 20. A scan that
/// runs out of descriptors or memory (EMFILE, ENFILE, ENOMEM, ENOBUFS) fails as a whole.
///
/// Clones share the catalog of the last scan.
#[derive(Debug, Clone)]
pub struct DirectorySkillDiscoverer {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    roots: Vec<AbsoluteRoot>,
    max_entries: usize,
    max_depth: usize,
    /// The last scan's skills, for loads.
    catalog: Mutex<Arc<Catalog>>,
}

impl DirectorySkillDiscoverer {
    /// A source over `roots` with nagents' default bounds. Fails only when a relative root
    /// cannot be made absolute (no current directory) or `~` cannot be expanded.
    pub fn new<I, P>(roots: I) -> std::io::Result<Self>
    where
        I: IntoIterator<Item = P>,
        P: AsRef<OsStr>,
    {
        let max_entries = NonZeroUsize::new(DEFAULT_MAX_ENTRIES).expect("nonzero");
        Self::with_limits(roots, max_entries, DEFAULT_MAX_DEPTH)
    }

    /// A source over `roots` with explicit bounds.
    pub fn with_limits<I, P>(roots: I, max_entries: NonZeroUsize, max_depth: usize) -> std::io::Result<Self>
    where
        I: IntoIterator<Item = P>,
        P: AsRef<OsStr>,
    {
        let roots = roots.into_iter().map(|root| AbsoluteRoot::new(root.as_ref())).collect::<Result<_, _>>()?;
        Ok(Self::from_roots(roots, max_entries, max_depth))
    }

    /// A source over already-absolute roots.
    pub fn from_roots(roots: Vec<AbsoluteRoot>, max_entries: NonZeroUsize, max_depth: usize) -> Self {
        let inner = Inner { roots, max_entries: max_entries.get(), max_depth, catalog: Mutex::default() };
        DirectorySkillDiscoverer { inner: Arc::new(inner) }
    }

    pub fn roots(&self) -> &[AbsoluteRoot] {
        &self.inner.roots
    }

    pub fn max_entries(&self) -> usize {
        self.inner.max_entries
    }

    pub fn max_depth(&self) -> usize {
        self.inner.max_depth
    }

    /// Scans synchronously on the calling thread (the async methods run this off the executor).
    pub fn scan_blocking(&self) -> Result<Discovery, SkillError> {
        let config = &self.inner;
        let outcome = walk::scan(&config.roots, config.max_entries, config.max_depth);
        // Out of descriptors or memory, the walk learns nothing about the files: the scan fails
        // rather than report folders as empty (where nagents would list a diagnostic).
        if let Some((path, source)) = outcome.exhausted {
            return Err(SkillError::Io { context: format!("the scan stopped at {path}"), source });
        }
        let catalog = Catalog::new(outcome.found)?;
        let skills = catalog.0.iter().map(|found| found.skill.clone()).collect();
        let versions = catalog.0.iter().map(|found| found.version).collect();
        *self.inner.catalog.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(catalog);
        Ok(Discovery { skills, versions, diagnostics: outcome.diagnostics })
    }

    /// Re-reads `skill`'s file through the same guarded opens as discovery.
    pub fn load_blocking(&self, skill: &Skill) -> Result<String, SkillError> {
        let catalog = Arc::clone(&self.inner.catalog.lock().unwrap_or_else(PoisonError::into_inner));
        let found = catalog
            .get(skill.name())
            .filter(|found| found.skill == *skill)
            .ok_or_else(|| SkillError::NotInCatalog { name: skill.name().clone(), catalog: "directory" })?;
        let changed = || SkillError::Changed { name: skill.name().clone() };
        let root = &self.inner.roots[found.root];
        let folders = folders_below(root, skill.location());
        let root_fd = guarded::open_root(root.as_bytes()).map_err(|_| changed())?;
        let folder = guarded::open_beneath(root_fd.as_fd(), &folders).map_err(|error| {
            let swapped =
                [rustix::io::Errno::LOOP, rustix::io::Errno::XDEV, rustix::io::Errno::NOENT, rustix::io::Errno::NOTDIR]
                    .iter()
                    .any(|errno| error.raw_os_error() == Some(errno.raw_os_error()));
            if swapped {
                changed()
            } else {
                SkillError::Io { context: format!("cannot open the folder of skill '{}'", skill.name()), source: error }
            }
        })?;
        let content = guarded::read_skill_file(folder.as_fd()).map_err(|_| changed())?;
        let folder_name = folders.last().copied().unwrap_or_else(|| root.name());
        match parse_skill_metadata(&content, skill.location(), &String::from_utf8_lossy(folder_name)) {
            Ok(current) if current == *skill => Ok(content),
            _ => Err(changed()),
        }
    }
}

/// One scan's skills in name order.
#[derive(Debug, Default)]
struct Catalog(Vec<Found>);

impl Catalog {
    /// Orders a scan's skills by name, refusing a name found twice as nagents' `skill_catalog`
    /// does: the error names the duplicate that the walk met first.
    fn new(found: Vec<Found>) -> Result<Self, SkillError> {
        Ok(Catalog(sorted_catalog(found, |found| &found.skill)?))
    }

    fn get(&self, name: &SkillName) -> Option<&Found> {
        self.0.binary_search_by(|found| found.skill.name().cmp(name)).ok().map(|index| &self.0[index])
    }
}

/// The folders from `root` down to the one holding the `SKILL.md` at `location`.
fn folders_below<'a>(root: &AbsoluteRoot, location: &'a str) -> Vec<&'a [u8]> {
    let below = location.as_bytes().get(root.as_bytes().len()..).unwrap_or_default();
    let below = below.strip_suffix(b"SKILL.md").unwrap_or(below);
    below.split(|&b| b == b'/').filter(|part| !part.is_empty()).collect()
}

#[async_trait]
impl SkillDiscoverer for DirectorySkillDiscoverer {
    async fn scan(&self) -> Result<Discovery, SkillError> {
        let this = self.clone();
        run_blocking(move || this.scan_blocking()).await
    }

    async fn load(&self, skill: &Skill) -> Result<String, SkillError> {
        let (this, skill) = (self.clone(), skill.clone());
        run_blocking(move || this.load_blocking(&skill)).await
    }
}

async fn run_blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(error) => std::panic::resume_unwind(error.into_panic()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set in the child process that runs the exhausted scan.
    const CHILD: &str = "SKILLCAT_TEST_EXHAUSTED_CHILD";

    /// Out of descriptors, a scan fails; it never reports the folders it could not open as empty.
    /// The descriptor limit is lowered in a child process (this same test binary, running only
    /// this test), since it would starve every other test running beside it.
    #[test]
    fn a_scan_out_of_descriptors_fails_rather_than_reporting_empty_folders() {
        if std::env::var_os(CHILD).is_none() {
            let output = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "directory::tests::a_scan_out_of_descriptors_fails_rather_than_reporting_empty_folders",
                ])
                .args(["--test-threads", "1", "--nocapture"])
                .env(CHILD, "1")
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
            assert!(stdout.contains("1 passed"), "the child ran the test: {stdout}");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        // Deep enough that the walk holds more folders open than the limit leaves.
        let mut folder = dir.path().to_path_buf();
        for depth in 0..12 {
            for sibling in 0..4 {
                let skill = folder.join(format!("s{sibling}"));
                std::fs::create_dir_all(&skill).unwrap();
                std::fs::write(skill.join("SKILL.md"), format!("---\nname: s{depth}x{sibling}\ndescription: d\n---\n"))
                    .unwrap();
            }
            folder = folder.join("s0");
        }
        let discoverer = DirectorySkillDiscoverer::new([dir.path()]).unwrap();
        assert_eq!(discoverer.scan_blocking().unwrap().skills.len(), 48, "the whole tree, with descriptors");
        let open = std::fs::read_dir("/proc/self/fd").unwrap().count();
        let limit = rustix::process::Rlimit { current: Some(open as u64 + 4), maximum: Some(open as u64 + 4) };
        rustix::process::setrlimit(rustix::process::Resource::Nofile, limit).unwrap();
        let error = discoverer.scan_blocking().expect_err("out of descriptors");
        assert!(matches!(&error, SkillError::Io { source, .. } if source.raw_os_error() == Some(24)), "{error}");
        assert!(error.to_string().starts_with("the scan stopped at "), "{error}");
    }
}
