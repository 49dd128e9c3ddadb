//! Skills in folders on disk, discovered without ever following a symlink beneath a root.

mod files;
pub(crate) mod guarded;
pub(crate) mod listing;
mod path;
mod walk;

use std::ffi::OsStr;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, AsRawFd as _, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use self::files::{Hashes, Listed, Lister};
pub use self::guarded::MAX_FILE_BYTES;
use self::guarded::OpenFileError;
pub use self::path::AbsoluteRoot;
use self::walk::{Found, Picture};
use crate::discover::{Discovery, SkillDiscoverer, SkillError, sorted_catalog};
use crate::files::{FileListing, FilesUnavailable, SkillFilePath};
use crate::metadata::parse_skill_metadata;
use crate::skill::Skill;

pub const DEFAULT_MAX_ENTRIES: usize = 10_000;
pub const DEFAULT_MAX_DEPTH: usize = 16;
/// Threads that list skills' files, at most; each lists at least this many skills.
const MAX_LISTING_THREADS: usize = 4;
const MIN_SKILLS_PER_THREAD: usize = 64;

/// Told of each folder a full walk opens, before the walk lists it, and of the folders listed in
/// it: a file watcher places its watches from the walk this way, on the descriptor the walk lists,
/// instead of walking the tree a second time (see
/// [`DirectorySkillDiscoverer::observe_next_walk`]). Called from the walk's threads.
pub trait FolderObserver: Send + Sync {
    /// `folder` is open at `path` (absolute, beneath a root as the walk names it; the root itself
    /// when `root`) and is listed next. What is answered comes back with the listing; `None`: the
    /// listing is of no interest.
    fn opened(&self, path: &[u8], folder: BorrowedFd<'_>, root: bool) -> Option<u64>;

    /// The folders listed in the folder `opened` answered `token` for (real folders, never
    /// symlinks), in listing order. The walk opens some of them next, not necessarily all: those
    /// beyond its bounds it leaves alone.
    fn listed(&self, token: u64, path: &[u8], subfolders: &mut dyn Iterator<Item = &[u8]>);
}

/// Discovers `SKILL.md` files under explicitly configured roots.
///
/// Roots are made absolute lexically and walked in order. Every entry (directories and symlinks
/// included) counts against `max_entries`; a directory whose listing does not fit in what remains
/// yields nothing and ends the walk. Folders deeper than `max_depth` (the root is 0) are not
/// entered. Symlinks beneath a root are never followed; the root itself may be one, and is
/// resolved once per scan. Skipped files are reported as diagnostics, at most 20. A scan that
/// runs out of descriptors or memory (EMFILE, ENFILE, ENOMEM, ENOBUFS) fails as a whole.
///
/// A scan also lists the files of every skill (the regular files beneath the folder holding its
/// `SKILL.md`, nested skills' included; see [`FileListing`]) by the same guarded walk, with
/// bounds of its own, independent of `max_entries` and `max_depth`. Digests are SHA-256; a
/// rescan reads only files whose (device, inode, size, modification and change times) differ
/// from what the previous scan saw, and a `SKILL.md` the walk read whole is not read again for
/// its digest (the walk takes it, under the same conditions as the listing's own reads). A first
/// scan lists the files of a skill whose folder holds no folders while its walk has the folder
/// open; the others, and every skill on later scans, are listed after the walk.
///
/// [`descriptors_only`](Self::descriptors_only) makes a source of nagents' view alone: no file
/// listings, no digests, nothing kept for rescans (a command that answers once).
///
/// Clones share the catalog of the last scan and the digests.
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
    /// The digests of the files the last scan listed, by their status.
    hashes: Mutex<Arc<Hashes>>,
    /// Files read to be hashed, over all scans.
    files_hashed: AtomicU64,
    /// How long ago a file must have changed for its digest to be trusted at the next scan.
    settle_seconds: i64,
    /// What the last scan saw of the folders, for a rescan of only what changed (`None` until a
    /// scan succeeds, and after one that could not see everything).
    picture: Mutex<Option<Seen>>,
    /// Paths changed since the file listings of `catalog` were made, by rescans that failed (a
    /// name listed twice): the next rescan lists the files beneath them again.
    unlisted: Mutex<Vec<Vec<u8>>>,
    /// Whether scans list files and keep what a rescan starts from (the folder view); `false`
    /// for nagents' view alone.
    folder_view: bool,
    /// Told of the folders the next full walk opens (see [`FolderObserver`]).
    observer: Mutex<Option<Arc<dyn FolderObserver>>>,
}

impl std::fmt::Debug for dyn FolderObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FolderObserver")
    }
}

/// The folders a scan saw, and where each root resolved to then (the paths a file watcher
/// reports changes under).
#[derive(Debug)]
struct Seen {
    picture: Picture,
    resolved: Vec<Option<PathBuf>>,
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
        let inner = Inner {
            roots,
            max_entries: max_entries.get(),
            max_depth,
            catalog: Mutex::default(),
            hashes: Mutex::default(),
            files_hashed: AtomicU64::new(0),
            settle_seconds: files::SETTLE_SECONDS,
            picture: Mutex::default(),
            unlisted: Mutex::default(),
            folder_view: true,
            observer: Mutex::default(),
        };
        DirectorySkillDiscoverer { inner: Arc::new(inner) }
    }

    /// This source as nagents sees skills: its scans read and parse every `SKILL.md` in the same
    /// walk, with the same bounds and diagnostics, but list no skill's files (the discovery's
    /// [`files`](Discovery::files) is empty, as a source that lists none gives it), hash nothing
    /// and keep no picture of the folders for rescans ([`rescan_blocking`](Self::rescan_blocking)
    /// always answers `None`). Loads work as before. For a command that answers once.
    pub fn descriptors_only(self) -> Self {
        let mut inner = Arc::try_unwrap(self.inner).unwrap_or_else(|shared| Inner {
            roots: shared.roots.clone(),
            max_entries: shared.max_entries,
            max_depth: shared.max_depth,
            catalog: Mutex::default(),
            hashes: Mutex::default(),
            files_hashed: AtomicU64::new(0),
            settle_seconds: shared.settle_seconds,
            picture: Mutex::default(),
            unlisted: Mutex::default(),
            folder_view: true,
            observer: Mutex::default(),
        });
        inner.folder_view = false;
        DirectorySkillDiscoverer { inner: Arc::new(inner) }
    }

    /// Whether scans list each skill's files (see [`descriptors_only`](Self::descriptors_only)).
    pub fn lists_files(&self) -> bool {
        self.inner.folder_view
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

    /// Has `observer` told of every folder the next full walk from disk opens, and of what is
    /// listed there (a scan, not a rescan from changes). The walk is the same with or without it.
    pub fn observe_next_walk(&self, observer: Arc<dyn FolderObserver>) {
        *lock(&self.inner.observer) = Some(observer);
    }

    /// Scans synchronously on the calling thread (the async methods run this off the executor).
    pub fn scan_blocking(&self) -> Result<Discovery, SkillError> {
        let config = &self.inner;
        *lock(&config.picture) = None;
        let observer = lock(&config.observer).take();
        // With a folder view, the walk takes the digests of the `SKILL.md` files it reads, so that
        // listing the skills' files after it does not read them again.
        let digests = config.folder_view.then(|| Arc::clone(&lock(&config.hashes)));
        // With no listings from a last scan to reuse, the walk lists each skill's files while it
        // has the folder open, rather than the listing after it opening every folder again.
        let settle_seconds =
            (config.folder_view && lock(&config.catalog).found.is_empty()).then_some(config.settle_seconds);
        let (roots, max_entries, max_depth) = (&config.roots, config.max_entries, config.max_depth);
        let outcome = walk::scan(roots, max_entries, max_depth, config.folder_view, observer, digests, settle_seconds);
        if !config.folder_view {
            return self.descriptors(outcome);
        }
        self.conclude(outcome, None)
    }

    /// Scans again after changes at `changed`, absolute paths as a file watcher reports them
    /// (beneath the folders the roots resolved to at the last scan), listing from disk only the
    /// folders a change may have touched and the files of the skills whose folders it did: the
    /// rest is taken from what the last scan saw. The outcome is exactly a full scan's as long as
    /// `changed` names every change since the last scan. `None` when only a full scan can tell:
    /// there was no successful scan before, a change touched a root itself, a root resolves to
    /// another folder now, or the tree changed under this scan; call
    /// [`scan_blocking`](Self::scan_blocking) then.
    pub fn rescan_blocking(&self, changed: &[PathBuf]) -> Option<Result<Discovery, SkillError>> {
        let config = &self.inner;
        // Without a folder view no picture is kept: `None`, so a full scan runs.
        let Seen { mut picture, resolved } = lock(&config.picture).take()?;
        let mut touched: Vec<Vec<u8>> = Vec::new();
        for path in changed {
            for (root, resolved) in config.roots.iter().zip(&resolved) {
                let Some(resolved) = resolved else { continue };
                let Ok(rest) = path.strip_prefix(resolved) else { continue };
                if rest.as_os_str().is_empty() {
                    return None;
                }
                let lexical = path::join(root.as_bytes(), rest.as_os_str().as_encoded_bytes());
                picture.forget(&lexical);
                touched.push(lexical);
            }
        }
        let digests = Some(Arc::clone(&lock(&config.hashes)));
        let outcome = walk::scan_from(&config.roots, config.max_entries, config.max_depth, picture, digests);
        if outcome.lost {
            return None;
        }
        Some(self.conclude(outcome, Some(&touched)))
    }

    /// Whether `path` lies beneath a root as the last scan resolved it (a change there can be
    /// given to [`rescan_blocking`](Self::rescan_blocking)); `false` before a successful scan.
    pub fn covers(&self, path: &std::path::Path) -> bool {
        lock(&self.inner.picture).as_ref().is_some_and(|seen| {
            seen.resolved.iter().flatten().any(|resolved| path.starts_with(resolved) && path != resolved)
        })
    }

    /// Folders the last scan saw and keeps for the next rescan.
    pub fn folders_seen(&self) -> usize {
        lock(&self.inner.picture).as_ref().map_or(0, |seen| seen.picture.len())
    }

    /// The discovery of a walk's outcome in nagents' view: the descriptors, their content versions
    /// and the diagnostics; no files listed, nothing kept for a rescan.
    fn descriptors(&self, outcome: walk::Outcome) -> Result<Discovery, SkillError> {
        if let Some((path, source)) = outcome.exhausted {
            return Err(SkillError::Io { context: format!("the scan stopped at {path}"), source });
        }
        let found = sorted_catalog(outcome.found, |found| &found.skill)?;
        let skills = found.iter().map(|found| found.skill.clone()).collect();
        let versions = found.iter().map(|found| found.version).collect();
        *lock(&self.inner.catalog) = Arc::new(Catalog { found, files: Vec::new() });
        Ok(Discovery { skills, versions, files: Vec::new(), diagnostics: outcome.diagnostics })
    }

    /// The discovery of a walk's outcome. `touched`: for a rescan, the paths whose changes it
    /// covers (lexical, beneath the roots); the files of skills whose folders hold none of them
    /// are taken from the last scan.
    fn conclude(&self, mut outcome: walk::Outcome, touched: Option<&[Vec<u8>]>) -> Result<Discovery, SkillError> {
        // Out of descriptors or memory, the walk learns nothing about the files: the scan fails
        // rather than report folders as empty (where nagents would list a diagnostic).
        if let Some((path, source)) = outcome.exhausted {
            return Err(SkillError::Io { context: format!("the scan stopped at {path}"), source });
        }
        let resolved = outcome
            .roots
            .iter()
            .map(|fd| fd.as_ref().and_then(|fd| std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()))
            .collect();
        let picture = std::mem::take(&mut outcome.picture);
        *lock(&self.inner.picture) = Some(Seen { picture, resolved });
        // The listings to reuse are those of the last scan that succeeded: what changed since
        // includes what rescans that failed meanwhile saw (after a full walk that failed, all).
        let mut unlisted = std::mem::take(&mut *lock(&self.inner.unlisted));
        match touched {
            Some(touched) => unlisted.extend_from_slice(touched),
            None => unlisted = self.inner.roots.iter().map(|root| root.as_bytes().to_vec()).collect(),
        }
        let mut found = match sorted_catalog(outcome.found, |found| &found.skill) {
            Ok(found) => found,
            Err(error) => {
                *lock(&self.inner.unlisted) = unlisted;
                return Err(error);
            }
        };
        let touched = touched.map(|_| unlisted.as_slice());
        let previous = Arc::clone(&lock(&self.inner.catalog));
        let reused: Vec<Option<Arc<FileListing>>> = match touched {
            // Those the walk listed while their folders were open.
            None => found.iter_mut().map(|found| found.files.take()).collect(),
            Some(touched) => {
                // Both in name order: one pass over the two.
                let mut known = previous.found.iter().zip(&previous.files).peekable();
                found
                    .iter()
                    .map(|found| {
                        while known.next_if(|(known, _)| known.skill.name() < found.skill.name()).is_some() {}
                        let (known, files) = known.next_if(|(known, _)| known.skill.name() == found.skill.name())?;
                        let folder = found.skill.location().as_bytes();
                        let folder = &folder[..folder.len() - "/SKILL.md".len()];
                        let within = |inner: &[u8], outer: &[u8]| {
                            inner.starts_with(outer) && (inner.len() == outer.len() || inner[outer.len()] == b'/')
                        };
                        let untouched = !touched.iter().any(|path| within(path, folder) || within(folder, path));
                        (known.skill == found.skill && known.root == found.root && untouched).then(|| Arc::clone(files))
                    })
                    .collect()
            }
        };
        // For files that keep changing under every read: the last scan's listing of each skill
        // listed now (a reused listing is not listed again).
        let known: Vec<Option<Arc<FileListing>>> = found
            .iter()
            .zip(&reused)
            .map(|(found, reused)| {
                if reused.is_some() {
                    return None;
                }
                let index = previous.found.binary_search_by(|known| known.skill.name().cmp(found.skill.name())).ok()?;
                previous.files.get(index).cloned()
            })
            .collect();
        let seeded: Hashes = std::mem::take(&mut outcome.digests).into_iter().collect();
        // Read and hashed by the walk rather than by the listing.
        self.inner.files_hashed.fetch_add(seeded.len() as u64 + outcome.by_walk.hashed, Ordering::Relaxed);
        // The digests the walk's own listings took: known to the listing after it (a skill
        // enclosing one the walk listed reads none of its files again), and kept for the next scan.
        let carried = std::mem::take(&mut outcome.by_walk.hashes);
        let carrying = !carried.is_empty();
        if carrying {
            let mut hashes = lock(&self.inner.hashes);
            if hashes.is_empty() {
                *hashes = Arc::new(carried);
            } else {
                Arc::make_mut(&mut hashes).extend(carried);
            }
        }
        let keep = touched.is_some() || carrying;
        let files = match self.list_files(&found, &outcome.roots, &reused, &known, seeded, keep) {
            Ok(files) => files,
            Err(error) => {
                *lock(&self.inner.unlisted) = unlisted;
                return Err(error);
            }
        };
        // A listing equal to the last scan's is that one: after a full walk, the catalog served
        // (which holds the last scan's listings) and this source share them rather than each
        // keeping a copy of every skill's files.
        let files = (files.into_iter().zip(&known))
            .map(|(listed, known)| match known {
                Some(known) if **known == *listed => Arc::clone(known),
                _ => listed,
            })
            .collect();
        let catalog = Catalog { found, files };
        let skills = catalog.found.iter().map(|found| found.skill.clone()).collect();
        let versions = catalog.found.iter().map(|found| found.version).collect();
        let files = catalog.files.clone();
        *lock(&self.inner.catalog) = Arc::new(catalog);
        Ok(Discovery { skills, versions, files, diagnostics: outcome.diagnostics })
    }

    /// Re-reads `skill`'s file through the same guarded opens as discovery.
    pub fn load_blocking(&self, skill: &Skill) -> Result<String, SkillError> {
        let catalog = Arc::clone(&self.inner.catalog.lock().unwrap_or_else(PoisonError::into_inner));
        let (found, _) = catalog.current(skill)?;
        let changed = || SkillError::Changed { name: skill.name().clone() };
        let root = &self.inner.roots[found.root];
        let folders = folders_below(root, skill.location());
        let folder = self.open_folder(skill, found, &folders)?;
        let content = guarded::read_skill_file(folder.as_fd()).map_err(|_| changed())?;
        let folder_name = folders.last().copied().unwrap_or_else(|| root.name());
        match parse_skill_metadata(&content, skill.location(), &String::from_utf8_lossy(folder_name)) {
            Ok(current) if current == *skill => Ok(content),
            _ => Err(changed()),
        }
    }

    /// Opens the file at `path` of `skill`, which must be this source's current descriptor and
    /// `path` one of its listed files: beneath the skill folder without following a symlink,
    /// without blocking on a FIFO, and checked to be a regular file. Gives the open file and its
    /// size now; the caller reads it and compares what it reads with the digest it holds (a
    /// mismatch means the listing it has is stale).
    pub fn open_file_blocking(&self, skill: &Skill, path: &SkillFilePath) -> Result<(std::fs::File, u64), SkillError> {
        let catalog = Arc::clone(&self.inner.catalog.lock().unwrap_or_else(PoisonError::into_inner));
        let (found, listing) = catalog.current(skill)?;
        let changed = || SkillError::Changed { name: skill.name().clone() };
        if listing.and_then(|listing| listing.get(path)).is_none() {
            return Err(changed());
        }
        let mut folders = folders_below(&self.inner.roots[found.root], skill.location());
        folders.extend(path.folders().map(str::as_bytes));
        let folder = self.open_folder(skill, found, &folders)?;
        let (fd, stat) = guarded::open_regular(folder.as_fd(), path.file_name().as_bytes()).map_err(|error| {
            use rustix::io::Errno;
            match error {
                // Removed, or replaced by a symlink, a socket or something else than a file.
                OpenFileError::Os(Errno::NOENT | Errno::LOOP | Errno::NXIO | Errno::NOTDIR)
                | OpenFileError::NotRegular => changed(),
                OpenFileError::Os(errno) => file_error(skill, path, errno.into()),
            }
        })?;
        Ok((std::fs::File::from(fd), u64::try_from(stat.st_size).unwrap_or(0)))
    }

    /// Reads the file at `path` of `skill` as [`open_file_blocking`](Self::open_file_blocking)
    /// opens it, to at most `max_bytes` (a file now larger is [`SkillError::Changed`]).
    pub fn read_file_blocking(
        &self,
        skill: &Skill,
        path: &SkillFilePath,
        max_bytes: u64,
    ) -> Result<Vec<u8>, SkillError> {
        let (file, size) = self.open_file_blocking(skill, path)?;
        let limit = usize::try_from(max_bytes).unwrap_or(usize::MAX);
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        let mut content = Vec::new();
        guarded::read_limited(file.as_fd(), size, limit, &mut content)
            .map_err(|error| file_error(skill, path, error))?;
        if content.len() > limit {
            return Err(SkillError::Changed { name: skill.name().clone() });
        }
        Ok(content)
    }

    /// As [`read_file_blocking`](Self::read_file_blocking), off the async executor.
    pub async fn read_file(&self, skill: &Skill, path: &SkillFilePath, max_bytes: u64) -> Result<Vec<u8>, SkillError> {
        let (this, skill, path) = (self.clone(), skill.clone(), path.clone());
        run_blocking(move || this.read_file_blocking(&skill, &path, max_bytes)).await
    }

    /// Files read to be hashed by this source's scans so far (unchanged files are not read).
    #[cfg(test)]
    pub(crate) fn files_hashed(&self) -> u64 {
        self.inner.files_hashed.load(Ordering::Relaxed)
    }

    /// Opens `folders` beneath the root of `found` (the skill's folder, or one inside it).
    fn open_folder(&self, skill: &Skill, found: &Found, folders: &[&[u8]]) -> Result<OwnedFd, SkillError> {
        let changed = || SkillError::Changed { name: skill.name().clone() };
        let root_fd = guarded::open_root(self.inner.roots[found.root].as_bytes()).map_err(|_| changed())?;
        guarded::open_beneath(root_fd.as_fd(), folders).map_err(|error| {
            let swapped =
                [rustix::io::Errno::LOOP, rustix::io::Errno::XDEV, rustix::io::Errno::NOENT, rustix::io::Errno::NOTDIR]
                    .iter()
                    .any(|errno| error.raw_os_error() == Some(errno.raw_os_error()));
            if swapped {
                changed()
            } else {
                SkillError::Io { context: format!("cannot open the folder of skill '{}'", skill.name()), source: error }
            }
        })
    }

    /// Lists the files of every skill of a scan (`found` in name order), from the roots as the
    /// walk opened them, on a few threads. A nested skill's listing is cut from its enclosing
    /// skill's when that one is complete and entered its folder, so no folder is walked twice.
    /// `reused[i]`: the listing of `found[i]` known to be current (it is not listed again).
    /// `seeded`: the digests the walk took of the files it read.
    /// `keep`: the digests of files not listed now are kept for later scans (a rescan of a few
    /// skills, or a first scan whose walk listed files); otherwise only those of the files listed
    /// now are.
    fn list_files(
        &self,
        found: &[Found],
        roots: &[Option<Arc<OwnedFd>>],
        reused: &[Option<Arc<FileListing>>],
        known: &[Option<Arc<FileListing>>],
        seeded: Hashes,
        keep: bool,
    ) -> Result<Vec<Arc<FileListing>>, SkillError> {
        // Taken out while listing, so that a pass that keeps it can add to it without a copy.
        let previous = std::mem::take(&mut *lock(&self.inner.hashes));
        // Only for the skills listed now (none is asked of a reused one).
        let folders: Vec<Vec<&[u8]>> = found
            .iter()
            .zip(reused)
            .map(|(found, reused)| match reused {
                Some(_) => Vec::new(),
                None => folders_below(&self.inner.roots[found.root], found.skill.location()),
            })
            .collect();
        // Enclosing folders before the folders inside them, and each folder's nested skills right
        // after it: the order of their paths as bytes, each ending in `/` (a path's extensions
        // follow it together).
        let listed: Vec<usize> = (0..found.len()).filter(|&index| reused[index].is_none()).collect();
        let paths: Vec<(usize, &[u8])> = (listed.iter())
            .map(|&index| {
                let location = found[index].skill.location().as_bytes();
                (found[index].root, location.strip_suffix(guarded::SKILL_FILE.as_bytes()).unwrap_or(location))
            })
            .collect();
        let order: Vec<usize> =
            crate::order::positions_in_order(&paths).into_iter().map(|position| listed[position]).collect();
        // Consecutive runs of that order, one per thread: a nested skill whose enclosing skill
        // fell in another run is walked on its own, to the same listing.
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_LISTING_THREADS)
            .min(order.len().div_ceil(MIN_SKILLS_PER_THREAD))
            .max(1);
        let seeded = Arc::new(seeded);
        let pass = FilePass {
            source: self,
            found,
            folders: &folders,
            roots,
            previous: &previous,
            seeded: &seeded,
            known,
            threads,
        };
        let runs: Vec<&[usize]> = order.chunks(order.len().div_ceil(threads).max(1)).collect();
        let results: Vec<Result<Run, SkillError>> = std::thread::scope(|scope| {
            let helpers: Vec<_> = runs
                .iter()
                .skip(1)
                .map(|run| {
                    std::thread::Builder::new()
                        .name("skill-files".into())
                        .spawn_scoped(scope, || pass.run(run))
                        .expect("cannot start a listing thread")
                })
                .collect();
            let first = runs.first().map(|run| pass.run(run));
            first
                .into_iter()
                .chain(helpers.into_iter().map(|helper| helper.join().unwrap_or_else(|p| std::panic::resume_unwind(p))))
                .collect()
        });
        let mut listings = reused.to_vec();
        let mut hashes =
            if keep { Arc::try_unwrap(previous).unwrap_or_else(|shared| (*shared).clone()) } else { Hashes::default() };
        for run in results {
            let Run { listings: listed, hashes: seen, hashed } = run?;
            for (index, listing) in listed {
                listings[index] = Some(listing);
            }
            self.inner.files_hashed.fetch_add(hashed, Ordering::Relaxed);
            hashes = files::union(hashes, seen);
        }
        if !keep {
            // Each thread's map grew on its own, and the largest took in the others: kept until
            // the next scan, so no room to grow.
            hashes.shrink_to_fit();
        }
        *lock(&self.inner.hashes) = Arc::new(hashes);
        Ok(listings.into_iter().map(|listing| listing.expect("every skill is listed")).collect())
    }

    fn list_skill(
        &self,
        lister: &mut Lister,
        roots: &[Option<Arc<OwnedFd>>],
        found: &Found,
        below: &[&[u8]],
    ) -> Result<Listed, SkillError> {
        let unavailable = |message: String| Listed {
            listing: FileListing::unavailable(FilesUnavailable::Unreadable { message }),
            folders: Vec::new(),
        };
        let stopped = |inside: &str, source| {
            let mut path = self.inner.roots[found.root].as_bytes().to_vec();
            for part in below.iter().copied().chain(inside.split('/').map(str::as_bytes)) {
                if !part.is_empty() {
                    path = path::join(&path, part);
                }
            }
            SkillError::Io { context: format!("the scan stopped at {}", String::from_utf8_lossy(&path)), source }
        };
        let Some(root_fd) = &roots[found.root] else {
            return Ok(unavailable("the root could not be opened again".to_owned()));
        };
        match guarded::open_beneath(root_fd.as_fd(), below) {
            Ok(folder) => lister.list(folder.as_fd()).map_err(|exhausted| stopped(&exhausted.path, exhausted.error)),
            Err(error)
                if error.raw_os_error().map(rustix::io::Errno::from_raw_os_error).is_some_and(guarded::exhausted) =>
            {
                Err(stopped("", error))
            }
            Err(error) => Ok(unavailable(error.to_string())),
        }
    }
}

/// The listing of the files of one scan's skills, shared by its threads.
struct FilePass<'a> {
    source: &'a DirectorySkillDiscoverer,
    found: &'a [Found],
    /// The folders from its root down to each skill's folder.
    folders: &'a [Vec<&'a [u8]>],
    roots: &'a [Option<Arc<OwnedFd>>],
    previous: &'a Arc<Hashes>,
    /// The digests this scan's walk took.
    seeded: &'a Arc<Hashes>,
    /// The last scan's listing of each skill, if it had one.
    known: &'a [Option<Arc<FileListing>>],
    threads: usize,
}

/// What one thread listed: listings by index in `found`, the digests it saw, the files it read.
struct Run {
    listings: Vec<(usize, Arc<FileListing>)>,
    hashes: Hashes,
    hashed: u64,
}

impl FilePass<'_> {
    /// Lists the skills `run` (indexes in `found`, enclosing folders first).
    fn run(&self, run: &[usize]) -> Result<Run, SkillError> {
        let (found, folders) = (self.found, self.folders);
        let capacity = self.previous.len() / self.threads;
        let mut lister =
            Lister::new(Arc::clone(self.previous), Arc::clone(self.seeded), self.source.inner.settle_seconds, capacity);
        let mut listings = Vec::with_capacity(run.len());
        // The complete listings of the skills enclosing the current one, outermost first.
        let mut enclosing: Vec<(usize, Arc<FileListing>, Vec<String>)> = Vec::new();
        for &index in run {
            let below = &folders[index];
            let encloses = |outer: usize| {
                found[outer].root == found[index].root
                    && below.len() > folders[outer].len()
                    && below.starts_with(&folders[outer])
            };
            while enclosing.last().is_some_and(|(outer, ..)| !encloses(*outer)) {
                enclosing.pop();
            }
            let cut = enclosing.last().and_then(|(outer, listing, entered)| {
                let inside = below[folders[*outer].len()..].join(&b'/');
                let inside = std::str::from_utf8(&inside).ok()?;
                entered.binary_search_by(|folder| folder.as_str().cmp(inside)).ok()?;
                listing.within(inside)
            });
            let listing = match cut {
                Some(listing) => Arc::new(listing),
                None => {
                    lister.fallback = self.known[index].clone();
                    let Listed { listing, folders: entered } =
                        self.source.list_skill(&mut lister, self.roots, &found[index], below)?;
                    let listing = Arc::new(listing);
                    if listing.files().is_ok() {
                        enclosing.push((index, Arc::clone(&listing), entered));
                    }
                    listing
                }
            };
            listings.push((index, listing));
        }
        Ok(Run { listings, hashes: lister.current, hashed: lister.hashed })
    }
}

fn file_error(skill: &Skill, path: &SkillFilePath, source: std::io::Error) -> SkillError {
    SkillError::Io { context: format!("cannot read '{path}' of skill '{}'", skill.name()), source }
}

/// One scan's skills in name order, and their files (none when the scan listed no files).
#[derive(Debug, Default)]
struct Catalog {
    found: Vec<Found>,
    files: Vec<Arc<FileListing>>,
}

impl Catalog {
    /// The scan's entry for `skill` if `skill` is its current descriptor, and its files if the
    /// scan listed them.
    fn current(&self, skill: &Skill) -> Result<(&Found, Option<&FileListing>), SkillError> {
        let index = self.found.binary_search_by(|found| found.skill.name().cmp(skill.name())).ok();
        index
            .filter(|&index| self.found[index].skill == *skill)
            .map(|index| (&self.found[index], self.files.get(index).map(|files| &**files)))
            .ok_or_else(|| SkillError::NotInCatalog { name: skill.name().clone(), catalog: "directory" })
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn run_blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(error) => std::panic::resume_unwind(error.into_panic()),
    }
}

#[cfg(test)]
pub(crate) mod tests;
