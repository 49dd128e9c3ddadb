//! One blocking scan of a directory source, step for step nagents' walk.

use std::borrow::Cow;
use std::collections::HashSet;
use std::os::fd::{AsFd, BorrowedFd};

use rustix::fs::{AtFlags, Dir, FileType};

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

/// A discovered skill and where its file is, relative to its root.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub skill: Skill,
    pub root: usize,
    /// The folders from the root down to the one holding `SKILL.md`.
    pub folders: Vec<Vec<u8>>,
}

#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub found: Vec<Found>,
    pub diagnostics: Vec<String>,
}

pub(crate) fn scan(roots: &[AbsoluteRoot], max_entries: usize, max_depth: usize) -> Outcome {
    let mut walk = Walk { max_depth, remaining: max_entries, visited: HashSet::new(), outcome: Outcome::default() };
    for (index, root) in roots.iter().enumerate() {
        if walk.remaining == 0 {
            break;
        }
        let mut folders = Vec::new();
        walk.directory(Opener::Root, root.as_bytes().to_vec(), &mut folders, 0, index);
    }
    walk.outcome
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
    outcome: Outcome,
}

impl Walk {
    fn diagnose(&mut self, path: &[u8], message: &[u8]) {
        if self.outcome.diagnostics.len() < MAX_DIAGNOSTICS {
            let mut text = pystr::take_units(path, MAX_DIAGNOSTIC_PART).to_vec();
            text.extend_from_slice(b": ");
            text.extend_from_slice(pystr::take_units(message, MAX_DIAGNOSTIC_PART));
            self.outcome.diagnostics.push(String::from_utf8_lossy(&text).into_owned());
        }
    }

    fn directory(&mut self, opener: Opener<'_>, path: Vec<u8>, folders: &mut Vec<Vec<u8>>, depth: usize, root: usize) {
        if self.visited.contains(&path) {
            return;
        }
        self.visited.insert(path.clone());
        let opened = match opener {
            Opener::Root => guarded::open_root(&path),
            Opener::Child(parent) => guarded::open_child_directory(parent, last_component(&path)),
        };
        let fd = match opened {
            Ok(fd) => fd,
            Err(message) => return self.diagnose(&path, message.as_bytes()),
        };
        let Some(mut entries) = self.list(fd.as_fd(), &path) else { return };
        let fd = fd.as_fd();
        entries.sort_by(|(a, _), (b, _)| pystr::cmp_units(a, b));
        for (name, kind) in entries {
            let child = join(&path, &name);
            match kind {
                Kind::Directory if depth < self.max_depth && self.remaining > 0 => {
                    folders.push(name);
                    self.directory(Opener::Child(fd), child, folders, depth + 1, root);
                    folders.pop();
                }
                Kind::Directory => self.diagnose(&child, DEPTH_LIMIT.as_bytes()),
                Kind::SkillFile => self.skill_file(fd, &path, child, folders, root),
                Kind::Other => {}
            }
        }
    }

    /// Lists a directory, counting every entry against the entry budget. A directory that does not
    /// fit yields nothing (never an arbitrary subset) and ends the walk.
    fn list(&mut self, fd: BorrowedFd<'_>, path: &[u8]) -> Option<Vec<(Vec<u8>, Kind)>> {
        // The stream reads through its own descriptor, so `fd` stays free for `openat`.
        let mut dir = match rustix::io::fcntl_dupfd_cloexec(fd, 0).and_then(Dir::new) {
            Ok(dir) => dir,
            Err(errno) => {
                self.diagnose(path, pystr::os_error_message(&errno.into(), path).as_bytes());
                return None;
            }
        };
        let mut entries = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = match entry {
                Ok(entry) => entry,
                Err(errno) => {
                    self.diagnose(path, pystr::os_error_message(&errno.into(), path).as_bytes());
                    return None;
                }
            };
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if entries.len() >= self.remaining {
                self.diagnose(path, ENTRY_LIMIT.as_bytes());
                entries.clear();
                self.remaining = 0;
                break;
            }
            let name = name.to_vec();
            let file_type = match entry.file_type() {
                FileType::Unknown => match rustix::fs::statat(fd, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                    Err(errno) => {
                        self.diagnose(&join(path, &name), pystr::os_error_message(&errno.into(), &name).as_bytes());
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
        self.remaining -= entries.len();
        Some(entries)
    }

    fn skill_file(
        &mut self,
        directory: BorrowedFd<'_>,
        folder: &[u8],
        path: Vec<u8>,
        folders: &[Vec<u8>],
        root: usize,
    ) {
        let content = match guarded::read_skill_file(directory) {
            Ok(content) => content,
            Err(error) => return self.diagnose(&path, error.message().as_bytes()),
        };
        let folder_name = String::from_utf8_lossy(last_component(folder));
        let location = String::from_utf8_lossy(&path);
        let message = match parse_fields(&content, &folder_name) {
            // The message starts with the location; Python prints its raw bytes.
            Err(kind) => [path.as_slice(), kind.message("").as_bytes()].concat(),
            Ok((name, description)) => match Skill::new(name, description, location.as_ref()) {
                Err(error) => error.to_string().into_bytes(),
                Ok(skill) if matches!(location, Cow::Borrowed(_)) => {
                    self.outcome.found.push(Found { skill, root, folders: folders.to_vec() });
                    return;
                }
                Ok(_) if pystr::unit_len(&path) > MAX_LOCATION_CHARS => InvalidSkill::Location.to_string().into_bytes(),
                // nagents would publish a location no JSON or manifest can carry.
                Ok(_) => LOCATION_NOT_UTF8.as_bytes().to_vec(),
            },
        };
        self.diagnose(&path, &message);
    }
}
