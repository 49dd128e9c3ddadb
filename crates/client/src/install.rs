//! Writing a downloaded skill into a local folder, all or nothing.
//!
//! The files go into a staging folder beside the target (same parent, so one rename moves it;
//! a hidden name, so nothing that scans the parent for skills sees it half-written), created
//! mode 0700 so that no other user can put anything in it. Every folder and file inside is
//! created relative to an open descriptor of its parent, files with `O_CREAT|O_EXCL|O_NOFOLLOW`
//! and folders opened `O_DIRECTORY|O_NOFOLLOW`: nothing is ever re-resolved from a path string,
//! no symlink is followed, nothing that exists is written through. Paths come from a checked
//! [`RemoteFileListing`](crate::RemoteFileListing), so they can only name things beneath the
//! staging folder; these opens are the second line of defence. Files get 0644 or 0755, folders
//! 0755, everything is synced, and then one rename puts the folder in place:
//! `RENAME_NOREPLACE` onto a free name, `RENAME_EXCHANGE` with an existing folder when replacing
//! (the old one is then removed). Where the filesystem has neither, the same is done with plain
//! renames, checked as closely as they allow. On any failure the staging folder is removed and
//! the target is as it was.
//!
//! A hidden name does not hide a folder from skill discovery: nagents (and skillcat, which
//! follows it) walk hidden folders too, so a scan of the parent that met a `SKILL.md` in the
//! staging folder (or in a replaced folder being removed) would find the skill twice and fail
//! the whole source. So every `SKILL.md` is written under a hidden name and renamed to
//! `SKILL.md` only once everything else is written and synced, just before the final rename;
//! and a replaced folder loses its `SKILL.md` files first when it is removed.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Permissions};
use std::io::{self, Write as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use skillcat_core::SkillFilePath;

use crate::error::ClientError;
use crate::files::RemoteFile;

const FOLDER: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);
const NEW_FILE: OFlags =
    OFlags::WRONLY.union(OFlags::CREATE).union(OFlags::EXCL).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);
/// Until the folder is complete, only its owner may enter it.
const PRIVATE: u32 = 0o700;
/// The name skill discovery looks for.
const SKILL_FILE: &str = "SKILL.md";
/// What a `SKILL.md` is called until the folder is about to be put in place. Hidden, so no
/// listed path can be this name.
const SKILL_FILE_PART: &str = ".SKILL.md.skillcat-part";

/// What [`install`] did.
#[derive(Debug)]
pub(crate) struct Installed {
    /// An existing folder was swapped out.
    pub replaced: bool,
    /// Where the swapped-out folder was left when it could not be removed (a read-only folder
    /// inside it, say): the new one is in place all the same.
    pub leftover: Option<PathBuf>,
}

/// The target's parent folder, open, and the target's name in it.
struct Target<'a> {
    path: &'a Path,
    parent: OwnedFd,
    name: &'a OsStr,
}

impl<'a> Target<'a> {
    fn open(path: &'a Path) -> Result<Target<'a>, ClientError> {
        let name = path.file_name().ok_or_else(|| ClientError::Io {
            target: path.to_owned(),
            action: "naming the folder to write".into(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "the target path does not end in a name"),
        })?;
        let parent = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let parent = rustix::fs::openat(CWD, parent, FOLDER.difference(OFlags::NOFOLLOW), Mode::empty())
            .map_err(|errno| io_error(path, format!("opening its parent folder {}", parent.display()), errno))?;
        Ok(Target { path, parent, name })
    }

    /// Whether something is at the target: `Some(true)` for a folder, `Some(false)` for anything
    /// else (a symlink is not followed).
    fn existing(&self) -> Result<Option<bool>, ClientError> {
        match rustix::fs::statat(&self.parent, self.name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(FileType::from_raw_mode(stat.st_mode) == FileType::Directory)),
            Err(Errno::NOENT) => Ok(None),
            Err(errno) => Err(io_error(self.path, "looking at it", errno)),
        }
    }

    /// Refuses what is there, unless it is a folder and `replace` is asked.
    fn check(&self, replace: bool) -> Result<bool, ClientError> {
        match self.existing()? {
            None => Ok(false),
            Some(true) if replace => Ok(true),
            Some(folder) => Err(ClientError::TargetExists { path: self.path.to_owned(), folder }),
        }
    }
}

/// Refuses a target that [`install`] would refuse, before anything is fetched.
pub(crate) fn check_target(target: &Path, replace: bool) -> Result<(), ClientError> {
    Target::open(target)?.check(replace).map(drop)
}

/// Writes `files` (each with its bytes, already verified) as the folder `target`, replacing an
/// existing folder only if `replace`.
pub(crate) fn install(target: &Path, files: &[(RemoteFile, Vec<u8>)], replace: bool) -> Result<Installed, ClientError> {
    let target = Target::open(target)?;
    target.check(replace)?;
    let staging = Staging::create(&target)?;
    let root = rustix::fs::openat(&target.parent, &staging.name, FOLDER, Mode::empty())
        .map_err(|errno| io_error(target.path, "opening the staging folder", errno))?;
    fill(&root, files, target.path)?;
    drop(root);
    let installed = staging.swap_in(&target, replace)?;
    // The renames are durable once the parent is synced. The target has changed already, so a
    // failure here is no reason to report the download as failed.
    let _ = rustix::fs::fsync(&target.parent);
    Ok(installed)
}

/// Writes `files` beneath `root` and syncs them, each `SKILL.md` last (see the module's notes).
fn fill(root: &OwnedFd, files: &[(RemoteFile, Vec<u8>)], target: &Path) -> Result<(), ClientError> {
    let failed = |action: String| move |source| ClientError::Io { target: target.to_owned(), action, source };
    for (file, bytes) in files {
        write_file(root, &file.path, bytes, file.executable).map_err(failed(format!("writing {:?}", file.path)))?;
    }
    seal_folders(root, files.iter().map(|(file, _)| &file.path)).map_err(failed("syncing the folders".into()))?;
    for (file, _) in files.iter().filter(|(file, _)| file.path.file_name() == SKILL_FILE) {
        publish_skill_file(root, &file.path).map_err(failed(format!("renaming {:?} into place", file.path)))?;
    }
    Ok(())
}

/// Opens the folder whose `segments` lead from `root` (`None` when there are none: `root` itself).
fn open_folder<'a>(root: &OwnedFd, segments: impl Iterator<Item = &'a str>) -> io::Result<Option<OwnedFd>> {
    let mut fd: Option<OwnedFd> = None;
    for segment in segments {
        let at = fd.as_ref().map_or(root.as_fd(), AsFd::as_fd);
        fd = Some(rustix::fs::openat(at, segment, FOLDER, Mode::empty())?);
    }
    Ok(fd)
}

/// Renames the `SKILL.md` at `path`, written under [`SKILL_FILE_PART`], to its name, and syncs
/// its folder.
fn publish_skill_file(root: &OwnedFd, path: &SkillFilePath) -> io::Result<()> {
    let folder = open_folder(root, path.folders())?;
    let at = folder.as_ref().map_or(root.as_fd(), AsFd::as_fd);
    match rustix::fs::renameat_with(at, SKILL_FILE_PART, at, SKILL_FILE, RenameFlags::NOREPLACE) {
        Ok(()) => {}
        // The staging folder holds only what was written into it, so a plain rename replaces
        // nothing there either.
        Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
            rustix::fs::renameat(at, SKILL_FILE_PART, at, SKILL_FILE)?
        }
        Err(errno) => return Err(errno.into()),
    }
    Ok(rustix::fs::fsync(at)?)
}

/// Creates `path`'s folders (0700 until sealed) and then the file itself, which must not exist,
/// with `bytes` and its final mode, synced. A `SKILL.md` gets the name [`SKILL_FILE_PART`].
fn write_file(root: &OwnedFd, path: &SkillFilePath, bytes: &[u8], executable: bool) -> io::Result<()> {
    let mut folder: Option<OwnedFd> = None;
    for segment in path.folders() {
        let at = folder.as_ref().map_or(root.as_fd(), AsFd::as_fd);
        match rustix::fs::mkdirat(at, segment, Mode::from_raw_mode(PRIVATE)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(errno) => return Err(errno.into()),
        }
        // An existing name that is not a folder (a file of the same name on a case-insensitive
        // filesystem, say) fails here rather than being written through.
        folder = Some(rustix::fs::openat(at, segment, FOLDER, Mode::empty())?);
    }
    let at = folder.as_ref().map_or(root.as_fd(), AsFd::as_fd);
    let name = if path.file_name() == SKILL_FILE { SKILL_FILE_PART } else { path.file_name() };
    let mut file = File::from(rustix::fs::openat(at, name, NEW_FILE, Mode::from_raw_mode(0o600))?);
    file.write_all(bytes)?;
    file.set_permissions(Permissions::from_mode(if executable { 0o755 } else { 0o644 }))?;
    file.sync_all()
}

/// Gives every folder of the files, and the root, mode 0755 and syncs it.
fn seal_folders<'a>(root: &OwnedFd, paths: impl Iterator<Item = &'a SkillFilePath>) -> io::Result<()> {
    let mut folders = std::collections::BTreeSet::new();
    for path in paths {
        let text = path.as_str();
        folders.extend(text.match_indices('/').map(|(end, _)| &text[..end]));
    }
    for folder in folders {
        if let Some(fd) = open_folder(root, folder.split('/'))? {
            seal(&fd)?;
        }
    }
    seal(root)
}

fn seal(folder: &OwnedFd) -> io::Result<()> {
    rustix::fs::fchmod(folder, Mode::from_raw_mode(0o755))?;
    Ok(rustix::fs::fsync(folder)?)
}

/// The staging folder beside the target; removed on drop unless it was renamed onto the target.
struct Staging<'a> {
    parent: BorrowedFd<'a>,
    name: OsString,
    armed: bool,
}

impl<'a> Staging<'a> {
    fn create(target: &'a Target<'_>) -> Result<Staging<'a>, ClientError> {
        let mut attempts = 0;
        loop {
            let name = hidden_name(target.name, "tmp");
            match rustix::fs::mkdirat(&target.parent, &name, Mode::from_raw_mode(PRIVATE)) {
                Ok(()) => return Ok(Staging { parent: target.parent.as_fd(), name, armed: true }),
                Err(Errno::EXIST) if attempts < 16 => attempts += 1,
                Err(errno) => return Err(io_error(target.path, "creating a staging folder beside it", errno)),
            }
        }
    }

    /// Puts the staging folder at the target's name in one rename.
    fn swap_in(mut self, target: &Target<'_>, replace: bool) -> Result<Installed, ClientError> {
        let (parent, name) = (&target.parent, target.name);
        if replace {
            match rustix::fs::renameat_with(parent, &self.name, parent, name, RenameFlags::EXCHANGE) {
                Ok(()) => {
                    // The old folder now has the staging folder's name.
                    self.armed = false;
                    let leftover = remove_tree(parent.as_fd(), &self.name).err().map(|_| sibling(target, &self.name));
                    return Ok(Installed { replaced: true, leftover });
                }
                // The target went away meanwhile: it is put in place as if it never was.
                Err(Errno::NOENT) => {}
                Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => return self.swap_in_by_steps(target),
                Err(errno) => return Err(io_error(target.path, "swapping the new folder in", errno)),
            }
        }
        match rustix::fs::renameat_with(parent, &self.name, parent, name, RenameFlags::NOREPLACE) {
            Ok(()) => {}
            Err(Errno::EXIST) => return Err(ClientError::TargetExists { path: target.path.to_owned(), folder: true }),
            Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
                // Without RENAME_NOREPLACE a rename would replace an empty folder made since the
                // check; this narrows the window to the two calls.
                if target.existing()?.is_some() {
                    return Err(ClientError::TargetExists { path: target.path.to_owned(), folder: true });
                }
                rustix::fs::renameat(parent, &self.name, parent, name)
                    .map_err(|errno| io_error(target.path, "renaming the new folder onto it", errno))?;
            }
            Err(errno) => return Err(io_error(target.path, "renaming the new folder onto it", errno)),
        }
        self.armed = false;
        Ok(Installed { replaced: false, leftover: None })
    }

    /// Replaces the target where the filesystem cannot exchange two names: the old folder is
    /// renamed aside, the new one onto its name (the old one goes back if that fails), and the
    /// old one is removed. Between the two renames the target's name is briefly free.
    fn swap_in_by_steps(mut self, target: &Target<'_>) -> Result<Installed, ClientError> {
        let (parent, name) = (&target.parent, target.name);
        let aside = hidden_name(name, "old");
        rustix::fs::renameat(parent, name, parent, &aside)
            .map_err(|errno| io_error(target.path, "moving the old folder aside", errno))?;
        if let Err(errno) = rustix::fs::renameat(parent, &self.name, parent, name) {
            let _ = rustix::fs::renameat(parent, &aside, parent, name);
            return Err(io_error(target.path, "renaming the new folder onto it", errno));
        }
        self.armed = false;
        let leftover = remove_tree(parent.as_fd(), &aside).err().map(|_| sibling(target, &aside));
        Ok(Installed { replaced: true, leftover })
    }
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = remove_tree(self.parent, &self.name);
        }
    }
}

/// `.{name}.skillcat-{kind}-{random}`: hidden, beside the target, and telling whoever finds one
/// after a crash what it is.
fn hidden_name(target: &OsStr, kind: &str) -> OsString {
    // A name is at most 255 bytes; the target's part is cut so that the whole stays within.
    let stem = &target.as_bytes()[..target.len().min(200)];
    let mut name = b".".to_vec();
    name.extend_from_slice(stem);
    name.extend_from_slice(format!(".skillcat-{kind}-{:016x}", fastrand::u64(..)).as_bytes());
    OsString::from_vec(name)
}

fn sibling(target: &Target<'_>, name: &OsStr) -> PathBuf {
    target.path.with_file_name(name)
}

/// Removes `name` in `parent` and everything beneath it, relative to open folders and without
/// following any symlink (a symlink is removed, never what it points to). In each folder a
/// `SKILL.md` goes first, so that a scan meeting the rest finds no skill in it.
fn remove_tree(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let folder = match rustix::fs::openat(parent, name, FOLDER, Mode::empty()) {
        Ok(folder) => folder,
        // Not a folder (or a symlink to one): removed as a name.
        Err(Errno::NOTDIR | Errno::LOOP) => return Ok(rustix::fs::unlinkat(parent, name, AtFlags::empty())?),
        Err(errno) => return Err(errno.into()),
    };
    match rustix::fs::unlinkat(&folder, SKILL_FILE, AtFlags::empty()) {
        // A folder named SKILL.md (EISDIR) is removed with the rest.
        Ok(()) | Err(Errno::NOENT | Errno::ISDIR | Errno::PERM) => {}
        Err(errno) => return Err(errno.into()),
    }
    let mut entries = Vec::new();
    for entry in rustix::fs::Dir::read_from(&folder)? {
        let entry = entry?;
        let entry_name = entry.file_name().to_bytes();
        if entry_name != b"." && entry_name != b".." {
            entries.push((OsString::from_vec(entry_name.to_vec()), entry.file_type()));
        }
    }
    for (entry, kind) in entries {
        match kind {
            FileType::Directory | FileType::Unknown => remove_tree(folder.as_fd(), &entry)?,
            _ => rustix::fs::unlinkat(&folder, &entry, AtFlags::empty())?,
        }
    }
    drop(folder);
    Ok(rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR)?)
}

fn io_error(target: &Path, action: impl Into<String>, errno: Errno) -> ClientError {
    ClientError::Io { target: target.to_owned(), action: action.into(), source: errno.into() }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    use skillcat_core::Digest;

    use super::*;

    fn file(path: &str, bytes: &[u8], executable: bool) -> (RemoteFile, Vec<u8>) {
        let remote = RemoteFile {
            path: SkillFilePath::parse(path).unwrap(),
            size: bytes.len() as u64,
            digest: Digest::of(bytes),
            media_type: "text/plain".into(),
            executable,
        };
        (remote, bytes.to_vec())
    }

    /// Every name in `dir`, sorted: what a failed install must leave as it found it.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        names
    }

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn a_skill_is_written_with_its_modes_and_nothing_else_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("alpha");
        let files = [
            file("SKILL.md", b"# A\n", false),
            file("scripts/run.sh", b"#!/bin/sh\n", true),
            file("a/b/c.txt", b"", false),
        ];
        let installed = install(&target, &files, false).unwrap();
        assert!(!installed.replaced && installed.leftover.is_none());
        assert_eq!(names(dir.path()), ["alpha"]);
        assert_eq!(std::fs::read(target.join("scripts/run.sh")).unwrap(), b"#!/bin/sh\n");
        assert_eq!(std::fs::read(target.join("a/b/c.txt")).unwrap(), b"");
        assert_eq!(mode(&target.join("scripts/run.sh")), 0o755);
        assert_eq!(mode(&target.join("SKILL.md")), 0o644);
        for folder in ["", "scripts", "a", "a/b"] {
            assert_eq!(mode(&target.join(folder)), 0o755, "{folder:?}");
        }
    }

    #[test]
    fn an_existing_target_is_refused_unless_it_is_a_folder_and_replace_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("alpha");
        std::fs::create_dir_all(target.join("old/deeper")).unwrap();
        std::fs::write(target.join("old/deeper/keep.txt"), "old").unwrap();
        let files = [file("SKILL.md", b"new", false)];
        let error = install(&target, &files, false).unwrap_err();
        assert!(matches!(&error, ClientError::TargetExists { folder: true, .. }), "{error:?}");
        assert_eq!(check_target(&target, false).unwrap_err().to_string(), error.to_string());
        assert_eq!(names(dir.path()), ["alpha"]);
        assert_eq!(std::fs::read_to_string(target.join("old/deeper/keep.txt")).unwrap(), "old");

        let installed = install(&target, &files, true).unwrap();
        assert!(installed.replaced && installed.leftover.is_none());
        assert_eq!(names(&target), ["SKILL.md"]);
        assert_eq!(names(dir.path()), ["alpha"], "the old folder is removed");

        // A file or a symlink (even to a folder) is never replaced.
        std::fs::write(dir.path().join("file"), "x").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("link")).unwrap();
        for name in ["file", "link"] {
            let error = install(&dir.path().join(name), &files, true).unwrap_err();
            assert!(matches!(&error, ClientError::TargetExists { folder: false, .. }), "{error:?}");
        }
        assert_eq!(names(dir.path()), ["alpha", "file", "link"]);
        assert_eq!(names(&target), ["SKILL.md"]);
    }

    #[test]
    fn a_failure_while_writing_removes_the_staging_folder_and_leaves_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("alpha");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("SKILL.md"), "old").unwrap();
        // A checked listing never has a file where another's folder is; if one got through, the
        // O_EXCL create of "x" fails on the folder "x/y" made (as a file named like a folder would
        // on a case-folding filesystem).
        let clash = [file("SKILL.md", b"new", false), file("x/y", b"", false), file("x", b"", false)];
        for (name, replace) in [("beta", false), ("alpha", true)] {
            let error = install(&dir.path().join(name), &clash, replace).unwrap_err();
            assert!(matches!(&error, ClientError::Io { action, .. } if action == "writing \"x\""), "{error:?}");
            assert_eq!(names(dir.path()), ["alpha"], "{error}");
            assert_eq!(names(&target), ["SKILL.md"]);
            assert_eq!(std::fs::read_to_string(target.join("SKILL.md")).unwrap(), "old");
        }
    }

    #[test]
    fn a_missing_parent_or_a_target_without_a_name_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let files = [file("SKILL.md", b"x", false)];
        for target in [dir.path().join("missing/alpha"), dir.path().join(".."), PathBuf::from("/")] {
            let error = install(&target, &files, false).unwrap_err();
            assert!(matches!(error, ClientError::Io { .. }), "{target:?}: {error:?}");
        }
    }

    /// Every path beneath `dir` whose last segment is `name`.
    fn named(dir: &Path, name: &str) -> Vec<String> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let file_name = entry.file_name().into_string().unwrap();
            if entry.file_type().unwrap().is_dir() {
                found.extend(named(&entry.path(), name).into_iter().map(|path| format!("{file_name}/{path}")));
            } else if file_name == name {
                found.push(file_name);
            }
        }
        found.sort();
        found
    }

    #[test]
    fn the_staging_folder_holds_no_skill_md_until_everything_else_is_written() {
        // A scan of the parent meeting a SKILL.md in the staging folder would see the skill twice
        // (hidden folders are walked), so every SKILL.md appears only at the end.
        let dir = tempfile::tempdir().unwrap();
        let root = rustix::fs::openat(CWD, dir.path(), FOLDER, Mode::empty()).unwrap();
        let files =
            [file("SKILL.md", b"# A", false), file("nested/inner/SKILL.md", b"# B", false), file("x", b"", false)];
        for (file, bytes) in &files {
            write_file(&root, &file.path, bytes, file.executable).unwrap();
        }
        assert_eq!(named(dir.path(), SKILL_FILE), Vec::<String>::new());
        assert_eq!(named(dir.path(), SKILL_FILE_PART).len(), 2);
        for (file, _) in &files[..2] {
            publish_skill_file(&root, &file.path).unwrap();
        }
        assert_eq!(named(dir.path(), SKILL_FILE), ["SKILL.md", "nested/inner/SKILL.md"]);
        assert_eq!(named(dir.path(), SKILL_FILE_PART), Vec::<String>::new());
        assert_eq!(std::fs::read(dir.path().join("nested/inner/SKILL.md")).unwrap(), b"# B");
    }

    #[test]
    fn removing_a_tree_never_follows_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("precious"), "keep").unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("sub")).unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("sub/link")).unwrap();
        std::os::unix::fs::symlink(outside.join("precious"), tree.join("file-link")).unwrap();
        let parent = rustix::fs::openat(CWD, dir.path(), FOLDER, Mode::empty()).unwrap();
        remove_tree(parent.as_fd(), OsStr::new("tree")).unwrap();
        assert_eq!(names(dir.path()), ["outside"]);
        assert_eq!(std::fs::read_to_string(outside.join("precious")).unwrap(), "keep");
    }

    #[test]
    fn hidden_names_stay_within_a_name_and_start_with_a_dot() {
        let long = OsString::from("x".repeat(255));
        let name = hidden_name(&long, "tmp");
        assert!(name.len() <= 255 && name.as_bytes()[0] == b'.', "{name:?}");
        assert_ne!(hidden_name(OsStr::new("a"), "tmp"), hidden_name(OsStr::new("a"), "tmp"));
    }
}
