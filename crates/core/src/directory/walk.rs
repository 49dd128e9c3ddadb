//! One blocking scan of a directory source, step for step nagents' walk.
//!
//! The decisions of the walk (what is counted, in which order, how deep, what is reported) are
//! taken on the calling thread in exactly nagents' order. The system calls are not: a few worker
//! threads open, list and sort the folders the walk will visit next and read their `SKILL.md`,
//! a bounded window ahead of it. The walk then consumes those results in its own order, so the
//! outcome is the same as a sequential walk's; work done for a folder the walk does not enter
//! (a bound was reached) is discarded.
//!
//! A walk also leaves a [`Picture`]: every folder it listed, with its sorted entries and its
//! `SKILL.md`'s parse result, without descriptors. A later walk can start from that picture,
//! told which paths changed: it takes every other folder from memory and lists only the changed
//! ones (and folders it has never seen) from disk. Its decisions are the same code as a full
//! walk's, so the walk order, both bounds and every diagnostic come out exactly as a full walk
//! of the same tree would give them.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};

use super::guarded::{self, OsFailure, SKILL_FILE};
use super::path::{AbsoluteRoot, join, last_component};
use crate::discover::ContentVersion;
use crate::metadata::parse_fields;
use crate::pystr;
use crate::skill::{InvalidSkill, MAX_LOCATION_CHARS, Skill};

const MAX_DIAGNOSTICS: usize = 20;
const MAX_DIAGNOSTIC_PART: usize = 300;
const ENTRY_LIMIT: &str = "discovery entry limit reached; increase max_entries";
const DEPTH_LIMIT: &str = "discovery depth/entry limit reached";
const LOCATION_NOT_UTF8: &str = "skill location is not valid UTF-8; rename the folder";
/// Subfolders prepared ahead of the walk, per folder being walked. Each prepared folder holds a
/// descriptor, so this (times the depth) bounds the descriptors a scan holds.
const WINDOW: usize = 16;
const MAX_THREADS: usize = 4;
/// How often an idle helper looks for work again before it sleeps.
const IDLE_POLLS: u32 = 64;
/// Large enough for any single directory entry, so `getdents64` never fails with `EINVAL`.
const LISTING_BUFFER: usize = 32 * 1024;

/// A discovered skill and the index of the root it was found under.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub skill: Skill,
    pub root: usize,
    /// The version of the content the scan read.
    pub version: ContentVersion,
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

/// What listing one folder gave: the folder, or why it could not be opened or listed.
type Visit = Result<Folder, OsFailure>;

pub(crate) fn scan(roots: &[AbsoluteRoot], max_entries: usize, max_depth: usize) -> Outcome {
    // The walk prepares folders itself while it would otherwise wait, so one core is its own.
    let helpers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(2, MAX_THREADS) - 1;
    let queue = Queue::default();
    std::thread::scope(|scope| {
        for _ in 0..helpers {
            std::thread::Builder::new()
                .name("skill-scan".into())
                .spawn_scoped(scope, || queue.serve())
                .expect("cannot start a scan thread");
        }
        let mut walk = Walk::new(roots, max_entries, max_depth, Supply::Disk(&queue), Picture::default());
        for (index, root) in roots.iter().enumerate() {
            if walk.remaining == 0 {
                break;
            }
            let folder = walk.queue(Opener::Root, root.as_bytes().to_vec());
            let prepared = walk.wait(&folder);
            walk.directory(prepared, 0, index);
        }
        let outcome = walk.finish();
        queue.close();
        outcome
    })
}

/// A walk of the same roots and bounds from `picture`, with the picture's folders trusted to be
/// what is on disk (the caller has [forgotten](Picture::forget) every changed path). Folders the
/// picture lacks are listed from disk, opened beneath their root as the full walk opens them.
pub(crate) fn scan_from(roots: &[AbsoluteRoot], max_entries: usize, max_depth: usize, picture: Picture) -> Outcome {
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
    for (index, root) in roots.iter().enumerate() {
        if walk.remaining == 0 || walk.outcome.lost {
            break;
        }
        let path = root.as_bytes().to_vec();
        let prepared = match walk.picture.folders.get(&path) {
            Some(visit) => Prepared { path, visit: Arc::clone(visit), fd: None },
            None => {
                let root = walk.root_fd(index);
                match root {
                    Some(fd) => {
                        Prepared { visit: Arc::new(Ok(relist(&fd, &path, &mut walk.buffers))), path, fd: Some(fd) }
                    }
                    None => prepare(Opener::Root, path, &mut walk.buffers),
                }
            }
        };
        walk.directory(prepared, 0, index);
    }
    walk.finish()
}

/// Lists a folder already open (a root opened to check its identity).
fn relist(fd: &OwnedFd, path: &[u8], buffers: &mut Buffers) -> Folder {
    let (mut folder, fd) =
        match rustix::fs::openat(fd, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()) {
            Ok(again) => list(again, path, &mut buffers.listing),
            Err(errno) => {
                return Folder {
                    names: Vec::new(),
                    entries: Vec::new(),
                    unexamined: Vec::new(),
                    error: Some(OsFailure::new(errno, path)),
                    skill: None,
                };
            }
        };
    let names = &folder.names;
    let name = |entry: &Entry| &names[entry.start as usize..(entry.start + entry.len) as usize];
    folder.entries.sort_by(|a, b| pystr::cmp_units(name(a), name(b)));
    if folder.error.is_none() && folder.entries.iter().any(|entry| entry.kind == Kind::SkillFile) {
        let location = join(path, SKILL_FILE.as_bytes());
        folder.skill = Some(read_skill(fd.as_fd(), &location, &mut buffers.content));
    }
    folder
}

/// A folder's device and inode.
// The field types of `struct stat` differ between architectures.
#[allow(clippy::unnecessary_cast)]
fn identity(fd: &OwnedFd) -> Option<(u64, u64)> {
    rustix::fs::fstat(fd).ok().map(|stat| (stat.st_dev as u64, stat.st_ino as u64))
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

/// A skipped path and why, rendered only if it is among the first 20.
#[derive(Debug, Clone)]
struct Diagnostic {
    path: Vec<u8>,
    message: Vec<u8>,
    /// The error, when it says the process or the system ran out of resources.
    exhausted: Option<rustix::io::Errno>,
}

impl Diagnostic {
    fn new(path: &[u8], message: impl Into<Vec<u8>>) -> Self {
        Diagnostic { path: path.to_vec(), message: message.into(), exhausted: None }
    }

    fn os(path: &[u8], failure: &OsFailure) -> Self {
        let exhausted = guarded::exhausted(failure.errno).then_some(failure.errno);
        Diagnostic { exhausted, ..Diagnostic::new(path, failure.message.as_str()) }
    }

    /// `f"{str(path)[:300]}: {str(error)[:300]}"`, undecodable bytes shown as U+FFFD.
    fn render(&self) -> String {
        let mut text = pystr::take_units(&self.path, MAX_DIAGNOSTIC_PART).to_vec();
        text.extend_from_slice(b": ");
        text.extend_from_slice(pystr::take_units(&self.message, MAX_DIAGNOSTIC_PART));
        String::from_utf8_lossy(&text).into_owned()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Directory,
    SkillFile,
    /// Symlinks, other files, special files, and entries that could not be examined: counted,
    /// never followed or read.
    Other,
}

/// Each thread's reusable buffers: one for `getdents64`, one for file content.
struct Buffers {
    listing: Vec<u8>,
    content: Vec<u8>,
}

impl Default for Buffers {
    fn default() -> Self {
        Buffers { listing: Vec::with_capacity(LISTING_BUFFER), content: Vec::new() }
    }
}

/// A listed entry; its name is `names[start..start + len]` of its listing.
#[derive(Debug, Clone, Copy)]
struct Entry {
    start: u32,
    len: u32,
    kind: Kind,
}

/// A folder opened and listed, with its `SKILL.md` already read: by a worker for a full walk, or
/// from the picture.
struct Prepared {
    path: Vec<u8>,
    visit: Arc<Visit>,
    /// The folder's descriptor, when it was opened for this walk (never for one from the picture).
    fd: Option<Arc<OwnedFd>>,
}

/// A folder's listing and its `SKILL.md`, as a walk saw them.
#[derive(Debug)]
pub(crate) struct Folder {
    /// Every entry's name, back to back.
    names: Vec<u8>,
    /// Entries in code-point order of names.
    entries: Vec<Entry>,
    /// Entries whose type could not be looked up: their position in listing order (which decides
    /// whether nagents reports them before the entry limit trips), name and error.
    unexamined: Vec<(usize, Vec<u8>, OsFailure)>,
    /// Listing failed after `entries`.
    error: Option<OsFailure>,
    skill: Option<Result<(Skill, ContentVersion), Diagnostic>>,
}

impl Folder {
    fn name(&self, entry: Entry) -> &[u8] {
        &self.names[entry.start as usize..(entry.start + entry.len) as usize]
    }
}

enum Opener {
    Root,
    Child(Arc<OwnedFd>),
}

/// A folder to prepare, and where to put the result.
struct Task {
    opener: Opener,
    path: Vec<u8>,
    slot: Arc<Slot>,
}

/// Where a prepared folder is delivered; the walk waits on it only when no queued work is left
/// for it to do itself.
#[derive(Default)]
struct Slot {
    state: Mutex<SlotState>,
    ready: Condvar,
}

#[derive(Default)]
struct SlotState {
    value: Option<Prepared>,
    waiting: bool,
}

impl Slot {
    fn put(&self, prepared: Prepared) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.value = Some(prepared);
        if state.waiting {
            self.ready.notify_one();
        }
    }

    fn try_take(&self) -> Option<Prepared> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).value.take()
    }

    fn take(&self) -> Prepared {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(prepared) = state.value.take() {
                return prepared;
            }
            state.waiting = true;
            state = self.ready.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Folders to prepare, in the order the walk will need them. Wake-ups cost system calls, so a
/// push wakes a helper only when one is idle.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    available: Condvar,
}

#[derive(Default)]
struct QueueState {
    tasks: VecDeque<Task>,
    idle: usize,
    closed: bool,
}

impl Queue {
    fn push(&self, task: Task) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.tasks.push_back(task);
        if state.idle > 0 {
            self.available.notify_one();
        }
    }

    fn try_pop(&self) -> Option<Task> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).tasks.pop_front()
    }

    fn close(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.closed = true;
        state.tasks.clear();
        self.available.notify_all();
    }

    /// A helper thread's loop: prepare queued folders until the walk ends. The walk queues the
    /// next folders within microseconds, so an idle helper polls briefly before it sleeps: a
    /// sleep and its wake-up cost more than the folder.
    fn serve(&self) {
        let mut buffers = Buffers::default();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut polls = 0;
        loop {
            if let Some(task) = state.tasks.pop_front() {
                drop(state);
                task.run(&mut buffers);
                polls = 0;
                state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            } else if state.closed {
                return;
            } else if polls < IDLE_POLLS {
                drop(state);
                polls += 1;
                std::thread::yield_now();
                state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            } else {
                state.idle += 1;
                state = self.available.wait(state).unwrap_or_else(PoisonError::into_inner);
                state.idle -= 1;
                polls = 0;
            }
        }
    }
}

impl Task {
    fn run(self, buffers: &mut Buffers) {
        self.slot.put(prepare(self.opener, self.path, buffers));
    }
}

/// Opens, lists and sorts a folder, and reads its `SKILL.md` if it has one.
fn prepare(opener: Opener, path: Vec<u8>, buffers: &mut Buffers) -> Prepared {
    let opened = match &opener {
        Opener::Root => guarded::open_root(&path),
        Opener::Child(parent) => guarded::open_child_directory(parent.as_fd(), last_component(&path)),
    };
    let fd = match opened {
        Ok(fd) => fd,
        Err(failure) => return Prepared { path, visit: Arc::new(Err(failure)), fd: None },
    };
    let (mut folder, fd) = list(fd, &path, &mut buffers.listing);
    let names = &folder.names;
    let name = |entry: &Entry| &names[entry.start as usize..(entry.start + entry.len) as usize];
    folder.entries.sort_by(|a, b| pystr::cmp_units(name(a), name(b)));
    if folder.error.is_none() && folder.entries.iter().any(|entry| entry.kind == Kind::SkillFile) {
        let location = join(&path, SKILL_FILE.as_bytes());
        folder.skill = Some(read_skill(fd.as_fd(), &location, &mut buffers.content));
    }
    Prepared { path, visit: Arc::new(Ok(folder)), fd: Some(Arc::new(fd)) }
}

fn list(fd: OwnedFd, path: &[u8], buffer: &mut Vec<u8>) -> (Folder, OwnedFd) {
    let mut names = Vec::new();
    let mut entries = Vec::new();
    let mut unexamined = Vec::new();
    let mut error = None;
    let mut stream = RawDir::new(fd.as_fd(), buffer.spare_capacity_mut());
    while let Some(entry) = stream.next() {
        let entry = match entry {
            Ok(entry) => entry,
            Err(errno) => {
                error = Some(OsFailure::new(errno, path));
                break;
            }
        };
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let file_type = match entry.file_type() {
            FileType::Unknown => match rustix::fs::statat(fd.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                Err(errno) => {
                    unexamined.push((entries.len(), name.to_vec(), OsFailure::new(errno, name)));
                    FileType::Unknown
                }
            },
            file_type => file_type,
        };
        let kind = match file_type {
            FileType::Directory => Kind::Directory,
            FileType::RegularFile if name == SKILL_FILE.as_bytes() => Kind::SkillFile,
            _ => Kind::Other,
        };
        // A name is at most 255 bytes, and a listing that overflows u32 offsets would need
        // millions of entries, far past any entry budget.
        let start = u32::try_from(names.len()).unwrap_or(u32::MAX);
        names.extend_from_slice(name);
        entries.push(Entry { start, len: name.len() as u32, kind });
    }
    names.shrink_to_fit();
    entries.shrink_to_fit();
    (Folder { names, entries, unexamined, error, skill: None }, fd)
}

/// Reads and parses one `SKILL.md`; `path` is its location.
fn read_skill(
    folder: BorrowedFd<'_>,
    path: &[u8],
    buffer: &mut Vec<u8>,
) -> Result<(Skill, ContentVersion), Diagnostic> {
    let content = guarded::read_skill_file_into(folder, buffer).map_err(|error| {
        let exhausted = match &error {
            guarded::ReadError::Os(error) => error.raw_os_error().map(rustix::io::Errno::from_raw_os_error),
            _ => None,
        };
        Diagnostic {
            exhausted: exhausted.filter(|&errno| guarded::exhausted(errno)),
            ..Diagnostic::new(path, error.message())
        }
    })?;
    let folder_path = &path[..path.len() - SKILL_FILE.len() - 1];
    let folder_name = String::from_utf8_lossy(last_component(folder_path));
    let location = String::from_utf8_lossy(path);
    let message = match parse_fields(content, &folder_name) {
        // The message starts with the location; Python prints its raw bytes.
        Err(kind) => [path, kind.message("").as_bytes()].concat(),
        Ok((name, description)) => match Skill::new(name, description, location.as_ref()) {
            Err(error) => error.to_string().into_bytes(),
            Ok(skill) if matches!(location, Cow::Borrowed(_)) => {
                return Ok((skill, ContentVersion::of(content)));
            }
            Ok(_) if pystr::unit_len(path) > MAX_LOCATION_CHARS => InvalidSkill::Location.to_string().into_bytes(),
            // nagents would publish a location that no JSON or manifest can carry.
            Ok(_) => LOCATION_NOT_UTF8.as_bytes().to_vec(),
        },
    };
    Err(Diagnostic::new(path, message))
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
        }
    }

    fn finish(mut self) -> Outcome {
        let mut outcome = std::mem::take(&mut self.outcome);
        if let Supply::Picture { roots } = &self.supply {
            outcome.roots.clone_from(roots);
        }
        self.picture.roots = outcome.roots.iter().map(|fd| fd.as_deref().and_then(identity)).collect();
        outcome.picture = std::mem::take(&mut self.picture);
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

    /// Queues a folder for a worker to prepare.
    fn queue(&self, opener: Opener, path: Vec<u8>) -> Arc<Slot> {
        let slot = Arc::new(Slot::default());
        if let Supply::Disk(queue) = &self.supply {
            queue.push(Task { opener, path, slot: Arc::clone(&slot) });
        }
        slot
    }

    /// The prepared folder of `slot`, preparing queued folders meanwhile rather than waiting.
    fn wait(&mut self, slot: &Slot) -> Prepared {
        loop {
            if let Some(prepared) = slot.try_take() {
                return prepared;
            }
            let task = match &self.supply {
                Supply::Disk(queue) => queue.try_pop(),
                Supply::Picture { .. } => None,
            };
            match task {
                Some(task) => task.run(&mut self.buffers),
                None => return slot.take(),
            }
        }
    }

    /// The folder at `path` (a child of the folder open as `parent`, if it was opened), from the
    /// picture or else from disk.
    fn fetch(&mut self, parent: Option<&Arc<OwnedFd>>, path: Vec<u8>, root: usize) -> Option<Prepared> {
        if let Some(visit) = self.picture.folders.get(&path) {
            return Some(Prepared { path, visit: Arc::clone(visit), fd: None });
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
        Some(prepare(Opener::Child(parent), path, &mut self.buffers))
    }

    fn directory(&mut self, prepared: Prepared, depth: usize, root: usize) {
        let Prepared { path, visit, fd } = prepared;
        if let Some(visited) = &mut self.visited
            && !visited.insert(path.clone())
        {
            return;
        }
        if fd.is_some() || matches!(self.supply, Supply::Disk(_)) || visit.is_err() {
            self.picture.folders.insert(path.clone(), Arc::clone(&visit));
        }
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
        let from_disk = matches!(self.supply, Supply::Disk(_));
        let subfolders: Vec<Entry> = if depth < self.max_depth && from_disk {
            folder.entries.iter().copied().filter(|entry| entry.kind == Kind::Directory).collect()
        } else {
            Vec::new()
        };
        let mut ahead: VecDeque<Arc<Slot>> = VecDeque::with_capacity(WINDOW.min(subfolders.len()));
        let mut next_to_prepare = 0;
        for &entry in &folder.entries {
            match entry.kind {
                Kind::Directory if depth < self.max_depth && self.remaining > 0 => {
                    let child = join(&path, folder.name(entry));
                    let prepared = if from_disk {
                        let parent = fd.as_ref().expect("a folder listed from disk is open");
                        while ahead.len() < WINDOW && next_to_prepare < subfolders.len() {
                            let child = join(&path, folder.name(subfolders[next_to_prepare]));
                            ahead.push_back(self.queue(Opener::Child(Arc::clone(parent)), child));
                            next_to_prepare += 1;
                        }
                        let slot = ahead.pop_front().expect("the next subfolder is prepared");
                        self.wait(&slot)
                    } else {
                        match self.fetch(fd.as_ref(), child, root) {
                            Some(prepared) => prepared,
                            None => {
                                self.outcome.lost = true;
                                self.remaining = 0;
                                return;
                            }
                        }
                    };
                    self.directory(prepared, depth + 1, root);
                }
                Kind::Directory => {
                    // Not entered; a prepared result for it is discarded.
                    if depth < self.max_depth && from_disk {
                        if ahead.is_empty() {
                            next_to_prepare += 1;
                        } else {
                            ahead.pop_front();
                        }
                    }
                    self.diagnose(Diagnostic::new(&join(&path, folder.name(entry)), DEPTH_LIMIT));
                }
                Kind::SkillFile => match folder.skill.as_ref().expect("a listed SKILL.md is read") {
                    Ok((skill, version)) => {
                        self.outcome.found.push(Found { skill: skill.clone(), root, version: *version });
                    }
                    Err(diagnostic) => self.diagnose(diagnostic.clone()),
                },
                Kind::Other => {}
            }
        }
    }

    /// Counts a folder's entries against the entry budget, reporting what examining them raised,
    /// as nagents does while it lists. A folder that does not fit yields nothing (never an
    /// arbitrary subset) and ends the walk; a folder that could not be listed counts nothing.
    fn count(&mut self, path: &[u8], folder: &Folder) -> bool {
        for (position, name, failure) in &folder.unexamined {
            if *position >= self.remaining {
                break;
            }
            self.diagnose(Diagnostic::os(&join(path, name), failure));
        }
        if folder.entries.len() > self.remaining {
            self.diagnose(Diagnostic::new(path, ENTRY_LIMIT));
            self.remaining = 0;
            return false;
        }
        if let Some(failure) = &folder.error {
            self.diagnose(Diagnostic::os(path, failure));
            return false;
        }
        self.remaining -= folder.entries.len();
        true
    }
}
