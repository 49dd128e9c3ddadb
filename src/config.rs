//! Which sources to serve, from flags and an optional TOML file, resolved once at startup.

use std::ffi::OsString;
use std::num::{NonZeroU64, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use skillcat_core::{DEFAULT_MAX_DEPTH, DEFAULT_MAX_ENTRIES};

/// Seconds between fetches of a git source unless configured.
pub const DEFAULT_GIT_INTERVAL: u64 = 60;
/// The most a git source's mirror may hold unless configured: 2 GiB.
pub const DEFAULT_MAX_MIRROR_BYTES: u64 = 2 << 30;
/// Seconds one fetch may take unless configured.
pub const DEFAULT_FETCH_TIMEOUT: u64 = 300;
/// Commits of a git source's history its skills' versions are listed from unless configured.
pub const DEFAULT_HISTORY: NonZeroUsize = NonZeroUsize::new(1000).expect("nonzero");

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid config file {path}: {source}")]
    Parse { path: PathBuf, source: Box<toml::de::Error> },
    #[error("--dir and --no-builtin cannot be combined with [[sources]] in {0}; list every source in the file")]
    Conflict(PathBuf),
    #[error("--git: {0}")]
    Flag(String),
    #[error("a directory source in {0} has no roots")]
    NoRoots(PathBuf),
    #[error("no state dir for git mirrors: set --state-dir (or SKILLCAT_STATE_DIR, XDG_STATE_HOME or HOME)")]
    NoStateDir,
}

/// What a `[[sources]] kind = "git"` table (or `--git`) configures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitConfig {
    pub name: Option<String>,
    pub url: String,
    pub reference: Option<String>,
    /// The folder of the repository that holds the skills, `/`-separated, no leading or
    /// trailing `/` (empty for the top).
    pub path: String,
    /// Between fetches; `None`: only on webhooks.
    pub interval: Option<Duration>,
    pub token_file: Option<PathBuf>,
    pub max_entries: NonZeroUsize,
    pub max_depth: usize,
    /// The most the mirror may hold (its packs, in bytes): a fetch beyond is stopped.
    pub max_mirror_bytes: u64,
    /// The longest one fetch may take.
    pub fetch_timeout: Duration,
    /// How many commits of the ref's first-parent history the skills' versions are listed from
    /// (1: the current commit alone).
    pub history: NonZeroUsize,
}

/// A `--git URL[#REF[:PATH]]` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitSpec {
    pub url: String,
    pub reference: Option<String>,
    pub path: Option<String>,
}

impl std::str::FromStr for GitSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (url, rest) = match text.split_once('#') {
            Some((url, rest)) => (url, Some(rest)),
            None => (text, None),
        };
        if url.trim().is_empty() {
            return Err("the URL is empty".to_owned());
        }
        let (reference, path) = match rest {
            None => (None, None),
            Some(rest) => match rest.split_once(':') {
                Some((reference, path)) => (Some(reference), Some(path)),
                None => (Some(rest), None),
            },
        };
        let reference = reference.filter(|reference| !reference.is_empty()).map(str::to_owned);
        let path = path.filter(|path| !path.is_empty()).map(str::to_owned);
        Ok(GitSpec { url: url.to_owned(), reference, path })
    }
}

/// The URL clients reach the server at (`--public-url`, `public_url`): `http` or `https`, a host
/// and an optional port, nothing after it but an optional `/`. Kept without the `/`, so that a
/// path appends to it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct PublicUrl(Box<str>);

/// A `--public-url` that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected http://HOST[:PORT] or https://HOST[:PORT], such as https://skills.example.com")]
pub struct InvalidPublicUrl;

impl PublicUrl {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for PublicUrl {
    type Err = InvalidPublicUrl;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let rest = text.strip_prefix("https://").or_else(|| text.strip_prefix("http://")).ok_or(InvalidPublicUrl)?;
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        let (host, port) = match authority.rsplit_once(':') {
            // An IPv6 address's own colons are inside its brackets.
            Some((host, port)) if !port.contains(']') => (host, Some(port)),
            _ => (authority, None),
        };
        let host_ok = if let Some(inner) = host.strip_prefix('[').and_then(|host| host.strip_suffix(']')) {
            inner.parse::<std::net::Ipv6Addr>().is_ok()
        } else {
            !host.is_empty() && host.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"-._".contains(&byte))
        };
        let port_ok = port.is_none_or(|port| port.parse::<u16>().is_ok_and(|port| port > 0));
        if !(host_ok && port_ok) {
            return Err(InvalidPublicUrl);
        }
        Ok(PublicUrl(text.strip_suffix('/').unwrap_or(text).into()))
    }
}

impl TryFrom<String> for PublicUrl {
    type Error = InvalidPublicUrl;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl std::fmt::Display for PublicUrl {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// The `--config` file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub listen: Option<crate::listen::ListenAddr>,
    /// The URL clients reach the server at (`--public-url` wins).
    pub public_url: Option<PublicUrl>,
    /// Where git sources keep their mirrors (`--state-dir` wins).
    pub state_dir: Option<PathBuf>,
    /// The secret of `POST /hooks/git` (`--webhook-secret-file` wins).
    pub webhook_secret_file: Option<PathBuf>,
    #[serde(default)]
    pub sources: Vec<SourceConfig>,
}

/// One `[[sources]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "SourceTable")]
#[allow(clippy::large_enum_variant)]
pub enum SourceConfig {
    Directory {
        /// Shown as the skills' `source`; defaults to the roots.
        name: Option<String>,
        roots: Vec<PathBuf>,
        max_entries: NonZeroUsize,
        max_depth: usize,
    },
    Builtin {
        name: Option<String>,
    },
    Git(GitConfig),
}

/// A `[[sources]]` table as written: one struct for every kind, so that a mistyped key is reported
/// at the key. (An internally tagged enum reads the whole table before it knows the kind, and its
/// errors can only point at the table.)
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceTable {
    kind: SourceKind,
    name: Option<String>,
    roots: Option<Vec<PathBuf>>,
    max_entries: Option<NonZeroUsize>,
    max_depth: Option<usize>,
    url: Option<String>,
    #[serde(rename = "ref")]
    reference: Option<String>,
    path: Option<String>,
    interval: Option<u64>,
    token_file: Option<PathBuf>,
    max_mirror_bytes: Option<u64>,
    fetch_timeout: Option<NonZeroU64>,
    history: Option<NonZeroUsize>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum SourceKind {
    Directory,
    Builtin,
    Git,
}

impl TryFrom<SourceTable> for SourceConfig {
    type Error = String;

    fn try_from(table: SourceTable) -> Result<Self, Self::Error> {
        let SourceTable {
            kind,
            name,
            roots,
            max_entries,
            max_depth,
            url,
            reference,
            path,
            interval,
            token_file,
            max_mirror_bytes,
            fetch_timeout,
            history,
        } = table;
        let git_only = [
            ("url", url.is_some()),
            ("ref", reference.is_some()),
            ("path", path.is_some()),
            ("interval", interval.is_some()),
            ("token_file", token_file.is_some()),
            ("max_mirror_bytes", max_mirror_bytes.is_some()),
            ("fetch_timeout", fetch_timeout.is_some()),
            ("history", history.is_some()),
        ];
        if !matches!(kind, SourceKind::Git)
            && let Some((key, _)) = git_only.iter().find(|(_, given)| *given)
        {
            return Err(format!("`{key}` is for kind = \"git\""));
        }
        match kind {
            SourceKind::Git => {
                if roots.is_some() {
                    return Err("`roots` is for kind = \"directory\", not \"git\" (a git source has `url`)".to_owned());
                }
                let url = url.ok_or("missing field `url` (a git source names its repository)")?;
                if url.trim().is_empty() {
                    return Err("`url` is empty".to_owned());
                }
                Ok(SourceConfig::Git(GitConfig {
                    name,
                    url,
                    reference: reference.filter(|reference| !reference.is_empty()),
                    path: repository_path(path.as_deref().unwrap_or_default())?,
                    interval: git_interval(interval.unwrap_or(DEFAULT_GIT_INTERVAL)),
                    token_file,
                    max_entries: max_entries.unwrap_or_else(default_max_entries),
                    max_depth: max_depth.unwrap_or_else(default_max_depth),
                    max_mirror_bytes: max_mirror_bytes.unwrap_or(DEFAULT_MAX_MIRROR_BYTES),
                    fetch_timeout: Duration::from_secs(fetch_timeout.map_or(DEFAULT_FETCH_TIMEOUT, NonZeroU64::get)),
                    history: history.unwrap_or(DEFAULT_HISTORY),
                }))
            }
            SourceKind::Directory => Ok(SourceConfig::Directory {
                name,
                roots: roots.ok_or("missing field `roots` (a directory source lists its folders)")?,
                max_entries: max_entries.unwrap_or_else(default_max_entries),
                max_depth: max_depth.unwrap_or_else(default_max_depth),
            }),
            SourceKind::Builtin => {
                let directory_only = [
                    ("roots", roots.is_some()),
                    ("max_entries", max_entries.is_some()),
                    ("max_depth", max_depth.is_some()),
                ];
                match directory_only.iter().find(|(_, given)| *given) {
                    Some((key, _)) => Err(format!("`{key}` is for kind = \"directory\", not \"builtin\"")),
                    None => Ok(SourceConfig::Builtin { name }),
                }
            }
        }
    }
}

/// A folder of a repository as configured: `/`-separated, made relative and without empty, `.`
/// or trailing segments; `..` is refused (it would leave the repository).
fn repository_path(path: &str) -> Result<String, String> {
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(format!("`path` {path:?} leaves the repository")),
            part => parts.push(part),
        }
    }
    Ok(parts.join("/"))
}

fn git_interval(seconds: u64) -> Option<std::time::Duration> {
    (seconds > 0).then(|| std::time::Duration::from_secs(seconds))
}

fn default_max_entries() -> NonZeroUsize {
    NonZeroUsize::new(DEFAULT_MAX_ENTRIES).expect("nonzero")
}

fn default_max_depth() -> usize {
    DEFAULT_MAX_DEPTH
}

impl SourceConfig {
    /// A git source as `--git URL[#REF[:PATH]]` gives, with default bounds and interval.
    pub fn git(spec: &GitSpec) -> Result<Self, String> {
        Ok(SourceConfig::Git(GitConfig {
            name: None,
            url: spec.url.clone(),
            reference: spec.reference.clone(),
            path: repository_path(spec.path.as_deref().unwrap_or_default())?,
            interval: git_interval(DEFAULT_GIT_INTERVAL),
            token_file: None,
            max_entries: default_max_entries(),
            max_depth: default_max_depth(),
            max_mirror_bytes: DEFAULT_MAX_MIRROR_BYTES,
            fetch_timeout: Duration::from_secs(DEFAULT_FETCH_TIMEOUT),
            history: DEFAULT_HISTORY,
        }))
    }

    /// A directory source of one root with default bounds, as `--dir` gives.
    pub fn directory(root: impl Into<PathBuf>) -> Self {
        SourceConfig::Directory {
            name: None,
            roots: vec![root.into()],
            max_entries: default_max_entries(),
            max_depth: default_max_depth(),
        }
    }
}

impl ConfigFile {
    /// Reads a config file. Relative roots in it are taken relative to the file's folder.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.into(), source })?;
        let mut file: ConfigFile = toml::from_str(&text)
            .map_err(|source| ConfigError::Parse { path: path.into(), source: Box::new(source) })?;
        let base = path.parent().unwrap_or(Path::new(""));
        for path in [&mut file.state_dir, &mut file.webhook_secret_file].into_iter().flatten() {
            if path.is_relative() {
                *path = base.join(&*path);
            }
        }
        for source in &mut file.sources {
            if let SourceConfig::Git(GitConfig { token_file: Some(token_file), .. }) = source
                && token_file.is_relative()
            {
                *token_file = base.join(&*token_file);
            }
            if let SourceConfig::Directory { roots, .. } = source {
                if roots.is_empty() {
                    return Err(ConfigError::NoRoots(path.into()));
                }
                for root in roots.iter_mut() {
                    if root.is_relative() && !root.starts_with("~") {
                        *root = base.join(&*root);
                    }
                }
            }
        }
        Ok(file)
    }
}

/// The source flags every command shares.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SourceArgs {
    /// A directory of skills; repeat for several sources, in precedence order (with --git).
    #[arg(long = "dir", value_name = "PATH")]
    pub dirs: Vec<OsString>,
    /// A git repository of skills, URL[#REF[:PATH]] (https, http, git, ssh, file or a local
    /// path; REF a branch or tag, default the remote's HEAD; PATH its folder of skills); repeat
    /// for several sources, in precedence order (with --dir).
    #[arg(long = "git", value_name = "URL[#REF[:PATH]]")]
    pub gits: Vec<GitSpec>,
    /// Where git sources keep their mirrors [default: $XDG_STATE_HOME/skillcat, else
    /// ~/.local/state/skillcat].
    #[arg(long, value_name = "DIR", env = "SKILLCAT_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Whether each --dir and --git came first, in the order given (set from the parsed command
    /// line; empty means every --dir, then every --git).
    #[arg(skip)]
    pub order: Vec<SourceFlag>,
    /// Leave out the builtin skills (otherwise they are the last source).
    #[arg(long)]
    pub no_builtin: bool,
    /// A TOML file with `listen` and `[[sources]]` (which then replace --dir and the builtin).
    #[arg(long, value_name = "FILE", env = "SKILLCAT_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Which flag gave a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SourceFlag {
    Dir,
    Git,
}

impl SourceArgs {
    /// Records the order of `--dir` and `--git` in the parsed command line `matches`.
    pub fn order_from(&mut self, matches: &clap::ArgMatches) {
        let positions = |id: &str| -> Vec<usize> { matches.indices_of(id).map(Iterator::collect).unwrap_or_default() };
        let mut flags: Vec<(usize, SourceFlag)> =
            positions("dirs").into_iter().map(|index| (index, SourceFlag::Dir)).collect();
        flags.extend(positions("gits").into_iter().map(|index| (index, SourceFlag::Git)));
        flags.sort_unstable();
        self.order = flags.into_iter().map(|(_, flag)| flag).collect();
    }

    /// Where git mirrors live: `--state-dir`, the config file's, `$XDG_STATE_HOME/skillcat`, or
    /// `~/.local/state/skillcat`.
    /// Only sources of git need one: without them it is never used (an empty path).
    pub fn state_dir(&self, sources: &[SourceConfig], file: &ConfigFile) -> Result<PathBuf, ConfigError> {
        if !sources.iter().any(|source| matches!(source, SourceConfig::Git(_))) {
            return Ok(PathBuf::new());
        }
        if let Some(dir) = self.state_dir.clone().or_else(|| file.state_dir.clone()) {
            return Ok(dir);
        }
        let home = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
        home("XDG_STATE_HOME")
            .map(|state| state.join("skillcat"))
            .or_else(|| home("HOME").map(|home| home.join(".local/state/skillcat")))
            .ok_or(ConfigError::NoStateDir)
    }

    /// The sources, in precedence order, and the config file if one was given.
    pub fn resolve(&self) -> Result<(Vec<SourceConfig>, ConfigFile), ConfigError> {
        let file = match &self.config {
            Some(path) => ConfigFile::load(path)?,
            None => ConfigFile::default(),
        };
        if !file.sources.is_empty() {
            if !self.dirs.is_empty() || !self.gits.is_empty() || self.no_builtin {
                return Err(ConfigError::Conflict(self.config.clone().unwrap_or_default()));
            }
            return Ok((file.sources.clone(), file));
        }
        let mut order = self.order.clone();
        if order.len() != self.dirs.len() + self.gits.len() {
            order = std::iter::repeat_n(SourceFlag::Dir, self.dirs.len())
                .chain(std::iter::repeat_n(SourceFlag::Git, self.gits.len()))
                .collect();
        }
        let (mut dirs, mut gits) = (self.dirs.iter(), self.gits.iter());
        let mut sources = Vec::with_capacity(order.len() + 1);
        for flag in order {
            sources.push(match flag {
                SourceFlag::Dir => SourceConfig::directory(dirs.next().expect("one per --dir")),
                SourceFlag::Git => SourceConfig::git(gits.next().expect("one per --git")).map_err(ConfigError::Flag)?,
            });
        }
        if !self.no_builtin {
            sources.push(SourceConfig::Builtin { name: None });
        }
        Ok((sources, file))
    }
}

/// The text of a small file of secrets (a token or a webhook secret): a regular file (never a FIFO that would block), at most 64 KiB.
pub fn read_small(path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut text = String::new();
    file.take(64 * 1024 + 1).read_to_string(&mut text)?;
    if text.len() > 64 * 1024 {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "larger than 64 KiB"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_format() {
        let file: ConfigFile = toml::from_str(
            r#"
            listen = "127.0.0.1:8080"
            [[sources]]
            kind = "directory"
            roots = ["/srv/skills/team", "/srv/skills/org"]
            max_entries = 10000
            max_depth = 16
            [[sources]]
            kind = "builtin"
            "#,
        )
        .unwrap();
        assert_eq!(file.sources.len(), 2);
        assert_eq!(file.sources[1], SourceConfig::Builtin { name: None });
    }

    #[test]
    fn refuses_unknown_keys_and_zero_bounds() {
        assert!(toml::from_str::<ConfigFile>("lisen = \"x\"").is_err());
        assert!(
            toml::from_str::<ConfigFile>("[[sources]]\nkind = \"directory\"\nroots = [\"a\"]\nmax_entries = 0")
                .is_err()
        );
        assert!(toml::from_str::<ConfigFile>("[[sources]]\nkind = \"git\"").is_err());
        assert!(toml::from_str::<ConfigFile>("[[sources]]\nkind = \"svn\"\nurl = \"/x\"").is_err());
    }

    #[test]
    fn specs_split_into_url_ref_and_path() {
        let spec: GitSpec = "https://h/o/r.git#main:skills/team".parse().unwrap();
        assert_eq!(spec.url, "https://h/o/r.git");
        assert_eq!(spec.reference.as_deref(), Some("main"));
        assert_eq!(spec.path.as_deref(), Some("skills/team"));
        let spec: GitSpec = "/srv/repo#v1.2".parse().unwrap();
        assert_eq!((spec.reference.as_deref(), spec.path), (Some("v1.2"), None));
        let spec: GitSpec = "git://h/r#:skills".parse().unwrap();
        assert_eq!((spec.reference, spec.path.as_deref()), (None, Some("skills")));
        assert!("".parse::<GitSpec>().is_err());
    }

    #[test]
    fn parses_the_documented_git_source() {
        let file: ConfigFile = toml::from_str(
            r#"
            state_dir = "/var/lib/skillcat"
            [[sources]]
            kind = "git"
            url = "https://git.example.com/org/skills.git"
            ref = "main"
            path = "/skills/"
            interval = 0
            token_file = "/run/secrets/git-token"
            max_entries = 100
            "#,
        )
        .unwrap();
        let SourceConfig::Git(git) = &file.sources[0] else { panic!("{:?}", file.sources) };
        assert_eq!((git.reference.as_deref(), git.path.as_str(), git.interval), (Some("main"), "skills", None));
        assert_eq!(git.max_entries.get(), 100);
        let (_, message) = error_at("[[sources]]\nkind = \"git\"\nurl = \"/r\"\npath = \"../up\"\n");
        assert!(message.contains("leaves the repository"), "{message}");
        let (_, message) = error_at("[[sources]]\nkind = \"directory\"\nroots = [\"a\"]\nref = \"main\"\n");
        assert!(message.contains("`ref` is for kind = \"git\""), "{message}");
    }

    /// The error's line (1-based) in `text`, and its message.
    fn error_at(text: &str) -> (usize, String) {
        let error = toml::from_str::<ConfigFile>(text).expect_err(text);
        let span = error.span().expect("a place in the file");
        (1 + text[..span.start].matches('\n').count(), error.to_string())
    }

    #[test]
    fn a_mistyped_key_is_reported_at_the_key() {
        let text =
            "listen = \"127.0.0.1:8080\"\n\n[[sources]]\nkind = \"directory\"\nroots = [\"a\"]\nmax_entrie = 5\n";
        let (line, message) = error_at(text);
        assert_eq!(line, 6, "{message}");
        assert!(message.contains("unknown field `max_entrie`"), "{message}");
        assert!(message.contains("max_entries"), "the expected keys are listed: {message}");

        let (line, message) =
            error_at("[[sources]]\nkind = \"builtin\"\n\n[[sources]]\nkind = \"directory\"\nrots = [\"a\"]\n");
        assert_eq!(line, 6, "{message}");
        let (line, message) = error_at("[[sources]]\nkind = \"gti\"\n");
        assert_eq!(line, 2, "{message}");
        assert!(message.contains("unknown variant `gti`"), "{message}");
        let (line, message) = error_at("lisen = \":8080\"\n");
        assert_eq!(line, 1, "{message}");
    }

    #[test]
    fn keys_of_another_kind_and_missing_roots_are_refused() {
        let (_, message) = error_at("[[sources]]\nkind = \"builtin\"\nmax_depth = 3\n");
        assert!(message.contains("`max_depth` is for kind = \"directory\""), "{message}");
        let (_, message) = error_at("[[sources]]\nkind = \"directory\"\n");
        assert!(message.contains("missing field `roots`"), "{message}");
        let (line, message) = error_at("[[sources]]\nkind = \"directory\"\nroots = [\"a\"]\nmax_depth = -1\n");
        assert_eq!(line, 4, "{message}");
    }

    #[test]
    fn a_public_url_is_a_scheme_a_host_and_a_port() {
        for (text, kept) in [
            ("https://skills.example.com", "https://skills.example.com"),
            ("https://skills.example.com/", "https://skills.example.com"),
            ("http://catalog:8080", "http://catalog:8080"),
            ("http://[::1]:8080/", "http://[::1]:8080"),
            ("http://10.0.0.7", "http://10.0.0.7"),
        ] {
            assert_eq!(text.parse::<PublicUrl>().map(|url| url.to_string()), Ok(kept.to_owned()), "{text}");
        }
        for text in [
            "skills.example.com",
            "ftp://skills.example.com",
            "https://",
            "https://skills.example.com/catalog",
            "https://skills.example.com?x=1",
            "https://skills.example.com:0",
            "https://skills.example.com:http",
            "https://user@skills.example.com",
            "https://[not-v6]:80",
            "https://a b",
        ] {
            assert_eq!(text.parse::<PublicUrl>(), Err(InvalidPublicUrl), "{text}");
        }
        let file: ConfigFile = toml::from_str("public_url = \"https://skills.example.com/\"").unwrap();
        assert_eq!(file.public_url.unwrap().as_str(), "https://skills.example.com");
        let (line, message) = error_at("\npublic_url = \"skills.example.com\"\n");
        assert_eq!(line, 2);
        assert!(message.contains("https://HOST"), "{message}");
    }

    #[test]
    fn listen_takes_the_flag_s_forms() {
        for listen in ["127.0.0.1:8080", "[::]:8080", "localhost:8080", ":8080"] {
            let file: ConfigFile = toml::from_str(&format!("listen = \"{listen}\"")).unwrap();
            assert_eq!(file.listen, Some(listen.parse().unwrap()));
        }
        let (line, message) = error_at("\nlisten = \"8080\"\n");
        assert_eq!(line, 2, "{message}");
        assert!(message.contains("expected IP:PORT"), "{message}");
    }
}
