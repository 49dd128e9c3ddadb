//! Installing several skills into one folder all or nothing: each is downloaded (and checked)
//! into a hidden staging folder beside the target folder first; only when every one is there
//! are they renamed into place, and a failed rename puts back what was moved.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use skillcat_core::SkillName;

/// A hidden folder beside the folder skills are installed into, on the same filesystem so that
/// renames move them; removed with whatever it still holds when dropped.
pub struct Staging {
    into: PathBuf,
    root: PathBuf,
    staged: Vec<SkillName>,
}

/// The folders the staging folder holds: the new skills, then the replaced ones.
const NEW: &str = "new";
const OLD: &str = "old";

impl Staging {
    /// A staging folder for installs into `into` (which must exist). It is beside `into`, not
    /// in it: a catalog scanning `into` never sees a skill twice.
    pub fn new(into: &Path) -> anyhow::Result<Staging> {
        let into = std::fs::canonicalize(into).with_context(|| format!("cannot open {}", into.display()))?;
        let (Some(parent), Some(name)) = (into.parent(), into.file_name()) else {
            anyhow::bail!("cannot install skills into {}", into.display());
        };
        let mut hidden = std::ffi::OsString::from(".");
        hidden.push(name);
        hidden.push(format!(".skillcat-{}-{:08x}", std::process::id(), rand()));
        let root = parent.join(hidden);
        std::fs::create_dir(&root).with_context(|| format!("cannot create the staging folder {}", root.display()))?;
        let staging = Staging { into, root, staged: Vec::new() };
        for folder in [NEW, OLD] {
            std::fs::create_dir(staging.root.join(folder))
                .with_context(|| format!("cannot create the staging folder {}", staging.root.display()))?;
        }
        Ok(staging)
    }

    /// Where the skill `name` is to be downloaded before it is installed (it is then staged).
    pub fn path(&mut self, name: &SkillName) -> PathBuf {
        if !self.staged.contains(name) {
            self.staged.push(name.clone());
        }
        self.root.join(NEW).join(name.as_str())
    }

    /// Checks that every staged skill can be put in place: an existing folder only when
    /// `replace`, never anything that is not a folder (a symlink included).
    pub fn check_targets(into: &Path, names: &[SkillName], replace: bool) -> anyhow::Result<()> {
        for name in names {
            let target = into.join(name.as_str());
            match std::fs::symlink_metadata(&target) {
                Ok(metadata) if metadata.is_dir() && replace => {}
                Ok(metadata) if metadata.is_dir() => {
                    anyhow::bail!("{} already exists; pass --replace to replace it", target.display())
                }
                Ok(_) => anyhow::bail!("{} exists and is not a folder; it is never replaced", target.display()),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(error).with_context(|| format!("cannot inspect {}", target.display())),
            }
        }
        Ok(())
    }

    /// Moves every staged skill into place, replacing existing folders when `replace`; on any
    /// failure every move already made is undone and the target folder is as it was. Returns
    /// the names of the skills that replaced a folder.
    pub fn commit(self, replace: bool) -> anyhow::Result<Vec<SkillName>> {
        Staging::check_targets(&self.into, &self.staged, replace)?;
        let mut moves: Vec<(PathBuf, PathBuf)> = Vec::new();
        let mut replaced = Vec::new();
        for name in &self.staged {
            let target = self.into.join(name.as_str());
            let old = self.root.join(OLD).join(name.as_str());
            let new = self.root.join(NEW).join(name.as_str());
            let result = (|| {
                if std::fs::symlink_metadata(&target).is_ok() {
                    std::fs::rename(&target, &old)
                        .with_context(|| format!("cannot move {} aside", target.display()))?;
                    moves.push((target.clone(), old.clone()));
                    replaced.push(name.clone());
                }
                std::fs::rename(&new, &target).with_context(|| format!("cannot move skill '{name}' into place"))?;
                moves.push((new.clone(), target.clone()));
                anyhow::Ok(())
            })();
            if let Err(error) = result {
                for (from, to) in moves.iter().rev() {
                    if let Err(undo) = std::fs::rename(to, from) {
                        eprintln!("skillcat: cannot move {} back to {}: {undo}", to.display(), from.display());
                    }
                }
                return Err(error);
            }
        }
        // The new folders are in place: the renames must outlive a crash before anything else
        // is said.
        if let Ok(folder) = std::fs::File::open(&self.into) {
            let _ = folder.sync_all();
        }
        Ok(replaced)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // What is left: a failed install's downloads, or the folders a successful one replaced.
        if let Err(error) = std::fs::remove_dir_all(&self.root) {
            eprintln!("skillcat: cannot remove the staging folder {}: {error}", self.root.display());
        }
    }
}

/// A few random bits for a folder name no other run picks.
fn rand() -> u32 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher
        .write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    hasher.finish() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(text: &str) -> SkillName {
        SkillName::parse(text).unwrap()
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        names
    }

    #[test]
    fn staged_skills_replace_folders_and_the_staging_folder_goes() {
        let parent = tempfile::tempdir().unwrap();
        let into = parent.path().join("skills");
        std::fs::create_dir_all(into.join("alpha")).unwrap();
        std::fs::write(into.join("alpha/SKILL.md"), "old").unwrap();
        std::fs::create_dir_all(into.join("local")).unwrap();
        let mut staging = Staging::new(&into).unwrap();
        for skill in ["alpha", "beta"] {
            let path = staging.path(&name(skill));
            std::fs::create_dir(&path).unwrap();
            std::fs::write(path.join("SKILL.md"), format!("new {skill}")).unwrap();
        }
        assert!(staging.root.starts_with(std::fs::canonicalize(parent.path()).unwrap()));
        assert_eq!(staging.commit(true).unwrap(), [name("alpha")]);
        assert_eq!(entries(&into), ["alpha", "beta", "local"]);
        assert_eq!(std::fs::read_to_string(into.join("alpha/SKILL.md")).unwrap(), "new alpha");
        assert_eq!(entries(parent.path()), ["skills"]);
    }

    #[test]
    fn a_target_that_cannot_be_replaced_leaves_everything_as_it_was() {
        let parent = tempfile::tempdir().unwrap();
        let into = parent.path().join("skills");
        std::fs::create_dir_all(into.join("alpha")).unwrap();
        std::fs::write(into.join("beta"), "a file").unwrap();
        for replace in [false, true] {
            let mut staging = Staging::new(&into).unwrap();
            for skill in ["alpha", "beta"] {
                std::fs::create_dir(staging.path(&name(skill))).unwrap();
            }
            assert!(staging.commit(replace).is_err());
            assert_eq!(entries(&into), ["alpha", "beta"]);
            assert_eq!(std::fs::read_to_string(into.join("beta")).unwrap(), "a file");
            assert_eq!(entries(parent.path()), ["skills"]);
        }
    }
}
