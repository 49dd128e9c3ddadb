//! One blocking scan of a directory source, step for step nagents' walk.
//!
//! The walk itself (listing, counting, ordering, depth) runs on the calling thread, exactly in
//! nagents' order. Reading and parsing each `SKILL.md` is handed to a few reader threads through
//! a bounded queue (which also bounds the descriptors held open), and the results are put back in
//! walk order before anything is published, so the outcome is the same as a sequential walk.

use std::borrow::Cow;
use std::collections::HashSet;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fs::{AtFlags, FileType, RawDir};

use super::guarded::{self, SKILL_FILE};
use super::path::{AbsoluteRoot, join, last_component};
use crate::metadata::parse_fields;
use crate::pystr;
use crate::skill::{InvalidSkill, MAX_LOCATION_CHARS, Skill};

const MAX_DIAGNOSTICS: usize = 20;
const MAX_DIAGNOSTIC_PART: usize = 300;
const ENTRY_LIMIT: &str = "discovery entry limit reached; increase max_entries";
const DEPTH_LIMIT: &str = "discovery depth/entry limit reached";
const LOCATION_NOT_UTF8: &str = "skill location is not valid UTF-8; rename the folder";
/// Reads are handed over in batches (fewer wake-ups); each read holds its folder's descriptor open
/// until done, so the batch size and queue length bound the descriptors a scan holds.
const READ_BATCH: usize = 32;
const QUEUED_BATCHES: usize = 4;
const MAX_READERS: usize = 4;
/// Large enough for any single directory entry, so `getdents64` never fails with `EINVAL`.
const LISTING_BUFFER: usize = 32 * 1024;

/// A discovered skill and the index of the root it was found under.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub skill: Skill,
    pub root: usize,
}

#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub found: Vec<Found>,
    pub diagnostics: Vec<String>,
}

pub(crate) fn scan(roots: &[AbsoluteRoot], max_entries: usize, max_depth: usize) -> Outcome {
    let readers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, MAX_READERS);
    let (jobs, queue) = mpsc::sync_channel::<Vec<ReadJob>>(QUEUED_BATCHES);
    let queue = Mutex::new(queue);
    let (events, reads) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..readers)
            .map(|_| {
                let reader = std::thread::Builder::new().name("skill-reader".into());
                reader.spawn_scoped(scope, || read_jobs(&queue)).expect("cannot start a reader thread")
            })
            .collect();
        let mut walk = Walk {
            max_depth,
            remaining: max_entries,
            visited: HashSet::new(),
            events: Vec::new(),
            diagnostic_events: 0,
            reads: 0,
            jobs,
            batch: Vec::with_capacity(READ_BATCH),
            listing: Vec::with_capacity(LISTING_BUFFER),
        };
        for (index, root) in roots.iter().enumerate() {
            if walk.remaining == 0 {
                break;
            }
            walk.directory(Opener::Root, root.as_bytes().to_vec(), 0, index);
        }
        walk.flush();
        let Walk { events, reads, jobs, .. } = walk;
        drop(jobs);
        let mut results: Vec<Option<Result<Found, Diagnostic>>> = vec![None; reads];
        for worker in workers {
            for (sequence, result) in worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)) {
                results[sequence] = Some(result);
            }
        }
        (events, results)
    });
    replay(events, reads)
}

/// Puts the walk's diagnostics and the readers' results back in walk order.
fn replay(events: Vec<Event>, mut reads: Vec<Option<Result<Found, Diagnostic>>>) -> Outcome {
    let mut outcome = Outcome::default();
    let diagnose = |diagnostic: Diagnostic, outcome: &mut Outcome| {
        if outcome.diagnostics.len() < MAX_DIAGNOSTICS {
            outcome.diagnostics.push(diagnostic.render());
        }
    };
    for event in events {
        match event {
            Event::Diagnostic(diagnostic) => diagnose(diagnostic, &mut outcome),
            Event::Read(sequence) => match reads[sequence].take().expect("every queued read is answered") {
                Ok(found) => outcome.found.push(found),
                Err(diagnostic) => diagnose(diagnostic, &mut outcome),
            },
        }
    }
    outcome
}

#[derive(Debug, Clone)]
struct Diagnostic {
    path: Vec<u8>,
    message: Vec<u8>,
}

impl Diagnostic {
    fn new(path: &[u8], message: impl Into<Vec<u8>>) -> Self {
        Diagnostic { path: path.to_vec(), message: message.into() }
    }

    /// `f"{str(path)[:300]}: {str(error)[:300]}"`, undecodable bytes shown as U+FFFD.
    fn render(&self) -> String {
        let mut text = pystr::take_units(&self.path, MAX_DIAGNOSTIC_PART).to_vec();
        text.extend_from_slice(b": ");
        text.extend_from_slice(pystr::take_units(&self.message, MAX_DIAGNOSTIC_PART));
        String::from_utf8_lossy(&text).into_owned()
    }
}

enum Event {
    Diagnostic(Diagnostic),
    /// The result of the read with this sequence number.
    Read(usize),
}

struct ReadJob {
    sequence: usize,
    folder: Arc<OwnedFd>,
    path: Vec<u8>,
    root: usize,
}

fn read_jobs(queue: &Mutex<Receiver<Vec<ReadJob>>>) -> Vec<(usize, Result<Found, Diagnostic>)> {
    let mut done = Vec::new();
    loop {
        let batch = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(batch) = batch else { return done };
        for job in batch {
            let result = read_skill(job.folder.as_fd(), &job.path).map(|skill| Found { skill, root: job.root });
            done.push((job.sequence, result));
        }
    }
}

/// Reads and parses one `SKILL.md`; `path` is its location.
fn read_skill(folder: BorrowedFd<'_>, path: &[u8]) -> Result<Skill, Diagnostic> {
    let content = guarded::read_skill_file(folder).map_err(|error| Diagnostic::new(path, error.message()))?;
    let folder_path = &path[..path.len() - SKILL_FILE.len() - 1];
    let folder_name = String::from_utf8_lossy(last_component(folder_path));
    let location = String::from_utf8_lossy(path);
    let message = match parse_fields(&content, &folder_name) {
        // The message starts with the location; Python prints its raw bytes.
        Err(kind) => [path, kind.message("").as_bytes()].concat(),
        Ok((name, description)) => match Skill::new(name, description, location.as_ref()) {
            Err(error) => error.to_string().into_bytes(),
            Ok(skill) if matches!(location, Cow::Borrowed(_)) => return Ok(skill),
            Ok(_) if pystr::unit_len(path) > MAX_LOCATION_CHARS => InvalidSkill::Location.to_string().into_bytes(),
            // nagents would publish a location that no JSON or manifest can carry.
            Ok(_) => LOCATION_NOT_UTF8.as_bytes().to_vec(),
        },
    };
    Err(Diagnostic::new(path, message))
}

/// Why a listing ended early.
enum Stop {
    Failed(String),
    OverLimit,
}

enum Opener<'a> {
    Root,
    Child(BorrowedFd<'a>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Directory,
    SkillFile,
    /// Symlinks, other files, special files, and entries that could not be examined: counted,
    /// never followed or read.
    Other,
}

struct Walk {
    max_depth: usize,
    remaining: usize,
    visited: HashSet<Vec<u8>>,
    events: Vec<Event>,
    /// Diagnostics recorded by the walk itself; past the cap, more cannot show.
    diagnostic_events: usize,
    reads: usize,
    jobs: SyncSender<Vec<ReadJob>>,
    batch: Vec<ReadJob>,
    /// The `getdents64` buffer, reused for every directory.
    listing: Vec<u8>,
}

impl Walk {
    fn diagnose(&mut self, path: &[u8], message: impl Into<Vec<u8>>) {
        if self.diagnostic_events < MAX_DIAGNOSTICS {
            self.diagnostic_events += 1;
            self.events.push(Event::Diagnostic(Diagnostic::new(path, message)));
        }
    }

    fn flush(&mut self) {
        if !self.batch.is_empty() {
            let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(READ_BATCH));
            self.jobs.send(batch).expect("readers run until the walk ends");
        }
    }

    fn directory(&mut self, opener: Opener<'_>, path: Vec<u8>, depth: usize, root: usize) {
        if !self.visited.insert(path.clone()) {
            return;
        }
        let opened = match opener {
            Opener::Root => guarded::open_root(&path),
            Opener::Child(parent) => guarded::open_child_directory(parent, last_component(&path)),
        };
        let fd = match opened {
            Ok(fd) => Arc::new(fd),
            Err(message) => return self.diagnose(&path, message),
        };
        let Some(mut entries) = self.list(fd.as_fd(), &path) else { return };
        entries.sort_by(|(a, _), (b, _)| pystr::cmp_units(a, b));
        for (name, kind) in entries {
            match kind {
                Kind::Directory if depth < self.max_depth && self.remaining > 0 => {
                    self.directory(Opener::Child(fd.as_fd()), join(&path, &name), depth + 1, root);
                }
                Kind::Directory => self.diagnose(&join(&path, &name), DEPTH_LIMIT),
                Kind::SkillFile => {
                    let sequence = self.reads;
                    self.reads += 1;
                    self.events.push(Event::Read(sequence));
                    let job = ReadJob { sequence, folder: Arc::clone(&fd), path: join(&path, &name), root };
                    self.batch.push(job);
                    if self.batch.len() == READ_BATCH {
                        self.flush();
                    }
                }
                Kind::Other => {}
            }
        }
    }

    /// Lists a directory, counting every entry against the entry budget. A directory that does not
    /// fit yields nothing (never an arbitrary subset) and ends the walk.
    fn list(&mut self, fd: BorrowedFd<'_>, path: &[u8]) -> Option<Vec<(Vec<u8>, Kind)>> {
        let mut entries = Vec::new();
        let mut failure: Option<Stop> = None;
        let mut buffer = std::mem::take(&mut self.listing);
        let mut listing = RawDir::new(fd, buffer.spare_capacity_mut());
        while let Some(entry) = listing.next() {
            let entry = match entry {
                Ok(entry) => entry,
                Err(errno) => {
                    failure = Some(Stop::Failed(pystr::os_error_message(&errno.into(), path)));
                    break;
                }
            };
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if entries.len() >= self.remaining {
                failure = Some(Stop::OverLimit);
                break;
            }
            let name = name.to_vec();
            let file_type = match entry.file_type() {
                FileType::Unknown => match rustix::fs::statat(fd, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                    Err(errno) => {
                        let message = pystr::os_error_message(&errno.into(), &name);
                        self.diagnose(&join(path, &name), message);
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
            entries.push((name, kind));
        }
        self.listing = buffer;
        match failure {
            // A failed listing publishes nothing of the directory and counts nothing.
            Some(Stop::Failed(message)) => {
                self.diagnose(path, message);
                None
            }
            // Never publish an arbitrary subset of a directory.
            Some(Stop::OverLimit) => {
                self.diagnose(path, ENTRY_LIMIT);
                self.remaining = 0;
                Some(Vec::new())
            }
            None => {
                self.remaining -= entries.len();
                Some(entries)
            }
        }
    }
}
