//! `skillcat verify` and `skillcat outdated`: an installed tree, and the servers, against a lock.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use skillcat_client::{Lock, RemoteSkillDiscoverer};

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The lock file the tree was installed from.
    #[arg(long, value_name = "FILE")]
    pub lock: PathBuf,
    /// The folder the skills were installed into (each locked skill is DIR/NAME).
    #[arg(value_name = "DIR", default_value = ".agents/skills")]
    pub dir: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct OutdatedArgs {
    /// The lock file to compare with its sources.
    #[arg(long, value_name = "FILE")]
    pub lock: PathBuf,
    /// A file holding the bearer token to send to every source (as `download --token-file`).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// `skillcat verify`: each locked skill's folder recomputed to its version and compared.
pub fn verify(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let lock = Lock::read(&args.lock)?;
    let mut out = std::io::stdout().lock();
    let mut differing = Vec::new();
    for (name, locked) in lock.skills() {
        let folder = args.dir.join(name.as_str());
        match skillcat_client::installed_version(&folder) {
            Ok(version) if version == locked.version => writeln!(out, "ok       {name} {version}")?,
            Ok(version) => {
                writeln!(out, "DIFFERS  {name}: {} is version {version}, locked {}", folder.display(), locked.version)?;
                differing.push(name);
            }
            Err(error) => {
                writeln!(out, "DIFFERS  {name}: {error}")?;
                differing.push(name);
            }
        }
    }
    out.flush()?;
    if differing.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    let names: Vec<String> = differing.iter().map(|name| format!("'{name}'")).collect();
    eprintln!(
        "skillcat: {} of {} differ from {}: {}",
        names.len(),
        lock.skills().len(),
        args.lock.display(),
        names.join(", ")
    );
    Ok(ExitCode::FAILURE)
}

/// `skillcat outdated`: each locked skill's version against its source's current one. Exit 1
/// when any differs (or is gone), 0 when none does, 2 when the lock cannot be read or a source
/// cannot be asked.
pub async fn outdated(args: &OutdatedArgs) -> ExitCode {
    match compare(&args.lock, args.token_file.as_deref()).await {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("skillcat: {}", super::explain(&error));
            ExitCode::from(2)
        }
    }
}

/// Prints every outdated skill; returns how many there are.
async fn compare(lock_path: &Path, token_file: Option<&Path>) -> anyhow::Result<usize> {
    let lock = Lock::read(lock_path)?;
    let token = token_file.map(super::download::read_token).transpose()?;
    let mut lines = Vec::new();
    for source in lock.sources() {
        let mut builder = RemoteSkillDiscoverer::builder(source);
        if let Some(token) = &token {
            builder = builder.bearer_token(token.clone());
        }
        let catalog =
            builder.build()?.catalog().await.with_context(|| format!("cannot read the catalog of {source}"))?;
        for (name, locked) in lock.skills().iter().filter(|(_, locked)| locked.source == source) {
            let current = match catalog.get(name.as_str()) {
                None => "not in the catalog".to_owned(),
                Some(entry) => match entry.version {
                    Some(version) if version == locked.version => continue,
                    Some(version) => version.to_string(),
                    None => "no version (its files are not served)".to_owned(),
                },
            };
            lines.push(format!("{name}: {} -> {current} ({source})", locked.version));
        }
    }
    let mut out = std::io::stdout().lock();
    for line in &lines {
        writeln!(out, "{line}")?;
    }
    if lines.is_empty() {
        writeln!(out, "every locked skill is current ({} in all)", lock.skills().len())?;
    }
    out.flush()?;
    Ok(lines.len())
}
