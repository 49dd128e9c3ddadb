//! Where a git source fetches from, and how its URL is shown and recognized: never with a user or
//! password (locations, labels, logs and webhook matching all use the shown form).

use std::fmt;

/// A repository URL as configured (`https://`, `http://`, `git://`, `ssh://`, `file://`, scp-like
/// `host:path`, or a local path), with the form every answer shows.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteUrl {
    /// As configured: what a fetch connects to.
    fetch: String,
    /// Without user or password.
    shown: String,
}

/// Why a URL cannot be a git source's.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a git URL or path: {1}")]
pub struct InvalidRemote(pub String, pub String);

impl RemoteUrl {
    pub fn parse(text: &str) -> Result<Self, InvalidRemote> {
        let text = text.trim();
        if text.is_empty() {
            return Err(InvalidRemote(text.to_owned(), "it is empty".to_owned()));
        }
        let url = gix::url::parse(gix::bstr::BStr::new(text))
            .map_err(|error| InvalidRemote(shown_of(text), error.to_string()))?;
        if !matches!(
            url.scheme,
            gix::url::Scheme::Http
                | gix::url::Scheme::Https
                | gix::url::Scheme::Git
                | gix::url::Scheme::Ssh
                | gix::url::Scheme::File
        ) {
            return Err(InvalidRemote(shown_of(text), format!("the scheme {} is not supported", url.scheme)));
        }
        Ok(RemoteUrl { fetch: text.to_owned(), shown: shown_of(text) })
    }

    /// What a fetch connects to (may carry credentials; never shown).
    pub fn fetch_url(&self) -> &str {
        &self.fetch
    }

    /// The URL without user or password.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Whether the URL is served over HTTP(S), where a token can be sent.
    pub fn is_http(&self) -> bool {
        let lower = self.fetch.to_ascii_lowercase();
        lower.starts_with("https://") || lower.starts_with("http://")
    }

    /// The user the URL names, if any (the user a token is sent as).
    pub fn user(&self) -> Option<String> {
        let (_, rest) = self.fetch.split_once("://")?;
        let authority = rest.split('/').next()?;
        let (userinfo, _) = authority.rsplit_once('@')?;
        let user = userinfo.split(':').next()?;
        (!user.is_empty()).then(|| user.to_owned())
    }

    /// The name a checkout of the repository gets by default (`git clone`): the last segment of
    /// the path without `.git`. A `SKILL.md` at the top of the repository without a `name` is
    /// named after it, as nagents names it after a checkout's folder.
    pub fn checkout_name(&self) -> String {
        let path = self.shown.trim_end_matches('/');
        let path = path.strip_suffix("/.git").unwrap_or(path);
        let last = path.rsplit(['/', ':']).next().unwrap_or(path);
        let last = last.strip_suffix(".git").unwrap_or(last);
        if last.is_empty() { "repository".to_owned() } else { last.to_owned() }
    }

    /// The form two spellings of one repository share, for matching the URLs a webhook names:
    /// no scheme, user or password, lowercase host, no trailing `/` or `.git`.
    pub fn key(&self) -> String {
        key_of(&self.shown)
    }
}

impl fmt::Debug for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RemoteUrl").field(&self.shown).finish()
    }
}

impl fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

/// `text` without the user and password of a `scheme://user:password@host` or `user@host:path`.
fn shown_of(text: &str) -> String {
    if let Some((scheme, rest)) = text.split_once("://") {
        let (authority, path) = match rest.find('/') {
            Some(slash) => rest.split_at(slash),
            None => (rest, ""),
        };
        let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
        return format!("{scheme}://{host}{path}");
    }
    // scp-like `user@host:path` (a local path has no ':' before its first '/').
    match (text.find(':'), text.find('/')) {
        (Some(colon), slash) if slash.is_none_or(|slash| colon < slash) => {
            let (authority, path) = text.split_at(colon);
            let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
            format!("{host}{path}")
        }
        _ => text.to_owned(),
    }
}

/// See [`RemoteUrl::key`]; `text` is any spelling a webhook payload may use.
pub fn key_of(text: &str) -> String {
    let shown = shown_of(text.trim());
    let rest = shown.split_once("://").map_or(shown.as_str(), |(_, rest)| rest);
    let rest = rest.trim_end_matches('/');
    let rest = rest.strip_suffix(".git").unwrap_or(rest);
    let (host, path) = match rest.find(['/', ':']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    // `host:path` (scp-like) and `host/path` name the same repository.
    let path = path.strip_prefix(':').map_or_else(|| path.to_owned(), |path| format!("/{path}"));
    // A port is part of the host only for URLs that name it; scp-like paths never do.
    format!("{}{}", host.to_ascii_lowercase(), path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_never_shown() {
        for (given, shown) in [
            ("https://user:secret@git.example.com/org/skills.git", "https://git.example.com/org/skills.git"),
            ("https://token@git.example.com:8443/org/skills", "https://git.example.com:8443/org/skills"),
            ("git://127.0.0.1:9418/repo.git", "git://127.0.0.1:9418/repo.git"),
            ("git@github.com:org/skills.git", "github.com:org/skills.git"),
            ("file:///srv/repo", "file:///srv/repo"),
            ("/srv/repo", "/srv/repo"),
        ] {
            let url = RemoteUrl::parse(given).unwrap();
            assert_eq!(url.shown(), shown, "{given}");
            assert!(!format!("{url:?} {url}").contains("secret"));
        }
        assert_eq!(RemoteUrl::parse("https://tok:pw@h/x").unwrap().user().as_deref(), Some("tok"));
        assert_eq!(RemoteUrl::parse("https://h/x").unwrap().user(), None);
    }

    #[test]
    fn spellings_of_one_repository_share_a_key() {
        let key = key_of("https://github.com/Org/Skills.git");
        for other in [
            "https://GitHub.com/Org/Skills",
            "http://user:pw@github.com/Org/Skills/",
            "git@github.com:Org/Skills.git",
            "ssh://git@github.com/Org/Skills",
            "git://github.com/Org/Skills.git",
        ] {
            assert_eq!(key_of(other), key, "{other}");
        }
        assert_ne!(key_of("https://github.com/Org/Other"), key);
    }

    #[test]
    fn checkout_names_are_git_clone_s() {
        for (url, name) in [
            ("https://h/org/skills.git", "skills"),
            ("https://h/org/skills/", "skills"),
            ("git@h:org/skills.git", "skills"),
            ("/srv/repos/team", "team"),
            ("/srv/repos/team/.git", "team"),
        ] {
            assert_eq!(RemoteUrl::parse(url).unwrap().checkout_name(), name, "{url}");
        }
    }
}
