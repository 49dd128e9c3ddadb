//! The version of an installed skill folder, recomputed from its files as the server computes it
//! from its listing: every regular file whose path has no hidden segment, mode `755` when its
//! owner may execute it (else `644`), in code-point path order.

use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use skillcat_core::{Digest, FileListing, MAX_SKILL_BYTES, MAX_SKILL_DEPTH, MAX_SKILL_FILES, SkillFile, SkillFilePath};

/// Why an installed folder has no version, or holds something no download writes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FolderError {
    #[error("{} is missing", path.display())]
    Missing { path: PathBuf },
    #[error("{} is not a folder", path.display())]
    NotAFolder { path: PathBuf },
    /// A symlink, FIFO, socket or device beneath the folder (hidden names aside): a download
    /// writes regular files and folders only.
    #[error("{} holds {what} '{path}', which no download writes", folder.display())]
    Unexpected { folder: PathBuf, path: String, what: &'static str },
    /// A name that cannot be a skill's file path (not UTF-8, a backslash, too long), or a tree
    /// beyond the bounds of what servers serve.
    #[error("{} cannot be a skill's folder: {reason}", folder.display())]
    Unservable { folder: PathBuf, reason: String },
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The version of the skill installed in `folder`: `sha256:` of one line
/// `<mode> <sha256 hex> <path>\n` per regular file, as
/// [`RemoteFileListing::version`](crate::RemoteFileListing::version) computes it from a
/// listing and the README's shell recipe from a folder. Names starting with `.` are left out
/// (servers never list them); symlinks and other special files are an error.
pub fn installed_version(folder: impl AsRef<Path>) -> Result<Digest, FolderError> {
    let folder = folder.as_ref();
    match std::fs::symlink_metadata(folder) {
        Ok(metadata) if metadata.is_dir() => {}
        Ok(_) => return Err(FolderError::NotAFolder { path: folder.to_owned() }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(FolderError::Missing { path: folder.to_owned() });
        }
        Err(source) => return Err(FolderError::Io { path: folder.to_owned(), source }),
    }
    let mut walk = Walk { root: folder, files: Vec::new(), total: 0 };
    walk.folder(folder, "", 0)?;
    let listing = FileListing::new(walk.files, Vec::new());
    listing.version().ok_or_else(|| FolderError::Unservable {
        folder: folder.to_owned(),
        reason: listing.files().err().map(ToString::to_string).unwrap_or_default(),
    })
}

struct Walk<'a> {
    root: &'a Path,
    files: Vec<SkillFile>,
    total: u64,
}

impl Walk<'_> {
    fn unservable(&self, reason: String) -> FolderError {
        FolderError::Unservable { folder: self.root.to_owned(), reason }
    }

    fn folder(&mut self, dir: &Path, prefix: &str, depth: usize) -> Result<(), FolderError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| FolderError::Io { path, source }
        };
        for entry in std::fs::read_dir(dir).map_err(io(dir))? {
            let entry = entry.map_err(io(dir))?;
            let name = entry.file_name();
            if name.as_encoded_bytes().first() == Some(&b'.') {
                continue;
            }
            let Some(name) = name.to_str() else {
                return Err(self.unservable(format!("a name in '{prefix}' is not UTF-8")));
            };
            let relative = format!("{prefix}{name}");
            let kind = entry.file_type().map_err(io(&entry.path()))?;
            if kind.is_dir() {
                if depth >= MAX_SKILL_DEPTH {
                    return Err(self.unservable(format!("'{relative}' is more than {MAX_SKILL_DEPTH} folders deep")));
                }
                self.folder(&entry.path(), &format!("{relative}/"), depth + 1)?;
            } else if kind.is_file() {
                self.file(&entry.path(), relative)?;
            } else {
                let what = if kind.is_symlink() { "a symlink" } else { "a special file" };
                return Err(FolderError::Unexpected { folder: self.root.to_owned(), path: relative, what });
            }
        }
        Ok(())
    }

    fn file(&mut self, path: &Path, relative: String) -> Result<(), FolderError> {
        let io = |source| FolderError::Io { path: path.to_owned(), source };
        let file_path =
            SkillFilePath::parse(&relative).map_err(|error| self.unservable(format!("'{relative}': {error}")))?;
        if self.files.len() >= MAX_SKILL_FILES {
            return Err(self.unservable(format!("more than {MAX_SKILL_FILES} files")));
        }
        // Opened without following a symlink put in the file's place since it was listed; its
        // mode and size are the open file's.
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)
            .map_err(io)?;
        let metadata = file.metadata().map_err(io)?;
        if !metadata.is_file() {
            return Err(FolderError::Unexpected {
                folder: self.root.to_owned(),
                path: relative,
                what: "a special file",
            });
        }
        self.total = self.total.saturating_add(metadata.len());
        if self.total > MAX_SKILL_BYTES {
            return Err(self.unservable(format!("more than {MAX_SKILL_BYTES} bytes")));
        }
        let mut bytes = Vec::with_capacity(metadata.len() as usize);
        std::io::Read::read_to_end(&mut file, &mut bytes).map_err(io)?;
        self.files.push(SkillFile {
            path: file_path,
            size: bytes.len() as u64,
            digest: Digest::of(&bytes),
            executable: metadata.permissions().mode() & 0o100 != 0,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, bytes: &[u8], mode: u32) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_version_is_the_digest_of_the_mode_digest_and_path_lines_in_code_point_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join("SKILL.md"), b"# A\n", 0o644);
        write(&root.join("scripts/run.sh"), b"#!/bin/sh\n", 0o755);
        write(&root.join("a b/\u{fc}.txt"), b"", 0o600);
        write(&root.join(".hidden/secret"), b"x", 0o644);
        write(&root.join("scripts/.cache"), b"x", 0o644);
        let hex = |bytes: &[u8]| Digest::of(bytes).to_string()["sha256:".len()..].to_owned();
        let lines = format!(
            "644 {} SKILL.md\n644 {} a b/\u{fc}.txt\n755 {} scripts/run.sh\n",
            hex(b"# A\n"),
            hex(b""),
            hex(b"#!/bin/sh\n")
        );
        assert_eq!(installed_version(root).unwrap(), Digest::of(lines.as_bytes()));

        // Any byte, an added file, an executable bit: another version.
        let before = installed_version(root).unwrap();
        std::fs::set_permissions(root.join("SKILL.md"), std::fs::Permissions::from_mode(0o744)).unwrap();
        assert_ne!(installed_version(root).unwrap(), before);
        std::fs::set_permissions(root.join("SKILL.md"), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(installed_version(root).unwrap(), before);
        write(&root.join("extra"), b"", 0o644);
        assert_ne!(installed_version(root).unwrap(), before);
    }

    #[test]
    fn a_symlink_a_file_or_nothing_has_no_version() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skill");
        assert!(matches!(installed_version(&root), Err(FolderError::Missing { .. })));
        write(&root.join("SKILL.md"), b"# A\n", 0o644);
        std::os::unix::fs::symlink("SKILL.md", root.join("link")).unwrap();
        let error = installed_version(&root).unwrap_err();
        assert!(matches!(&error, FolderError::Unexpected { path, .. } if path == "link"), "{error:?}");
        std::fs::remove_file(root.join("link")).unwrap();
        std::os::unix::fs::symlink(&root, dir.path().join("alias")).unwrap();
        assert!(matches!(installed_version(dir.path().join("alias")), Err(FolderError::NotAFolder { .. })));
        assert!(matches!(installed_version(root.join("SKILL.md")), Err(FolderError::NotAFolder { .. })));
    }
}
