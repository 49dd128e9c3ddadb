//! The catalog as `GET /skills` answers it, validated into `skillcat-core` descriptors.

use reqwest::header::HeaderValue;
use serde::Deserialize;
use skillcat_core::{Digest, Discovery, Skill, SkillName, skill_catalog};

use crate::error::ClientError;

/// One version of the remote catalog: what `GET /skills` answered, validated. Descriptors are
/// built with [`Skill::new`], so a catalog holds only valid skills with distinct names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteCatalog {
    etag: String,
    /// The `ETag` header as answered, sent back in `If-None-Match`.
    validator: HeaderValue,
    skills: Vec<Skill>,
    entries: Vec<RemoteSkill>,
    shadowed: Vec<ShadowedSkill>,
    diagnostics: Vec<RemoteDiagnostic>,
    error: Option<CatalogFailure>,
}

/// Why the server serves its last good catalog rather than what its files say now: a scan failed
/// (a source could not be read, or listed a name twice). The catalog is still complete and
/// usable; this says that it is not current.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct CatalogFailure {
    /// The label of the server-side source that failed.
    pub source: String,
    /// The source's message.
    pub message: String,
    /// When the scans started failing this way (RFC 3339).
    pub since: String,
}

/// A skill of the catalog with the label of the server-side source that owns it and the tag of
/// its current version (sent as `If-Match` when it is loaded).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteSkill {
    pub skill: Skill,
    pub source: String,
    pub etag: String,
    /// The digest of the skill's folder (its version), when the server names one: servers
    /// before versions do not, nor for a skill whose files are not served.
    pub version: Option<Digest>,
}

/// A descriptor hidden on the server by an earlier source's skill of the same name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShadowedSkill {
    pub name: SkillName,
    pub location: String,
    pub source: String,
}

/// A file a server-side source skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteDiagnostic {
    pub source: String,
    pub message: String,
}

#[derive(Deserialize)]
struct WireCatalog {
    etag: String,
    skills: Vec<WireSkill>,
    #[serde(default)]
    shadowed: Vec<WireShadowed>,
    #[serde(default)]
    diagnostics: Vec<WireDiagnostic>,
    #[serde(default)]
    error: Option<CatalogFailure>,
}

#[derive(Deserialize)]
struct WireSkill {
    name: String,
    description: String,
    location: String,
    source: String,
    etag: String,
    #[serde(default)]
    version: Option<String>,
}

#[derive(Deserialize)]
struct WireShadowed {
    name: String,
    location: String,
    source: String,
}

#[derive(Deserialize)]
struct WireDiagnostic {
    source: String,
    message: String,
}

fn invalid(what: impl std::fmt::Display) -> ClientError {
    ClientError::InvalidResponse(format!("the catalog is not valid: {what}"))
}

/// A tag that can be sent back in a header.
fn tag(etag: &str) -> Result<HeaderValue, ClientError> {
    HeaderValue::from_str(etag).ok().filter(|_| !etag.is_empty()).ok_or_else(|| invalid(format!("bad tag {etag:?}")))
}

impl RemoteCatalog {
    /// Parses and validates a `GET /skills` body; `header` is the answer's `ETag`, if any.
    pub(crate) fn parse(body: &[u8], header: Option<&HeaderValue>) -> Result<RemoteCatalog, ClientError> {
        let wire: WireCatalog = serde_json::from_slice(body).map_err(invalid)?;
        let validator = match header {
            Some(header) => header.clone(),
            None => tag(&wire.etag)?,
        };
        let mut entries = Vec::with_capacity(wire.skills.len());
        for skill in wire.skills {
            let WireSkill { name, description, location, source, etag, version } = skill;
            let descriptor = Skill::new(&name, description, location)
                .map_err(|error| invalid(format!("skill {name:?}: {error}")))?;
            tag(&etag)?;
            let version = version
                .map(|text| Digest::parse(&text).map_err(|_| invalid(format!("skill {name:?}: bad version {text:?}"))))
                .transpose()?;
            entries.push(RemoteSkill { skill: descriptor, source, etag, version });
        }
        // Distinct names in name order, as every source's catalog.
        let order = skill_catalog(entries.iter().map(|entry| entry.skill.clone())).map_err(invalid)?;
        if !order.keys().eq(entries.iter().map(|entry| entry.skill.name())) {
            entries.sort_by(|a, b| a.skill.name().cmp(b.skill.name()));
        }
        let shadowed = wire
            .shadowed
            .into_iter()
            .map(|entry| {
                let name = SkillName::parse(&entry.name)
                    .map_err(|error| invalid(format!("shadowed skill {:?}: {error}", entry.name)))?;
                Ok(ShadowedSkill { name, location: entry.location, source: entry.source })
            })
            .collect::<Result<_, ClientError>>()?;
        let diagnostics = wire
            .diagnostics
            .into_iter()
            .map(|entry| RemoteDiagnostic { source: entry.source, message: entry.message })
            .collect();
        Ok(RemoteCatalog {
            etag: wire.etag,
            validator,
            skills: entries.iter().map(|entry| entry.skill.clone()).collect(),
            entries,
            shadowed,
            diagnostics,
            error: wire.error,
        })
    }

    /// The catalog's tag, as the server's `ETag` and its events name it.
    pub fn etag(&self) -> &str {
        &self.etag
    }

    pub(crate) fn validator(&self) -> &HeaderValue {
        &self.validator
    }

    /// The descriptors, in name order.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// The descriptors with their source and tag, in name order.
    pub fn entries(&self) -> &[RemoteSkill] {
        &self.entries
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&RemoteSkill> {
        self.entries
            .binary_search_by(|entry| entry.skill.name().as_str().cmp(name))
            .ok()
            .map(|index| &self.entries[index])
    }

    /// Descriptors the server's earlier sources hide.
    pub fn shadowed(&self) -> &[ShadowedSkill] {
        &self.shadowed
    }

    /// What the server's sources skipped, with the source of each.
    pub fn diagnostics(&self) -> &[RemoteDiagnostic] {
        &self.diagnostics
    }

    /// Set while the server's scans fail: this catalog is the last good one, not the files'
    /// current state.
    pub fn error(&self) -> Option<&CatalogFailure> {
        self.error.as_ref()
    }

    /// The catalog as a [`Discovery`]: the descriptors, and each diagnostic's message alone (as a
    /// composite of local sources reports them; the source of each is in
    /// [`diagnostics`](Self::diagnostics)).
    pub fn discovery(&self) -> Discovery {
        Discovery {
            skills: self.skills.clone(),
            // The server does not send contents with the catalog.
            versions: Vec::new(),
            files: Vec::new(),
            diagnostics: self.diagnostics.iter().map(|diagnostic| diagnostic.message.clone()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(skills: serde_json::Value) -> Vec<u8> {
        let catalog = json!({
            "etag": "\"c1\"",
            "skills": skills,
            "shadowed": [{"name": "alpha", "location": "/b/alpha/SKILL.md", "source": "/b"}],
            "diagnostics": [{"source": "/a", "message": "Skipped /a/x/SKILL.md: not UTF-8"}],
        });
        serde_json::to_vec(&catalog).unwrap()
    }

    fn skill(name: &str) -> serde_json::Value {
        json!({"name": name, "description": "d", "location": format!("/a/{name}/SKILL.md"), "source": "/a", "etag": format!("\"{name}\"")})
    }

    #[test]
    fn a_valid_catalog_is_parsed_with_its_tags() {
        let catalog = RemoteCatalog::parse(&body(json!([skill("alpha"), skill("beta")])), None).unwrap();
        assert_eq!(catalog.etag(), "\"c1\"");
        assert_eq!(catalog.validator().to_str().unwrap(), "\"c1\"");
        let names: Vec<&str> = catalog.skills().iter().map(|skill| skill.name().as_str()).collect();
        assert_eq!(names, ["alpha", "beta"]);
        assert_eq!(catalog.get("beta").unwrap().etag, "\"beta\"");
        assert_eq!(catalog.get("beta").unwrap().source, "/a");
        assert!(catalog.get("gamma").is_none());
        assert_eq!(catalog.shadowed()[0].name.as_str(), "alpha");
        assert_eq!(catalog.discovery().diagnostics, ["Skipped /a/x/SKILL.md: not UTF-8"]);
        assert_eq!(catalog.error(), None);
        // The header's tag is what goes back in If-None-Match.
        let header = HeaderValue::from_static("W/\"c1\"");
        let catalog = RemoteCatalog::parse(&body(json!([skill("alpha")])), Some(&header)).unwrap();
        assert_eq!(catalog.validator(), &header);
        // Out of order is put in order.
        let catalog = RemoteCatalog::parse(&body(json!([skill("beta"), skill("alpha")])), None).unwrap();
        assert_eq!(catalog.skills()[0].name().as_str(), "alpha");
        assert_eq!(catalog.get("alpha").unwrap().etag, "\"alpha\"");
    }

    #[test]
    fn a_failing_server_still_gives_its_last_good_catalog_and_says_why() {
        let mut catalog: serde_json::Value = serde_json::from_slice(&body(json!([skill("alpha")]))).unwrap();
        let failure = json!({"source": "/a", "message": "Duplicate skill name 'x' at /a/y/SKILL.md", "since": "2026-12-01T09:30:00Z"});
        catalog["error"] = failure;
        let catalog = RemoteCatalog::parse(&serde_json::to_vec(&catalog).unwrap(), None).unwrap();
        assert_eq!(catalog.skills().len(), 1);
        let error = catalog.error().expect("the failure");
        assert_eq!((error.source.as_str(), error.since.as_str()), ("/a", "2026-12-01T09:30:00Z"));
        assert!(error.message.starts_with("Duplicate skill name"));
    }

    #[test]
    fn anything_but_a_valid_catalog_is_an_error() {
        let mut blank = skill("alpha");
        blank["description"] = json!("   ");
        let mut bad_tag = skill("alpha");
        bad_tag["etag"] = json!("line\nbreak");
        let bodies = [
            body(json!([skill("alpha"), skill("alpha")])),
            body(json!([skill("bad name")])),
            body(json!([blank])),
            body(json!([bad_tag])),
            body(json!([{"name": "alpha"}])),
            b"[]".to_vec(),
            b"{\"skills\": []}".to_vec(),
            b"<html>".to_vec(),
        ];
        for body in bodies {
            let error = RemoteCatalog::parse(&body, None).unwrap_err();
            assert!(matches!(error, ClientError::InvalidResponse(_)), "{error:?}");
        }
        let error = RemoteCatalog::parse(&body(json!([skill("alpha"), skill("alpha")])), None).unwrap_err();
        assert!(error.to_string().contains("Duplicate skill name 'alpha'"), "{error}");
    }
}
