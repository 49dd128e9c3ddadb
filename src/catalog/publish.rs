//! Which skills the agentskills.io surfaces publish — the well-known indexes installers read and
//! MCP's Skills extension (SEP-2640) — and why the others are left out: one rule, decided once per
//! skill version, and one report of what it leaves out.
//!
//! A skill is published when its catalog name follows the agentskills.io naming rule, its files
//! are listed (within SEP-2640's bounds of 512 files and 16 MiB), its listing has a `SKILL.md` at
//! the top, and that file's YAML frontmatter declares the same `name` and a non-empty
//! `description`, which both specifications require. The older well-known index can also not
//! carry a skill whose file paths its clients cannot append to a URL as they are. None of this
//! changes `GET /skills`, which stays nagents' catalog; the REST API and the MCP tools reach every
//! skill.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value};
use skillcat_core::{InvalidSpecName, SKILL_MD, SkillFile, SkillFilePath, SpecName};

use super::live::LiveCatalog;
use super::snapshot::{CatalogSkill, Snapshot};
use super::views::made_in_task;
use super::{Catalog, CatalogError};
use crate::spec::frontmatter_json;

/// `SKILL.md` files read at once while deciding a catalog version's publications.
const CONCURRENT_READS: usize = 16;

/// Why a skill of the catalog is not published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeftOut {
    #[error("its name does not follow the agentskills.io naming rule: {0}")]
    Name(InvalidSpecName),
    /// Over a bound on its files, or from a source that lists none.
    #[error("its files are not listed: {0}")]
    Files(String),
    #[error("its listing has no SKILL.md at the top of its folder")]
    NoSkillMd,
    /// Its `SKILL.md` could not be read now (it changed, or an I/O error): decided again later.
    #[error("its SKILL.md cannot be read: {0}")]
    Unreadable(String),
    #[error("its frontmatter {0}")]
    Frontmatter(String),
    /// The older index only. Its clients append each listed path to the skill's URL unencoded:
    /// a `%` would be decoded by the server, a `?`, `#` or space would end the path or break the
    /// URL, and the `skills` installer refuses the whole index when any path holds `..`.
    #[error(
        "the older index leaves it out: its file path {0:?} cannot be appended to a URL as it is (printable \
         ASCII without space, '%', '?', '#', '[', ']' or '..')"
    )]
    Path(String),
}

/// A published skill: its name under the agentskills.io rule, its `SKILL.md`, and its frontmatter.
#[derive(Debug)]
pub struct Published {
    pub name: SpecName,
    /// The listed `SKILL.md`.
    pub skill_md: SkillFile,
    /// The frontmatter's `description` (YAML's reading; the catalog's is nagents').
    pub description: String,
    /// The frontmatter's other fields, as JSON.
    pub fields: Map<String, Value>,
    /// Whether the older well-known index can list the skill, or why not.
    pub legacy: Result<(), LeftOut>,
}

/// The decision for one skill version.
pub type Publication = Result<Arc<Published>, LeftOut>;

/// The published skills of one catalog version, in name order (which is URI order), and the
/// others with why.
#[derive(Debug)]
pub struct PublishedView {
    pub skills: Vec<(Arc<CatalogSkill>, Arc<Published>)>,
    index: HashMap<SpecName, usize>,
    /// In name order.
    pub left_out: Vec<(String, LeftOut)>,
}

impl PublishedView {
    /// Where the skill published as `name` is in [`skills`](Self::skills).
    pub fn position(&self, name: &SpecName) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// The positions of the published skills after `cursor` (a name; `None`: from the first), at
    /// most `page` of them, and the cursor of the next page. A name that no longer exists still
    /// places the page: names are ordered.
    pub fn page(&self, cursor: Option<&SpecName>, page: usize) -> (std::ops::Range<usize>, Option<SpecName>) {
        let start = cursor.map_or(0, |cursor| self.skills.partition_point(|(_, published)| published.name <= *cursor));
        let end = self.skills.len().min(start + page);
        let next = (end < self.skills.len()).then(|| self.skills[end - 1].1.name.clone());
        (start..end, next)
    }
}

/// The last left-out list reported, so that each change of it is logged once.
#[derive(Debug, Default)]
struct LeftOutReport(Mutex<Option<Vec<(String, String)>>>);

impl LiveCatalog {
    /// Whether `skill` (a skill of a published snapshot) is published, or why not; decided once
    /// per skill version, reading its `SKILL.md` (a read that fails is not kept).
    pub async fn publication(&self, skill: &CatalogSkill) -> Publication {
        let cell = skill.views.of::<Publication>();
        let decided = cell
            .get_or_try_init(|| async {
                match self.decide(skill).await {
                    Err(LeftOut::Unreadable(why)) => Err(LeftOut::Unreadable(why)),
                    decided => Ok(Arc::new(decided)),
                }
            })
            .await;
        match decided {
            Ok(decided) => (**decided).clone(),
            Err(unreadable) => Err(unreadable),
        }
    }

    async fn decide(&self, skill: &CatalogSkill) -> Publication {
        let name = SpecName::parse(skill.skill.name().as_str()).map_err(LeftOut::Name)?;
        let (_, files) = skill.files().map_err(|error| match error {
            CatalogError::FilesUnavailable { reason, .. } => LeftOut::Files(reason),
            other => LeftOut::Files(other.to_string()),
        })?;
        let skill_md = files.iter().find(|file| file.path.as_str() == SKILL_MD).ok_or(LeftOut::NoSkillMd)?.clone();
        let content = self.content(skill).await.map_err(|error| LeftOut::Unreadable(error.to_string()))?;
        let mut fields =
            frontmatter_json(content.text()).map_err(|error| LeftOut::Frontmatter(format!(": {error}")))?;
        let required = "(agentskills.io and SEP-2640 require name and description)";
        match fields.remove("name") {
            Some(Value::String(declared)) if declared == name.as_str() => {}
            Some(Value::String(declared)) => {
                return Err(LeftOut::Frontmatter(format!("name '{declared}' is not its catalog name '{name}'")));
            }
            Some(_) => return Err(LeftOut::Frontmatter("name is not a string".to_owned())),
            None => return Err(LeftOut::Frontmatter(format!("has no name {required}"))),
        }
        let description = match fields.remove("description") {
            Some(Value::String(description)) if !description.trim().is_empty() => description,
            _ => return Err(LeftOut::Frontmatter(format!("has no description {required}"))),
        };
        let legacy = match files.iter().find(|file| !appendable_to_url(&file.path)) {
            Some(file) => Err(LeftOut::Path(file.path.to_string())),
            None => Ok(()),
        };
        Ok(Arc::new(Published { name, skill_md, description, fields, legacy }))
    }

    /// The published skills of `snapshot`'s catalog, decided once per catalog version (and each
    /// skill's once per skill version). When what is left out differs from the last version
    /// decided, it is logged: skills, and why.
    pub async fn published(&self, snapshot: &Arc<Snapshot>) -> Result<Arc<PublishedView>, CatalogError> {
        let cell = snapshot.ready()?.views.of::<PublishedView>();
        let (live, snapshot) = (self.clone(), Arc::clone(snapshot));
        made_in_task(cell, async move {
            let catalog = snapshot.ready()?;
            let view = live.decide_all(catalog).await;
            live.report_left_out(snapshot.version, &view).await;
            Ok(view)
        })
        .await
    }

    async fn decide_all(&self, catalog: &Catalog) -> PublishedView {
        use futures_util::StreamExt as _;
        let decided: Vec<(Arc<CatalogSkill>, Publication)> = futures_util::stream::iter(catalog.skills.iter().cloned())
            .map(|skill| async move {
                let publication = self.publication(&skill).await;
                (skill, publication)
            })
            .buffered(CONCURRENT_READS)
            .collect()
            .await;
        let mut skills = Vec::new();
        let mut left_out = Vec::new();
        for (skill, publication) in decided {
            match publication {
                Ok(published) => skills.push((skill, published)),
                Err(why) => left_out.push((skill.skill.name().to_string(), why)),
            }
        }
        let index = skills.iter().enumerate().map(|(index, (_, published))| (published.name.clone(), index)).collect();
        PublishedView { skills, index, left_out }
    }

    /// Logs what `view` (of catalog version `version`) leaves out, when it is not what the last
    /// report said (the first report included).
    async fn report_left_out(&self, version: u64, view: &PublishedView) {
        let legacy = view.skills.iter().filter_map(|(_, published)| {
            published.legacy.as_ref().err().map(|why| (published.name.to_string(), why.to_string()))
        });
        let mut now: Vec<(String, String)> =
            view.left_out.iter().map(|(name, why)| (name.clone(), why.to_string())).chain(legacy).collect();
        now.sort();
        let report = self.kept().of::<LeftOutReport>();
        let report = report.get_or_init(|| async { Arc::default() }).await;
        let mut last = report.0.lock().unwrap_or_else(PoisonError::into_inner);
        if last.as_ref() == Some(&now) {
            return;
        }
        if now.is_empty() {
            tracing::info!(version, "the well-known indexes and MCP publish every skill");
        } else {
            let skills = now.iter().map(|(name, why)| format!("{name}: {why}")).collect::<Vec<_>>().join("; ");
            tracing::warn!(version, count = now.len(), skills, "skills left out of the well-known indexes and MCP");
        }
        *last = Some(now);
    }
}

/// Whether a client of the older index can append `path` to a URL as it is and reach this very
/// file. The draft that defined that index allows printable ASCII but `\`, `?`, `#`, `[` and `]`
/// in paths; a space is left out too (a client may send it raw), and so are `%` (the server
/// decodes a path once, so `a%41` would name `aA`) and `..` anywhere (`skills` 1.7 refuses an
/// index with any path that holds it, which would hide every other skill from it too).
fn appendable_to_url(path: &SkillFilePath) -> bool {
    let path = path.as_str();
    path.bytes().all(|byte| byte.is_ascii_graphic() && !matches!(byte, b'%' | b'?' | b'#' | b'[' | b']'))
        && !path.contains("..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_appendable_to_a_url() {
        let appendable = |path: &str| appendable_to_url(&SkillFilePath::parse(path).unwrap());
        for good in ["SKILL.md", "scripts/run.sh", "a-b_c~d!e$f&g'h(i)j*k+l,m;n=o@p:q", "x./y"] {
            assert!(appendable(good), "{good}");
        }
        for bad in ["a b", "a%41", "a?b", "a#b", "a[0]", "a..b", "x/y..", "caf\u{e9}", "tab\there", "del\u{7f}"] {
            assert!(!appendable(bad), "{bad}");
        }
    }
}
