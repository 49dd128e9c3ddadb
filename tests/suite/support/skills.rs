//! Skill files as the tests write them.

use std::path::Path;

/// A `SKILL.md` with frontmatter; without a `name` the folder names the skill.
pub fn skill_md<'a>(name: impl Into<Option<&'a str>>, description: &str, body: &str) -> String {
    let name = name.into().map(|name| format!("name: {name}\n")).unwrap_or_default();
    format!("---\n{name}description: {description}\n---\n{body}\n")
}

/// Writes `folder/SKILL.md`, creating `folder`. The file is written beside and renamed over the
/// old one, so a rescan (which may run at any moment) sees the old or the new file, never half of
/// one: a test that waits for the new version would otherwise sometimes see an empty file first.
pub fn write_skill(folder: &Path, text: &str) {
    std::fs::create_dir_all(folder).expect("create the skill folder");
    let temporary = folder.join(".SKILL.md.tmp");
    std::fs::write(&temporary, text).expect("write the temporary file");
    std::fs::rename(&temporary, folder.join("SKILL.md")).expect("rename over SKILL.md");
}
