//! One blocking scan of a directory source, step for step nagents' walk.
//!
//! The decisions of the walk (what is counted, in which order, how deep, what is reported) are
//! taken on the calling thread in exactly nagents' order. The system calls are not: a few worker
//! threads open, list and sort the folders the walk will visit next and read their `SKILL.md`,
//! in runs of sibling folders, a bounded window of runs ahead of it; while the walk waits for a
//! run it prepares a later one itself. The walk then consumes those results in its own order, so
//! the outcome is the same as a sequential walk's; work done for a folder the walk does not enter
//! (a bound was reached) is discarded.
//!
//! A walk also leaves a [`Picture`]: every folder it listed, with its sorted entries and its
//! `SKILL.md`'s parse result, without descriptors. A later walk can start from that picture,
//! told which paths changed: it takes every other folder from memory and lists only the changed
//! ones (and folders it has never seen) from disk. Its decisions are the same code as a full
//! walk's, so the walk order, both bounds and every diagnostic come out exactly as a full walk
//! of the same tree would give them.

use std::collections::{BTreeMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::FolderObserver;
use super::files::{self, FileKey, Hashes};
use super::guarded::{self};
use super::listing::{
    Buffers, Diagnostic, Digests, Entry, Folder, Held, Kind, MAX_THREADS, Opener, Prepared, Queue, Queued, RUN,
    RUNS_AHEAD, RunFolder, Slot, Task, Visit, Waits, identity, kept_beneath, prepare, prepare_child, relist,
};
use super::path::{AbsoluteRoot, join};
use crate::discover::ContentVersion;
use crate::files::{Digest, FileListing};
use crate::skill::Skill;

const MAX_DIAGNOSTICS: usize = 20;
/// A run near the end of a folder's subfolders takes at most one in this many of those left.
const TAIL_SHARE: usize = 4;
const ENTRY_LIMIT: &str = "discovery entry limit reached; increase max_entries";
const DEPTH_LIMIT: &str = "discovery depth/entry limit reached";

/// A discovered skill and the index of the root it was found under.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub skill: Skill,
    pub root: usize,
    /// The version of the content the scan read.
    pub version: ContentVersion,
    /// The skill's files, when the walk listed them (a first scan: see [`Digests`]).
    pub files: Option<Arc<FileListing>>,
}

#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub found: Vec<Found>,
    pub diagnostics: Vec<String>,
    /// Set when the walk stopped because the process or the system ran out of descriptors or
    /// memory: the path it was at, and the error. The outcome is then incomplete and not to be
    /// published (nagents would report the error as a diagnostic and list the folder as empty).
    pub exhausted: Option<(String, std::io::Error)>,
    /// Each root's folder as this walk opened it, for listing the files of its skills from the
    /// same resolution of the root (`None` where the root could not be listed).
    pub roots: Vec<Option<Arc<OwnedFd>>>,
    /// Every folder this walk listed or took from its starting picture.
    pub picture: Picture,
    /// Set when a walk from a picture could not go on from it (a root now resolves to another
    /// folder, or a folder vanished while the walk opened the one beneath it): the outcome is to
    /// be thrown away for a full walk.
    pub lost: bool,
    /// The digests of the `SKILL.md` files the walk read (see [`Digests`]), when asked for.
    pub digests: Vec<(FileKey, Digest)>,
    /// What the walk's listings of skills' files leave for the next scan.
    pub by_walk: ListedByWalk,
}

/// The digests a walk's listings of skills' files took (of settled files: the next scan's), and
/// how many files they read.
#[derive(Debug, Default)]
pub(crate) struct ListedByWalk {
    pub hashes: Hashes,
    pub hashed: u64,
}

impl Outcome {
    /// Takes in what one of the walk's threads took.
    fn absorb(&mut self, digests: Digests) {
        self.digests.extend(digests.taken);
        if let Some(lister) = digests.files {
            self.by_walk.hashed += lister.hashed;
            self.by_walk.hashes = files::union(std::mem::take(&mut self.by_walk.hashes), lister.current);
        }
    }
}

/// Every folder a walk saw, by path, as it saw it; kept between scans without descriptors.
#[derive(Debug, Default)]
pub(crate) struct Picture {
    folders: BTreeMap<Vec<u8>, Arc<Visit>>,
    /// Each root's folder (device and inode) when the walk opened it.
    roots: Vec<Option<(u64, u64)>>,
}

impl Picture {
    /// Forgets what a change at `path` may have changed: the entry itself, everything beneath it
    /// (a folder moved or made there is another folder), and the folder holding it (its listing).
    pub(crate) fn forget(&mut self, path: &[u8]) {
        self.folders.remove(path);
        let mut start = path.to_vec();
        start.push(b'/');
        let mut end = path.to_vec();
        end.push(b'/' + 1);
        let beneath: Vec<Vec<u8>> = self.folders.range(start..end).map(|(key, _)| key.clone()).collect();
        for key in beneath {
            self.folders.remove(&key);
        }
        if let Some(slash) = path.iter().rposition(|&b| b == b'/') {
            let parent = if slash == 0 { &path[..1] } else { &path[..slash] };
            self.folders.remove(parent);
        }
    }

    /// Folders held.
    pub(crate) fn len(&self) -> usize {
        self.folders.len()
    }
}

/// A full walk of `roots`, every folder from disk; its picture is left empty unless `keep_picture`
/// (nothing will rescan from it). With `digests` (the last scan's), the walk takes the digests
/// of the `SKILL.md` files it reads that those lack; with `settle_seconds` too, it lists each
/// skill's files (see [`Digests`]).
pub(crate) fn scan(
    roots: &[AbsoluteRoot],
    max_entries: usize,
    max_depth: usize,
    keep_picture: bool,
    observer: Option<Arc<dyn FolderObserver>>,
    digests: Option<Arc<Hashes>>,
    settle_seconds: Option<i64>,
) -> Outcome {
    // The walk prepares folders itself while it would otherwise wait, so one core is its own.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let helpers = cores.clamp(2, MAX_THREADS) - 1;
    // On one core a thread watching for work would only keep the one that brings it off the core.
    let watch = cores > 1;
    let queue =
        Queue { observer: observer.clone(), digests: digests.clone(), settle_seconds, watch, ..Queue::default() };
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (0..helpers)
            .map(|_| {
                std::thread::Builder::new()
                    .name("skill-scan".into())
                    .spawn_scoped(scope, || queue.serve())
                    .expect("cannot start a scan thread")
            })
            .collect();
        // The helpers stop once the queue closes: when the walk is done, or when it panics (they
        // would otherwise wait for work forever, and the scope for them).
        let closing = Closing(&queue);
        let mut walk = Walk::new(roots, max_entries, max_depth, Supply::Disk(&queue), Picture::default());
        walk.keep_picture = keep_picture;
        walk.waits = Waits::new(watch);
        walk.buffers.observer = observer;
        walk.buffers.digests = digests.map(|known| Digests::of_scan(known, settle_seconds));
        for (index, root) in roots.iter().enumerate() {
            if walk.remaining == 0 {
                break;
            }
            let folder = walk.queue(Opener::Root, vec![RunFolder::Path(root.as_bytes().to_vec())], max_depth);
            let Some(RunFolder::Prepared(prepared)) = walk.wait(&folder).pop() else {
                unreachable!("a root is prepared")
            };
            walk.directory(prepared, 0, index, None);
        }
        // A walk that went through every folder took every descriptor kept ahead of it.
        debug_assert!(walk.remaining == 0 || queue.kept.load(Ordering::Relaxed) == 0, "descriptors counted ahead");
        let mut outcome = walk.finish();
        drop(closing);
        for helper in helpers {
            let taken = helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            if let Some(taken) = taken {
                outcome.absorb(taken);
            }
        }
        outcome
    })
}

/// A walk of the same roots and bounds from `picture`, with the picture's folders trusted to be
/// what is on disk (the caller has [forgotten](Picture::forget) every changed path). Folders the
/// picture lacks are listed from disk, opened beneath their root as the full walk opens them.
/// Takes digests as [`scan`] does.
pub(crate) fn scan_from(
    roots: &[AbsoluteRoot],
    max_entries: usize,
    max_depth: usize,
    picture: Picture,
    digests: Option<Arc<Hashes>>,
) -> Outcome {
    let mut opened = Vec::with_capacity(roots.len());
    let mut lost = picture.roots.len() != roots.len();
    for (index, root) in roots.iter().enumerate() {
        let fd = guarded::open_root(root.as_bytes()).ok().map(Arc::new);
        // The root resolves elsewhere now (a flipped link): nothing of the picture applies.
        lost |= fd.as_deref().map(identity) != picture.roots.get(index).copied();
        opened.push(fd);
    }
    let mut walk = Walk::new(roots, max_entries, max_depth, Supply::Picture { roots: opened }, picture);
    walk.outcome.lost = lost;
    walk.buffers.digests = digests.map(Digests::new);
    for (index, root) in roots.iter().enumerate() {
        if walk.remaining == 0 || walk.outcome.lost {
            break;
        }
        let path = root.as_bytes().to_vec();
        let prepared = match walk.picture.folders.get(&path) {
            Some(visit) => Prepared::pictured(path, visit),
            None => {
                let root = walk.root_fd(index);
                match root {
                    Some(fd) => {
                        let visit = Held::Own(Ok(relist(&fd, &path, &mut walk.buffers)));
                        let path = path.into_boxed_slice();
                        Prepared { visit, path, fd: Some(fd), files: None, subfolders: None, queued: None }
                    }
                    None => prepare(&Opener::Root, path, &mut walk.buffers),
                }
            }
        };
        walk.directory(prepared, 0, index, None);
    }
    walk.finish()
}

/// Closes a walk's queue when dropped.
struct Closing<'q>(&'q Queue);

impl Drop for Closing<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Whether one root lies within another (or repeats it). Nothing is followed, so otherwise every
/// folder has exactly one path from one root, and no folder can be walked twice.
fn roots_overlap(roots: &[AbsoluteRoot]) -> bool {
    let within = |inner: &[u8], outer: &[u8]| {
        inner.starts_with(outer) && (inner.len() == outer.len() || outer.ends_with(b"/") || inner[outer.len()] == b'/')
    };
    roots
        .iter()
        .enumerate()
        .any(|(i, a)| roots.iter().enumerate().any(|(j, b)| i != j && within(a.as_bytes(), b.as_bytes())))
}

/// Where a walk gets its folders.
enum Supply<'q> {
    /// All from disk, prepared ahead of the walk by helper threads.
    Disk(&'q Queue),
    /// From the picture; the ones it lacks from disk, beneath these roots (as opened at the start).
    Picture { roots: Vec<Option<Arc<OwnedFd>>> },
}

struct Walk<'q> {
    max_depth: usize,
    remaining: usize,
    /// Folders walked so far, kept only when a folder can be reached twice (see `roots_overlap`).
    visited: Option<HashSet<Vec<u8>>>,
    outcome: Outcome,
    supply: Supply<'q>,
    /// The picture this walk leaves: the one it started from, with what it listed from disk.
    picture: Picture,
    roots: &'q [AbsoluteRoot],
    buffers: Buffers,
    /// How long the walk's waits for its helpers have been.
    waits: Waits,
    /// Whether the folders listed from disk go into the picture.
    keep_picture: bool,
}

impl<'q> Walk<'q> {
    fn new(
        roots: &'q [AbsoluteRoot],
        max_entries: usize,
        max_depth: usize,
        supply: Supply<'q>,
        picture: Picture,
    ) -> Self {
        Walk {
            max_depth,
            remaining: max_entries,
            visited: roots_overlap(roots).then(HashSet::new),
            outcome: Outcome { roots: vec![None; roots.len()], ..Outcome::default() },
            supply,
            picture,
            roots,
            buffers: Buffers::default(),
            waits: Waits::new(false),
            keep_picture: true,
        }
    }

    fn finish(mut self) -> Outcome {
        let mut outcome = std::mem::take(&mut self.outcome);
        if let Supply::Picture { roots } = &self.supply {
            outcome.roots.clone_from(roots);
        }
        self.picture.roots = outcome.roots.iter().map(|fd| fd.as_deref().and_then(identity)).collect();
        outcome.picture = std::mem::take(&mut self.picture);
        if let Some(digests) = self.buffers.digests.take() {
            outcome.absorb(digests);
        }
        outcome
    }

    fn root_fd(&self, root: usize) -> Option<Arc<OwnedFd>> {
        match &self.supply {
            Supply::Picture { roots } => roots.get(root).cloned().flatten(),
            Supply::Disk(_) => None,
        }
    }

    fn diagnose(&mut self, diagnostic: Diagnostic) {
        if let Some(errno) = diagnostic.exhausted {
            // Nothing more can be learned: stop, and say where.
            self.remaining = 0;
            let path = String::from_utf8_lossy(&diagnostic.path).into_owned();
            self.outcome.exhausted.get_or_insert_with(|| (path, errno.into()));
            return;
        }
        if self.outcome.diagnostics.len() < MAX_DIAGNOSTICS {
            self.outcome.diagnostics.push(diagnostic.render());
        }
    }

    /// Queues folders for a worker to prepare.
    fn queue(&self, opener: Opener, folders: Vec<RunFolder>, levels: usize) -> Arc<Slot> {
        let slot = Arc::new(Slot::default());
        if let Supply::Disk(queue) = &self.supply {
            queue.push(Task { opener, folders, levels, slot: Arc::clone(&slot) });
        }
        slot
    }

    /// The prepared folders of `slot`, preparing queued folders meanwhile rather than waiting.
    /// The walk prepares the folders it waits for itself if no helper has taken them yet: taken
    /// in queue order, they would wait behind the runs queued ahead of them (a skill's
    /// subfolders, queued as the walk enters it, behind its siblings'), the helpers would empty
    /// the queue meanwhile, and then sleep until the walk came out of the skill to queue more.
    fn wait(&mut self, slot: &Slot) -> Vec<RunFolder> {
        if let Supply::Disk(queue) = self.supply
            && let Some(task) = queue.take_for(slot)
        {
            task.run(&mut self.buffers, &queue.kept);
        }
        loop {
            if let Some(prepared) = slot.try_take() {
                return prepared;
            }
            let Supply::Disk(queue) = self.supply else { return slot.take(&mut self.waits) };
            match queue.try_pop() {
                Some(task) => task.run(&mut self.buffers, &queue.kept),
                None => return slot.take(&mut self.waits),
            }
        }
    }

    /// The folder at `path` (a child of the folder open as `parent`, if it was opened), from the
    /// picture or else from disk.
    fn fetch(&mut self, parent: Option<&Arc<OwnedFd>>, path: Vec<u8>, root: usize) -> Option<Prepared> {
        if let Some(visit) = self.picture.folders.get(&path) {
            return Some(Prepared::pictured(path, visit));
        }
        let parent = match parent {
            Some(parent) => Arc::clone(parent),
            None => {
                // Opened beneath the root the walk holds, component by component, never
                // following a symlink; a folder on the way that is gone now means the tree
                // changed under the walk.
                let root_fd = self.root_fd(root)?;
                let below = path.get(self.roots[root].as_bytes().len()..).unwrap_or_default();
                let parts: Vec<&[u8]> = below.split(|&b| b == b'/').filter(|part| !part.is_empty()).collect();
                let parent_parts = &parts[..parts.len().saturating_sub(1)];
                Arc::new(guarded::open_beneath(root_fd.as_fd(), parent_parts).ok()?)
            }
        };
        Some(prepare(&Opener::Child(parent), path, &mut self.buffers))
    }

    /// Walks the folder `prepared`; `next` is the sibling the walk enters after it, if that one
    /// is prepared already (see [`Ahead::next_sibling`]).
    fn directory(&mut self, prepared: Prepared, depth: usize, root: usize, next: Option<&mut Prepared>) {
        let Prepared { path, visit, fd, mut files, subfolders, queued } = prepared;
        if let Some(visited) = &mut self.visited
            && !visited.insert(path.to_vec())
        {
            self.forgo(subfolders.as_deref().unwrap_or_default());
            return;
        }
        let visit = if self.keep_picture && (fd.is_some() || matches!(self.supply, Supply::Disk(_)) || visit.is_err()) {
            let shared = visit.share();
            self.picture.folders.insert(path.to_vec(), Arc::clone(&shared));
            Held::Shared(shared)
        } else {
            visit
        };
        let folder = match &*visit {
            Ok(folder) => folder,
            Err(failure) => return self.diagnose(Diagnostic::os(&path, failure)),
        };
        if depth == 0 && matches!(self.supply, Supply::Disk(_)) {
            self.outcome.roots[root].clone_from(&fd);
        }
        if !self.count(&path, folder) {
            return;
        }
        let queue = match self.supply {
            Supply::Disk(queue) => Some(queue),
            Supply::Picture { .. } => None,
        };
        let from_disk = queue.is_some();
        // A folder from disk whose subfolders the walk may enter came with them prepared, or else
        // keeps its descriptor.
        let mut nested = subfolders.map(|subfolders| subfolders.into_vec().into_iter());
        // Runs for the next sibling's subfolders are queued ahead only where a folder is walked
        // once (see `roots_overlap`): one walked again would leave their descriptors counted.
        let next = next.filter(|_| self.visited.is_none());
        let mut ahead = (fd.as_ref().zip(queue)).filter(|_| depth < self.max_depth).map(|(parent, queue)| {
            let of = Parent { fd: parent, path: &path, folder, levels: self.max_depth.saturating_sub(depth + 1) };
            Ahead::new(of, &queue.kept, queued.map(|queued| *queued), next)
        });
        for entry in folder.entries() {
            match entry.kind {
                Kind::Directory if depth < self.max_depth && self.remaining > 0 => {
                    let (prepared, next) = if let Some(nested) = &mut nested {
                        let subfolder = nested.next().expect("a folder's subfolders are prepared together");
                        // On the walk's path from now on (see `Ahead::next`).
                        self.forgo([&subfolder]);
                        (subfolder, None)
                    } else if from_disk {
                        let ahead = ahead.as_mut().expect("a folder listed from disk with subfolders is open");
                        let subfolder = ahead.next(self);
                        (subfolder, ahead.next_sibling())
                    } else {
                        let child = join(&path, folder.name(entry));
                        match self.fetch(fd.as_ref(), child, root) {
                            Some(prepared) => (prepared, None),
                            None => {
                                self.outcome.lost = true;
                                self.remaining = 0;
                                return;
                            }
                        }
                    };
                    self.directory(prepared, depth + 1, root, next);
                }
                Kind::Directory => {
                    // Not entered: beyond the depth bound (nothing was prepared for it), or the
                    // entry budget is spent (which ends the walk: what was prepared is discarded).
                    self.diagnose(Diagnostic::new(&join(&path, folder.name(entry)), DEPTH_LIMIT));
                }
                Kind::SkillFile => match folder.skill.as_ref().expect("a listed SKILL.md is read") {
                    Ok((skill, version)) => {
                        let files = files.take();
                        self.outcome.found.push(Found { skill: skill.clone(), root, version: *version, files });
                    }
                    Err(diagnostic) => self.diagnose((**diagnostic).clone()),
                },
                Kind::Other => {}
            }
        }
    }

    /// Takes `subfolders`, prepared with their folder, off the count of descriptors kept ahead of
    /// the walk: they are on its path now, or it will not go through them.
    fn forgo<'p>(&self, subfolders: impl IntoIterator<Item = &'p Prepared>) {
        if let Supply::Disk(queue) = self.supply {
            let kept = subfolders.into_iter().filter(|subfolder| subfolder.fd.is_some()).count();
            queue.kept.fetch_sub(kept, Ordering::Relaxed);
        }
    }

    /// Counts a folder's entries against the entry budget, reporting what examining them raised,
    /// as nagents does while it lists. A folder that does not fit yields nothing (never an
    /// arbitrary subset) and ends the walk; a folder that could not be listed counts nothing.
    fn count(&mut self, path: &[u8], folder: &Folder) -> bool {
        for (position, name, failure) in folder.unexamined() {
            if *position >= self.remaining {
                break;
            }
            self.diagnose(Diagnostic::os(&join(path, name), failure));
        }
        if folder.len() > self.remaining {
            self.diagnose(Diagnostic::new(path, ENTRY_LIMIT));
            self.remaining = 0;
            return false;
        }
        if let Some(failure) = folder.error() {
            self.diagnose(Diagnostic::os(path, failure));
            return false;
        }
        self.remaining -= folder.len();
        true
    }
}

/// The subfolders of a folder being walked from disk, prepared ahead of the walk in runs.
///
/// Once every subfolder of the folder is queued, runs for the subfolders of the sibling the walk
/// enters next are queued too, if that sibling is prepared already: the helpers would otherwise
/// run out of work at the end of each folder, while the walk takes its last runs and until it
/// enters the sibling. Those runs travel with the sibling ([`Prepared::queued`]), whose own
/// `Ahead` takes them over.
struct Ahead<'f> {
    /// The folder, and the levels the walk may enter beneath its subfolders.
    of: Parent<'f>,
    subfolders: Vec<Entry>,
    /// The runs queued, and how many subfolders they take.
    queued: Queued,
    /// What is left of the run being consumed; the folders it left unprepared (it stopped at its
    /// descriptor bound) still as paths.
    current: std::vec::IntoIter<RunFolder>,
    /// The scan's count of descriptors kept by runs and not yet handed to the walk.
    kept_ahead: &'f AtomicUsize,
    /// The sibling the walk enters after this folder, if it is prepared already.
    sibling: Option<&'f mut Prepared>,
}

/// A folder whose subfolders are prepared in runs: open as `fd` at `path`, listed as `folder`,
/// with `levels` of folders beneath its subfolders that the walk may enter (see [`Task::levels`]).
struct Parent<'f> {
    fd: &'f Arc<OwnedFd>,
    path: &'f [u8],
    folder: &'f Folder,
    levels: usize,
}

impl Parent<'_> {
    /// Queues runs of `subfolders` (the folder's, `count` of them) after the first ones `queued`
    /// takes already, until it holds `limit` runs or every subfolder is queued. Runs shrink toward
    /// the last subfolders (each takes at most one in [`TAIL_SHARE`] of those left), so that the
    /// threads finish the folder at about the same time: with whole runs to the end, one thread
    /// prepared the last run while the other, out of work, waited.
    fn queue_runs(
        &self,
        walk: &Walk<'_>,
        subfolders: impl Iterator<Item = Entry>,
        count: usize,
        queued: &mut Queued,
        limit: usize,
    ) {
        let mut rest = subfolders.skip(queued.queued);
        while queued.runs.len() < limit && queued.queued < count {
            let take = RUN.min((count - queued.queued).div_ceil(TAIL_SHARE));
            let folders = rest
                .by_ref()
                .take(take)
                .map(|entry| RunFolder::Path(join(self.path, self.folder.name(entry))))
                .collect();
            queued.runs.push_back(walk.queue(Opener::Child(Arc::clone(self.fd)), folders, self.levels));
            queued.queued += take;
        }
    }
}

impl<'f> Ahead<'f> {
    fn new(
        of: Parent<'f>,
        kept_ahead: &'f AtomicUsize,
        queued: Option<Queued>,
        sibling: Option<&'f mut Prepared>,
    ) -> Self {
        let subfolders = of.folder.subfolders().collect();
        let queued = queued.unwrap_or_default();
        Ahead { of, subfolders, queued, current: Vec::new().into_iter(), kept_ahead, sibling }
    }

    /// The subfolder the walk enters after the one it was last handed, if it is prepared already.
    fn next_sibling(&mut self) -> Option<&mut Prepared> {
        match self.current.as_mut_slice().first_mut()? {
            RunFolder::Prepared(prepared) => Some(prepared),
            RunFolder::Path(_) => None,
        }
    }

    /// The next subfolder, prepared; the walk asks for them in order.
    fn next(&mut self, walk: &mut Walk<'_>) -> Prepared {
        loop {
            match self.current.next() {
                Some(RunFolder::Prepared(prepared)) => {
                    if prepared.fd.is_some() {
                        // On the walk's path from now on (a run left behind when the walk ends
                        // early is never handed out, but then the scan is over).
                        self.kept_ahead.fetch_sub(1, Ordering::Relaxed);
                    }
                    return prepared;
                }
                Some(RunFolder::Path(path)) => {
                    let opener = Opener::Child(Arc::clone(self.of.fd));
                    let prepared = prepare_child(&opener, path, self.of.levels, &mut walk.buffers);
                    // Those beneath are handed to the walk as it reaches them, and counted till then.
                    self.kept_ahead.fetch_add(kept_beneath(&prepared), Ordering::Relaxed);
                    return prepared;
                }
                None => {}
            }
            self.queue_runs(walk);
            let slot = self.queued.runs.pop_front().expect("the next subfolder is queued");
            // The runs after it are queued before the walk waits, so that it can prepare one.
            self.queue_runs(walk);
            self.current = walk.wait(&slot).into_iter();
        }
    }

    /// Queues runs until [`RUNS_AHEAD`] wait, or every subfolder is queued; then, while fewer
    /// than [`RUNS_AHEAD`] wait, runs of the next sibling's subfolders (see [`Ahead`]).
    fn queue_runs(&mut self, walk: &Walk<'_>) {
        let (subfolders, count) = (self.subfolders.iter().copied(), self.subfolders.len());
        self.of.queue_runs(walk, subfolders, count, &mut self.queued, RUNS_AHEAD);
        let room = RUNS_AHEAD.saturating_sub(self.queued.runs.len());
        if self.queued.queued < count || room == 0 {
            return;
        }
        let Some(Prepared { path, visit, fd: Some(fd), subfolders: None, queued, .. }) = self.sibling.as_deref_mut()
        else {
            return;
        };
        let Ok(folder) = &**visit else { return };
        let queued = queued.get_or_insert_with(Box::default);
        let sibling = Parent { fd, path, folder, levels: self.of.levels };
        let limit = room + queued.runs.len();
        sibling.queue_runs(walk, folder.subfolders(), folder.subfolders().count(), queued, limit);
    }
}
