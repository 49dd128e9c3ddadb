//! `skillcat init`: a new skill's folder that passes `check --spec`, written beside its target
//! and renamed into place (an existing folder is never touched).

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use skillcat_core::{SkillName, SpecName};

use super::staging::Staging;

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The skill's name, as agentskills.io names skills: 1 to 64 lowercase letters, digits and
    /// hyphens, no hyphen first, last or next to another. It is also its folder's name.
    pub name: String,
    /// The folder to create the skill in: it becomes DIR/NAME. Created if missing.
    #[arg(long, value_name = "DIR", default_value = ".agents/skills")]
    pub into: PathBuf,
    /// What the skill does and when an agent should use it (the frontmatter's `description`,
    /// 1 to 1024 characters) [default: a line to replace].
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,
    /// Also write `scripts/` and `references/`, each with a stub to replace.
    #[arg(long)]
    pub full: bool,
}

const PLACEHOLDER: &str = "Replace this line: what the skill does, and when an agent should use it.";

pub fn run(args: &InitArgs) -> anyhow::Result<ExitCode> {
    let name = match SpecName::parse(&args.name) {
        Ok(name) => name,
        Err(error) => {
            eprintln!("skillcat: {error}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let description = args.description.as_deref().unwrap_or(PLACEHOLDER).trim();
    let chars = description.chars().count();
    if !(1..=crate::spec::MAX_DESCRIPTION_CHARS).contains(&chars) || description.contains('\n') {
        eprintln!("skillcat: a description is one line of 1 to 1024 characters (this one has {chars})");
        return Ok(ExitCode::FAILURE);
    }
    let Some(description) = scalar(description) else {
        eprintln!(
            "skillcat: a description with both ' and \" (or a backslash) cannot be written as nagents and YAML read it alike; drop one of them"
        );
        return Ok(ExitCode::FAILURE);
    };
    let skill = SkillName::parse(name.as_str()).expect("a specification name is a skill name");
    std::fs::create_dir_all(&args.into).with_context(|| format!("cannot create {}", args.into.display()))?;
    let target = args.into.join(name.as_str());
    if std::fs::symlink_metadata(&target).is_ok() {
        eprintln!("skillcat: {} already exists; init never changes an existing folder", target.display());
        return Ok(ExitCode::FAILURE);
    }
    let mut staging = Staging::new(&args.into)?;
    let folder = staging.path(&skill);
    let mut files = vec![(PathBuf::from("SKILL.md"), skill_md(name.as_str(), &description, args.full), false)];
    if args.full {
        files.push((PathBuf::from("scripts/example.sh"), SCRIPT.to_owned(), true));
        files.push((PathBuf::from("references/REFERENCE.md"), REFERENCE.to_owned(), false));
    }
    for (path, text, executable) in &files {
        let path = folder.join(path);
        std::fs::create_dir_all(path.parent().expect("a folder"))
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut file = std::fs::File::create_new(&path).with_context(|| format!("cannot create {}", path.display()))?;
        file.write_all(text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))?;
        let mode = if *executable { 0o755 } else { 0o644 };
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.sync_all()?;
    }
    staging.commit(false)?;
    let count = if files.len() == 1 { "1 file".to_owned() } else { format!("{} files", files.len()) };
    println!(
        "created skill '{name}' in {} ({count}); check it with: skillcat check --spec --dir {}",
        target.display(),
        args.into.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `text` as a YAML scalar that nagents' frontmatter reading (which strips one pair of quotes
/// and unescapes nothing) reads as the same text: plain when YAML takes it so, else quoted
/// without escapes; `None` when no such form exists.
fn scalar(text: &str) -> Option<String> {
    let plain = !text.starts_with(|c: char| "-?:,[]{}#&*!|>'\"%@`".contains(c))
        && !text.contains(": ")
        && !text.contains(" #")
        && !text.ends_with(':');
    if plain {
        Some(text.to_owned())
    } else if !text.contains('\'') {
        Some(format!("'{text}'"))
    } else if !text.contains('"') && !text.contains('\\') {
        Some(format!("\"{text}\""))
    } else {
        None
    }
}

/// The `SKILL.md` of a new skill: the frontmatter agentskills.io requires, and a body that says
/// what belongs in it.
fn skill_md(name: &str, description: &str, full: bool) -> String {
    let mut text = format!(
        "---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\n\
         The instructions an agent follows once it loads this skill: the steps, in order, and what\n\
         to check before it says it is done. Keep this file under 500 lines; move details into\n\
         files beside it and say here when to read them.\n"
    );
    if full {
        text.push_str(
            "\n## Files\n\n\
             - `scripts/example.sh`: a script the agent runs instead of writing the same code again.\n\
             - `references/REFERENCE.md`: details the agent reads only when a step needs them.\n",
        );
    }
    text
}

const SCRIPT: &str =
    "#!/bin/sh\n# A script the skill's instructions tell the agent to run.\nset -eu\necho \"replace this script\"\n";
const REFERENCE: &str = "# Reference\n\nDetails the skill's instructions point to, read only when a step needs them.\n";
