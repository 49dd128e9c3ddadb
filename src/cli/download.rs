//! `skillcat download`: one skill's folder from a running server into a local folder, with
//! `skillcat-client` (every file verified against its digest, written atomically).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use skillcat_client::{BearerToken, ClientError, Downloaded, RemoteSkillDiscoverer};
use skillcat_core::SkillName;

/// How many times a skill that changed on the server during a download is asked for again.
const ATTEMPTS: usize = 3;

#[derive(Debug, clap::Args)]
pub struct DownloadArgs {
    /// The skill to download.
    pub name: SkillName,
    /// The server's base URL, such as http://127.0.0.1:8080 (a path prefix is kept).
    #[arg(long = "from", value_name = "URL", env = "SKILLCAT_URL")]
    pub from: String,
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
}

pub async fn run(args: DownloadArgs) -> anyhow::Result<ExitCode> {
    let mut builder = RemoteSkillDiscoverer::builder(&args.from);
    if let Some(file) = &args.token_file {
        builder = builder.bearer_token(read_token(file)?);
    }
    let remote = builder.build()?;
    std::fs::create_dir_all(&args.into).with_context(|| format!("cannot create {}", args.into.display()))?;
    let target = args.into.join(args.name.as_str());
    let done = download(&remote, &args.name, &target, args.replace).await?;
    let mut out = std::io::stdout().lock();
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
    out.flush()?;
    if let Some(leftover) = &done.leftover {
        eprintln!("skillcat: the replaced folder could not be removed; it is at {}", leftover.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Discovers `name` and downloads it; a skill that changed on the server in between (a stale
/// descriptor) is discovered again, a few times.
async fn download(
    remote: &RemoteSkillDiscoverer,
    name: &SkillName,
    target: &Path,
    replace: bool,
) -> anyhow::Result<Downloaded> {
    let mut attempt = 1;
    loop {
        let catalog = remote.catalog().await.context("cannot read the server's catalog")?;
        let entry = catalog.get(name.as_str()).with_context(|| format!("the server has no skill named '{name}'"))?;
        match remote.download(&entry.skill, target, replace).await {
            Err(error) if error.is_stale() && attempt < ATTEMPTS => attempt += 1,
            Err(ClientError::TargetExists { path, folder: true }) => {
                anyhow::bail!("{} already exists; pass --replace to replace it", path.display());
            }
            result => return Ok(result?),
        }
    }
}

fn read_token(file: &Path) -> anyhow::Result<BearerToken> {
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
