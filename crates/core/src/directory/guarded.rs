//! The only filesystem access of directory discovery. Every open is relative to an already-open
//! directory and refuses symlinks, so nothing beneath a root can redirect a read elsewhere, and a
//! `SKILL.md` is opened non-blocking and checked with `fstat`, so a FIFO or device cannot hang it.

use std::io::Read;
use std::os::fd::{BorrowedFd, OwnedFd};
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
    drop(read_skill_file_into(directory, &mut content)?);
    Ok(String::from_utf8(content).expect("read_skill_file_into checked the content is UTF-8"))
}

/// A `SKILL.md` read whole: its content, and the file, still open, with its status when opened.
pub(crate) struct SkillFileRead<'a> {
    pub content: &'a str,
    pub file: std::fs::File,
    pub stat: Stat,
}

/// As [`read_skill_file`], into a buffer the caller reuses.
pub(crate) fn read_skill_file_into<'a>(
    directory: BorrowedFd<'_>,
    content: &'a mut Vec<u8>,
) -> Result<SkillFileRead<'a>, ReadError> {
    let fd =
        rustix::fs::openat(directory, SKILL_FILE, FILE_FLAGS, Mode::empty()).map_err(|e| ReadError::Os(e.into()))?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| ReadError::Os(e.into()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(ReadError::NotRegular);
    }
    let size = usize::try_from(stat.st_size).unwrap_or(usize::MAX);
    let file = std::fs::File::from(fd);
    read_limited(&file, size, MAX_FILE_BYTES, content).map_err(ReadError::Os)?;
    if content.len() > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge);
    }
    let content: &'a [u8] = content;
    let content =
        std::str::from_utf8(content).map_err(|error| ReadError::NotUtf8(pystr::utf8_error_message(content, &error)))?;
    Ok(SkillFileRead { content, file, stat })
}

/// Reads at most `limit + 1` bytes into `content`, so that a file over `limit` is recognized
/// without reading it all. A read that stops short exactly at the size `fstat` reported is the
/// end of the file, which saves the extra `read` returning 0.
pub(crate) fn read_limited(
    mut file: &std::fs::File,
    size: usize,
    limit: usize,
    content: &mut Vec<u8>,
) -> std::io::Result<()> {
    content.clear();
    content.resize(size.min(limit).saturating_add(1), 0);
    let mut filled = 0;
    loop {
        match file.read(&mut content[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        }
        if filled == content.len() {
            if filled > limit {
                break;
            }
            // The file grew since fstat.
            content.resize(filled.saturating_mul(2).min(limit.saturating_add(1)), 0);
        } else if filled == size {
            break;
        }
    }
    content.truncate(filled);
    Ok(())
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
