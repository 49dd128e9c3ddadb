//! Pinned skills: a skill read at one version (`?version=V`), its descriptor, listing and
//! content checked against that version's digest. A pinned answer never changes, so what was
//! resolved and checked is kept for the discoverer's life.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use reqwest::header::ACCEPT;
use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;
use skillcat_core::{Digest, Skill, SkillName};

use crate::discoverer::RemoteSkillDiscoverer;
use crate::download::read_at_most;
use crate::error::ClientError;
use crate::files::RemoteFileListing;
use crate::retry;
use crate::shared::lock;

/// The most of a descriptor's body that is read (a description is at most 1024 characters).
const MAX_DESCRIPTOR_BYTES: u64 = 64 * 1024;
/// The most of a listing's body that is read, as for unpinned listings.
const MAX_LISTING_BYTES: u64 = 16 * 1024 * 1024;

/// What is known of the pinned skills, by name.
#[derive(Debug, Default)]
pub(crate) struct PinnedSkills {
    resolved: Mutex<HashMap<SkillName, Arc<PinnedSkill>>>,
}

/// A pinned skill as the server resolved it.
#[derive(Debug)]
pub(crate) struct PinnedSkill {
    /// The descriptor at the pinned version.
    pub skill: Skill,
    /// The version as pinned (a digest, a commit id or a tag).
    pub pin: String,
    /// The digest the server resolved it to.
    pub version: Digest,
    /// The listing, once read and checked.
    listing: tokio::sync::OnceCell<RemoteFileListing>,
}

#[derive(Deserialize)]
struct WireDescriptor {
    name: String,
    description: String,
    location: String,
    #[serde(default)]
    version: Option<String>,
}

impl PinnedSkill {
    fn mismatch(&self, reason: impl Into<String>) -> ClientError {
        ClientError::VersionMismatch {
            name: self.skill.name().clone(),
            version: self.pin.clone(),
            reason: reason.into(),
        }
    }
}

impl RemoteSkillDiscoverer {
    /// The pinned skills (see [`Builder::pin`](crate::Builder::pin) and
    /// [`lock_file`](crate::Builder::lock_file)) with their descriptors at their pinned
    /// versions, in name order, without the rest of the catalog. Each is asked for once
    /// (`GET /skills/{name}?version=V`); a version the server does not have is
    /// [`VersionNotFound`](ClientError::VersionNotFound).
    pub async fn pinned_skills(&self) -> Result<Vec<Skill>, ClientError> {
        let mut skills = Vec::with_capacity(self.shared.settings.pins.len());
        for name in self.shared.settings.pins.keys() {
            skills.push(self.resolve_pin(name).await?.skill.clone());
        }
        Ok(skills)
    }

    /// The version `name` is pinned to, as given, if it is pinned.
    pub fn pin(&self, name: &str) -> Option<&str> {
        self.shared.settings.pins.get(name).map(String::as_str)
    }

    /// The digest of the version the skill `skill` is read at, if it is pinned: the one the
    /// server resolved its pin to (and checked against its files once they are listed).
    pub async fn pinned_version(&self, skill: &Skill) -> Result<Option<Digest>, ClientError> {
        Ok(self.pinned_for(skill).await?.map(|pinned| pinned.version))
    }

    /// The pinned skill `skill` names, if its name is pinned: `None` for an unpinned skill; a
    /// descriptor other than the pinned one is [`NotInCatalog`](ClientError::NotInCatalog)
    /// (a pinned name is never read at another version).
    pub(crate) async fn pinned_for(&self, skill: &Skill) -> Result<Option<Arc<PinnedSkill>>, ClientError> {
        if !self.shared.settings.pins.contains_key(skill.name()) {
            return Ok(None);
        }
        let pinned = self.resolve_pin(skill.name()).await?;
        if pinned.skill != *skill {
            return Err(ClientError::NotInCatalog { name: skill.name().clone() });
        }
        Ok(Some(pinned))
    }

    /// The route `skills/{name}/{tail...}?version=V` of a pinned skill.
    pub(crate) fn pinned_url<'a>(&self, pinned: &PinnedSkill, tail: impl IntoIterator<Item = &'a str>) -> Url {
        let mut url = self.shared.settings.skill_url(pinned.skill.name(), tail);
        url.query_pairs_mut().append_pair("version", &pinned.pin);
        url
    }

    /// `GET url` of a pinned skill: the answer's body (at most `limit` bytes, else `None`), or
    /// the error a pinned read's failure is.
    async fn pinned_get(
        &self,
        name: &SkillName,
        pin: &str,
        url: Url,
        limit: u64,
    ) -> Result<Option<Vec<u8>>, ClientError> {
        let settings = &self.shared.settings;
        let json = !url.path().ends_with("/content");
        let response = retry::send(settings, || {
            let request = settings.request(Method::GET, url.clone());
            if json { request.header(ACCEPT, "application/json") } else { request }
        })
        .await?;
        if response.status() != StatusCode::OK {
            return Err(ClientError::from_pinned_response(response, name, pin).await);
        }
        read_at_most(response, limit).await
    }

    /// The pinned skill `name`, resolved by the server once: its descriptor at the pinned
    /// version and that version's digest (which must be the pin when the pin is a digest).
    async fn resolve_pin(&self, name: &SkillName) -> Result<Arc<PinnedSkill>, ClientError> {
        if let Some(pinned) = lock(&self.pinned.resolved).get(name) {
            return Ok(Arc::clone(pinned));
        }
        let pin =
            self.shared.settings.pins.get(name).ok_or_else(|| ClientError::NotInCatalog { name: name.clone() })?;
        let mut url = self.shared.settings.skill_url(name, []);
        url.query_pairs_mut().append_pair("version", pin);
        let invalid =
            |what: String| ClientError::InvalidResponse(format!("the descriptor of '{name}' at {pin:?} {what}"));
        let body = self
            .pinned_get(name, pin, url, MAX_DESCRIPTOR_BYTES)
            .await?
            .ok_or_else(|| invalid("is too large".into()))?;
        let wire: WireDescriptor =
            serde_json::from_slice(&body).map_err(|error| invalid(format!("is not valid: {error}")))?;
        if wire.name != name.as_str() {
            return Err(invalid(format!("names another skill, {:?}", wire.name)));
        }
        let skill =
            Skill::new(&wire.name, wire.description, wire.location).map_err(|error| invalid(error.to_string()))?;
        let mismatch =
            |reason: String| ClientError::VersionMismatch { name: name.clone(), version: pin.clone(), reason };
        let version = match wire.version.as_deref().map(Digest::parse) {
            Some(Ok(version)) => version,
            Some(Err(_)) => return Err(invalid(format!("has a bad version {:?}", wire.version))),
            None => return Err(mismatch("the server names no version for it (its files are not served)".into())),
        };
        if Digest::parse(pin).is_ok_and(|pinned| pinned != version) {
            return Err(mismatch(format!("the server answered version {version}")));
        }
        let pinned = Arc::new(PinnedSkill { skill, pin: pin.clone(), version, listing: tokio::sync::OnceCell::new() });
        Ok(Arc::clone(lock(&self.pinned.resolved).entry(name.clone()).or_insert(pinned)))
    }

    /// The listing of a pinned skill (`GET /skills/{name}/files?version=V`), read once: its
    /// files must make the resolved version.
    pub(crate) async fn pinned_listing<'a>(
        &self,
        pinned: &'a PinnedSkill,
    ) -> Result<&'a RemoteFileListing, ClientError> {
        pinned
            .listing
            .get_or_try_init(|| async {
                let name = pinned.skill.name();
                let url = self.pinned_url(pinned, ["files"]);
                let body = self.pinned_get(name, &pinned.pin, url, MAX_LISTING_BYTES).await?.ok_or_else(|| {
                    ClientError::InvalidResponse(format!("the file listing of '{name}' is too large"))
                })?;
                let listing = RemoteFileListing::parse(&body, name, None)?;
                if listing.version() != pinned.version {
                    return Err(pinned.mismatch(format!("its files make version {}", listing.version())));
                }
                Ok(listing)
            })
            .await
    }

    /// The `SKILL.md` of a pinned skill (`GET /skills/{name}/content?version=V`): exactly the
    /// bytes its checked listing names.
    pub(crate) async fn pinned_content(&self, pinned: &PinnedSkill) -> Result<String, ClientError> {
        let listing = self.pinned_listing(pinned).await?;
        let name = pinned.skill.name();
        let listed = listing
            .files()
            .iter()
            .find(|file| file.path.as_str() == skillcat_core::SKILL_MD)
            .ok_or_else(|| pinned.mismatch("its listing has no SKILL.md"))?;
        let url = self.pinned_url(pinned, ["content"]);
        let bytes = self
            .pinned_get(name, &pinned.pin, url, listed.size)
            .await?
            .ok_or_else(|| pinned.mismatch(format!("its SKILL.md is longer than the {} bytes listed", listed.size)))?;
        let digest = Digest::of(&bytes);
        if digest != listed.digest {
            return Err(pinned.mismatch(format!("its SKILL.md hashes to {digest}, not the listed {}", listed.digest)));
        }
        String::from_utf8(bytes)
            .map_err(|_| ClientError::InvalidResponse(format!("the content of '{name}' is not UTF-8")))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::RetryPolicy;
    use crate::fake::{FakeServer, Reply};

    fn listing_of(skill_md: &[u8]) -> Value {
        json!({"name": "alpha", "etag": "\"t\"", "files": [{"path": "SKILL.md", "size": skill_md.len(),
            "digest": Digest::of(skill_md).to_string(), "media_type": "text/markdown", "executable": false}]})
    }

    fn version_of(skill_md: &[u8]) -> Digest {
        let hex = &Digest::of(skill_md).to_string()["sha256:".len()..];
        Digest::of(format!("644 {hex} SKILL.md\n").as_bytes())
    }

    /// A server that resolves `alpha` at `pin` to `version`, lists `listed` as its SKILL.md and
    /// answers `served` as its content.
    async fn serving(pin: &str, version: Digest, listed: &[u8], served: &[u8]) -> FakeServer {
        let descriptor = json!({"name": "alpha", "description": "d", "location": "/srv/alpha/SKILL.md",
            "source": "/srv", "etag": "\"t\"", "version": version.to_string()});
        // As the query is written: form-encoded.
        let pin = pin.replace(':', "%3A");
        let routes = [
            (format!("/skills/alpha?version={pin}"), Reply::json(200, descriptor)),
            (format!("/skills/alpha/files?version={pin}"), Reply::json(200, listing_of(listed))),
            (format!("/skills/alpha/content?version={pin}"), Reply::bytes(200, served)),
        ];
        FakeServer::routes(routes.iter().map(|(target, reply)| (target.as_str(), reply.clone())).collect()).await
    }

    fn pinned(server: &FakeServer, pin: &str) -> RemoteSkillDiscoverer {
        RemoteSkillDiscoverer::builder(server.url())
            .retry_policy(RetryPolicy::none())
            .pin(SkillName::parse("alpha").unwrap(), pin)
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn a_pinned_read_asks_for_the_version_and_checks_the_answer_against_it() {
        let server = serving("v1", version_of(b"# A\n"), b"# A\n", b"# A\n").await;
        let remote = pinned(&server, "v1");
        let skill = remote.pinned_skills().await.unwrap().remove(0);
        assert_eq!(remote.content(&skill).await.unwrap(), "# A\n");
        assert_eq!(remote.content(&skill).await.unwrap(), "# A\n");
        assert_eq!(remote.pinned_version(&skill).await.unwrap(), Some(version_of(b"# A\n")));
        let lines: Vec<String> = server.requests().iter().map(|request| request.line.clone()).collect();
        // The descriptor and the listing once each (they never change), the content per read;
        // no If-Match: the answer is checked, not the server asked to.
        assert_eq!(
            lines,
            [
                "GET /skills/alpha?version=v1 HTTP/1.1",
                "GET /skills/alpha/files?version=v1 HTTP/1.1",
                "GET /skills/alpha/content?version=v1 HTTP/1.1",
                "GET /skills/alpha/content?version=v1 HTTP/1.1",
            ]
        );
        assert!(server.requests().iter().all(|request| request.header("if-match").is_none()));
    }

    #[tokio::test]
    async fn files_of_another_version_or_content_other_than_listed_are_a_version_mismatch() {
        // The version resolved is A's, the files listed make B's.
        let server = serving("v1", version_of(b"# A\n"), b"# B\n", b"# B\n").await;
        let remote = pinned(&server, "v1");
        let skill = remote.pinned_skills().await.unwrap().remove(0);
        let error = remote.content(&skill).await.unwrap_err();
        assert!(matches!(&error, ClientError::VersionMismatch { version, .. } if version == "v1"), "{error:?}");
        assert!(remote.files(&skill).await.is_err());

        // The listing is A's, the content served is B's (of the same size).
        let server = serving("v1", version_of(b"# A\n"), b"# A\n", b"# B\n").await;
        let remote = pinned(&server, "v1");
        let skill = remote.pinned_skills().await.unwrap().remove(0);
        let error = remote.load_budgeted(&skill, skillcat_core::TokenLimit::DEFAULT).await.unwrap_err();
        assert!(error.to_string().contains("SKILL.md hashes to"), "{error}");

        // A digest pin the server resolves to another version.
        let pin = version_of(b"# A\n").to_string();
        let server = serving(&pin, version_of(b"# B\n"), b"# B\n", b"# B\n").await;
        let error = pinned(&server, &pin).pinned_skills().await.unwrap_err();
        assert!(matches!(&error, ClientError::VersionMismatch { version, .. } if *version == pin), "{error:?}");

        // A version the server does not have.
        let error = pinned(&server, "v2").pinned_skills().await.unwrap_err();
        assert!(matches!(&error, ClientError::VersionNotFound { version, .. } if version == "v2"), "{error:?}");
    }
}
