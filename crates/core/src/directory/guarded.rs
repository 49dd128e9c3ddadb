//! The only filesystem access of directory discovery. Every open is relative to an already-open
//! directory and refuses symlinks, so nothing beneath a root can redirect a read elsewhere, and a
//! `SKILL.md` is opened non-blocking, read within a bound and checked to be a regular file, so a
//! FIFO or device cannot hang it (see [`Check`]).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;

use crate::pystr;

/// The largest `SKILL.md` read, in bytes.
pub const MAX_FILE_BYTES: usize = 4_000_000;
pub(crate) use crate::SKILL_MD as SKILL_FILE;

const DIRECTORY_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);
const FILE_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::NOFOLLOW).union(OFlags::NONBLOCK).union(OFlags::NOCTTY).union(OFlags::CLOEXEC);

/// A system call that failed: its error, and nagents' message for it.
#[derive(Debug, Clone)]
pub(crate) struct OsFailure {
    pub errno: Errno,
    pub message: String,
}

impl OsFailure {
    pub(crate) fn new(errno: Errno, name: &[u8]) -> Self {
        OsFailure { errno, message: pystr::os_error_message(&errno.into(), name) }
    }
}

/// Whether a failure says the process or the system ran out of descriptors or memory: then
/// nothing can be concluded about the file, and a scan that met it has failed.
pub(crate) fn exhausted(errno: Errno) -> bool {
    matches!(errno, Errno::MFILE | Errno::NFILE | Errno::NOMEM | Errno::NOBUFS)
}

/// Why a `SKILL.md` could not be read; the messages are nagents'.
#[derive(Debug)]
pub(crate) enum ReadError {
    Os(std::io::Error),
    NotRegular,
    TooLarge,
    NotUtf8(String),
}

impl ReadError {
    pub(crate) fn message(&self) -> String {
        match self {
            ReadError::Os(error) => pystr::os_error_message(error, SKILL_FILE.as_bytes()),
            ReadError::NotRegular => "SKILL.md must be a regular file".to_owned(),
            ReadError::TooLarge => format!("SKILL.md exceeds {MAX_FILE_BYTES} bytes"),
            ReadError::NotUtf8(message) => message.clone(),
        }
    }
}

/// Opens a configured root, following symlinks: the root itself may be one (a git-sync link or
/// a mounted volume). On failure the message names the component that failed, as nagents'.
pub(crate) fn open_root(root: &[u8]) -> Result<OwnedFd, OsFailure> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    match rustix::fs::open(root, flags, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(_) => {
            // Walk again one component at a time to name the one that fails.
            let mut current = rustix::fs::open("/", flags, Mode::empty()).map_err(|e| OsFailure::new(e, b"/"))?;
            for part in root.split(|&b| b == b'/').filter(|part| !part.is_empty()) {
                current =
                    rustix::fs::openat(&current, part, flags, Mode::empty()).map_err(|e| OsFailure::new(e, part))?;
            }
            Ok(current)
        }
    }
}

/// Opens the directory `name` inside `parent`, refusing a symlink.
pub(crate) fn open_child_directory(parent: BorrowedFd<'_>, name: &[u8]) -> Result<OwnedFd, OsFailure> {
    rustix::fs::openat(parent, name, DIRECTORY_FLAGS, Mode::empty()).map_err(|e| OsFailure::new(e, name))
}

/// Opens the directory reached from `root` through `components`, with no symlink anywhere on the
/// way: `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the kernel has it, one
/// `O_NOFOLLOW` open per component otherwise.
pub(crate) fn open_beneath(root: BorrowedFd<'_>, components: &[&[u8]]) -> Result<OwnedFd, std::io::Error> {
    static OPENAT2_MISSING: AtomicBool = AtomicBool::new(false);
    if components.is_empty() {
        // A new open, not a `dup`: a duplicate would share the position of a listing.
        return Ok(rustix::fs::openat(root, ".", DIRECTORY_FLAGS, Mode::empty())?);
    }
    if !OPENAT2_MISSING.load(Ordering::Relaxed) {
        let path = components.join(&b'/');
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        for _ in 0..3 {
            match rustix::fs::openat2(root, &path, DIRECTORY_FLAGS, Mode::empty(), resolve) {
                // A concurrent rename anywhere on the system can make the kernel refuse to vouch.
                Err(Errno::AGAIN) => continue,
                // No openat2 (before Linux 5.6), or a seccomp filter that refuses it.
                Err(Errno::NOSYS | Errno::PERM) => {
                    OPENAT2_MISSING.store(true, Ordering::Relaxed);
                    break;
                }
                result => return Ok(result?),
            }
        }
    }
    let mut current = rustix::fs::openat(root, components[0], DIRECTORY_FLAGS, Mode::empty())?;
    for part in &components[1..] {
        current = rustix::fs::openat(&current, *part, DIRECTORY_FLAGS, Mode::empty())?;
    }
    Ok(current)
}

/// Reads `SKILL.md` in `directory`: a regular file (checked on the open descriptor) of at most
/// 4,000,000 bytes of UTF-8.
pub(crate) fn read_skill_file(directory: BorrowedFd<'_>) -> Result<String, ReadError> {
    let mut content = Vec::new();
    drop(read_skill_file_into(directory, &mut content, Check::Status)?);
    Ok(String::from_utf8(content).expect("read_skill_file_into checked the content is UTF-8"))
}

/// How a read of `SKILL.md` makes sure that what it opened is a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// `fstat` on the open descriptor, before reading: the read also gives the file's status.
    Status,
    /// The folder's listing named a regular file, and the read trusts it: a walk that needs no
    /// file status saves the `fstat` of each skill. Opened non-blocking and without following a
    /// symlink, what was swapped in since the listing cannot hang the read or lead it elsewhere,
    /// and the read is bounded as ever. A read that leaves the buffer short is the end of a
    /// regular file (POSIX); one that gives nothing at all, or fails, is checked with `fstat` as
    /// [`Check::Status`] checks, so that a FIFO, device or folder put in its place is still
    /// refused as not a regular file rather than read as an empty skill.
    Listed,
}

/// A `SKILL.md` read whole: its content, and the file, still open, with its status when opened
/// (when read with [`Check::Status`]).
pub(crate) struct SkillFileRead<'a> {
    pub content: &'a str,
    pub file: std::fs::File,
    pub stat: Option<Stat>,
}

/// As [`read_skill_file`], into a buffer the caller reuses, checked as `check` says.
pub(crate) fn read_skill_file_into<'a>(
    directory: BorrowedFd<'_>,
    content: &'a mut Vec<u8>,
    check: Check,
) -> Result<SkillFileRead<'a>, ReadError> {
    let file = std::fs::File::from(
        rustix::fs::openat(directory, SKILL_FILE, FILE_FLAGS, Mode::empty()).map_err(|e| ReadError::Os(e.into()))?,
    );
    let regular = || -> Result<Stat, ReadError> {
        let stat = rustix::fs::fstat(&file).map_err(|e| ReadError::Os(e.into()))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => Ok(stat),
            _ => Err(ReadError::NotRegular),
        }
    };
    let stat = match check {
        Check::Status => {
            let stat = regular()?;
            let size = usize::try_from(stat.st_size).unwrap_or(usize::MAX);
            read_limited(file.as_fd(), size, MAX_FILE_BYTES, content).map_err(ReadError::Os)?;
            Some(stat)
        }
        Check::Listed => {
            match read_limited(file.as_fd(), FIRST_READ, MAX_FILE_BYTES, content) {
                Ok(()) if !content.is_empty() => {}
                Ok(()) => drop(regular()?),
                Err(error) => {
                    regular()?;
                    return Err(ReadError::Os(error));
                }
            }
            None
        }
    };
    if content.len() > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge);
    }
    let content: &'a [u8] = content;
    let content =
        std::str::from_utf8(content).map_err(|error| ReadError::NotUtf8(pystr::utf8_error_message(content, &error)))?;
    Ok(SkillFileRead { content, file, stat })
}

/// Room for most `SKILL.md` files in one read, where no `fstat` tells a file's size.
const FIRST_READ: usize = 16 * 1024;

/// Reads the file open at `fd` into `content`, to its end or to `limit + 1` bytes, so that a file
/// over `limit` is recognized without reading it all; room is made first for `expected` bytes
/// (the size `fstat` reported, or a guess). A read that leaves the room short is the end of the
/// file (POSIX: a read of a regular file returns fewer bytes than asked only at its end), which
/// saves the extra `read` returning 0.
pub(crate) fn read_limited(
    fd: BorrowedFd<'_>,
    expected: usize,
    limit: usize,
    content: &mut Vec<u8>,
) -> std::io::Result<()> {
    content.clear();
    content.reserve_exact(expected.min(limit).saturating_add(1));
    loop {
        let room = content.capacity() - content.len();
        let read = match rustix::io::read(fd, rustix::buffer::spare_capacity(&mut *content)) {
            Ok(read) => read,
            Err(Errno::INTR) => continue,
            Err(errno) => return Err(errno.into()),
        };
        if read < room || content.len() > limit {
            return Ok(());
        }
        // Larger than expected: twice the room, up to one byte past the limit.
        content.reserve_exact(content.len().min(limit.saturating_add(1) - content.len()));
    }
}

/// Why a file beneath a skill folder could not be opened for reading.
#[derive(Debug)]
pub(crate) enum OpenFileError {
    Os(Errno),
    /// The entry is not a regular file (any more): a FIFO, socket or device opened without
    /// blocking, or a folder. A symlink fails the open itself (`ELOOP`).
    NotRegular,
}

/// Opens the regular file `name` in `directory`: never through a symlink, never blocking on a
/// FIFO or device, and checked to be a regular file on the open descriptor. Returns its status.
pub(crate) fn open_regular(directory: BorrowedFd<'_>, name: &[u8]) -> Result<(OwnedFd, Stat), OpenFileError> {
    let fd = rustix::fs::openat(directory, name, FILE_FLAGS, Mode::empty()).map_err(OpenFileError::Os)?;
    let stat = rustix::fs::fstat(&fd).map_err(OpenFileError::Os)?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Ok((fd, stat)),
        _ => Err(OpenFileError::NotRegular),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_folder(path: &std::path::Path) -> OwnedFd {
        rustix::fs::open(path, DIRECTORY_FLAGS, Mode::empty()).unwrap()
    }

    /// Both checks read every size whole, around the first read's room and its multiples, and
    /// agree on what they read.
    #[test]
    fn a_listed_read_reads_what_a_checked_read_reads() {
        let dir = tempfile::tempdir().unwrap();
        let folder = open_folder(dir.path());
        for size in [0, 1, 580, 16_383, 16_384, 16_385, 32_768, 32_769, 100_000] {
            let text: String = (0..size).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            std::fs::write(dir.path().join(SKILL_FILE), &text).unwrap();
            let mut buffer = Vec::new();
            let listed = read_skill_file_into(folder.as_fd(), &mut buffer, Check::Listed).unwrap();
            assert_eq!(listed.content, text, "{size}");
            assert!(listed.stat.is_none());
            let mut buffer = Vec::new();
            let checked = read_skill_file_into(folder.as_fd(), &mut buffer, Check::Status).unwrap();
            assert_eq!(checked.content, text, "{size}");
            assert_eq!(checked.stat.unwrap().st_size, size as i64);
        }
    }

    /// A read stops once past the limit (not reading the rest), and a file at the limit is whole,
    /// however much room was made first.
    #[test]
    fn a_listed_read_stops_past_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SKILL_FILE);
        for (size, limit, read) in [(100, 100, 100), (101, 100, 101), (70_000, 20_000, 20_001), (5, 0, 5)] {
            // The buffer's room from before (16 bytes) is read into whole: 5 of 5 bytes, not 1.
            std::fs::write(&path, vec![b'x'; size]).unwrap();
            let file = std::fs::File::open(&path).unwrap();
            let mut content = b"left from before".to_vec();
            read_limited(file.as_fd(), FIRST_READ, limit, &mut content).unwrap();
            assert_eq!(content.len(), read, "{size} {limit}");
        }
        std::fs::write(&path, vec![b'x'; 4_000_001]).unwrap();
        let mut buffer = Vec::new();
        let folder = open_folder(dir.path());
        let error = read_skill_file_into(folder.as_fd(), &mut buffer, Check::Listed).err().unwrap();
        assert!(matches!(error, ReadError::TooLarge), "{error:?}");
        assert!(buffer.len() <= 2 * MAX_FILE_BYTES, "{}", buffer.len());
    }

    /// What stands where the listing saw a regular file is still refused when it is none: a FIFO
    /// (with no writer, and with a writer that wrote nothing) or a folder reads as nothing, or
    /// fails, and is then checked.
    #[test]
    fn a_listed_read_refuses_what_is_no_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let folder = open_folder(dir.path());
        let path = dir.path().join(SKILL_FILE);
        let refused = |check| {
            let mut buffer = Vec::new();
            match read_skill_file_into(folder.as_fd(), &mut buffer, check) {
                Err(ReadError::NotRegular) => {}
                other => panic!("{check:?}: {:?}", other.map(|read| read.content.to_owned())),
            }
        };
        rustix::fs::mknodat(rustix::fs::CWD, &path, FileType::Fifo, Mode::from_raw_mode(0o644), 0).unwrap();
        refused(Check::Listed);
        refused(Check::Status);
        let writer = rustix::fs::open(&path, OFlags::RDWR | OFlags::NONBLOCK, Mode::empty()).unwrap();
        refused(Check::Listed);
        drop(writer);
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        refused(Check::Listed);
        refused(Check::Status);
    }
}
