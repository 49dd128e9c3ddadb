//! The files beneath a directory skill's folder: the same guarded walk as discovery (every open
//! relative to an open folder, no symlink followed, files opened non-blocking and checked on the
//! descriptor), with bounds of its own, and SHA-256 digests that a rescan reuses for files whose
//! status did not change.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::{AtFlags, FileType, RawDir, Stat};
use rustix::io::Errno;

use super::guarded::{self, OpenFileError};
use crate::files::{
    Digest, FileListing, FilesUnavailable, MAX_FILE_PATH_BYTES, MAX_SKILL_BYTES, MAX_SKILL_DEPTH, MAX_SKILL_ENTRIES,
    MAX_SKILL_FILES, SkillFile, SkillFilePath, SkipReason, SkippedEntry, check_segment,
};

const LISTING_BUFFER: usize = 32 * 1024;
const HASH_CHUNK: usize = 64 * 1024;
/// A file whose status changed less than this many seconds before the scan started is hashed
/// again at the next scan: file times tick coarsely (a jiffy, or a server's clock), so a write
/// just after the scan read the file could leave its status unchanged (git's "racy" files).
pub(crate) const SETTLE_SECONDS: i64 = 2;
/// How long a file that changed a moment ago must keep its status before it is read: longer than
/// a writer's pause between two writes, and than the grain of the clock the kernel stamps changes
/// with (a jiffy: 1 to 10 ms), so that a write during the read changes its status.
const SETTLED: Duration = Duration::from_millis(12);
/// A change at most this old may be one a writer is still in the middle of, whatever the lag of
/// its stamp; an older one has settled. Waiting for [`SETTLED`] costs a scan at most about this
/// long in all, however many files changed: the files it reads after waiting are older.
const RECENT: Duration = Duration::from_millis(50);
/// Reads of a file that keeps changing under them before it is left out of this scan's listing.
const HASH_TRIES: usize = 8;

/// What identifies a file's content without reading it: a write changes the size, the
/// modification time or at least the change time, which no one can set back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FileKey {
    device: u64,
    inode: u64,
    size: u64,
    modified: (i64, u64),
    changed: (i64, u64),
}

impl FileKey {
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    // The field types of `struct stat` differ between architectures.
    #[allow(clippy::unnecessary_cast)]
    pub(crate) fn of(stat: &Stat) -> Self {
        FileKey {
            device: stat.st_dev as u64,
            inode: stat.st_ino as u64,
            size: stat.st_size as u64,
            modified: (stat.st_mtime as i64, stat.st_mtime_nsec as u64),
            changed: (stat.st_ctime as i64, stat.st_ctime_nsec as u64),
        }
    }
}

/// Digests by file status, as the last scan saw them.
pub(crate) type Hashes = HashMap<FileKey, Digest, BuildHasherDefault<KeyHasher>>;

/// The digests of both maps, each thread's gathered in one: the larger takes in the smaller.
pub(crate) fn union(a: Hashes, b: Hashes) -> Hashes {
    let (mut larger, smaller) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    larger.extend(smaller);
    larger
}

/// A fast hash of a [`FileKey`]'s numbers (a folded 128-bit multiply per number). Inode
/// numbers and times are not chosen by an adversary who gains anything from collisions: the
/// writer of the files can slow a scan down more simply by adding files.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, number: u64) {
        let product = u128::from(self.0 ^ number) * 0xe703_7ed1_a0b4_28db_u128;
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }

    fn write_i64(&mut self, number: i64) {
        self.write_u64(number as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A scan that ran out of descriptors or memory where it was (relative to the skill folder).
#[derive(Debug)]
pub(crate) struct Exhausted {
    pub path: String,
    pub error: std::io::Error,
}

/// One skill's files, and the folders beneath it that the walk entered (in path order), from
/// which a nested skill's listing can be cut.
#[derive(Debug)]
pub(crate) struct Listed {
    pub listing: FileListing,
    pub folders: Vec<String>,
}

/// Lists skills' files during one scan, reusing the previous scan's digests and those its walk
/// took of the `SKILL.md` files it read.
pub(crate) struct Lister {
    previous: Arc<Hashes>,
    seeded: Arc<Hashes>,
    /// The digest of one more file known to be current: the `SKILL.md` a walk just read, when it
    /// lists the skill's files while the folder is open.
    pub seed: Option<(FileKey, Digest)>,
    /// The digests of the files this scan listed whose status has settled: the next scan's
    /// `previous`.
    pub current: Hashes,
    settled_before: i64,
    /// Files read and hashed by this scan.
    pub hashed: u64,
    listing: Vec<u8>,
    chunk: Vec<u8>,
    /// Listings of folders already walked, to be reused.
    spare: Vec<Names>,
    /// The last scan's listing of the skill being listed, for files that keep changing.
    pub fallback: Option<Arc<FileListing>>,
}

/// What became of hashing a file.
enum Hashed {
    /// Read while it did not change, with its status then.
    Settled(FileKey, Digest),
    /// Changed under every read.
    Changing,
    /// Removed, or no longer a regular file.
    Gone,
}

/// Why a skill's walk stopped.
enum Stop {
    Bound(FilesUnavailable),
    Exhausted(Exhausted),
}

#[derive(Default)]
struct Tree {
    files: Vec<SkillFile>,
    skipped: Vec<SkippedEntry>,
    folders: Vec<String>,
    entries: usize,
    bytes: u64,
}

impl Tree {
    fn skip(&mut self, path: String, reason: SkipReason) {
        self.skipped.push(SkippedEntry { path, reason });
    }
}

impl Lister {
    /// A lister that trusts the digests of files whose status changed at least `settle_seconds`
    /// before now.
    pub(crate) fn new(previous: Arc<Hashes>, seeded: Arc<Hashes>, settle_seconds: i64, capacity: usize) -> Self {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
        Lister {
            previous,
            seeded,
            seed: None,
            current: Hashes::with_capacity_and_hasher(capacity, BuildHasherDefault::default()),
            settled_before: i64::try_from(now).unwrap_or(i64::MAX).saturating_sub(settle_seconds),
            hashed: 0,
            listing: Vec::with_capacity(LISTING_BUFFER),
            chunk: vec![0; HASH_CHUNK],
            spare: Vec::new(),
            fallback: None,
        }
    }

    /// Lists the files beneath the open skill `folder`.
    pub(crate) fn list(&mut self, folder: BorrowedFd<'_>) -> Result<Listed, Exhausted> {
        self.list_given(folder, None)
    }

    /// Lists the files beneath the open skill `folder`, whose own entries (name and type, in any
    /// order) were listed already: only the folders beneath it are listed.
    pub(crate) fn list_from<'n>(
        &mut self,
        folder: BorrowedFd<'_>,
        entries: impl Iterator<Item = (&'n [u8], FileType)>,
    ) -> Result<Listed, Exhausted> {
        let mut names = self.spare_names();
        // One more than the bound is enough to say it is over.
        for (name, file_type) in entries.take(MAX_SKILL_ENTRIES + 1) {
            names.push(name, file_type);
        }
        names.sort();
        self.list_given(folder, Some(names))
    }

    fn list_given(&mut self, folder: BorrowedFd<'_>, names: Option<Names>) -> Result<Listed, Exhausted> {
        let mut tree = Tree::default();
        match self.folder(&mut tree, folder, "", 0, names) {
            Ok(()) => {
                tree.folders.sort_unstable();
                Ok(Listed { listing: FileListing::new(tree.files, tree.skipped), folders: tree.folders })
            }
            Err(Stop::Bound(reason)) => Ok(Listed { listing: FileListing::unavailable(reason), folders: Vec::new() }),
            Err(Stop::Exhausted(exhausted)) => Err(exhausted),
        }
    }

    /// Walks one folder (`path` relative to the skill folder, empty for the skill folder), its
    /// entries in byte order of names so that the bound met first is the same on every replica.
    /// `given` is the folder's listing, if it was listed already.
    fn folder(
        &mut self,
        tree: &mut Tree,
        fd: BorrowedFd<'_>,
        path: &str,
        depth: usize,
        given: Option<Names>,
    ) -> Result<(), Stop> {
        let budget = MAX_SKILL_ENTRIES - tree.entries;
        let listed = match given {
            Some(names) if names.entries.len() > budget => {
                self.spare.push(names);
                Err(Listing::Over(budget + 1))
            }
            Some(names) => Ok(names),
            None => self.names(fd, budget),
        };
        let names = match listed {
            Ok(names) => names,
            Err(Listing::Over(count)) => {
                return Err(Stop::Bound(FilesUnavailable::TooManyEntries { counted: tree.entries + count }));
            }
            Err(Listing::Failed(errno)) if guarded::exhausted(errno) => return Err(exhausted(path, errno)),
            Err(Listing::Failed(errno)) if depth == 0 => {
                let message = std::io::Error::from(errno).to_string();
                return Err(Stop::Bound(FilesUnavailable::Unreadable { message }));
            }
            Err(Listing::Failed(errno)) => {
                tree.skip(path.to_owned(), unreadable(errno));
                return Ok(());
            }
        };
        tree.entries += names.entries.len();
        if depth > 0 {
            tree.folders.push(path.to_owned());
        }
        for &(start, len, file_type) in &names.entries {
            let name = &names.bytes[start as usize..(start + len) as usize];
            if name.starts_with(b".") {
                continue;
            }
            let Ok(text) = std::str::from_utf8(name) else {
                tree.skip(join(path, &String::from_utf8_lossy(name)), SkipReason::NotUtf8);
                continue;
            };
            let child = join(path, text);
            if let Err(invalid) = check_segment(text) {
                tree.skip(child, SkipReason::InvalidPath(invalid));
                continue;
            }
            if child.len() > MAX_FILE_PATH_BYTES {
                tree.skip(child, SkipReason::InvalidPath(crate::files::InvalidFilePath::TooLong));
                continue;
            }
            let file_type = match file_type {
                FileType::Unknown => match rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                    Err(errno) => {
                        self.failed(tree, child, errno)?;
                        continue;
                    }
                },
                known => known,
            };
            match file_type {
                FileType::Directory if depth + 1 > MAX_SKILL_DEPTH => {
                    return Err(Stop::Bound(FilesUnavailable::TooDeep { path: child }));
                }
                FileType::Directory => match guarded::open_child_directory(fd, name) {
                    Ok(sub) => self.folder(tree, sub.as_fd(), &child, depth + 1, None)?,
                    Err(failure) => self.failed(tree, child, failure.errno)?,
                },
                FileType::RegularFile => self.file(tree, fd, name, child)?,
                other => tree.skip(child, special(other)),
            }
        }
        self.spare.push(names);
        Ok(())
    }

    /// An empty listing, reusing one already walked.
    fn spare_names(&mut self) -> Names {
        let mut names = self.spare.pop().unwrap_or_default();
        names.bytes.clear();
        names.entries.clear();
        names
    }

    /// Lists `fd`'s entries in byte order of names, stopping when there are more than `budget`.
    fn names(&mut self, fd: BorrowedFd<'_>, budget: usize) -> Result<Names, Listing> {
        let mut names = self.spare_names();
        let mut stream = RawDir::new(fd, self.listing.spare_capacity_mut());
        while let Some(entry) = stream.next() {
            let entry = entry.map_err(Listing::Failed)?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if names.entries.len() == budget {
                return Err(Listing::Over(budget + 1));
            }
            names.push(name, entry.file_type());
        }
        names.sort();
        Ok(names)
    }

    /// Lists a regular file, hashing it unless its status is the one a digest is known for.
    fn file(&mut self, tree: &mut Tree, folder: BorrowedFd<'_>, name: &[u8], path: String) -> Result<(), Stop> {
        let stat = match rustix::fs::statat(folder, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(errno) => return self.failed(tree, path, errno),
        };
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            // Replaced since the folder was listed.
            tree.skip(path, SkipReason::Changed);
            return Ok(());
        }
        if tree.files.len() == MAX_SKILL_FILES {
            return Err(Stop::Bound(FilesUnavailable::TooManyFiles { counted: MAX_SKILL_FILES + 1 }));
        }
        let key = FileKey::of(&stat);
        if tree.bytes.saturating_add(key.size) > MAX_SKILL_BYTES {
            let counted = tree.bytes.saturating_add(key.size);
            return Err(Stop::Bound(FilesUnavailable::TooLarge { counted, path, size: key.size }));
        }
        let parsed = if path == crate::SKILL_MD { Ok(SkillFilePath::skill_md()) } else { SkillFilePath::parse(&path) };
        let file_path = match parsed {
            Ok(file_path) => file_path,
            Err(invalid) => {
                tree.skip(path, SkipReason::InvalidPath(invalid));
                return Ok(());
            }
        };
        // A file seen by the last scan or earlier in this one (by its walk, as a hard link, or
        // for a nested skill listed on its own) is not read again.
        let seed = self.seed.as_ref().filter(|(seed, _)| *seed == key).map(|(_, digest)| digest);
        let known =
            (self.previous.get(&key)).or_else(|| self.seeded.get(&key)).or_else(|| self.current.get(&key)).or(seed);
        let (key, digest) = match known {
            Some(&digest) => (key, digest),
            None => match self.hash_settled(folder, name, key) {
                Ok(Hashed::Settled(key, digest)) => (key, digest),
                // Still being written: listed as the last scan listed it (a read of it is then
                // refused as changed) rather than dropped; the write's last change brings the
                // rescan that reads it settled.
                Ok(Hashed::Changing)
                    if let Some(known) = self.fallback.as_ref().and_then(|known| known.get(&file_path)) =>
                {
                    let known = known.clone();
                    tree.bytes = tree.bytes.saturating_add(known.size);
                    tree.files.push(known);
                    return Ok(());
                }
                Ok(Hashed::Changing | Hashed::Gone) => {
                    tree.skip(path, SkipReason::Changed);
                    return Ok(());
                }
                Err(errno) => return self.failed(tree, path, errno),
            },
        };
        let counted = tree.bytes.saturating_add(key.size);
        if counted > MAX_SKILL_BYTES {
            return Err(Stop::Bound(FilesUnavailable::TooLarge { counted, path, size: key.size }));
        }
        if key.changed.0 < self.settled_before {
            self.current.insert(key, digest);
        }
        tree.bytes = counted;
        tree.files.push(SkillFile { path: file_path, size: key.size, digest, executable: stat.st_mode & 0o100 != 0 });
        Ok(())
    }

    /// The digest of the file `name` (found with the status `key`), and its status as hashed: the
    /// file is read only once its last change is older than the clock's grain ([`SETTLED`]), so
    /// that a write during the read shows in its status, and it is read again (a few times, a
    /// moment apart) while it keeps changing under the read. A file written in place is never
    /// listed as it was halfway through a write.
    fn hash_settled(&mut self, folder: BorrowedFd<'_>, name: &[u8], key: FileKey) -> Result<Hashed, Errno> {
        let mut key = key;
        for _ in 0..HASH_TRIES {
            wait_until_settled(&key);
            if let Some(digest) = self.hash(folder, name, key)? {
                return Ok(Hashed::Settled(key, digest));
            }
            // Changed while read: its status now, to read it again once settled.
            key = match rustix::fs::statat(folder, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile => FileKey::of(&stat),
                Ok(_) | Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => return Ok(Hashed::Gone),
                Err(errno) => return Err(errno),
            };
        }
        Ok(Hashed::Changing)
    }

    /// Hashes the file `name` if it still has the status `key`; `None` if it changed (replaced,
    /// swapped for a symlink or FIFO, written) between the listing and the end of the read.
    fn hash(&mut self, folder: BorrowedFd<'_>, name: &[u8], key: FileKey) -> Result<Option<Digest>, Errno> {
        use sha2::Digest as _;
        let (fd, stat) = match guarded::open_regular(folder, name) {
            Ok(opened) => opened,
            Err(OpenFileError::Os(Errno::LOOP | Errno::NOENT)) | Err(OpenFileError::NotRegular) => return Ok(None),
            Err(OpenFileError::Os(errno)) => return Err(errno),
        };
        if FileKey::of(&stat) != key {
            return Ok(None);
        }
        self.hashed += 1;
        let mut file = std::fs::File::from(fd);
        let mut hasher = sha2::Sha256::new();
        let mut read = 0u64;
        // At most one byte past the size: enough to see that the file grew.
        while read <= key.size {
            let want = usize::try_from(key.size + 1 - read).unwrap_or(usize::MAX).min(self.chunk.len());
            match file.read(&mut self.chunk[..want]) {
                Ok(0) => break,
                Ok(count) => {
                    hasher.update(&self.chunk[..count]);
                    read += count as u64;
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Err(errno_of(&error)),
            }
        }
        let after = rustix::fs::fstat(&file)?;
        if read != key.size || FileKey::of(&after) != key {
            return Ok(None);
        }
        Ok(Some(Digest::from_sha256(hasher.finalize().into())))
    }

    /// Records a failed system call on the entry at `path`: the scan fails when it says the
    /// process or the system ran out of resources; otherwise the entry is skipped.
    fn failed(&mut self, tree: &mut Tree, path: String, errno: Errno) -> Result<(), Stop> {
        if guarded::exhausted(errno) {
            return Err(exhausted(&path, errno));
        }
        let reason = match errno {
            // Removed, or replaced by a symlink or something that is not a folder, since listed.
            Errno::NOENT | Errno::LOOP | Errno::NOTDIR => SkipReason::Changed,
            errno => unreadable(errno),
        };
        tree.skip(path, reason);
        Ok(())
    }
}

/// Waits, for a file whose status `key` (just seen) says it changed [`RECENT`]ly, [`SETTLED`]: a
/// file is read once it has kept one status that long. Its change time alone cannot tell: the
/// kernel stamps changes with a coarse clock that lags the precise one, and here moved in jumps
/// of over 15 ms, so a file truncated a moment ago can carry a stamp that looks settled.
fn wait_until_settled(key: &FileKey) {
    if !settled(key, Stamp::now()) {
        std::thread::sleep(SETTLED);
    }
}

/// A moment as file systems stamp changes, in nanoseconds since the epoch: the earlier of the
/// fine and the coarse clock, since a change may be stamped from either.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamp(i128);

impl Stamp {
    pub(crate) fn now() -> Self {
        use rustix::time::{ClockId, clock_gettime};
        let at = |clock: ClockId| {
            let now = clock_gettime(clock);
            i128::from(now.tv_sec) * 1_000_000_000 + i128::from(now.tv_nsec)
        };
        Stamp(at(ClockId::Realtime).min(at(ClockId::RealtimeCoarse)))
    }
}

/// Whether a file whose status is `key` may be read at `now` with any later write changing its
/// status: its last change is more than [`RECENT`] before, or stamped that far ahead (a clock
/// that is off, where waiting would tell no more).
pub(crate) fn settled(key: &FileKey, now: Stamp) -> bool {
    let (seconds, nanos) = key.changed;
    let since = now.0 - (i128::from(seconds) * 1_000_000_000 + i128::from(nanos));
    let recent = RECENT.as_nanos() as i128;
    // Stamped far ahead is a clock that is off (a network file system's, say): waiting would not
    // tell more, and every new file would cost the wait.
    !(-recent..recent).contains(&since)
}

/// A folder's entries: names back to back, and each one's start, length and type.
#[derive(Default)]
struct Names {
    bytes: Vec<u8>,
    entries: Vec<(u32, u32, FileType)>,
}

impl Names {
    /// Adds an entry. A name is at most 255 bytes, and at most `MAX_SKILL_ENTRIES + 1` are kept.
    fn push(&mut self, name: &[u8], file_type: FileType) {
        self.entries.push((self.bytes.len() as u32, name.len() as u32, file_type));
        self.bytes.extend_from_slice(name);
    }

    /// Puts the entries in byte order of names.
    fn sort(&mut self) {
        let bytes = &self.bytes;
        let name = |&(start, len, _): &(u32, u32, FileType)| &bytes[start as usize..(start + len) as usize];
        self.entries.sort_unstable_by(|a, b| name(a).cmp(name(b)));
    }
}

enum Listing {
    Over(usize),
    Failed(Errno),
}

fn exhausted(path: &str, errno: Errno) -> Stop {
    Stop::Exhausted(Exhausted { path: path.to_owned(), error: errno.into() })
}

fn unreadable(errno: Errno) -> SkipReason {
    SkipReason::Unreadable(std::io::Error::from(errno).to_string())
}

fn errno_of(error: &std::io::Error) -> Errno {
    error.raw_os_error().map_or(Errno::IO, Errno::from_raw_os_error)
}

fn special(file_type: FileType) -> SkipReason {
    match file_type {
        FileType::Symlink => SkipReason::Symlink,
        FileType::Fifo => SkipReason::Fifo,
        FileType::Socket => SkipReason::Socket,
        FileType::CharacterDevice | FileType::BlockDevice => SkipReason::Device,
        _ => SkipReason::Unreadable("not a file or folder".to_owned()),
    }
}

fn join(folder: &str, name: &str) -> String {
    let mut path = String::with_capacity(folder.len() + 1 + name.len());
    if !folder.is_empty() {
        path.push_str(folder);
        path.push('/');
    }
    path.push_str(name);
    path
}

#[cfg(test)]
mod tests;
