//! Watching folders for changes: one implementation over notify (inotify on Linux), used by the
//! live catalog (its sources' roots, recursively, and the folders holding symlinked roots) and by
//! the token file's reloader (the folders on the way to the file).
//!
//! A [`Watcher`] is told, again and again, exactly which folders to watch ([`Watcher::watch`]);
//! it moves its watches to match. A folder replaced under the same path (moved away, another
//! moved in) is watched again, since inotify watches inodes. A recursive watch that meets the
//! kernel's limit on watches stays in place as far as it reached, is reported as a [`WatchGap`]
//! and is placed again later (the limit may have been raised). What the kernel reports arrives as
//! a [`Change`] at the callback the watcher was made with, on notify's thread.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use notify::EventKindMask;
pub use notify::RecursiveMode;
use notify::{RecommendedWatcher, Watcher as _};

/// How often watches that hit the kernel's limit are tried again (the limit may have been raised).
pub const WATCH_RETRY: Duration = Duration::from_secs(300);

/// What the kernel reported.
#[derive(Debug)]
pub enum Change {
    /// Something changed at these paths (a creation, removal, modification or rename; with
    /// [`EventKindMask::ACCESS_CLOSE`] in the mask, a file written and closed too).
    Paths(Vec<PathBuf>),
    /// The kernel's event queue overflowed: changes were lost, and folders made meanwhile may have
    /// no watch yet (the next [`Watcher::watch`] should be asked to place every watch again).
    Overflow,
    /// Folders made while running that could not be watched: the limit on watches was reached.
    Unwatched(Vec<PathBuf>),
    /// Another watcher error: events may have been lost for good.
    Failed(notify::Error),
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
    watcher: RecommendedWatcher,
    /// What is watched now (a recursive watch that met the limit on watches included).
    watched: Vec<Watched>,
    partial: Vec<PartialWatch>,
    /// Folders that could not be watched for another reason, so that each is logged once.
    unwatchable: Vec<PathBuf>,
}

impl Watcher {
    /// A watcher reporting the events of `kinds` to `on_change`. Symlinks are never followed.
    pub fn new(kinds: EventKindMask, on_change: impl Fn(Change) + Send + 'static) -> notify::Result<Watcher> {
        let handler = move |event: notify::Result<notify::Event>| match event {
            Ok(event) if event.need_rescan() => on_change(Change::Overflow),
            // A close after reading is no change (the mask keeps only a close after writing).
            Ok(event)
                if event.kind.is_access()
                    && event.kind
                        != notify::EventKind::Access(notify::event::AccessKind::Close(
                            notify::event::AccessMode::Write,
                        )) => {}
            Ok(event) => on_change(Change::Paths(event.paths)),
            Err(error) if matches!(error.kind, notify::ErrorKind::MaxFilesWatch) => {
                on_change(Change::Unwatched(error.paths));
            }
            Err(error) => on_change(Change::Failed(error)),
        };
        let config = notify::Config::default().with_follow_symlinks(false).with_event_kinds(kinds);
        let watcher = RecommendedWatcher::new(handler, config)?;
        Ok(Watcher { watcher, watched: Vec::new(), partial: Vec::new(), unwatchable: Vec::new() })
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
            // May fail harmlessly: the kernel drops the watches of a deleted folder by itself.
            let _ = self.watcher.unwatch(&watch.path);
            self.watched.retain(|watched| *watched != watch);
            self.partial.retain(|partial| partial.watch != watch);
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
                    // After an overflow: notify adds the folders it missed (the others are
                    // already watched and stay so).
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
        for partial in &self.partial {
            outcome.complete = false;
            match &mut outcome.gap {
                Some(gap) => gap.merge(&partial.gap),
                None => outcome.gap = Some(partial.gap.clone()),
            }
        }
        outcome
    }

    /// Places one watch; whether the folder (and, for a recursive one, every folder beneath) is
    /// watched now. A recursive watch that met the kernel's limit stays in place as far as it
    /// reached and is tried again later.
    fn place(&mut self, watch: &Watched, outcome: &mut Outcome) -> bool {
        match self.watcher.watch(Path::new(&watch.path), watch.mode) {
            Ok(()) => {
                if !self.watched.contains(watch) {
                    self.watched.push(watch.clone());
                }
                self.unwatchable.retain(|path| *path != watch.path);
                true
            }
            Err(error) if matches!(error.kind, notify::ErrorKind::MaxFilesWatch) => {
                outcome.limit_reached += 1;
                if !self.watched.contains(watch) {
                    self.watched.push(watch.clone());
                }
                let gap = measure_gap(watch);
                self.partial.push(PartialWatch { watch: watch.clone(), retry_at: Instant::now() + WATCH_RETRY, gap });
                false
            }
            Err(error) => {
                outcome.failed += 1;
                if !self.unwatchable.contains(&watch.path) {
                    tracing::warn!(path = %watch.path.display(), %error, "cannot watch a folder; relying on periodic re-reads");
                    self.unwatchable.push(watch.path.clone());
                }
                false
            }
        }
    }
}

/// The gap a recursive watch that met the limit leaves: the limit, and the folders it wants.
fn measure_gap(watch: &Watched) -> WatchGap {
    // `/proc/sys/user/max_inotify_watches` is the limit of this user namespace; in the initial
    // one it is `fs.inotify.max_user_watches`. The lower one applies.
    let limit = ["/proc/sys/fs/inotify/max_user_watches", "/proc/sys/user/max_inotify_watches"]
        .into_iter()
        .filter_map(read_limit)
        .min();
    WatchGap { owners: vec![watch.owner], limit, folders: count_folders(&watch.path) }
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

    use super::*;

    fn watcher() -> (Watcher, mpsc::Receiver<Change>) {
        let (sender, receiver) = mpsc::channel();
        let watcher = Watcher::new(EventKindMask::CORE | EventKindMask::ACCESS_CLOSE, move |change| {
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
        paths
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
}
