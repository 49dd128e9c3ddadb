//! Watching folders for changes with inotify: used by the live catalog (its sources' roots,
//! recursively, and the folders holding symlinked roots) and by the token file's reloader (the
//! folders on the way to the file).
//!
//! A [`Watcher`] is told, again and again, exactly which folders to watch ([`Watcher::watch`]);
//! it moves its watches to match. A folder replaced under the same path (moved away, another
//! moved in) is watched again, since inotify watches inodes.
//!
//! A recursive watch walks its tree through file descriptors: each folder is opened beneath the
//! one holding it (never through a symlink), watched through that descriptor, and only then
//! listed. So no folder is listed before it is watched, and no path is looked up twice. A folder
//! made later beneath a recursive watch is watched the same way, its own folders too, before its
//! creation is reported: a scan that the report asks for reads it after its watches are in place.
//! A recursive watch that meets the kernel's limit on watches stays in place as far as it
//! reached, is reported as a [`WatchGap`] and is placed again later (the limit may have been
//! raised).
//!
//! A recursive watch can also be placed by another walk of the same tree, a directory source's
//! first scan ([`Watcher::watch_through_walk`]): the walk tells a [`WalkWatch`] of each folder it
//! has open, which is watched before the walk lists it, so the tree is walked once, not twice.
//! What the walk did not open (beyond its bounds) the watcher watches itself afterwards
//! ([`Watcher::finish_walk`]). When the walk meets the limit on watches, the tree's gap is the
//! folders the walk found in it, so that a tree too large to watch is not walked twice more to
//! find where the limit stops and how large it is. The walk lists what its bounds let it: the
//! folders inside one beyond its depth bound, or past its bound on entries, are not counted.
//!
//! What the kernel reports arrives as a [`Change`] at the callback the watcher was made with, on
//! the watcher's thread, the events of one read at a time.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fmt;
use std::os::fd::{AsFd, AsRawFd as _, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rustix::event::{EventfdFlags, PollFd, PollFlags};
use rustix::fs::inotify::{self, ReadFlags, WatchFlags};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};
use rustix::io::Errno;

/// How often watches that hit the kernel's limit are tried again (the limit may have been raised).
pub const WATCH_RETRY: Duration = Duration::from_secs(300);

/// How deep a recursive watch goes: deeper folders are not watched, and the watch is reported
/// as failed there (each open level holds a file descriptor while its folders are watched).
const MAX_DEPTH: usize = 256;

/// Large enough for any single directory entry or inotify event (a name is at most 255 bytes).
const BUFFER: usize = 64 * 1024;

/// Whether a watch covers the folders beneath the one named too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecursiveMode {
    Recursive,
    NonRecursive,
}

/// Which changes a watcher reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Events {
    /// Creations, removals, renames, writes and changes of attributes. A read is no change.
    Changes,
    /// Those, and a file closed after writing (a write's end, where `Changes` sees its start).
    ChangesAndCloses,
}

/// What the kernel reported.
#[derive(Debug)]
pub enum Change {
    /// Something changed at these paths: a creation, removal, modification or rename (with
    /// [`Events::ChangesAndCloses`], a file written and closed too).
    Paths(Vec<PathBuf>),
    /// The kernel's event queue overflowed: changes were lost, and folders made meanwhile may have
    /// no watch yet (the next [`Watcher::watch`] should be asked to place every watch again).
    Overflow,
    /// Folders made while running that could not be watched: the limit on watches was reached.
    Unwatched(Vec<PathBuf>),
    /// Another failure: changes beneath `path` may go unseen for good.
    Failed(WatchError),
}

/// A folder that could not be watched, or a failure to read the kernel's events.
#[derive(Debug)]
pub struct WatchError {
    pub path: Option<PathBuf>,
    pub error: std::io::Error,
}

impl WatchError {
    fn at(path: &Path, errno: Errno) -> WatchError {
        WatchError { path: Some(path.to_path_buf()), error: errno.into() }
    }
}

impl fmt::Display for WatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) => write!(f, "{}: {}", path.display(), self.error),
            None => self.error.fmt(f),
        }
    }
}

impl std::error::Error for WatchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// A folder to watch, and who asked (the index of a source, say), for [`WatchGap::owners`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub path: PathBuf,
    pub mode: RecursiveMode,
    pub owner: usize,
    /// The folder's device and inode when it was asked for: a folder replaced under the same path
    /// must be watched again.
    identity: Option<(u64, u64)>,
}

impl Watched {
    pub fn new(path: PathBuf, mode: RecursiveMode, owner: usize) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        let identity = std::fs::metadata(&path).ok().map(|metadata| (metadata.dev(), metadata.ino()));
        Watched { path, mode, owner, identity }
    }
}

/// Folders that could not be watched because the kernel's limit on inotify watches was reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchGap {
    /// Whose folders are left unwatched (each [`Watched::owner`] once, in order).
    pub owners: Vec<usize>,
    /// The limit in force: `fs.inotify.max_user_watches`, or a user namespace's lower limit.
    pub limit: Option<u64>,
    /// Folders beneath the watched trees whose watches met the limit: each needs a watch.
    pub folders: u64,
}

impl WatchGap {
    /// A limit that leaves these folders room next to the watches counted now.
    pub fn suggested_limit(&self) -> u64 {
        (self.limit.unwrap_or(8_192) + self.folders).next_power_of_two()
    }

    fn merge(&mut self, other: &WatchGap) {
        for owner in &other.owners {
            if !self.owners.contains(owner) {
                self.owners.push(*owner);
            }
        }
        self.owners.sort_unstable();
        self.limit = self.limit.or(other.limit);
        self.folders += other.folders;
    }
}

/// What one [`Watcher::watch`] achieved.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Whether every folder asked for (and, for a recursive watch, every folder beneath) is watched.
    pub complete: bool,
    /// What the limit on watches leaves unwatched, while anything is.
    pub gap: Option<WatchGap>,
    /// Whether a folder is watched now that was not before (what changed there before its watch
    /// began is seen only by reading it again).
    pub added: bool,
    /// Watches the kernel refused, by reason.
    pub limit_reached: u64,
    pub failed: u64,
}

/// A recursive watch some of whose folders could not be watched.
struct PartialWatch {
    watch: Watched,
    retry_at: Instant,
    /// The gap as measured when it was found.
    gap: WatchGap,
}

/// The watches of one user of the watcher.
pub struct Watcher {
    shared: Arc<Shared>,
    /// Written to stop the watcher's thread.
    stop: OwnedFd,
    /// What is watched now (a recursive watch that met the limit on watches included).
    watched: Vec<Watched>,
    partial: Vec<PartialWatch>,
    /// Folders that could not be watched for another reason, so that each is logged once.
    unwatchable: Vec<PathBuf>,
}

impl Watcher {
    /// A watcher reporting `events` to `on_change`. Symlinks are never followed.
    pub fn new(events: Events, on_change: impl Fn(Change) + Send + Sync + 'static) -> std::io::Result<Watcher> {
        let inotify = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
        let stop = rustix::event::eventfd(0, EventfdFlags::CLOEXEC)?;
        // A folder's own move or removal too: for a folder asked for, its holder is not watched.
        let mut mask = WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MODIFY
            | WatchFlags::ATTRIB
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF;
        if events == Events::ChangesAndCloses {
            mask |= WatchFlags::CLOSE_WRITE;
        }
        let shared = Arc::new(Shared { inotify, mask, folders: Mutex::default(), on_change: Box::new(on_change) });
        let (reader, stopped) = (Arc::clone(&shared), stop.try_clone()?);
        std::thread::Builder::new().name("skillcat-watch".to_owned()).spawn(move || reader.read(&stopped))?;
        Ok(Watcher { shared, stop, watched: Vec::new(), partial: Vec::new(), unwatchable: Vec::new() })
    }

    /// Watches exactly `wanted` from now on: stale watches are removed, new ones placed, and those
    /// that met the limit on watches placed again when their retry is due (or at once with
    /// `rewatch`, after a queue overflow, which may have lost the watches of new folders).
    /// `unwatched` are folders made since the last call that the watcher could not watch
    /// ([`Change::Unwatched`]). Adding a recursive watch walks its tree: blocking work.
    pub fn watch(&mut self, wanted: Vec<Watched>, unwatched: &[PathBuf], rewatch: bool) -> Outcome {
        let mut outcome = Outcome::default();
        let mut distinct: Vec<Watched> = Vec::with_capacity(wanted.len());
        for watch in wanted {
            if !distinct.contains(&watch) {
                distinct.push(watch);
            }
        }
        let stale: Vec<Watched> = self.watched.iter().filter(|watch| !distinct.contains(watch)).cloned().collect();
        for watch in stale {
            self.watched.retain(|watched| *watched != watch);
            self.partial.retain(|partial| partial.watch != watch);
            // Another request may name the same folder (another source's root, say).
            if !self.watched.iter().any(|watched| watched.path == watch.path) {
                self.shared.folders().unwatch(self.shared.inotify.as_fd(), &watch.path);
            }
        }
        // Folders made while running that met the limit: their tree's watch is partial now.
        for path in unwatched {
            let Some(tree) = self
                .watched
                .iter()
                .find(|watch| watch.mode == RecursiveMode::Recursive && path.starts_with(&watch.path))
            else {
                continue;
            };
            if !self.partial.iter().any(|partial| partial.watch == *tree) {
                let gap = measure_gap(tree);
                self.partial.push(PartialWatch { watch: tree.clone(), retry_at: Instant::now() + WATCH_RETRY, gap });
            }
        }
        let now = Instant::now();
        outcome.complete = true;
        for watch in distinct {
            let due =
                self.partial.iter().position(|partial| partial.watch == watch && (rewatch || partial.retry_at <= now));
            if let Some(due) = due {
                self.partial.remove(due);
            } else if self.watched.contains(&watch) {
                if rewatch && watch.mode == RecursiveMode::Recursive {
                    // After an overflow: the walk watches the folders whose creation was lost (the
                    // others are watched already and stay so).
                    self.place(&watch, &mut outcome);
                }
                continue;
            } else {
                outcome.added = true;
            }
            if !self.place(&watch, &mut outcome) {
                outcome.complete = false;
            }
        }
        self.account_gaps(&mut outcome);
        outcome
    }

    /// Marks `outcome` incomplete, with the gap, while a recursive watch is partial.
    fn account_gaps(&self, outcome: &mut Outcome) {
        for partial in &self.partial {
            outcome.complete = false;
            match &mut outcome.gap {
                Some(gap) => gap.merge(&partial.gap),
                None => outcome.gap = Some(partial.gap.clone()),
            }
        }
    }

    /// Watches `wanted` as [`watch`](Self::watch) does, except the recursive watches that
    /// `through_walk` picks among those not placed yet: those are left to a walk of their trees
    /// told of each folder it opens through the [`WalkWatch`] answered (see
    /// [`DirectorySkillDiscoverer::observe_next_walk`](skillcat_core::DirectorySkillDiscoverer::observe_next_walk)),
    /// and count as watched once [`finish_walk`](Self::finish_walk) is called after the walk.
    pub fn watch_through_walk(
        &mut self,
        wanted: Vec<Watched>,
        through_walk: impl Fn(&Watched) -> bool,
    ) -> (Outcome, Arc<WalkWatch>) {
        let (mut trees, mut now) = (Vec::new(), Vec::new());
        for watch in wanted {
            if watch.mode == RecursiveMode::Recursive && !self.watched.contains(&watch) && through_walk(&watch) {
                if !trees.contains(&watch) {
                    trees.push(watch);
                }
            } else {
                now.push(watch);
            }
        }
        let mut outcome = self.watch(now, &[], false);
        // Not complete before the walk is.
        outcome.complete &= trees.is_empty();
        let walk = WalkWatch {
            shared: Arc::clone(&self.shared),
            state: Mutex::new(WalkState { seen: vec![TreeSeen::default(); trees.len()], ..WalkState::default() }),
            trees,
        };
        (outcome, Arc::new(walk))
    }

    /// Ends the watches a walk placed (see [`watch_through_walk`](Self::watch_through_walk)):
    /// the folders it listed and did not open are watched now, and each tree whose root it did
    /// not open (missing, or resolved elsewhere by then) by the watcher's own walk. What is
    /// watched only now may have changed before: [`Finished::late`] names it, to be read again.
    /// A tree the walk left short at the kernel's limit keeps the watches it placed and is placed
    /// again later, as one the watcher's own walk left short.
    pub fn finish_walk(&mut self, walk: &WalkWatch) -> Finished {
        let state = std::mem::replace(&mut *lock(&walk.state), WalkState { closed: true, ..WalkState::default() });
        let mut finished =
            Finished { outcome: Outcome { complete: true, added: true, ..Outcome::default() }, late: Vec::new() };
        let mut failures = state.failures;
        let mut limit_reached = state.limit_reached;
        if !limit_reached {
            let inotify = self.shared.inotify.as_fd();
            let mut folders = self.shared.folders();
            'parents: for parent in state.parents.values() {
                // Removed since (the kernel dropped its watch): its holder's watch reported it.
                let Some(parent_path) = folders.path(parent.wd) else { continue };
                for name in &parent.unopened {
                    let name = OsStr::from_bytes(name);
                    let path = parent_path.join(name);
                    match folders.adopt(inotify, self.shared.mask, parent.wd, name, &path, &mut failures) {
                        Ok(()) => finished.late.push(path),
                        Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => {}
                        Err(Errno::NOSPC) => {
                            limit_reached = true;
                            break 'parents;
                        }
                        Err(errno) => failures.push(WatchError::at(&path, errno)),
                    }
                }
            }
        }
        for failure in failures {
            (self.shared.on_change)(Change::Failed(failure));
        }
        // At the limit, which trees the walk left folders of unwatched: those listed after the
        // limit was met, and those it listed and did not open (or some of them, when the limit
        // was met watching them here).
        let mut seen = state.seen;
        if limit_reached {
            for (path, parent) in &state.parents {
                if !parent.unopened.is_empty() {
                    for &tree in state.roots.trees_of(path) {
                        seen[tree].short = true;
                    }
                }
            }
        }
        for (tree, seen) in walk.trees.iter().zip(seen) {
            if seen.opened {
                if !self.watched.contains(tree) {
                    self.watched.push(tree.clone());
                }
                if limit_reached && seen.short {
                    // The watches the walk placed stay; the rest is tried again later, and the
                    // gap is what the walk found, so the tree is not walked twice more.
                    finished.outcome.limit_reached += 1;
                    finished.outcome.complete = false;
                    let gap = gap_of(tree, seen.found);
                    self.partial.push(PartialWatch {
                        watch: tree.clone(),
                        retry_at: Instant::now() + WATCH_RETRY,
                        gap,
                    });
                }
                continue;
            }
            // A tree whose root the walk did not open (missing, resolved elsewhere by then, or met
            // at the limit) is the watcher's own walk's, which finds where a limit stops it and
            // measures the gap; it is read again.
            if !self.place(tree, &mut finished.outcome) {
                finished.outcome.complete = false;
            }
            finished.late.push(tree.path.clone());
        }
        self.account_gaps(&mut finished.outcome);
        finished
    }

    /// Places one watch; whether the folder (and, for a recursive one, every folder beneath) is
    /// watched now. A recursive watch that met the kernel's limit stays in place as far as it
    /// reached and is tried again later.
    fn place(&mut self, watch: &Watched, outcome: &mut Outcome) -> bool {
        let mut failures = Vec::new();
        let placed = self.shared.watch_root(&watch.path, watch.mode, &mut failures);
        // Folders beneath that could not be watched (no permission to list them, say).
        for failure in failures {
            (self.shared.on_change)(Change::Failed(failure));
        }
        match placed {
            Ok(()) => {
                if !self.watched.contains(watch) {
                    self.watched.push(watch.clone());
                }
                self.unwatchable.retain(|path| *path != watch.path);
                true
            }
            Err(Errno::NOSPC) => {
                outcome.limit_reached += 1;
                if !self.watched.contains(watch) {
                    self.watched.push(watch.clone());
                }
                let gap = measure_gap(watch);
                self.partial.push(PartialWatch { watch: watch.clone(), retry_at: Instant::now() + WATCH_RETRY, gap });
                false
            }
            Err(errno) => {
                outcome.failed += 1;
                if !self.unwatchable.contains(&watch.path) {
                    let error = std::io::Error::from(errno);
                    tracing::warn!(path = %watch.path.display(), %error, "cannot watch a folder; relying on periodic re-reads");
                    self.unwatchable.push(watch.path.clone());
                }
                false
            }
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // The thread stops at once, closing the inotify descriptor, which removes every watch.
        let _ = rustix::io::write(&self.stop, &1u64.to_ne_bytes());
    }
}

/// What [`Watcher::finish_walk`] did.
#[derive(Debug)]
pub struct Finished {
    pub outcome: Outcome,
    /// Folders watched only after the walk (it did not open them), each with its tree: what
    /// changed there before may have been read by no one, or before the change.
    pub late: Vec<PathBuf>,
}

/// Places recursive watches from another walk of the trees (see [`Watcher::watch_through_walk`]).
pub struct WalkWatch {
    shared: Arc<Shared>,
    /// The trees to watch, each at the folder its root resolves to.
    trees: Vec<Watched>,
    state: Mutex<WalkState>,
}

#[derive(Default)]
struct WalkState {
    /// Set by [`Watcher::finish_walk`]: a walk told of folders later is not listened to.
    closed: bool,
    /// What the walk saw of each tree, in the order of [`WalkWatch::trees`].
    seen: Vec<TreeSeen>,
    /// The roots the walk opened and watched, as it names them, with the trees found at each.
    roots: Roots,
    /// The folders listed with folders in them, by the walk's path for them: their watch, and
    /// the folders in them the walk has not opened (yet).
    parents: HashMap<Box<[u8]>, Parent>,
    /// Set when the kernel's limit on watches was reached: nothing more is placed from the walk.
    limit_reached: bool,
    failures: Vec<WatchError>,
}

/// What a walk saw of one tree it was asked to watch.
#[derive(Clone, Copy, Default)]
struct TreeSeen {
    /// Whether the walk opened the tree's root (as a root of its own).
    opened: bool,
    /// The folders the walk found in the tree: the root and every folder listed beneath it. A tree
    /// met at the limit has this as its gap, rather than a walk of its own.
    found: u64,
    /// Whether the walk left a folder of the tree unwatched.
    short: bool,
}

impl WalkState {
    /// Counts the `subfolders` listed in the folder at `path` (the walk's path) in its trees; and
    /// that the folder is not watched, when `unwatched`.
    fn count(&mut self, path: &[u8], subfolders: u64, unwatched: bool) {
        for &tree in self.roots.trees_of(path) {
            self.seen[tree].found += subfolders;
            self.seen[tree].short |= unwatched;
        }
    }
}

/// The roots a walk opened, as it names them, each with the trees asked for at it.
#[derive(Default)]
struct Roots(Vec<(Box<[u8]>, Vec<usize>)>);

impl Roots {
    /// The trees the folder at `path` (a path of the walk) is in: those of the innermost root it
    /// is beneath.
    fn trees_of(&self, path: &[u8]) -> &[usize] {
        let beneath = |root: &[u8]| {
            path.starts_with(root) && (path.len() == root.len() || root.ends_with(b"/") || path[root.len()] == b'/')
        };
        (self.0.iter())
            .filter(|(root, _)| beneath(root))
            .max_by_key(|(root, _)| root.len())
            .map_or(&[], |(_, trees)| trees.as_slice())
    }
}

/// The token of a folder the walk lists that is not watched (at the limit, or failed): its
/// listing is counted, nothing else. A watch's token is its descriptor, never negative.
const UNWATCHED: u64 = u64::MAX;

struct Parent {
    wd: i32,
    unopened: HashSet<Box<[u8]>>,
}

impl skillcat_core::FolderObserver for WalkWatch {
    fn opened(&self, path: &[u8], folder: BorrowedFd<'_>, root: bool) -> Option<u64> {
        let (parent, name, trees) = {
            let mut state = lock(&self.state);
            if state.closed || (root && state.limit_reached) {
                // A tree whose root is not watched is left to the watcher's own walk.
                return None;
            }
            if root {
                // The trees asked for at the folder this root resolves to, as the walk opened it.
                let resolved = std::fs::read_link(format!("/proc/self/fd/{}", folder.as_raw_fd())).ok()?;
                let trees: Vec<usize> = (self.trees.iter().enumerate())
                    .filter(|(_, tree)| tree.path == resolved)
                    .map(|(index, _)| index)
                    .collect();
                if trees.is_empty() {
                    return None;
                }
                (None, resolved.into_os_string(), trees)
            } else {
                if state.limit_reached {
                    return Some(UNWATCHED);
                }
                let slash = path.iter().rposition(|&b| b == b'/')?;
                let holder = if slash == 0 { &path[..1] } else { &path[..slash] };
                let name = &path[slash + 1..];
                // Beneath a folder that is not watched, or beneath no tree asked for.
                let Some(parent) = state.parents.get_mut(holder) else { return Some(UNWATCHED) };
                parent.unopened.remove(name);
                (Some(parent.wd), OsStr::from_bytes(name).to_os_string(), Vec::new())
            }
        };
        // Watched with no lock held, so that the walk's threads do not wait on one another. An
        // event the watcher's thread reads before the folder is recorded below is dropped: it is
        // of a change made before the walk lists the folder, which the listing sees.
        let watched = add_watch(self.shared.inotify.as_fd(), folder, self.shared.mask);
        let wd = match watched {
            Ok(wd) => wd,
            Err(Errno::NOSPC) => {
                lock(&self.state).limit_reached = true;
                return parent.map(|_| UNWATCHED);
            }
            Err(errno) => {
                let path = match parent {
                    Some(parent) => self.shared.folders().beneath(parent, &name),
                    None => PathBuf::from(name),
                };
                lock(&self.state).failures.push(WatchError::at(&path, errno));
                return parent.map(|_| UNWATCHED);
            }
        };
        match parent {
            Some(parent) => self.shared.folders().child(wd, parent, &name),
            None => {
                self.shared.folders().root(wd, Path::new(&name), true);
                let mut state = lock(&self.state);
                // A tree opened again (beneath two roots of the walk) is counted once.
                let trees: Vec<usize> = trees.into_iter().filter(|&tree| !state.seen[tree].opened).collect();
                for &tree in &trees {
                    state.seen[tree].opened = true;
                    state.seen[tree].found += 1;
                }
                state.roots.0.push((path.into(), trees));
            }
        }
        u64::try_from(wd).ok()
    }

    fn listed(&self, token: u64, path: &[u8], subfolders: &mut dyn Iterator<Item = &[u8]>) {
        let mut state = lock(&self.state);
        if state.closed || state.parents.contains_key(path) {
            return;
        }
        // [`UNWATCHED`] is no descriptor.
        let Ok(wd) = i32::try_from(token) else {
            let count = subfolders.count() as u64;
            state.count(path, count, true);
            return;
        };
        let unopened: HashSet<Box<[u8]>> = subfolders.map(Box::from).collect();
        state.count(path, unopened.len() as u64, false);
        if !unopened.is_empty() {
            state.parents.insert(path.into(), Parent { wd, unopened });
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the watcher's thread and its user share.
struct Shared {
    inotify: OwnedFd,
    /// The events asked of every folder.
    mask: WatchFlags,
    folders: Mutex<Folders>,
    on_change: Box<dyn Fn(Change) + Send + Sync>,
}

impl Shared {
    fn folders(&self) -> MutexGuard<'_, Folders> {
        self.folders.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Watches the folder at `path` (and, recursively, those beneath) as one asked for.
    fn watch_root(&self, path: &Path, mode: RecursiveMode, failures: &mut Vec<WatchError>) -> Result<(), Errno> {
        let fd = open_folder(rustix::fs::CWD, path)?;
        let recursive = mode == RecursiveMode::Recursive;
        let mut folders = self.folders();
        let wd = add_watch(self.inotify.as_fd(), fd.as_fd(), self.mask)?;
        folders.root(wd, path, recursive);
        if recursive { folders.walk(self.inotify.as_fd(), self.mask, fd, wd, path, failures) } else { Ok(()) }
    }

    /// Reads the kernel's events until `stop` is written to.
    fn read(&self, stop: &OwnedFd) {
        let mut buffer: Vec<u8> = Vec::with_capacity(BUFFER);
        loop {
            let mut fds = [PollFd::new(&self.inotify, PollFlags::IN), PollFd::new(stop, PollFlags::IN)];
            match rustix::event::poll(&mut fds, None) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(errno) => {
                    (self.on_change)(Change::Failed(WatchError { path: None, error: errno.into() }));
                    return;
                }
            }
            if !fds[1].revents().is_empty() {
                return;
            }
            if !self.drain(&mut buffer) {
                return;
            }
        }
    }

    /// Takes the events queued now; `false` when no more can be read.
    fn drain(&self, buffer: &mut Vec<u8>) -> bool {
        let mut paths: Vec<PathBuf> = Vec::new();
        let (mut unwatched, mut failures) = (Vec::new(), Vec::new());
        let (mut overflow, mut readable) = (false, true);
        {
            let mut folders = self.folders();
            let mut reader = inotify::Reader::new(&self.inotify, buffer.spare_capacity_mut());
            loop {
                let (wd, flags, name) = match reader.next() {
                    Ok(event) => {
                        let name =
                            event.file_name().map(|name| name.to_bytes().to_vec()).filter(|name| !name.is_empty());
                        (event.wd(), event.events(), name)
                    }
                    Err(Errno::AGAIN) => break,
                    Err(Errno::INTR) => continue,
                    Err(errno) => {
                        failures.push(WatchError { path: None, error: errno.into() });
                        readable = false;
                        break;
                    }
                };
                if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                    overflow = true;
                    continue;
                }
                if flags.contains(ReadFlags::IGNORED) {
                    // The kernel dropped the watch: the folder is gone, or was unwatched.
                    folders.forget(wd);
                    continue;
                }
                let Some(folder) = folders.path(wd) else { continue };
                let path = match &name {
                    Some(name) => folder.join(OsStr::from_bytes(name)),
                    None => folder,
                };
                if let Some(name) = name.filter(|_| flags.contains(ReadFlags::ISDIR)) {
                    let name = OsStr::from_bytes(&name);
                    if flags.contains(ReadFlags::MOVED_FROM) {
                        // Moved elsewhere, maybe out of the tree: watched again where it lands.
                        folders.detach(self.inotify.as_fd(), wd, name);
                    }
                    if flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) && folders.is_recursive(wd) {
                        match folders.adopt(self.inotify.as_fd(), self.mask, wd, name, &path, &mut failures) {
                            Ok(()) => {}
                            // Removed again already, or replaced by a file: the report below says so.
                            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => {}
                            Err(Errno::NOSPC) => unwatched.push(path.clone()),
                            Err(errno) => failures.push(WatchError::at(&path, errno)),
                        }
                    }
                }
                if paths.last() != Some(&path) {
                    paths.push(path);
                }
            }
        }
        if !paths.is_empty() {
            tracing::trace!(changes = paths.len(), first = %paths[0].display(), "file changes seen");
            (self.on_change)(Change::Paths(paths));
        }
        if !unwatched.is_empty() {
            (self.on_change)(Change::Unwatched(unwatched));
        }
        if overflow {
            (self.on_change)(Change::Overflow);
        }
        for failure in failures {
            (self.on_change)(Change::Failed(failure));
        }
        readable
    }
}

/// The watched folders, by watch descriptor.
#[derive(Default)]
struct Folders {
    nodes: HashMap<i32, Node>,
}

/// One watched folder.
struct Node {
    /// The watched folder holding it, for one watched as part of a tree; `None` for one watched
    /// on its own (a root).
    parent: Option<i32>,
    /// Its name in `parent`; a root's whole path.
    name: Box<OsStr>,
    /// Whether folders made in it are watched too.
    recursive: bool,
    /// Whether it was asked for (it may be in another's tree as well: a source's root beneath
    /// another's).
    root: bool,
}

impl Folders {
    /// The path of a watched folder (`None` for one no longer known).
    fn path(&self, wd: i32) -> Option<PathBuf> {
        let mut names: Vec<&OsStr> = Vec::new();
        let mut current = wd;
        loop {
            let node = self.nodes.get(&current)?;
            names.push(&node.name);
            match node.parent {
                // A chain longer than any tree could be deep is a cycle, which cannot be.
                Some(parent) if names.len() <= MAX_DEPTH + 1 => current = parent,
                Some(_) => return None,
                None => break,
            }
        }
        let mut path = PathBuf::with_capacity(names.iter().map(|name| name.len() + 1).sum());
        for name in names.iter().rev() {
            path.push(name);
        }
        Some(path)
    }

    fn is_recursive(&self, wd: i32) -> bool {
        self.nodes.get(&wd).is_some_and(|node| node.recursive)
    }

    /// Records a folder asked for.
    fn root(&mut self, wd: i32, path: &Path, recursive: bool) {
        let node = self.nodes.entry(wd).or_insert_with(|| Node {
            parent: None,
            name: path.as_os_str().into(),
            recursive,
            root: true,
        });
        node.root = true;
        node.recursive |= recursive;
    }

    /// Records a folder watched as the entry `name` of `parent`.
    fn child(&mut self, wd: i32, parent: i32, name: &OsStr) {
        if wd == parent {
            return;
        }
        let node = self.nodes.entry(wd).or_insert_with(|| Node {
            parent: Some(parent),
            name: name.into(),
            recursive: true,
            root: false,
        });
        node.parent = Some(parent);
        node.name = name.into();
        node.recursive = true;
    }

    /// Watches the folder `name` made in the watched folder `parent` (at `path`), and every
    /// folder beneath it.
    fn adopt(
        &mut self,
        inotify: BorrowedFd<'_>,
        mask: WatchFlags,
        parent: i32,
        name: &OsStr,
        path: &Path,
        failures: &mut Vec<WatchError>,
    ) -> Result<(), Errno> {
        let fd = open_folder(rustix::fs::CWD, path)?;
        let wd = add_watch(inotify, fd.as_fd(), mask)?;
        self.child(wd, parent, name);
        self.walk(inotify, mask, fd, wd, path, failures)
    }

    /// Watches every folder beneath the watched folder open at `fd` (at `path`), depth first,
    /// each before it is listed. Stops at the limit on watches (`Err(NOSPC)`); folders that
    /// cannot be opened, listed or watched for another reason are left out, in `failures`.
    fn walk(
        &mut self,
        inotify: BorrowedFd<'_>,
        mask: WatchFlags,
        fd: OwnedFd,
        wd: i32,
        path: &Path,
        failures: &mut Vec<WatchError>,
    ) -> Result<(), Errno> {
        struct Level {
            fd: OwnedFd,
            wd: i32,
            /// The folders in it still to watch.
            folders: Vec<Box<OsStr>>,
        }
        let mut buffer: Vec<u8> = Vec::with_capacity(BUFFER);
        let first = subfolders(&fd, &mut buffer).map_err(|errno| failures.push(WatchError::at(path, errno)));
        let mut levels = vec![Level { fd, wd, folders: first.unwrap_or_default() }];
        while let Some(level) = levels.last_mut() {
            let Some(name) = level.folders.pop() else {
                levels.pop();
                continue;
            };
            let parent = level.wd;
            let folder = match open_folder(level.fd.as_fd(), &*name) {
                Ok(folder) => folder,
                // Removed or replaced since it was listed: its holder's watch reports that.
                Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => continue,
                Err(errno) => {
                    failures.push(WatchError::at(&self.beneath(parent, &name), errno));
                    continue;
                }
            };
            let wd = match add_watch(inotify, folder.as_fd(), mask) {
                Ok(wd) => wd,
                Err(Errno::NOSPC) => return Err(Errno::NOSPC),
                Err(errno) => {
                    failures.push(WatchError::at(&self.beneath(parent, &name), errno));
                    continue;
                }
            };
            self.child(wd, parent, &name);
            if levels.len() > MAX_DEPTH {
                failures.push(WatchError::at(&self.beneath(parent, &name), Errno::LOOP));
                continue;
            }
            match subfolders(&folder, &mut buffer) {
                Ok(folders) => levels.push(Level { fd: folder, wd, folders }),
                Err(errno) => failures.push(WatchError::at(&self.beneath(parent, &name), errno)),
            }
        }
        Ok(())
    }

    /// The path of the entry `name` of a watched folder, for a message.
    fn beneath(&self, parent: i32, name: &OsStr) -> PathBuf {
        self.path(parent).unwrap_or_default().join(name)
    }

    /// Stops watching the folder asked for at `path`, and the folders of its tree (those not
    /// asked for themselves).
    fn unwatch(&mut self, inotify: BorrowedFd<'_>, path: &Path) {
        let Some(wd) = (self.nodes.iter())
            .find(|(wd, node)| node.root && self.path(**wd).as_deref() == Some(path))
            .map(|(wd, _)| *wd)
        else {
            return;
        };
        let node = self.nodes.get_mut(&wd).expect("found");
        node.root = false;
        if node.parent.is_none() {
            self.remove_tree(inotify, wd);
        }
    }

    /// Stops watching the folder `name` of the watched folder `parent` and its tree: it moved.
    fn detach(&mut self, inotify: BorrowedFd<'_>, parent: i32, name: &OsStr) {
        let found = self.nodes.iter().find(|(_, node)| node.parent == Some(parent) && *node.name == *name);
        let Some(wd) = found.map(|(wd, _)| *wd) else { return };
        if self.nodes[&wd].root {
            // Asked for itself: it stays, and is watched again where it resolves at the next
            // request.
            let path = self.path(wd).unwrap_or_default();
            let node = self.nodes.get_mut(&wd).expect("found");
            (node.parent, node.name) = (None, path.into_os_string().into_boxed_os_str());
            return;
        }
        self.remove_tree(inotify, wd);
    }

    /// Removes the watches of `top` and of the folders beneath it, except those asked for
    /// themselves, which stay, each on its own.
    fn remove_tree(&mut self, inotify: BorrowedFd<'_>, top: i32) {
        // Whether each folder lies beneath `top` (and not beneath a folder asked for in between).
        let mut beneath: HashMap<i32, bool> = HashMap::from([(top, true)]);
        let wds: Vec<i32> = self.nodes.keys().copied().collect();
        for wd in wds {
            let mut chain = Vec::new();
            let mut current = Some(wd);
            let verdict = loop {
                let Some(at) = current else { break false };
                if let Some(&known) = beneath.get(&at) {
                    break known;
                }
                let Some(node) = self.nodes.get(&at) else { break false };
                if node.root {
                    break false;
                }
                chain.push(at);
                current = node.parent;
            };
            for at in chain {
                beneath.insert(at, verdict);
            }
        }
        // The folders asked for beneath keep their watches, on their own now.
        let kept: Vec<(i32, PathBuf)> = (self.nodes.iter())
            .filter(|(wd, node)| {
                node.root && **wd != top && node.parent.is_some_and(|parent| beneath.get(&parent) == Some(&true))
            })
            .filter_map(|(wd, _)| Some((*wd, self.path(*wd)?)))
            .collect();
        for (wd, path) in kept {
            let node = self.nodes.get_mut(&wd).expect("kept");
            (node.parent, node.name) = (None, path.into_os_string().into_boxed_os_str());
        }
        for (wd, _) in beneath.into_iter().filter(|(_, beneath)| *beneath) {
            if self.nodes.remove(&wd).is_some() {
                // Fails harmlessly when the kernel dropped the watch already (a removed folder).
                let _ = inotify::remove_watch(inotify, wd);
            }
        }
    }

    /// Forgets a watch the kernel dropped.
    fn forget(&mut self, wd: i32) {
        self.nodes.remove(&wd);
    }
}

/// Opens the folder `name` beneath `at` to list and watch it, never through a symlink.
fn open_folder<P: rustix::path::Arg>(at: impl AsFd, name: P) -> Result<OwnedFd, Errno> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(at, name, flags, Mode::empty())
}

/// Watches the folder open at `fd`: exactly the folder that is listed next, whatever happens to
/// its path meanwhile. inotify takes a path, not a descriptor: the watch is placed on `.` with
/// the calling thread moved into the folder and back ([`ThreadFolder`]), or, where the thread
/// cannot move (a folder it may list but not enter), through `/proc/self/fd/N`, which names the
/// same folder but whose lookup through procfs was over half of a watch's cost in a profile of
/// a 100,000-skill start (docs/BENCHMARKS.md).
fn add_watch(inotify: BorrowedFd<'_>, fd: BorrowedFd<'_>, mask: WatchFlags) -> Result<i32, Errno> {
    let mask = mask | WatchFlags::ONLYDIR;
    if let Some(watched) = THREAD_FOLDER.with(|folder| folder.watch(inotify, fd, mask)) {
        return watched;
    }
    let through = format!("/proc/self/fd/{}", fd.as_raw_fd());
    inotify::add_watch(inotify, through.as_str(), mask)
}

thread_local! {
    static THREAD_FOLDER: ThreadFolder = ThreadFolder::new();
}

/// The calling thread's own working folder, for placing watches through it: the thread no longer
/// shares its working folder with the process (`unshare(CLONE_FS)`), so moving it moves no other
/// thread, and it is back where the process's was before [`watch`](Self::watch) returns, so
/// that a relative path means on this thread what it means on every other.
struct ThreadFolder {
    /// Where the thread works (the process's working folder when it was unshared); `None` where
    /// it could not be unshared or that folder opened (watches then go through procfs).
    home: Option<OwnedFd>,
    /// Set when the thread could not go home: it then moves no more.
    lost: std::cell::Cell<bool>,
}

impl ThreadFolder {
    fn new() -> Self {
        // SAFETY: `FS` unshares the working folder, root folder and umask, no descriptors: every
        // descriptor stays valid on every thread.
        let unshared = unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::FS) };
        let home = unshared.ok().and_then(|()| {
            rustix::fs::open(".", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()
        });
        ThreadFolder { home, lost: std::cell::Cell::new(false) }
    }

    /// Watches the folder open at `fd` as `.`; `None` where the thread cannot move into it.
    fn watch(&self, inotify: BorrowedFd<'_>, fd: BorrowedFd<'_>, mask: WatchFlags) -> Option<Result<i32, Errno>> {
        let home = self.home.as_ref().filter(|_| !self.lost.get())?;
        rustix::process::fchdir(fd).ok()?;
        let watched = inotify::add_watch(inotify, c".", mask);
        if let Err(errno) = rustix::process::fchdir(home) {
            // The folder the thread came from can no longer be entered (its search permission was
            // taken away, so a relative path fails there too): the thread stays where it is.
            self.lost.set(true);
            tracing::error!(%errno, "a watching thread cannot return to the working folder");
        }
        Some(watched)
    }
}

/// The folders in the folder open at `fd` (symlinks are no folders here).
fn subfolders(fd: &OwnedFd, buffer: &mut Vec<u8>) -> Result<Vec<Box<OsStr>>, Errno> {
    let mut folders = Vec::new();
    let mut entries = RawDir::new(fd, buffer.spare_capacity_mut());
    while let Some(entry) = entries.next() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let folder = match entry.file_type() {
            FileType::Directory => true,
            // A file system that does not say: asked of the entry itself.
            FileType::Unknown => rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Directory),
            _ => false,
        };
        if folder {
            folders.push(OsStr::from_bytes(name).into());
        }
    }
    Ok(folders)
}

/// The gap a recursive watch that met the limit leaves: the limit, and the folders it wants.
fn measure_gap(watch: &Watched) -> WatchGap {
    gap_of(watch, count_folders(&watch.path))
}

/// The gap of `watch`, whose tree has `folders` folders.
fn gap_of(watch: &Watched, folders: u64) -> WatchGap {
    // `/proc/sys/user/max_inotify_watches` is the limit of this user namespace; in the initial
    // one it is `fs.inotify.max_user_watches`. The lower one applies.
    let limit = ["/proc/sys/fs/inotify/max_user_watches", "/proc/sys/user/max_inotify_watches"]
        .into_iter()
        .filter_map(read_limit)
        .min();
    WatchGap { owners: vec![watch.owner], limit, folders }
}

/// A number in a `/proc/sys` file.
pub fn read_limit(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The folders in the tree at `root`, itself included, without following symlinks: what a
/// recursive watch of it needs, one watch each.
fn count_folders(root: &Path) -> u64 {
    let mut count = 0;
    let mut pending = vec![root.to_path_buf()];
    while let Some(folder) = pending.pop() {
        count += 1;
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                pending.push(entry.path());
            }
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use skillcat_core::FolderObserver as _;

    use super::*;

    fn watcher() -> (Watcher, mpsc::Receiver<Change>) {
        let (sender, receiver) = mpsc::channel();
        let watcher = Watcher::new(Events::ChangesAndCloses, move |change| {
            let _ = sender.send(change);
        })
        .expect("a watcher");
        (watcher, receiver)
    }

    fn paths_changed(receiver: &mpsc::Receiver<Change>) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        while let Ok(change) = receiver.recv_timeout(Duration::from_millis(300)) {
            if let Change::Paths(changed) = change {
                paths.extend(changed);
            }
        }
        // One write is several events (create, modify, close), read in one batch or in several.
        let mut seen = std::collections::HashSet::new();
        paths.retain(|path| seen.insert(path.clone()));
        paths
    }

    #[test]
    fn a_watch_placed_through_the_threads_folder_watches_that_folder_and_moves_no_other_thread() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().canonicalize().unwrap().join("watched");
        std::fs::create_dir(&folder).unwrap();
        let before = std::env::current_dir().unwrap();
        let placed = std::thread::spawn(move || {
            // Events are queued by the writes below, before the read: it need not wait.
            let inotify = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).unwrap();
            let fd = open_folder(rustix::fs::CWD, folder.as_path()).unwrap();
            // The path is moved away: the watch is of the folder open, not of what the path names.
            let moved = folder.with_file_name("moved");
            std::fs::rename(&folder, &moved).unwrap();
            std::fs::create_dir(&folder).unwrap();
            let wd = add_watch(inotify.as_fd(), fd.as_fd(), WatchFlags::CREATE).unwrap();
            assert!(THREAD_FOLDER.with(|thread| thread.home.is_some() && !thread.lost.get()));
            let here = std::env::current_dir().unwrap();
            std::fs::write(folder.join("not-this"), "x").unwrap();
            std::fs::write(moved.join("new"), "x").unwrap();
            let mut buffer = [std::mem::MaybeUninit::uninit(); 4096];
            let mut events = inotify::Reader::new(&inotify, &mut buffer);
            let event = events.next().unwrap();
            let name = event.file_name().map(|name| name.to_bytes().to_vec());
            (here, event.wd() == wd, name)
        })
        .join()
        .unwrap();
        assert_eq!(placed, (before.clone(), true, Some(b"new".to_vec())), "back where the process works");
        assert_eq!(std::env::current_dir().unwrap(), before);
    }

    #[test]
    fn watches_move_to_what_is_asked_and_a_replaced_folder_is_watched_again() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (a, b) = (base.join("a"), base.join("b"));
        std::fs::create_dir_all(a.join("deep")).unwrap();
        std::fs::create_dir(&b).unwrap();
        let (mut watcher, changes) = watcher();
        let outcome = watcher.watch(vec![Watched::new(a.clone(), RecursiveMode::Recursive, 0)], &[], false);
        assert!(outcome.complete && outcome.added && outcome.gap.is_none());
        std::fs::write(a.join("deep/x"), "x").unwrap();
        assert!(paths_changed(&changes).contains(&a.join("deep/x")), "a recursive watch sees beneath");
        // The same request again adds nothing.
        assert!(!watcher.watch(vec![Watched::new(a.clone(), RecursiveMode::Recursive, 0)], &[], false).added);
        // Moved to `b` alone: `a` is no longer reported.
        let outcome = watcher.watch(vec![Watched::new(b.clone(), RecursiveMode::NonRecursive, 1)], &[], false);
        assert!(outcome.added);
        std::fs::write(a.join("y"), "y").unwrap();
        std::fs::write(b.join("z"), "z").unwrap();
        let seen = paths_changed(&changes);
        assert!(seen.contains(&b.join("z")) && !seen.contains(&a.join("y")), "{seen:?}");
        // `b` replaced by another folder of the same name: watched again at the next request.
        std::fs::rename(&b, base.join("old-b")).unwrap();
        std::fs::create_dir(&b).unwrap();
        let _ = paths_changed(&changes);
        assert!(watcher.watch(vec![Watched::new(b.clone(), RecursiveMode::NonRecursive, 1)], &[], false).added);
        std::fs::write(b.join("again"), "z").unwrap();
        assert!(paths_changed(&changes).contains(&b.join("again")));
    }

    #[test]
    fn a_file_written_and_closed_is_a_change_and_a_read_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::write(base.join("file"), "x").unwrap();
        let (mut watcher, changes) = watcher();
        watcher.watch(vec![Watched::new(base.clone(), RecursiveMode::NonRecursive, 0)], &[], false);
        std::fs::read(base.join("file")).unwrap();
        assert!(paths_changed(&changes).is_empty(), "a read changes nothing");
        std::fs::write(base.join("file"), "y").unwrap();
        assert!(paths_changed(&changes).contains(&base.join("file")));
    }

    #[test]
    fn a_missing_folder_is_not_watched_and_leaves_the_watch_incomplete() {
        let dir = tempfile::tempdir().unwrap();
        let (mut watcher, _changes) = watcher();
        let missing = dir.path().join("missing");
        let outcome = watcher.watch(vec![Watched::new(missing, RecursiveMode::Recursive, 0)], &[], false);
        assert!(!outcome.complete);
        assert_eq!(outcome.failed, 1);
    }

    #[test]
    fn the_suggested_limit_leaves_room_for_the_gap() {
        let gap = WatchGap { owners: vec![0], limit: Some(8192), folders: 10_000 };
        assert_eq!(gap.suggested_limit(), 32_768);
        let mut merged = gap.clone();
        merged.merge(&WatchGap { owners: vec![2, 0], limit: None, folders: 5 });
        assert_eq!((merged.owners, merged.limit, merged.folders), (vec![0, 2], Some(8192), 10_005));
    }

    #[test]
    fn folders_made_later_are_watched_to_the_bottom_before_they_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (mut watcher, changes) = watcher();
        assert!(watcher.watch(vec![Watched::new(base.clone(), RecursiveMode::Recursive, 0)], &[], false).complete);
        std::fs::create_dir_all(base.join("a/b/c")).unwrap();
        assert!(paths_changed(&changes).contains(&base.join("a")));
        // Made at once with its parents, before any of them was watched: watched now all the same.
        std::fs::write(base.join("a/b/c/x"), "x").unwrap();
        assert!(paths_changed(&changes).contains(&base.join("a/b/c/x")));
    }

    #[test]
    fn a_folder_moved_out_is_no_longer_reported_and_one_moved_in_is() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (tree, outside) = (base.join("tree"), base.join("outside"));
        std::fs::create_dir_all(tree.join("leaving/deep")).unwrap();
        std::fs::create_dir_all(outside.join("arriving/deep")).unwrap();
        let (mut watcher, changes) = watcher();
        watcher.watch(vec![Watched::new(tree.clone(), RecursiveMode::Recursive, 0)], &[], false);
        std::fs::rename(tree.join("leaving"), outside.join("left")).unwrap();
        std::fs::rename(outside.join("arriving"), tree.join("arrived")).unwrap();
        let seen = paths_changed(&changes);
        assert!(seen.contains(&tree.join("leaving")) && seen.contains(&tree.join("arrived")), "{seen:?}");
        std::fs::write(outside.join("left/deep/x"), "x").unwrap();
        std::fs::write(tree.join("arrived/deep/y"), "y").unwrap();
        let seen = paths_changed(&changes);
        assert_eq!(seen, [tree.join("arrived/deep/y")]);
    }

    #[test]
    fn a_tree_asked_for_inside_another_keeps_its_watches_when_the_other_goes() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let inner = base.join("inner");
        std::fs::create_dir_all(inner.join("deep")).unwrap();
        let (mut watcher, changes) = watcher();
        let outer_watch = Watched::new(base.clone(), RecursiveMode::Recursive, 0);
        let inner_watch = Watched::new(inner.clone(), RecursiveMode::Recursive, 1);
        watcher.watch(vec![inner_watch.clone(), outer_watch], &[], false);
        std::fs::write(inner.join("deep/x"), "x").unwrap();
        assert_eq!(paths_changed(&changes), [inner.join("deep/x")]);
        watcher.watch(vec![inner_watch], &[], false);
        std::fs::write(base.join("y"), "y").unwrap();
        std::fs::write(inner.join("deep/z"), "z").unwrap();
        assert_eq!(paths_changed(&changes), [inner.join("deep/z")]);
    }

    #[test]
    fn a_scan_s_walk_places_the_watches_and_the_watcher_what_it_left() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let tree = base.join("tree");
        // Beyond the walk's depth bound of 2: the watcher watches it after the walk.
        std::fs::create_dir_all(tree.join("a/b/c/d")).unwrap();
        std::fs::create_dir_all(tree.join("e")).unwrap();
        std::fs::write(tree.join("e/SKILL.md"), "---\nname: e\ndescription: E.\n---\n").unwrap();
        let discoverer = skillcat_core::DirectorySkillDiscoverer::with_limits(
            [&tree],
            std::num::NonZeroUsize::new(1000).unwrap(),
            2,
        )
        .unwrap();
        let (mut watcher, changes) = watcher();
        let wanted = vec![Watched::new(tree.clone(), RecursiveMode::Recursive, 0)];
        let (outcome, walk) = watcher.watch_through_walk(wanted.clone(), |_| true);
        assert!(!outcome.complete, "not before the walk");
        discoverer.observe_next_walk(Arc::clone(&walk) as Arc<dyn skillcat_core::FolderObserver>);
        let discovery = discoverer.scan_blocking().unwrap();
        assert_eq!(discovery.skills.len(), 1);
        let finished = watcher.finish_walk(&walk);
        assert!(finished.outcome.complete && finished.outcome.gap.is_none());
        assert_eq!(finished.late, [tree.join("a/b/c")]);
        // Watched: folders the walk opened, and those it left.
        std::fs::write(tree.join("e/x"), "x").unwrap();
        std::fs::write(tree.join("a/b/c/d/y"), "y").unwrap();
        assert_eq!(paths_changed(&changes), [tree.join("e/x"), tree.join("a/b/c/d/y")]);
        // Placed: the same request again adds nothing, and a later walk is not listened to.
        assert!(!watcher.watch(wanted, &[], false).added);
        assert_eq!(walk.opened(tree.as_os_str().as_bytes(), std::fs::File::open(&tree).unwrap().as_fd(), true), None);
    }

    #[test]
    fn a_tree_the_walk_did_not_open_is_watched_by_the_watcher_and_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("deep")).unwrap();
        let (mut watcher, changes) = watcher();
        let (_, walk) =
            watcher.watch_through_walk(vec![Watched::new(base.clone(), RecursiveMode::Recursive, 0)], |_| true);
        // No walk came.
        let finished = watcher.finish_walk(&walk);
        assert!(finished.outcome.complete);
        assert_eq!(finished.late, std::slice::from_ref(&base));
        std::fs::write(base.join("deep/x"), "x").unwrap();
        assert_eq!(paths_changed(&changes), [base.join("deep/x")]);
    }

    #[test]
    fn a_symlink_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (tree, elsewhere) = (base.join("tree"), base.join("elsewhere"));
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, tree.join("link")).unwrap();
        let (mut watcher, changes) = watcher();
        watcher.watch(vec![Watched::new(tree.clone(), RecursiveMode::Recursive, 0)], &[], false);
        std::fs::write(elsewhere.join("x"), "x").unwrap();
        assert!(paths_changed(&changes).is_empty());
        // A symlink asked for is not watched through.
        let outcome = watcher.watch(vec![Watched::new(tree.join("link"), RecursiveMode::Recursive, 0)], &[], false);
        assert!(!outcome.complete && outcome.failed == 1);
    }
}
