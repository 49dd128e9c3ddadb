//! The live catalog's file watch: which folders to watch for the sources' roots, what an event
//! asks of the rescans, and what the catalog says while the kernel's limits leave folders
//! unwatched. The watching itself is `crate::watch`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use skillcat_core::{FolderObserver, SourcedDiagnostic};

use super::{LiveCatalog, lock};
use crate::observability::Metrics;
use crate::watch::{Change, Events, Outcome, RecursiveMode, WalkWatch, WatchGap, Watched, Watcher, read_limit};

/// The rescan period while some folder is not watched (the kernel's limit on inotify watches was
/// reached), when `--rescan-interval` is longer or off: changes must not stay invisible.
const UNWATCHED_RESCAN: Duration = Duration::from_secs(10);

/// What the watch tells the rest of the catalog.
pub(super) struct WatchState {
    /// File events seen (any path under any root), and whether every root is watched: together
    /// they say whether a content read earlier is still what is on disk.
    changes: AtomicU64,
    complete: AtomicBool,
    /// Set for good by a watcher error other than the limit on watches (events lost).
    failed: AtomicBool,
    /// Folders the watcher could not watch since the last refresh (the limit on watches, met by
    /// a folder made while running), for the next refresh to account for.
    unwatched: Mutex<Vec<PathBuf>>,
    /// Set by a queue overflow: the watcher may have missed new folders, so every recursive watch
    /// is placed again before the next rescan.
    rewatch: AtomicBool,
    /// Whether a queue overflow has been logged (once per process).
    overflow_logged: AtomicBool,
    /// The folders left unwatched, while there are any: the catalog says so, and the periodic
    /// rescan runs at least every `UNWATCHED_RESCAN`.
    gap: Mutex<Option<WatchGap>>,
    /// The periodic rescan's period while the watch is incomplete.
    pub(super) unwatched_period: Duration,
}

impl WatchState {
    pub(super) fn new(rescan_interval: Option<Duration>) -> Self {
        WatchState {
            changes: AtomicU64::new(0),
            complete: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            unwatched: Mutex::default(),
            rewatch: AtomicBool::new(false),
            overflow_logged: AtomicBool::new(false),
            gap: Mutex::default(),
            unwatched_period: rescan_interval.map_or(UNWATCHED_RESCAN, |period| period.min(UNWATCHED_RESCAN)),
        }
    }

    /// The count of file events so far, when every root is watched (`None` otherwise: then no
    /// earlier read can be trusted to still be current).
    pub(super) fn stamp(&self) -> Option<u64> {
        let stamp = self.changes.load(Ordering::Acquire);
        let trusted = self.complete.load(Ordering::Acquire) && !self.failed.load(Ordering::Acquire);
        trusted.then_some(stamp)
    }

    /// Whether some folder is left unwatched now.
    pub(super) fn has_gap(&self) -> bool {
        lock(&self.gap).is_some()
    }

    /// The catalog diagnostic of each source with an unwatched folder.
    pub(super) fn diagnostics(&self) -> Vec<SourcedDiagnostic> {
        let Some(gap) = &*lock(&self.gap) else { return Vec::new() };
        let limit = gap.limit.map_or_else(|| "its".to_owned(), |limit| limit.to_string());
        let message = format!(
            "file watch incomplete: the kernel's limit of {limit} inotify watches is reached ({} folders to \
             watch); changes are seen by rescans every {} s; raise it with sysctl fs.inotify.max_user_watches={}",
            gap.folders,
            self.unwatched_period.as_secs_f64(),
            gap.suggested_limit()
        );
        gap.owners.iter().map(|&source| SourcedDiagnostic { source, message: message.clone() }).collect()
    }

    /// Records how the last refresh of the watches went, logging once when folders start or stop
    /// going unwatched.
    fn record(&self, outcome: Outcome, metrics: &Metrics) {
        for _ in 0..outcome.limit_reached {
            metrics.watcher_error();
            metrics.watch_limit_reached();
        }
        for _ in 0..outcome.failed {
            metrics.watcher_error();
        }
        self.complete.store(outcome.complete, Ordering::Release);
        let mut current = lock(&self.gap);
        metrics.set_watch_incomplete(outcome.gap.is_some());
        match (&*current, &outcome.gap) {
            (None, Some(gap)) => {
                let limit = gap.limit.map_or_else(|| "unknown".to_owned(), |limit| limit.to_string());
                tracing::warn!(
                    limit,
                    folders = gap.folders,
                    rescan_every_seconds = self.unwatched_period.as_secs_f64(),
                    fix = format!("sysctl fs.inotify.max_user_watches={}", gap.suggested_limit()),
                    "the kernel's limit on inotify watches (fs.inotify.max_user_watches, per user, shared by \
                     all of its processes) is reached: some folders are not watched, so their changes are seen \
                     only by periodic rescans; raise the limit (the watches are placed again every {} s)",
                    crate::watch::WATCH_RETRY.as_secs()
                );
            }
            (Some(_), None) => tracing::info!("every folder is watched again"),
            _ => {}
        }
        *current = outcome.gap;
    }
}

/// The watch on the sources' roots. Each root is watched recursively at the folder it resolves
/// to now; the folder holding a root that is a symlink or does not exist yet, and the one holding
/// each symlink the root passes through, are watched too, so that a flip of a link (git-sync) or
/// the root's creation is seen.
pub(super) struct Roots {
    watcher: Watcher,
    /// Each root and the index of its source.
    roots: Vec<(usize, PathBuf)>,
    /// Whether the watches were placed once: the first time, the trees of the sources that walk
    /// folders are watched by their first scan's walk.
    placed: bool,
    /// The first scan's walk placing watches, until it is finished.
    walk: Option<Arc<WalkWatch>>,
}

impl Roots {
    /// Whether a scan's walk is placing watches, to be finished after the scan.
    pub(super) fn walking(&self) -> bool {
        self.walk.is_some()
    }

    /// The folders to watch for the roots as they resolve now.
    fn wanted(&self) -> Vec<Watched> {
        let mut recursive: Vec<Watched> = Vec::new();
        let mut parents: Vec<Watched> = Vec::new();
        for (source, root) in &self.roots {
            let resolved = std::fs::canonicalize(root).ok();
            if resolved.as_deref() != Some(root.as_path()) {
                // A symlinked (or missing) root: watch the folder holding the link as well, and
                // the one holding each symlinked ancestor (`/git/current/skills` flips with
                // `/git/current`).
                let links = root.ancestors().skip(1).filter(|ancestor| ancestor.is_symlink());
                for holder in std::iter::once(root.as_path()).chain(links).filter_map(Path::parent) {
                    parents.push(Watched::new(holder.to_path_buf(), RecursiveMode::NonRecursive, *source));
                }
            }
            // Where the link leads: a watch never follows a symlink.
            if let Some(resolved) = resolved {
                recursive.push(Watched::new(resolved, RecursiveMode::Recursive, *source));
            }
        }
        // A folder inside a recursively watched tree is already watched, with its subfolders.
        parents.retain(|parent| !recursive.iter().any(|tree| parent.path.starts_with(&tree.path)));
        recursive.into_iter().chain(parents).collect()
    }
}

impl LiveCatalog {
    /// Starts watching the sources' folders; `None` (logged) when the watcher cannot start, and
    /// then only periodic rescans see changes.
    pub(super) fn watch(&self) -> Option<Roots> {
        let catalog = self.clone();
        // Creations, removals and modifications only: the scans' own opens of every folder and
        // `SKILL.md` would otherwise each queue an event, overflow the kernel's queue on a large
        // tree, and make every full rescan cause the next.
        match Watcher::new(Events::Changes, move |change| catalog.on_change(change)) {
            Ok(watcher) => {
                let roots = (self.inner.sources.iter().enumerate())
                    .flat_map(|(source, of)| of.folders().iter().map(move |root| (source, root.clone())))
                    .collect();
                Some(Roots { watcher, roots, placed: false, walk: None })
            }
            Err(error) => {
                self.inner.metrics.watcher_error();
                tracing::error!(%error, "cannot watch the skill directories; only periodic rescans will see changes");
                None
            }
        }
    }

    /// Moves the watches to where the roots resolve now, off the async workers (adding a
    /// recursive watch walks its tree). `None`: the runtime is shutting down.
    pub(super) async fn refresh(&self, mut roots: Roots) -> Option<Roots> {
        let state = &self.inner.watching;
        let unwatched = std::mem::take(&mut *lock(&state.unwatched));
        let rewatch = state.rewatch.swap(false, Ordering::AcqRel);
        // The first time, the trees of the sources whose scans walk folders are watched by that
        // walk, folder by folder as it opens them: each is watched before it is listed, as the
        // watcher's own walk would, and the tree is walked once.
        let walkers: Vec<usize> = (self.inner.sources.iter().enumerate())
            .filter(|(_, source)| !roots.placed && source.observes_walks())
            .map(|(index, _)| index)
            .collect();
        let through_walk = walkers.clone();
        let refreshed = tokio::task::spawn_blocking(move || {
            let wanted = roots.wanted();
            let outcome = if roots.placed {
                roots.watcher.watch(wanted, &unwatched, rewatch)
            } else {
                let (outcome, walk) =
                    roots.watcher.watch_through_walk(wanted, |tree| through_walk.contains(&tree.owner));
                roots.walk = Some(walk);
                outcome
            };
            roots.placed = true;
            (roots, outcome)
        })
        .await;
        match refreshed {
            Ok((roots, outcome)) => {
                state.record(outcome, &self.inner.metrics);
                if let Some(walk) = &roots.walk {
                    for &index in &walkers {
                        self.inner.sources.get(index).observe_next_walk(Arc::clone(walk) as Arc<dyn FolderObserver>);
                    }
                }
                Some(roots)
            }
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(_) => None,
        }
    }

    /// After the scan whose walk placed watches: watches what it left, and asks for a rescan of
    /// what was watched only then. `None`: the runtime is shutting down.
    pub(super) async fn finish_walk(&self, mut roots: Roots) -> Option<Roots> {
        let walk = roots.walk.take()?;
        let finished = tokio::task::spawn_blocking(move || {
            let finished = roots.watcher.finish_walk(&walk);
            (roots, finished)
        })
        .await;
        match finished {
            Ok((roots, finished)) => {
                self.inner.watching.record(finished.outcome, &self.inner.metrics);
                if !finished.late.is_empty() {
                    self.request_rescan_of(finished.late);
                }
                Some(roots)
            }
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(_) => None,
        }
    }

    /// What a change the watcher reports asks of the rescans (on the watcher's thread).
    fn on_change(&self, change: Change) {
        let (state, metrics) = (&self.inner.watching, &self.inner.metrics);
        state.changes.fetch_add(1, Ordering::AcqRel);
        match change {
            Change::Paths(paths) => self.request_rescan_of(paths),
            Change::Overflow => {
                // Changes were lost, and folders made meanwhile may have no watch yet.
                metrics.watch_overflow();
                if !state.overflow_logged.swap(true, Ordering::AcqRel) {
                    let queue = read_limit("/proc/sys/fs/inotify/max_queued_events");
                    let queue_text = queue.map_or_else(|| "unknown".to_owned(), |queue| queue.to_string());
                    tracing::warn!(
                        max_queued_events = queue_text,
                        fix = format!(
                            "sysctl fs.inotify.max_queued_events={}",
                            queue.map_or(65_536, |queue| (queue * 4).next_power_of_two())
                        ),
                        "the kernel's inotify event queue overflowed (fs.inotify.max_queued_events); \
                         rescanning everything and watching every folder again (logged once; \
                         skillcat_watch_overflows_total counts them)"
                    );
                }
                state.rewatch.store(true, Ordering::Release);
                self.request_rescan();
            }
            Change::Unwatched(paths) => {
                // A folder made while running could not be watched; the next refresh accounts
                // for it (and logs it, once).
                metrics.watcher_error();
                metrics.watch_limit_reached();
                lock(&state.unwatched).extend(paths);
                self.request_rescan();
            }
            Change::Failed(error) => {
                // Events may have been lost: no read is trusted to stay current any more.
                state.failed.store(true, Ordering::Release);
                metrics.watcher_error();
                tracing::warn!(%error, "file watcher error; rescanning");
                self.request_rescan();
            }
        }
    }
}
