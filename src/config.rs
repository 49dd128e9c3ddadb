//! Which sources to serve, from flags and an optional TOML file, resolved once at startup.

use std::ffi::OsString;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use skillcat_core::{DEFAULT_MAX_DEPTH, DEFAULT_MAX_ENTRIES};

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid config file {path}: {source}")]
    Parse { path: PathBuf, source: Box<toml::de::Error> },
    #[error("--dir and --no-builtin cannot be combined with [[sources]] in {0}; list every source in the file")]
    Conflict(PathBuf),
    #[error("a directory source in {0} has no roots")]
    NoRoots(PathBuf),
}

/// The `--config` file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub listen: Option<crate::listen::ListenAddr>,
    #[serde(default)]
    pub sources: Vec<SourceConfig>,
}

/// One `[[sources]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "SourceTable")]
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
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum SourceKind {
    Directory,
    Builtin,
}

impl TryFrom<SourceTable> for SourceConfig {
    type Error = String;

    fn try_from(table: SourceTable) -> Result<Self, Self::Error> {
        let SourceTable { kind, name, roots, max_entries, max_depth } = table;
        match kind {
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

fn default_max_entries() -> NonZeroUsize {
    NonZeroUsize::new(DEFAULT_MAX_ENTRIES).expect("nonzero")
}

fn default_max_depth() -> usize {
    DEFAULT_MAX_DEPTH
}

impl SourceConfig {
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
        for source in &mut file.sources {
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
    /// A directory of skills; repeat for several sources, in precedence order.
    #[arg(long = "dir", value_name = "PATH")]
    pub dirs: Vec<OsString>,
    /// Leave out the builtin skills (otherwise they are the last source).
    #[arg(long)]
    pub no_builtin: bool,
    /// A TOML file with `listen` and `[[sources]]` (which then replace --dir and the builtin).
    #[arg(long, value_name = "FILE", env = "SKILLCAT_CONFIG")]
    pub config: Option<PathBuf>,
}

impl SourceArgs {
    /// The sources, in precedence order, and the config file if one was given.
    pub fn resolve(&self) -> Result<(Vec<SourceConfig>, ConfigFile), ConfigError> {
        let file = match &self.config {
            Some(path) => ConfigFile::load(path)?,
            None => ConfigFile::default(),
        };
        if !file.sources.is_empty() {
            if !self.dirs.is_empty() || self.no_builtin {
                return Err(ConfigError::Conflict(self.config.clone().unwrap_or_default()));
            }
            return Ok((file.sources.clone(), file));
        }
        let mut sources: Vec<SourceConfig> = self.dirs.iter().map(SourceConfig::directory).collect();
        if !self.no_builtin {
            sources.push(SourceConfig::Builtin { name: None });
        }
        Ok((sources, file))
    }
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
        let (line, message) = error_at("[[sources]]\nkind = \"git\"\n");
        assert_eq!(line, 2, "{message}");
        assert!(message.contains("unknown variant `git`"), "{message}");
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
