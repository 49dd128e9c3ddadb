//! Bearer tokens: the token file, its reloads, and the constant-time check of a presented token.
//!
//! Tokens are kept only as SHA-256 digests, so a check compares fixed-size values whatever the
//! token's length, every stored digest is compared (no early exit), and the tokens themselves
//! appear in no error, log line or `Debug` output.

mod reload;
pub mod throttle;
mod webhook;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use self::reload::{TokenReloads, TokenStore};
pub use self::throttle::{Penalty, Throttle, Waiting};
pub use self::webhook::{WebhookSecret, WebhookSecretError};

/// The largest token file read: far more than any real list of tokens.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Why the token file could not be used. Messages name the file and the line, never a token.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("cannot read the token file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("the token file {path} is a {kind}, not a regular file")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("the token file {path} is larger than {MAX_FILE_BYTES} bytes")]
    TooLarge { path: PathBuf },
    #[error("the token file {path} is not valid UTF-8")]
    NotUtf8 { path: PathBuf },
    #[error(
        "line {line} of the token file {path} is not a bearer token (RFC 6750: letters, digits and -._~+/, then optional =)"
    )]
    InvalidToken { path: PathBuf, line: usize },
    #[error("the token file {path} holds no token")]
    Empty { path: PathBuf },
}
/// The digest a token is kept and compared as.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TokenDigest([u8; 32]);

impl TokenDigest {
    fn of(token: &[u8]) -> Self {
        TokenDigest(Sha256::digest(token).into())
    }

    /// Equality that takes the same time whatever the values.
    fn equals(&self, other: &TokenDigest) -> bool {
        let difference = self.0.iter().zip(other.0.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(difference) == 0
    }
}

impl std::fmt::Debug for TokenDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenDigest(..)")
    }
}

/// The accepted tokens, as digests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tokens {
    digests: Vec<TokenDigest>,
}

impl Tokens {
    /// Parses a token file: one token per line; surrounding whitespace, blank lines and lines
    /// starting with `#` are ignored. A token must be an RFC 6750 `b64token`, which is what an
    /// `Authorization: Bearer` header can carry.
    pub fn parse(text: &str, path: &Path) -> Result<Self, TokenFileError> {
        let mut digests = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let token = line.trim();
            if token.is_empty() || token.starts_with('#') {
                continue;
            }
            if !is_b64token(token) {
                return Err(TokenFileError::InvalidToken { path: path.to_path_buf(), line: index + 1 });
            }
            let digest = TokenDigest::of(token.as_bytes());
            if !digests.contains(&digest) {
                digests.push(digest);
            }
        }
        Ok(Tokens { digests })
    }

    /// Reads and parses the token file.
    pub fn read(path: &Path) -> Result<Self, TokenFileError> {
        Tokens::parse(&read_text(path)?, path)
    }

    pub fn len(&self) -> usize {
        self.digests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// The digest of `presented` if it is one of the tokens. Every stored digest is compared.
    pub fn check(&self, presented: &[u8]) -> Option<TokenDigest> {
        let digest = TokenDigest::of(presented);
        let found = self.digests.iter().fold(false, |found, stored| found | stored.equals(&digest));
        found.then_some(digest)
    }

    /// Whether a token accepted earlier (by its digest) is still accepted.
    pub fn contains(&self, digest: &TokenDigest) -> bool {
        self.digests.iter().fold(false, |found, stored| found | stored.equals(digest))
    }
}

/// RFC 6750 `b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
fn is_b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'+' | b'/'))
}

/// The token file's text, read without ever blocking on what is not a regular file: it is opened
/// `O_NONBLOCK` (a FIFO would otherwise wait for a writer for ever), checked with `fstat` and
/// read up to a bound. Symlinks are followed: the file may be a link into a secrets volume.
fn read_text(path: &Path) -> Result<String, TokenFileError> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let read_error = |source| TokenFileError::Read { path: path.to_path_buf(), source };
    let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(path);
    let file = match opened {
        Ok(file) => file,
        // What opening a socket answers.
        Err(error) if error.raw_os_error() == Some(libc::ENXIO) => {
            return Err(match std::fs::metadata(path) {
                Ok(metadata) if !metadata.is_file() => {
                    TokenFileError::NotRegular { path: path.to_path_buf(), kind: kind_of(metadata.file_type()) }
                }
                _ => read_error(error),
            });
        }
        Err(error) => return Err(read_error(error)),
    };
    let metadata = file.metadata().map_err(read_error)?;
    if !metadata.is_file() {
        return Err(TokenFileError::NotRegular { path: path.to_path_buf(), kind: kind_of(metadata.file_type()) });
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(TokenFileError::TooLarge { path: path.to_path_buf() });
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(read_error)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(TokenFileError::TooLarge { path: path.to_path_buf() });
    }
    String::from_utf8(bytes).map_err(|_| TokenFileError::NotUtf8 { path: path.to_path_buf() })
}

/// What a file that is not a regular file is, for the error.
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if file_type.is_dir() {
        "directory"
    } else if file_type.is_fifo() {
        "FIFO"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_char_device() {
        "character device"
    } else if file_type.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn parse(text: &str) -> Result<Tokens, TokenFileError> {
        Tokens::parse(text, Path::new("/run/tokens"))
    }

    #[test]
    fn one_token_per_line_with_blanks_and_comments() {
        let tokens = parse("# deploy tokens\n\n  alpha-1  \r\nbeta.2~+/==\nalpha-1\n").unwrap();
        assert_eq!(tokens.len(), 2);
        assert!(tokens.check(b"alpha-1").is_some());
        assert!(tokens.check(b"beta.2~+/==").is_some());
        assert!(tokens.check(b"alpha-").is_none());
        assert!(tokens.check(b"alpha-1 ").is_none());
        assert!(tokens.check(b"").is_none());
    }

    #[test]
    fn a_line_that_cannot_be_a_bearer_token_is_an_error_naming_the_line_not_the_token() {
        for (text, line) in [("ok\nsecret value\n", 2), ("=abc\n", 1), ("a=b\n", 1), ("ok\n\nclé\n", 3)] {
            let error = parse(text).unwrap_err();
            assert!(matches!(error, TokenFileError::InvalidToken { line: l, .. } if l == line), "{text:?}");
            let message = error.to_string();
            assert!(!message.contains("secret") && !message.contains("clé") && !message.contains("abc"), "{message}");
        }
    }

    #[test]
    fn a_file_of_comments_holds_no_token() {
        assert!(parse("# none yet\n\n").unwrap().is_empty());
    }

    #[test]
    fn accepted_digests_stay_valid_only_while_listed() {
        let before = parse("old\nnew\n").unwrap();
        let after = parse("new\n").unwrap();
        let old = before.check(b"old").unwrap();
        let new = before.check(b"new").unwrap();
        assert!(!after.contains(&old));
        assert!(after.contains(&new));
    }

    #[test]
    fn what_is_not_a_regular_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let socket = dir.path().join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        for (path, kind) in
            [(fifo, "FIFO"), (link, "FIFO"), (socket, "socket"), (dir.path().to_path_buf(), "directory")]
        {
            // On a thread: reading a FIFO the ordinary way waits for a writer for ever.
            let (sender, receiver) = std::sync::mpsc::channel();
            let read = path.clone();
            std::thread::spawn(move || sender.send(Tokens::read(&read)));
            let result = receiver.recv_timeout(Duration::from_secs(5)).expect("an answer within 5 s");
            assert!(
                matches!(&result, Err(TokenFileError::NotRegular { kind: k, .. }) if *k == kind),
                "{}: {result:?}",
                path.display()
            );
            let message = result.unwrap_err().to_string();
            assert!(message.ends_with(&format!("is a {kind}, not a regular file")), "{message}");
        }
    }
}
