//! What a walk reads from disk: folders opened beneath their parents, listed and sorted, and their
//! `SKILL.md` read and parsed — in runs of sibling folders, by helper threads a bounded window
//! ahead of the walk, which takes the results in its own order (`walk`). Nothing here decides what
//! a walk counts or reports.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};

use super::FolderObserver;
use super::files::{self, FileKey, Hashes, Lister, Stamp};
use super::guarded::{self, Check, OsFailure, ReadError, SKILL_FILE, SkillFileRead};
use super::path::{join, join_into, last_component};
use crate::discover::ContentVersion;
use crate::files::{Digest, FileListing};
use crate::metadata::parse_fields;
use crate::pystr;
use crate::skill::{InvalidSkill, MAX_LOCATION_CHARS, Skill};

/// Sibling folders prepared by one task. A task goes to a sleeping helper with a wake-up, and its
/// result back to the walk through a lock: a run of folders makes that small next to its system
/// calls, where one folder (a few calls) does not.
pub(super) const RUN: usize = 8;

// A run travels in one vector, the folders it prepares in it. Kept under 1,024 bytes, it is a
// small request to glibc's allocator, which, unlike a larger one, does not first merge every
// freed small block of the thread's heap (the walk frees the folders of every run it consumes).
const _: () = assert!(RUN * std::mem::size_of::<RunFolder>() < 1024);
/// Runs queued ahead of the one the walk waits for, per folder being walked. Deep enough that a
/// helper finds work whenever it finishes a run: with a window of one run per thread, the walk
/// took the queued runs itself while it waited, the helper slept, and each run queued next had to
/// wake it.
pub(super) const RUNS_AHEAD: usize = 12;
/// Descriptors a run keeps, of folders the walk opens folders beneath: a run stops once it holds
/// this many. Any other folder is closed by the thread that listed it.
pub(super) const MAX_KEPT: usize = 4;
/// Descriptors kept by runs and not yet handed to the walk, across all folders being walked: a run
/// stops when the scan holds this many (give or take one folder's, `1 + NESTED`, per thread).
/// Handed to the walk, a descriptor is on the path it walks, which the depth bound bounds.
pub(super) const MAX_KEPT_AHEAD: usize = 64;
pub(super) const MAX_THREADS: usize = 4;
/// A folder of a run with at most this many subfolders comes with them prepared, in the same
/// task (see [`Prepared::subfolders`]): a skill's few folders (`references/`, `scripts/`). Each
/// of them that the walk will open folders beneath keeps its descriptor, so a run may keep up to
/// this many more than [`MAX_KEPT`].
pub(super) const NESTED: usize = 4;
/// How long a thread out of work (a helper with an empty queue, the walk waiting for a run a
/// helper holds) watches for it before it sleeps, while its waits are short ([`Waits`]). A sleep
/// costs the waker a system call and the sleeper the wake-up's latency (tens of microseconds on a
/// virtual machine): in `check`'s scan of 10,000 skills the threads slept about 600 times, and
/// the scan took a twelfth longer (docs/BENCHMARKS.md). Watching longer gained nothing.
pub(super) const SPIN: Duration = Duration::from_micros(50);
/// Large enough for any single directory entry, so `getdents64` never fails with `EINVAL`.
const LISTING_BUFFER: usize = 32 * 1024;
const MAX_DIAGNOSTIC_PART: usize = 300;
const LOCATION_NOT_UTF8: &str = "skill location is not valid UTF-8; rename the folder";

/// What listing one folder gave: the folder, or why it could not be opened or listed.
pub(crate) type Visit = Result<Folder, OsFailure>;

/// A skipped path and why, rendered only if it is among the first 20.
#[derive(Debug, Clone)]
pub(crate) struct Diagnostic {
    pub(super) path: Vec<u8>,
    pub(super) message: Vec<u8>,
    /// The error, when it says the process or the system ran out of resources.
    pub(super) exhausted: Option<rustix::io::Errno>,
}

impl Diagnostic {
    pub(crate) fn new(path: &[u8], message: impl Into<Vec<u8>>) -> Self {
        Diagnostic { path: path.to_vec(), message: message.into(), exhausted: None }
    }

    pub(super) fn os(path: &[u8], failure: &OsFailure) -> Self {
        let exhausted = guarded::exhausted(failure.errno).then_some(failure.errno);
        Diagnostic { exhausted, ..Diagnostic::new(path, failure.message.as_str()) }
    }

    /// `f"{str(path)[:300]}: {str(error)[:300]}"`, undecodable bytes shown as U+FFFD.
    pub(crate) fn render(&self) -> String {
        let mut text = pystr::take_units(&self.path, MAX_DIAGNOSTIC_PART).to_vec();
        text.extend_from_slice(b": ");
        text.extend_from_slice(pystr::take_units(&self.message, MAX_DIAGNOSTIC_PART));
        String::from_utf8_lossy(&text).into_owned()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Directory,
    SkillFile,
    /// Symlinks, other files, special files, and entries that could not be examined: counted,
    /// never followed or read.
    Other,
}

/// Each thread's reusable buffers: for listing a folder, for a `SKILL.md`'s path and for its
/// content; whom to tell of each folder opened, if anyone; and the digests it took, if the scan
/// lists files.
pub(super) struct Buffers {
    listing: ListingBuffers,
    location: Vec<u8>,
    pub(super) content: Vec<u8>,
    pub(super) observer: Option<Arc<dyn FolderObserver>>,
    pub(super) digests: Option<Digests>,
}

/// The digests of the `SKILL.md` files a walk reads, for the listing of the skills' files that
/// follows it: a file the walk has read whole is not read again there. Only files the last
/// scan's digests do not cover are hashed, and only those read once their status had settled
/// and unchanged by the end of the read, so a digest stands for exactly the content its status
/// names (as one taken by the listing itself would).
///
/// A first scan, which has no listings of the skills' files to reuse, also lists the files of
/// each skill whose folder holds no folders as it reads the `SKILL.md` (its `files`), from its
/// own listing of the folder and through the folder it has open: the listing after the walk
/// would open and list the folder again.
pub(crate) struct Digests {
    known: Arc<Hashes>,
    pub(super) taken: Vec<(FileKey, Digest)>,
    pub(super) files: Option<Lister>,
}

impl Digests {
    pub(crate) fn new(known: Arc<Hashes>) -> Self {
        Digests { known, taken: Vec::new(), files: None }
    }

    /// Digests for one thread of a walk; with `settle_seconds`, it lists each skill's files too
    /// (see [`Digests`]), trusting the digests of files whose status changed at least that long
    /// before now.
    pub(crate) fn of_scan(known: Arc<Hashes>, settle_seconds: Option<i64>) -> Self {
        let files = settle_seconds.map(|settle| Lister::new(Arc::clone(&known), Arc::default(), settle, 0));
        Digests { known, taken: Vec::new(), files }
    }

    /// The files of the skill whose `SKILL.md` was just read from the folder open at `fd`, if
    /// this walk lists them; `None` also where the listing ran out of descriptors or memory (the
    /// listing after the walk tries it again, and fails the scan if it fails too).
    fn list_files(
        &mut self,
        fd: BorrowedFd<'_>,
        folder: &Folder,
        seed: Option<(FileKey, Digest)>,
    ) -> Option<FileListing> {
        let lister = self.files.as_mut()?;
        lister.seed = seed;
        // The folder's own entries are the walk's listing of it, complete (or no skill is read).
        let entries = folder.entries().map(|entry| (folder.name(entry), entry.file_type));
        lister.list_from(fd, entries).ok().map(|listed| listed.listing)
    }

    /// Takes the digest of `read`, opened after `opened_after`, if it is new and settled.
    fn take(&mut self, read: &SkillFileRead<'_>, opened_after: Stamp) {
        let key = FileKey::of(read.stat.as_ref().expect("a read whose digest is taken checks the file's status"));
        let whole = u64::try_from(read.content.len()).is_ok_and(|len| len == key.size());
        if !whole || !files::settled(&key, opened_after) || self.known.contains_key(&key) {
            return;
        }
        match rustix::fs::fstat(&read.file) {
            Ok(after) if FileKey::of(&after) == key => self.taken.push((key, Digest::of(read.content.as_bytes()))),
            _ => {}
        }
    }
}

/// For `getdents64`, and for a listing's names and entries as they are read, and as they are
/// encoded: a folder then takes them, sorted, at their final size ([`Listing`]).
#[derive(Default)]
pub(super) struct ListingBuffers {
    read: Vec<u8>,
    names: Vec<u8>,
    entries: Vec<Entry>,
    encoded: Vec<u8>,
}

impl Buffers {
    pub(super) fn new(observer: Option<Arc<dyn FolderObserver>>) -> Self {
        Buffers {
            listing: ListingBuffers { read: Vec::with_capacity(LISTING_BUFFER), ..ListingBuffers::default() },
            location: Vec::new(),
            content: Vec::new(),
            observer,
            digests: None,
        }
    }
}

impl Default for Buffers {
    fn default() -> Self {
        Buffers::new(None)
    }
}

/// A listed entry; its name is `listing[start..start + len]` of its folder.
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub(super) start: u32,
    pub(super) len: u32,
    pub(super) kind: Kind,
    /// Its type as listed (`Unknown` where it could not be examined), for a listing of the
    /// skill's files from the same listing.
    pub(super) file_type: FileType,
}

/// Bytes before each name in a folder's listing: the entry's kind and type, and the name's length.
const ENTRY_HEADER: usize = 3;

impl Entry {
    /// The entry's kind and type in one byte: the type's bits of a mode (`S_IFMT`, four bits,
    /// shifted down) under the kind.
    fn tag(&self) -> u8 {
        let kind = match self.kind {
            Kind::Other => 0,
            Kind::Directory => 1,
            Kind::SkillFile => 2,
        };
        (kind << 4) | (self.file_type.as_raw_mode() >> 12) as u8
    }

    fn untag(tag: u8) -> (Kind, FileType) {
        let kind = match tag >> 4 {
            1 => Kind::Directory,
            2 => Kind::SkillFile,
            _ => Kind::Other,
        };
        (kind, FileType::from_raw_mode(rustix::fs::RawMode::from(tag & 0xf) << 12))
    }
}

/// A folder's entries, in order, read from its listing.
#[derive(Clone)]
pub(super) struct Entries<'f> {
    listing: &'f [u8],
    at: usize,
}

impl Iterator for Entries<'_> {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        let header = self.listing.get(self.at..self.at + ENTRY_HEADER)?;
        let (kind, file_type) = Entry::untag(header[0]);
        let len = u16::from_le_bytes([header[1], header[2]]);
        let start = self.at + ENTRY_HEADER;
        self.at = start + usize::from(len);
        Some(Entry { start: start as u32, len: u32::from(len), kind, file_type })
    }
}

/// A folder opened and listed, with its `SKILL.md` already read: by a worker for a full walk, or
/// from the picture. A run's folders travel in one vector, which stays in the allocator's small
/// sizes (see [`RUN`]), so what a folder holds is kept small: behind pointers where it is rare.
pub(super) struct Prepared {
    pub(super) path: Box<[u8]>,
    pub(super) visit: Held,
    /// The folder's descriptor, when it was opened for this walk and the walk may open folders
    /// beneath it (never for one from the picture).
    pub(super) fd: Option<Arc<OwnedFd>>,
    /// The files of the folder's skill, when the walk lists them (see [`Digests`]); shared as
    /// the walk's outcome holds them.
    pub(super) files: Option<Arc<FileListing>>,
    /// Its subfolders, one for each folder it lists, in order, when the task that prepared it
    /// prepared them too, through its descriptor before closing it (a folder with few of them,
    /// see [`NESTED`]). The walk would otherwise keep the folder open, queue them as a run of
    /// their own when it enters the folder, and wait for that run.
    pub(super) subfolders: Option<Box<[Prepared]>>,
    /// Runs of its subfolders queued before the walk entered it, while it walked the sibling
    /// before it (see `walk::Ahead`).
    pub(super) queued: Option<Box<Queued>>,
}

/// Runs queued for a folder's subfolders, in order, and how many of them they take.
#[derive(Default)]
pub(super) struct Queued {
    pub(super) runs: VecDeque<Arc<Slot>>,
    pub(super) queued: usize,
}

/// A prepared folder's listing: its own, as a walk's thread listed it (moved with the folder,
/// never allocated apart from it), or shared with the picture it was taken from or put in.
pub(super) enum Held {
    Own(Visit),
    Shared(Arc<Visit>),
}

impl std::ops::Deref for Held {
    type Target = Visit;

    fn deref(&self) -> &Visit {
        match self {
            Held::Own(visit) => visit,
            Held::Shared(visit) => visit,
        }
    }
}

impl Held {
    /// The listing, to be shared.
    pub(super) fn share(self) -> Arc<Visit> {
        match self {
            Held::Own(visit) => Arc::new(visit),
            Held::Shared(visit) => visit,
        }
    }
}

/// Whether the walk goes into a folder's subfolders if it counts the folder: it was listed
/// completely and lists a folder.
fn has_subfolders(visit: &Visit) -> bool {
    match visit {
        Ok(folder) => folder.error().is_none() && folder.subfolders().next().is_some(),
        Err(_) => false,
    }
}

/// A folder's listing and its `SKILL.md`, as a walk saw them.
#[derive(Debug)]
///
/// A picture keeps one per folder of the tree between scans, so what is rare (an entry that could
/// not be examined, a listing that failed, a `SKILL.md` that is no skill) is boxed: a folder
/// listed cleanly holds its listing and its skill.
pub(crate) struct Folder {
    /// Its entries in code-point order of names, back to back: each as its kind and type
    /// ([`Entry::tag`]), its name's length (two bytes, little-endian: a listed name is shorter
    /// than `getdents64`'s 16-bit record length) and its name.
    pub(super) listing: Listing,
    /// What went wrong while listing it, if anything did.
    pub(super) trouble: Option<Box<Trouble>>,
    pub(super) skill: Option<Result<(Skill, ContentVersion), Box<Diagnostic>>>,
}

/// A folder's listing ([`Folder::listing`]) and how many entries it holds: within the folder
/// when it is short (a skill's folder often lists its `SKILL.md` alone), else in one allocation.
#[derive(Debug)]
pub(super) enum Listing {
    Within { count: u8, len: u8, bytes: [u8; WITHIN] },
    Apart { bytes: Box<[u8]>, count: u32 },
}

/// The longest listing kept within its folder: as long as the listing takes no more room there
/// than one kept apart does.
const WITHIN: usize = 21;
const _: () = assert!(std::mem::size_of::<Listing>() == 24);

impl Listing {
    fn new(bytes: &[u8], count: usize) -> Self {
        match u8::try_from(count) {
            Ok(count) if bytes.len() <= WITHIN => {
                let mut within = [0; WITHIN];
                within[..bytes.len()].copy_from_slice(bytes);
                Listing::Within { count, len: bytes.len() as u8, bytes: within }
            }
            // A listing that overflows 32 bits would need millions of entries, far past any
            // entry budget (and the memory to list them).
            _ => Listing::Apart { bytes: Box::from(bytes), count: u32::try_from(count).unwrap_or(u32::MAX) },
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Listing::Within { len, bytes, .. } => &bytes[..usize::from(*len)],
            Listing::Apart { bytes, .. } => bytes,
        }
    }

    fn count(&self) -> usize {
        match self {
            Listing::Within { count, .. } => usize::from(*count),
            Listing::Apart { count, .. } => *count as usize,
        }
    }
}

/// What went wrong while listing a folder.
#[derive(Debug, Default)]
pub(crate) struct Trouble {
    /// Entries whose type could not be looked up: their position in listing order (which decides
    /// whether nagents reports them before the entry limit trips), name and error.
    pub(super) unexamined: Vec<(usize, Vec<u8>, OsFailure)>,
    /// Listing failed after the entries listed.
    pub(super) error: Option<OsFailure>,
}

impl Folder {
    /// Its entries, in code-point order of names.
    pub(super) fn entries(&self) -> Entries<'_> {
        Entries { listing: self.listing.bytes(), at: 0 }
    }

    /// How many entries it lists.
    pub(super) fn len(&self) -> usize {
        self.listing.count()
    }

    /// The entries that are folders, in order.
    pub(super) fn subfolders(&self) -> impl Iterator<Item = Entry> + Clone + '_ {
        self.entries().filter(|entry| entry.kind == Kind::Directory)
    }

    pub(super) fn name(&self, entry: Entry) -> &[u8] {
        &self.listing.bytes()[entry.start as usize..(entry.start + entry.len) as usize]
    }

    /// Entries whose type could not be looked up (see [`Trouble::unexamined`]).
    pub(super) fn unexamined(&self) -> &[(usize, Vec<u8>, OsFailure)] {
        self.trouble.as_deref().map_or(&[], |trouble| &trouble.unexamined)
    }

    /// Why listing failed after the entries listed, if it did.
    pub(super) fn error(&self) -> Option<&OsFailure> {
        self.trouble.as_deref().and_then(|trouble| trouble.error.as_ref())
    }

    /// Reads and parses its `SKILL.md` if it lists one and was listed completely; gives the
    /// skill's files if it is one and the walk lists them.
    fn read_skill(&mut self, fd: BorrowedFd<'_>, path: &[u8], buffers: &mut Buffers) -> Option<FileListing> {
        if self.error().is_some() || !self.entries().any(|entry| entry.kind == Kind::SkillFile) {
            return None;
        }
        join_into(&mut buffers.location, path, SKILL_FILE.as_bytes());
        let Buffers { location, content, digests, .. } = buffers;
        let taken = digests.as_ref().map_or(0, |digests| digests.taken.len());
        let skill = read_skill(fd, location, content, digests.as_mut()).map_err(Box::new);
        // A skill with folders may enclose other skills, whose listings are cut from its own
        // after the walk: it is listed then.
        let alone = || self.subfolders().next().is_none();
        let files = match (&skill, digests) {
            (Ok(_), Some(digests)) if digests.files.is_some() && alone() => {
                let seed = digests.taken.get(taken).copied();
                digests.list_files(fd, self, seed)
            }
            _ => None,
        };
        self.skill = Some(skill);
        files
    }
}

pub(super) enum Opener {
    Root,
    Child(Arc<OwnedFd>),
}

impl Opener {
    fn parent(&self) -> Option<BorrowedFd<'_>> {
        match self {
            Opener::Root => None,
            Opener::Child(parent) => Some(parent.as_fd()),
        }
    }
}

/// Folders to prepare (a root, or a run of siblings in walk order), and where to put the result.
pub(super) struct Task {
    pub(super) opener: Opener,
    /// The folders, each given by its path, which the thread that runs the task replaces with the
    /// folder prepared. The walk makes the vector and gets it back through the slot, so that the
    /// thread that allocated it frees it: glibc frees another thread's block into that thread's
    /// arena, under its lock, which the two threads then contend for.
    pub(super) folders: Vec<RunFolder>,
    /// How many levels of folders beneath these the walk may enter (the depth bound's room): with
    /// none, none keeps its descriptor.
    pub(super) levels: usize,
    pub(super) slot: Arc<Slot>,
}

/// A folder of a run: its path, until a thread prepares it in place.
pub(super) enum RunFolder {
    Path(Vec<u8>),
    Prepared(Prepared),
}

impl RunFolder {
    /// Prepares the folder with `prepare`, unless it is prepared already.
    fn prepare(&mut self, prepare: impl FnOnce(Vec<u8>) -> Prepared) {
        if let RunFolder::Path(path) = self {
            *self = RunFolder::Prepared(prepare(std::mem::take(path)));
        }
    }
}

/// Where a prepared folder is delivered; the walk waits on it only when no queued work is left
/// for it to do itself.
#[derive(Default)]
pub(super) struct Slot {
    pub(super) state: Mutex<SlotState>,
    pub(super) ready: Condvar,
    /// Set once `state.value` is, so that a waiter can watch for it without the lock.
    pub(super) filled: AtomicBool,
}

/// Whether a thread out of work watches for it before it sleeps: only on a machine of more than
/// one core, and only while its last wait was short (within twice [`SPIN`]). Where waits are
/// long, as in the server's first walk, which places a watch on every folder and so gives its
/// helpers less to do, watching would only burn the core (in that walk of 100,000 skills, a
/// third of a second of CPU time, nothing gained).
#[derive(Debug)]
pub(super) struct Waits {
    watch: bool,
    long: bool,
    /// When the current wait began.
    began: Instant,
}

impl Waits {
    /// Waits that are watched (while short) if `watch`, else never.
    pub(super) fn new(watch: bool) -> Self {
        Waits { watch, long: false, began: Instant::now() }
    }

    /// A wait begins: watches for `ready` for [`SPIN`], unless the last wait was long.
    pub(super) fn watch(&mut self, ready: impl Fn() -> bool) {
        self.began = Instant::now();
        if self.watch && !self.long {
            spin_until(SPIN, ready);
        }
    }

    /// The wait is over.
    pub(super) fn ended(&mut self) {
        self.waited(self.began.elapsed());
    }

    /// A wait lasted `waited`.
    pub(super) fn waited(&mut self, waited: Duration) {
        self.long = waited > 2 * SPIN;
    }
}

/// Whether `ready` held within `window`, checked without sleeping (the core is not given up).
pub(super) fn spin_until(window: Duration, ready: impl Fn() -> bool) -> bool {
    let started = Instant::now();
    loop {
        for _ in 0..64 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if started.elapsed() >= window {
            return ready();
        }
    }
}

#[derive(Default)]
pub(super) struct SlotState {
    pub(super) value: Option<Vec<RunFolder>>,
    pub(super) waiting: bool,
    /// Set when the thread preparing the slot's folders panicked: they will never come.
    pub(super) abandoned: bool,
}

impl Slot {
    pub(super) fn put(&self, prepared: Vec<RunFolder>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.value = Some(prepared);
        self.filled.store(true, Ordering::Release);
        if state.waiting {
            self.ready.notify_one();
        }
    }

    /// The thread preparing the slot's folders panicked: whoever waits for them panics too,
    /// rather than wait forever.
    fn abandon(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.abandoned = true;
        self.filled.store(true, Ordering::Release);
        if state.waiting {
            self.ready.notify_one();
        }
    }

    pub(super) fn try_take(&self) -> Option<Vec<RunFolder>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).value.take()
    }

    pub(super) fn take(&self, waits: &mut Waits) -> Vec<RunFolder> {
        waits.watch(|| self.filled.load(Ordering::Acquire));
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(prepared) = state.value.take() {
                waits.ended();
                return prepared;
            }
            assert!(!state.abandoned, "a thread of the scan panicked preparing the folders the walk waits for");
            state.waiting = true;
            state = self.ready.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Folders to prepare, in the order the walk will need them. Wake-ups cost system calls, so a
/// push wakes a helper only when one is idle.
#[derive(Default)]
pub(super) struct Queue {
    pub(super) state: Mutex<QueueState>,
    pub(super) available: Condvar,
    /// Told of every folder the helpers open.
    pub(super) observer: Option<Arc<dyn FolderObserver>>,
    /// Descriptors kept by runs and not yet handed to the walk (see [`MAX_KEPT_AHEAD`]).
    pub(super) kept: AtomicUsize,
    /// The last scan's digests, when the helpers take the digests of what they read.
    pub(super) digests: Option<Arc<Hashes>>,
    /// Set when the helpers list the files of the skills they read too (see [`Digests`]): how
    /// long ago a file's status must have changed for its digest to be kept.
    pub(super) settle_seconds: Option<i64>,
    /// Counts every push (and the close), so that a helper about to sleep can watch for the next
    /// without the lock.
    pub(super) pushes: AtomicUsize,
    /// Whether the helpers watch for work before they sleep ([`Waits`]).
    pub(super) watch: bool,
}

#[derive(Default)]
pub(super) struct QueueState {
    pub(super) tasks: VecDeque<Task>,
    pub(super) idle: usize,
    /// Idle helpers already woken and not yet up: a burst of pushes wakes each helper once.
    pub(super) waking: usize,
    pub(super) closed: bool,
}

impl Queue {
    pub(super) fn push(&self, task: Task) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.tasks.push_back(task);
        self.pushes.fetch_add(1, Ordering::Release);
        if state.idle > state.waking {
            state.waking += 1;
            self.available.notify_one();
        }
    }

    pub(super) fn try_pop(&self) -> Option<Task> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).tasks.pop_front()
    }

    /// The task that fills `slot`, if no helper has taken it yet.
    pub(super) fn take_for(&self, slot: &Slot) -> Option<Task> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let at = state.tasks.iter().position(|task| std::ptr::eq(Arc::as_ptr(&task.slot), slot))?;
        state.tasks.remove(at)
    }

    pub(super) fn close(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.closed = true;
        state.tasks.clear();
        self.pushes.fetch_add(1, Ordering::Release);
        self.available.notify_all();
    }

    /// A helper thread's loop: prepare queued folders until the walk ends, sleeping while there
    /// are none (after watching for one for [`SPIN`]). It never polls with `sched_yield`: on a
    /// machine with other work, each yield hands the core to another process for a time slice,
    /// and the walk, never yielding, ended up preparing nearly every folder itself. Gives the
    /// digests it took.
    pub(super) fn serve(&self) -> Option<Digests> {
        let mut buffers = Buffers::new(self.observer.clone());
        buffers.digests = self.digests.clone().map(|known| Digests::of_scan(known, self.settle_seconds));
        let mut waits = Waits::new(self.watch);
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(task) = state.tasks.pop_front() {
                drop(state);
                task.run(&mut buffers, &self.kept);
                state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            } else if state.closed {
                return buffers.digests;
            } else {
                // Watched a while before sleeping; the lock is taken again before it sleeps, so a
                // push in between is never missed.
                let seen = self.pushes.load(Ordering::Acquire);
                drop(state);
                waits.watch(|| self.pushes.load(Ordering::Acquire) != seen);
                state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                if state.tasks.is_empty() && !state.closed {
                    state.idle += 1;
                    state = self.available.wait(state).unwrap_or_else(PoisonError::into_inner);
                    state.idle -= 1;
                    // Woken by a push, or spuriously: either way, no more are waking than idle.
                    state.waking = state.waking.saturating_sub(1).min(state.idle);
                }
                waits.ended();
            }
        }
    }
}

impl Task {
    /// Prepares the task's folders; `kept` counts the descriptors its run keeps.
    pub(super) fn run(mut self, buffers: &mut Buffers, kept: &AtomicUsize) {
        let _abandoned = Abandoned(&self.slot);
        match &self.opener {
            Opener::Root => {
                for folder in &mut self.folders {
                    folder.prepare(|path| prepare(&self.opener, path, buffers));
                }
            }
            Opener::Child(_) => prepare_run(&self.opener, &mut self.folders, self.levels, buffers, kept),
        }
        self.slot.put(self.folders);
    }
}

/// Abandons a slot if its task panics (see [`Slot::abandon`]).
struct Abandoned<'s>(&'s Slot);

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abandon();
        }
    }
}

/// Prepares sibling folders in order, until [`MAX_KEPT`] of them kept their descriptor or the scan
/// holds [`MAX_KEPT_AHEAD`] (counted in `kept_ahead`): the caller prepares the rest. A folder the
/// walk will open nothing beneath is closed here.
fn prepare_run(
    opener: &Opener,
    folders: &mut [RunFolder],
    levels: usize,
    buffers: &mut Buffers,
    kept_ahead: &AtomicUsize,
) {
    let mut kept = 0;
    for folder in folders {
        if kept >= MAX_KEPT || kept_ahead.load(Ordering::Relaxed) >= MAX_KEPT_AHEAD {
            break;
        }
        folder.prepare(|path| {
            let prepared = prepare_child(opener, path, levels, buffers);
            let fds = usize::from(prepared.fd.is_some()) + kept_beneath(&prepared);
            if fds > 0 {
                kept += fds;
                kept_ahead.fetch_add(fds, Ordering::Relaxed);
            }
            prepared
        });
    }
}

/// [`prepare`] for a subfolder met by a full walk, with `levels` of folders beneath it that the
/// walk may enter. If it may enter the folder's subfolders, and they are at most [`NESTED`], they
/// are prepared with it (each as [`prepare_one`]) and the folder is closed; otherwise it keeps
/// its descriptor, for the walk to queue them.
pub(super) fn prepare_child(opener: &Opener, path: Vec<u8>, levels: usize, buffers: &mut Buffers) -> Prepared {
    let mut prepared = prepare_one(opener.parent(), path, levels, buffers);
    let (Some(fd), Ok(folder)) = (&prepared.fd, &*prepared.visit) else { return prepared };
    let count = folder.subfolders().count();
    if count > NESTED {
        return prepared;
    }
    let mut nested = Vec::with_capacity(count);
    nested.extend(
        (folder.subfolders())
            .map(|entry| prepare_one(Some(fd.as_fd()), join(&prepared.path, folder.name(entry)), levels - 1, buffers)),
    );
    // Closed once they are listed.
    prepared.fd = None;
    prepared.subfolders = Some(nested.into_boxed_slice());
    prepared
}

/// Opens, lists and sorts the folder at `path` (`parent` holding it), and reads its `SKILL.md` if
/// it has one; it keeps its descriptor only if the walk may open folders beneath it (`levels`
/// and it lists one).
fn prepare_one(parent: Option<BorrowedFd<'_>>, path: Vec<u8>, levels: usize, buffers: &mut Buffers) -> Prepared {
    let (visit, fd, files) = open_and_list(parent, &path, buffers);
    let fd = fd.filter(|_| levels > 0 && has_subfolders(&visit));
    Prepared::new(path, visit, fd, files)
}

/// Descriptors the subfolders prepared with `prepared` keep (see [`Prepared::subfolders`]).
pub(super) fn kept_beneath(prepared: &Prepared) -> usize {
    prepared.subfolders.as_deref().unwrap_or_default().iter().filter(|subfolder| subfolder.fd.is_some()).count()
}

/// Opens, lists and sorts a folder, and reads its `SKILL.md` if it has one.
pub(super) fn prepare(opener: &Opener, path: Vec<u8>, buffers: &mut Buffers) -> Prepared {
    let (visit, fd, files) = open_and_list(opener.parent(), &path, buffers);
    Prepared::new(path, visit, fd, files)
}

impl Prepared {
    pub(super) fn new(path: Vec<u8>, visit: Visit, fd: Option<OwnedFd>, files: Option<FileListing>) -> Self {
        let path = path.into_boxed_slice();
        let (fd, files) = (fd.map(Arc::new), files.map(Arc::new));
        Prepared { path, visit: Held::Own(visit), fd, files, subfolders: None, queued: None }
    }

    /// A folder as `picture` holds it.
    pub(super) fn pictured(path: Vec<u8>, visit: &Arc<Visit>) -> Self {
        let (path, visit) = (path.into_boxed_slice(), Held::Shared(Arc::clone(visit)));
        Prepared { path, visit, fd: None, files: None, subfolders: None, queued: None }
    }
}

/// [`prepare`]'s work: the folder as listed, its descriptor if it could be opened, and its
/// skill's files if the walk lists them.
/// `parent` is the folder holding it, or `None` for a root.
fn open_and_list(
    parent: Option<BorrowedFd<'_>>,
    path: &[u8],
    buffers: &mut Buffers,
) -> (Visit, Option<OwnedFd>, Option<FileListing>) {
    let opened = match parent {
        None => guarded::open_root(path),
        Some(parent) => guarded::open_child_directory(parent, last_component(path)),
    };
    let fd = match opened {
        Ok(fd) => fd,
        Err(failure) => return (Err(failure), None, None),
    };
    let observed = (buffers.observer.as_deref())
        .and_then(|observer| Some((observer, observer.opened(path, fd.as_fd(), parent.is_none())?)));
    let (mut folder, fd) = list(fd, path, &mut buffers.listing);
    if let Some((observer, token)) = observed {
        let mut subfolders = folder.subfolders().map(|entry| folder.name(entry));
        observer.listed(token, path, &mut subfolders);
    }
    let files = folder.read_skill(fd.as_fd(), path, buffers);
    (Ok(folder), Some(fd), files)
}

pub(super) fn list(fd: OwnedFd, path: &[u8], buffers: &mut ListingBuffers) -> (Folder, OwnedFd) {
    let ListingBuffers { read, names, entries, encoded } = buffers;
    names.clear();
    entries.clear();
    let mut unexamined = Vec::new();
    let mut error = None;
    let mut stream = RawDir::new(fd.as_fd(), read.spare_capacity_mut());
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
        entries.push(Entry { start, len: name.len() as u32, kind, file_type });
    }
    let trouble = (!unexamined.is_empty() || error.is_some()).then(|| Box::new(Trouble { unexamined, error }));
    let name = |entry: &Entry| &names[entry.start as usize..(entry.start + entry.len) as usize];
    if names.is_ascii() {
        // Code-point order, for ASCII, is byte order.
        entries.sort_by(|a, b| name(a).cmp(name(b)));
    } else {
        entries.sort_by(|a, b| pystr::cmp_units(name(a), name(b)));
    }
    encoded.clear();
    for entry in entries.iter() {
        // Shorter than a 16-bit record length: the length fits.
        encoded.push(entry.tag());
        encoded.extend_from_slice(&(entry.len as u16).to_le_bytes());
        encoded.extend_from_slice(name(entry));
    }
    let folder = Folder { listing: Listing::new(encoded, entries.len()), trouble, skill: None };
    (folder, fd)
}

/// Reads and parses one `SKILL.md`; `path` is its location. The digest of a skill's file goes
/// to `digests`, if given.
fn read_skill(
    folder: BorrowedFd<'_>,
    path: &[u8],
    buffer: &mut Vec<u8>,
    digests: Option<&mut Digests>,
) -> Result<(Skill, ContentVersion), Diagnostic> {
    let opened_after = digests.is_some().then(Stamp::now);
    // The status of the file only where its digest is taken: it identifies the digest.
    let check = if digests.is_some() { Check::Status } else { Check::Listed };
    let read = guarded::read_skill_file_into(folder, buffer, check);
    let folder_path = &path[..path.len() - SKILL_FILE.len() - 1];
    let (content, read) = match read {
        Ok(read) => (Ok(read.content), Some(read)),
        Err(error) => (Err(error), None),
    };
    let skill = skill_of(content, path, last_component(folder_path))?;
    if let (Some(digests), Some(read), Some(opened_after)) = (digests, read, opened_after) {
        digests.take(&read, opened_after);
    }
    Ok(skill)
}

/// The skill a `SKILL.md` read as `content` describes, or nagents' diagnostic: `path` is its
/// location, `folder_name` the name of the folder holding it (the default name).
pub(crate) fn skill_of(
    content: Result<&str, ReadError>,
    path: &[u8],
    folder_name: &[u8],
) -> Result<(Skill, ContentVersion), Diagnostic> {
    let content = content.map_err(|error| {
        let exhausted = match &error {
            ReadError::Os(error) => error.raw_os_error().map(rustix::io::Errno::from_raw_os_error),
            _ => None,
        };
        Diagnostic {
            exhausted: exhausted.filter(|&errno| guarded::exhausted(errno)),
            ..Diagnostic::new(path, error.message())
        }
    })?;
    let folder_name = pystr::lossy(folder_name);
    let location = pystr::lossy(path);
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

/// Lists a folder already open (a root opened to check its identity).
pub(super) fn relist(fd: &OwnedFd, path: &[u8], buffers: &mut Buffers) -> Folder {
    let (mut folder, fd) =
        match rustix::fs::openat(fd, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()) {
            Ok(again) => list(again, path, &mut buffers.listing),
            Err(errno) => {
                return Folder {
                    listing: Listing::new(&[], 0),
                    trouble: Some(Box::new(Trouble { error: Some(OsFailure::new(errno, path)), ..Trouble::default() })),
                    skill: None,
                };
            }
        };
    folder.read_skill(fd.as_fd(), path, buffers);
    folder
}

/// A folder's device and inode.
// The field types of `struct stat` differ between architectures.
#[allow(clippy::unnecessary_cast)]
pub(super) fn identity(fd: &OwnedFd) -> Option<(u64, u64)> {
    rustix::fs::fstat(fd).ok().map(|stat| (stat.st_dev as u64, stat.st_ino as u64))
}
