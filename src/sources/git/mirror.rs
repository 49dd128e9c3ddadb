//! The bare mirror of one git source in the state dir: fetched with gix (no git binary), never
//! checked out. A fetch updates the mirror's refs for the source's ref (forced: a force-push is
//! followed) and its tags, and says which commit the ref now names on the remote.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use gix::ObjectId;
use gix::remote::Direction;

use super::remote::RemoteUrl;

/// Where the mirror keeps the commit of a source without a configured ref (the remote's HEAD).
const HEAD_REF: &str = "refs/skillcat/head";

/// Why a fetch failed; the message is shown in the catalog's `error` and the log, so it never
/// carries a credential.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot prepare the mirror {path}: {message}")]
    Mirror { path: PathBuf, message: String },
    #[error("cannot fetch {url}: {message}")]
    Remote { url: String, message: String },
    #[error("{url} has no ref {reference:?} (deleted, or never there); serving the last good commit")]
    NoSuchRef { url: String, reference: String },
    #[error("{url} has no HEAD to serve (an empty repository?)")]
    NoHead { url: String },
    #[error("the fetch of {url} took longer than {seconds} s")]
    TimedOut { url: String, seconds: u64 },
    #[error("cannot read the token file {path}: {message}")]
    Token { path: PathBuf, message: String },
}

/// One source's mirror.
#[derive(Debug, Clone)]
pub struct Mirror {
    pub dir: PathBuf,
    pub url: RemoteUrl,
    pub reference: Option<String>,
    pub token_file: Option<PathBuf>,
}

impl Mirror {
    /// The local refs a fetch writes, and the one to serve from (first that exists).
    fn refspecs(&self) -> Vec<String> {
        let mut specs = match &self.reference {
            Some(reference) => vec![format!("+refs/heads/{reference}:refs/heads/{reference}")],
            None => vec![format!("+HEAD:{HEAD_REF}")],
        };
        specs.push("+refs/tags/*:refs/tags/*".to_owned());
        specs
    }

    /// The names the served ref may have on the remote, in the order they are tried.
    fn wanted(&self) -> Vec<String> {
        match &self.reference {
            Some(reference) => vec![format!("refs/heads/{reference}"), format!("refs/tags/{reference}")],
            None => vec!["HEAD".to_owned()],
        }
    }

    /// The local refs the served commit is read from when the mirror is opened without a fetch.
    fn local_refs(&self) -> Vec<String> {
        match &self.reference {
            Some(reference) => vec![format!("refs/heads/{reference}"), format!("refs/tags/{reference}")],
            None => vec![HEAD_REF.to_owned()],
        }
    }

    fn mirror_error(&self, error: impl std::fmt::Display) -> FetchError {
        FetchError::Mirror { path: self.dir.clone(), message: error.to_string() }
    }

    fn remote_error(&self, error: impl std::fmt::Display) -> FetchError {
        // gix's messages name the URL it was given; the shown one replaces it.
        let message = error.to_string().replace(self.url.fetch_url(), self.url.shown());
        FetchError::Remote { url: self.url.shown().to_owned(), message }
    }

    /// Opens the mirror, making an empty bare repository first if there is none.
    pub fn open(&self) -> Result<gix::Repository, FetchError> {
        if self.dir.join("HEAD").is_file() {
            return gix::open(&self.dir).map_err(|error| self.mirror_error(error));
        }
        if let Some(parent) = self.dir.parent() {
            std::fs::create_dir_all(parent).map_err(|error| self.mirror_error(error))?;
        }
        // Made beside and renamed into place, so that a crash never leaves half a repository.
        let making = self.dir.with_extension("new");
        let _ = std::fs::remove_dir_all(&making);
        gix::init_bare(&making).map_err(|error| self.mirror_error(error))?;
        std::fs::rename(&making, &self.dir).map_err(|error| self.mirror_error(error))?;
        gix::open(&self.dir).map_err(|error| self.mirror_error(error))
    }

    /// The commit the mirror holds for the source's ref, without fetching: what a restart
    /// serves while its first fetch runs.
    pub fn local_commit(&self) -> Option<ObjectId> {
        if !self.dir.join("HEAD").is_file() {
            return None;
        }
        let repo = gix::open(&self.dir).ok()?;
        self.local_refs().iter().find_map(|name| {
            let mut reference = repo.find_reference(name.as_str()).ok()?;
            Some(reference.peel_to_commit().ok()?.id)
        })
    }

    /// Fetches the source's ref and tags into the mirror; the commit the ref names on the remote.
    /// `interrupt` stops a fetch in progress (its deadline passed, or the server stops).
    pub fn fetch(&self, interrupt: &AtomicBool) -> Result<ObjectId, FetchError> {
        let repo = self.open()?;
        let token = self.token()?;
        let remote = repo
            .remote_at(self.url.fetch_url())
            .map_err(|error| self.remote_error(error))?
            .with_refspecs(self.refspecs().iter().map(String::as_str), Direction::Fetch)
            .map_err(|error| self.remote_error(error))?;
        let mut connection = remote.connect(Direction::Fetch).map_err(|error| self.remote_error(error))?;
        match token {
            Some(token) => {
                let username = self.url.user().unwrap_or_else(|| "x-access-token".to_owned());
                connection = connection.with_credentials(move |action| match action {
                    gix::credentials::helper::Action::Get(context) => Ok(Some(gix::credentials::protocol::Outcome {
                        credentials: gix::sec::identity::Credentials::UsernamePassword {
                            username: username.clone(),
                            password: token.clone(),
                            oauth_refresh_token: None,
                        },
                        next: context.into(),
                    })),
                    _ => Ok(None),
                });
            }
            // Never ask a credential helper or a terminal: a service has neither.
            None => connection = connection.with_credentials(|_| Ok(None)),
        }
        let outcome = connection
            .prepare_fetch(gix::progress::Discard, Default::default())
            .map_err(|error| self.remote_error(error))?
            .receive(gix::progress::Discard, interrupt)
            .map_err(|error| self.remote_error(error))?;
        let advertised = |wanted: &str| {
            outcome.ref_map.remote_refs.iter().find_map(|reference| {
                let (name, target, peeled) = reference.unpack();
                (name == wanted).then(|| peeled.or(target).map(ToOwned::to_owned)).flatten()
            })
        };
        let commit =
            self.wanted().iter().find_map(|wanted| advertised(wanted)).ok_or_else(|| match &self.reference {
                Some(reference) => {
                    FetchError::NoSuchRef { url: self.url.shown().to_owned(), reference: reference.clone() }
                }
                None => FetchError::NoHead { url: self.url.shown().to_owned() },
            })?;
        // The commit the remote names must now be in the mirror (and be a commit).
        let object = repo.find_object(commit).map_err(|error| self.remote_error(error))?;
        let commit = object.peel_to_commit().map_err(|error| self.remote_error(error))?.id;
        Ok(commit)
    }

    /// The token to send, re-read at every fetch (a rotated secret is used at once).
    fn token(&self) -> Result<Option<String>, FetchError> {
        let Some(path) = &self.token_file else { return Ok(None) };
        let error = |message: String| FetchError::Token { path: path.clone(), message };
        let text = crate::config::read_small(path).map_err(|e| error(e.to_string()))?;
        let token = text.lines().map(str::trim).find(|line| !line.is_empty() && !line.starts_with('#'));
        token.map(|token| Some(token.to_owned())).ok_or_else(|| error("it holds no token".to_owned()))
    }
}
