//! `skillcat download`: skills' folders from a running server into a local folder, with
//! `skillcat-client` (every file verified against its digest, written atomically); with a lock,
//! the versions installed recorded, or exactly the locked versions installed (`--frozen`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use skillcat_client::{
    BearerToken, ClientError, Downloaded, Lock, LockedSkill, RemoteSkillDiscoverer, installed_version,
};
use skillcat_core::{Skill, SkillName};

use super::staging::Staging;

/// How many times a skill that changed on the server during a download is asked for again.
const ATTEMPTS: usize = 3;

#[derive(Debug, clap::Args)]
pub struct DownloadArgs {
    /// The skills to download. Several are installed all or nothing: every one is fetched and
    /// checked before any is put in place.
    #[arg(value_name = "NAME", required_unless_present = "frozen", conflicts_with = "frozen")]
    pub names: Vec<SkillName>,
    /// The server's base URL, such as http://127.0.0.1:8080 (a path prefix is kept). Not used
    /// with --frozen, where each skill comes from the source its lock entry names.
    #[arg(long = "from", value_name = "URL", env = "SKILLCAT_URL", required_unless_present = "frozen")]
    pub from: Option<String>,
    /// The folder to download into: the skill becomes DIR/NAME. Created if missing.
    #[arg(long, value_name = "DIR", default_value = ".agents/skills")]
    pub into: PathBuf,
    /// A file holding the bearer token to send (its first line that is neither blank nor a
    /// `#` comment, as in the server's token file).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Replace DIR/NAME if it is a folder: the new one is swapped in at once and the old one
    /// removed. Without it an existing DIR/NAME is left alone and the command fails.
    #[arg(long)]
    pub replace: bool,
    /// Pin what is installed to version V: a version digest (sha256:...), a commit id (7 to 40
    /// hex digits) or a tag. The files must make that version, or nothing is installed.
    #[arg(long = "version", value_name = "V", conflicts_with = "frozen")]
    pub pin: Option<String>,
    /// The lock file: written (or updated, other entries kept) with the source and version
    /// digest of each skill installed; with --frozen, what is installed.
    #[arg(long, value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// Install exactly the skills and versions of --lock, each from its source, every file and
    /// each version's digest checked; all or nothing (on any mismatch, missing version or
    /// changed byte DIR is left as it was). Locked skills' folders in DIR are replaced; other
    /// folders are left alone.
    #[arg(long, requires = "lock")]
    pub frozen: bool,
}

pub async fn run(args: DownloadArgs) -> anyhow::Result<ExitCode> {
    let token = args.token_file.as_deref().map(read_token).transpose()?;
    if args.frozen {
        let lock_path = args.lock.as_deref().expect("clap requires --lock with --frozen");
        return frozen(lock_path, &args.into, token.as_ref()).await;
    }
    let from = args.from.as_deref().expect("clap requires --from without --frozen");
    // A lock that cannot be updated fails before anything is downloaded.
    let mut lock = args.lock.as_deref().map(Lock::read_or_new).transpose()?;
    let mut builder = RemoteSkillDiscoverer::builder(from);
    if let Some(token) = &token {
        builder = builder.bearer_token(token.clone());
    }
    if let Some(version) = &args.pin {
        for name in &args.names {
            builder = builder.pin(name.clone(), version.clone());
        }
    }
    let remote = builder.build()?;
    std::fs::create_dir_all(&args.into).with_context(|| format!("cannot create {}", args.into.display()))?;
    let done = match args.names.as_slice() {
        [name] => vec![download(&remote, name, &args.into.join(name.as_str()), args.replace).await?],
        names => download_all(&remote, names, &args.into, args.replace).await?,
    };
    let mut out = std::io::stdout().lock();
    for done in &done {
        let replaced = if done.replaced { ", replacing the folder that was there" } else { "" };
        let files = if done.files == 1 { "1 file".to_owned() } else { format!("{} files", done.files) };
        writeln!(
            out,
            "downloaded skill '{}' (version {}, {files}, {} bytes) into {}{replaced}",
            done.name,
            done.etag,
            done.bytes,
            done.path.display()
        )?;
    }
    if let (Some(lock), Some(path)) = (&mut lock, &args.lock) {
        for done in &done {
            lock.insert(done.name.clone(), LockedSkill::new(from, done.version));
        }
        lock.write(path)?;
        writeln!(out, "locked {} in {}", plural(done.len(), "skill"), path.display())?;
    }
    out.flush()?;
    for leftover in done.iter().filter_map(|done| done.leftover.as_ref()) {
        eprintln!("skillcat: the replaced folder could not be removed; it is at {}", leftover.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn plural(count: usize, noun: &str) -> String {
    if count == 1 { format!("1 {noun}") } else { format!("{count} {noun}s") }
}

/// The descriptor `name` is downloaded by: its pinned one if it is pinned, else the current
/// catalog's.
async fn find(remote: &RemoteSkillDiscoverer, name: &SkillName) -> anyhow::Result<Skill> {
    if let Some(pin) = remote.pin(name.as_str()) {
        let skills = remote
            .pinned_skills()
            .await
            .with_context(|| format!("cannot find skill '{name}' at version {pin} on the server"))?;
        return Ok(skills.into_iter().find(|skill| skill.name() == name).expect("every pin is resolved"));
    }
    let catalog = remote.catalog().await.context("cannot read the server's catalog")?;
    let entry = catalog.get(name.as_str()).with_context(|| format!("the server has no skill named '{name}'"))?;
    Ok(entry.skill.clone())
}

/// Finds `name` and downloads it; a skill that changed on the server in between (a stale
/// descriptor) is found again, a few times.
async fn download(
    remote: &RemoteSkillDiscoverer,
    name: &SkillName,
    target: &Path,
    replace: bool,
) -> anyhow::Result<Downloaded> {
    let mut attempt = 1;
    loop {
        let skill = find(remote, name).await?;
        match remote.download(&skill, target, replace).await {
            Err(error) if error.is_stale() && attempt < ATTEMPTS => attempt += 1,
            Err(ClientError::TargetExists { path, folder: true }) => {
                anyhow::bail!("{} already exists; pass --replace to replace it", path.display());
            }
            result => return result.with_context(|| format!("cannot download skill '{name}'")),
        }
    }
}

/// Downloads every one of `names` into a staging folder, then puts them all in place at once.
async fn download_all(
    remote: &RemoteSkillDiscoverer,
    names: &[SkillName],
    into: &Path,
    replace: bool,
) -> anyhow::Result<Vec<Downloaded>> {
    let mut unique = names.to_vec();
    unique.sort();
    unique.dedup();
    // An existing folder is refused before anything is fetched.
    Staging::check_targets(into, &unique, replace)?;
    let mut staging = Staging::new(into)?;
    let mut done = Vec::with_capacity(unique.len());
    for name in &unique {
        let staged = download(remote, name, &staging.path(name), false).await?;
        check_staged(name, &staged, staged.version)?;
        done.push(staged);
    }
    let replaced = staging.commit(replace)?;
    Ok(done.into_iter().map(|staged| installed(staged, into, &replaced)).collect())
}

/// What was downloaded into the staging folder, as it is once installed into `into`.
fn installed(mut staged: Downloaded, into: &Path, replaced: &[SkillName]) -> Downloaded {
    staged.path = into.join(staged.name.as_str());
    staged.replaced = replaced.contains(&staged.name);
    staged
}

/// The folder written has the version expected, recomputed from the disk.
fn check_staged(name: &SkillName, staged: &Downloaded, expected: skillcat_core::Digest) -> anyhow::Result<()> {
    let written = installed_version(&staged.path).with_context(|| format!("skill '{name}' as written"))?;
    anyhow::ensure!(written == expected, "skill '{name}' was written as version {written}, not {expected}");
    Ok(())
}

/// `download --frozen`: every skill of the lock at its version from its source, staged and
/// checked, then put in place at once.
async fn frozen(lock_path: &Path, into: &Path, token: Option<&BearerToken>) -> anyhow::Result<ExitCode> {
    let lock = Lock::read(lock_path)?;
    std::fs::create_dir_all(into).with_context(|| format!("cannot create {}", into.display()))?;
    let mut staging = Staging::new(into)?;
    let mut done = Vec::with_capacity(lock.skills().len());
    for source in lock.sources() {
        let mut builder = RemoteSkillDiscoverer::builder(source).lock_file(lock_path);
        if let Some(token) = token {
            builder = builder.bearer_token(token.clone());
        }
        let remote = builder.build()?;
        for (name, locked) in lock.skills().iter().filter(|(_, locked)| locked.source == source) {
            let failed = || format!("cannot install skill '{name}' at version {} from {source}", locked.version);
            anyhow::ensure!(
                remote.pin(name.as_str()).is_some(),
                "{}: the lock's source is not a usable base URL",
                failed()
            );
            let skill = find(&remote, name).await.with_context(failed)?;
            let staged = remote.download(&skill, staging.path(name), false).await.with_context(failed)?;
            anyhow::ensure!(
                staged.version == locked.version,
                "{}: the server sent version {}",
                failed(),
                staged.version
            );
            check_staged(name, &staged, locked.version).with_context(failed)?;
            done.push(staged);
        }
    }
    let replaced = staging.commit(true)?;
    let mut out = std::io::stdout().lock();
    for staged in done {
        let staged = installed(staged, into, &replaced);
        writeln!(out, "installed skill '{}' ({}) into {}", staged.name, staged.version, staged.path.display())?;
    }
    writeln!(out, "installed {} from {}", plural(lock.skills().len(), "locked skill"), lock_path.display())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn read_token(file: &Path) -> anyhow::Result<BearerToken> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let line = text
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('#'))
        .with_context(|| format!("{} holds no token", file.display()))?;
    BearerToken::new(line).with_context(|| format!("the token in {}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_the_first_line_that_is_not_blank_or_a_comment() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        // The only line that is a valid token is the third: reading any other fails.
        std::fs::write(&file, "\n# the agent's token\n  s3cret  \nother words\n").unwrap();
        read_token(&file).unwrap();
        std::fs::write(&file, "# nothing\n\n").unwrap();
        assert!(read_token(&file).unwrap_err().to_string().contains("holds no token"));
        std::fs::write(&file, "two words\n").unwrap();
        assert!(read_token(&file).is_err());
    }
}
