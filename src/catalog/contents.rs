//! Skill contents already read and verified, kept while nothing on disk may have changed.
//!
//! A content (and the load answers made from it) is keyed by the skill's tag and stamped with
//! the watcher's change count taken *before* the file was read. It is served again only while
//! that count is unchanged, that is while no file event at all arrived since: then the file is
//! still what was read. Without a complete watcher there is no count, and every request reads
//! the file. The cache is bounded in bytes and forgets its oldest entries first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use skillcat_core::{Skill, SkillLoadResult, TokenLimit, budget_skill_content};

use super::body::ETag;

/// The bytes of content kept at most (load answers of an entry count too).
const BUDGET_BYTES: usize = 4 << 20;

/// Load answers kept per content (for different token limits).
const LOADS_PER_CONTENT: usize = 2;

/// A skill's verified content and the load answers made from it.
#[derive(Debug)]
pub struct Content {
    skill: Skill,
    text: Arc<str>,
    loads: Mutex<Vec<(TokenLimit, Bytes)>>,
}

impl Content {
    pub(super) fn new(skill: Skill, text: String) -> Self {
        Content { skill, text: Arc::from(text), loads: Mutex::default() }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text as a response body (shared, not copied).
    pub fn body(&self) -> Bytes {
        Bytes::from_owner(SharedText(Arc::clone(&self.text)))
    }

    /// nagents' budgeted load of this content.
    pub fn load(&self, limit: TokenLimit) -> SkillLoadResult {
        budget_skill_content(&self.skill, &self.text, limit)
    }

    /// [`load`](Self::load) as JSON, nagents' wire form of it; the answers for the first few
    /// limits asked for are kept.
    pub fn load_json(&self, limit: TokenLimit) -> Bytes {
        let known = self.loads.lock().expect("load answers").iter().find(|(known, _)| *known == limit).cloned();
        if let Some((_, body)) = known {
            return body;
        }
        let body = Bytes::from(serde_json::to_vec(&self.load(limit)).expect("load results serialize"));
        let mut loads = self.loads.lock().expect("load answers");
        if loads.len() < LOADS_PER_CONTENT && loads.iter().all(|(known, _)| *known != limit) {
            loads.push((limit, body.clone()));
        }
        body
    }

    fn cost(&self) -> usize {
        self.text.len() * (1 + LOADS_PER_CONTENT)
    }
}

/// The text seen as the bytes of a response body.
struct SharedText(Arc<str>);

impl AsRef<[u8]> for SharedText {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

#[derive(Debug, Default)]
pub(super) struct ContentCache {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<ETag, (Arc<Content>, u64)>,
    /// Insertion order, for eviction.
    order: VecDeque<ETag>,
    bytes: usize,
}

impl ContentCache {
    /// The content tagged `etag`, if it was read while the change count was `stamp`.
    pub(super) fn get(&self, etag: &ETag, stamp: Option<u64>) -> Option<Arc<Content>> {
        let stamp = stamp?;
        let state = self.state.lock().expect("content cache");
        let (content, read_at) = state.entries.get(etag)?;
        (*read_at == stamp).then(|| Arc::clone(content))
    }

    /// Keeps `content`, read and verified as the version tagged `etag` after the change count
    /// was `stamp` (nothing is kept without one); returns it shared either way.
    pub(super) fn insert(&self, etag: &ETag, content: Content, stamp: Option<u64>) -> Arc<Content> {
        let content = Arc::new(content);
        let size = content.cost();
        let Some(stamp) = stamp.filter(|_| size <= BUDGET_BYTES / 8) else {
            return content;
        };
        let mut state = self.state.lock().expect("content cache");
        if let Some((old, _)) = state.entries.insert(etag.clone(), (Arc::clone(&content), stamp)) {
            state.bytes -= old.cost();
        } else {
            state.order.push_back(etag.clone());
        }
        state.bytes += size;
        while state.bytes > BUDGET_BYTES {
            let Some(oldest) = state.order.pop_front() else { break };
            if let Some((evicted, _)) = state.entries.remove(&oldest) {
                state.bytes -= evicted.cost();
            }
        }
        content
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(name: &str) -> ETag {
        ETag::of(&[name.as_bytes()])
    }

    fn content(text: &str) -> Content {
        Content::new(Skill::new("a", "d", "/a/SKILL.md").unwrap(), text.to_owned())
    }

    #[test]
    fn a_content_is_served_only_under_the_stamp_it_was_read_at() {
        let cache = ContentCache::default();
        cache.insert(&tag("a"), content("text"), Some(7));
        assert_eq!(&*cache.get(&tag("a"), Some(7)).unwrap().text, "text");
        assert!(cache.get(&tag("a"), Some(8)).is_none(), "a file event since");
        assert!(cache.get(&tag("a"), None).is_none(), "no complete watcher");
        assert!(cache.get(&tag("b"), Some(7)).is_none());
        // Without a stamp nothing is kept.
        cache.insert(&tag("c"), content("text"), None);
        assert!(cache.get(&tag("c"), Some(7)).is_none());
    }

    #[test]
    fn the_cache_stays_within_its_budget_forgetting_the_oldest_first() {
        let cache = ContentCache::default();
        let text = "x".repeat(BUDGET_BYTES / 8 / (1 + LOADS_PER_CONTENT));
        for index in 0..40 {
            cache.insert(&tag(&index.to_string()), content(&text), Some(1));
            let bytes = cache.state.lock().unwrap().bytes;
            assert!(bytes <= BUDGET_BYTES, "{bytes}");
        }
        assert!(cache.get(&tag("0"), Some(1)).is_none());
        assert!(cache.get(&tag("39"), Some(1)).is_some());
        // Replacing an entry does not count it twice; too large a content is not kept.
        cache.insert(&tag("39"), content(&text), Some(2));
        assert!(cache.state.lock().unwrap().bytes <= BUDGET_BYTES);
        cache.insert(&tag("huge"), content(&"x".repeat(BUDGET_BYTES)), Some(1));
        assert!(cache.get(&tag("huge"), Some(1)).is_none());
    }

    #[test]
    fn load_answers_are_nagents_results_and_a_few_are_kept() {
        let content = content("0123456789");
        let limit = |limit: u64| TokenLimit::new(limit).unwrap();
        let answer: serde_json::Value = serde_json::from_slice(&content.load_json(limit(2))).unwrap();
        assert_eq!(answer["content"], "01234567");
        assert_eq!(answer["truncated"], true);
        assert_eq!(answer["token_limit"], 2);
        for limit in [limit(2), limit(20), limit(30)] {
            content.load_json(limit);
        }
        let kept: Vec<u32> = content.loads.lock().unwrap().iter().map(|(limit, _)| limit.get()).collect();
        assert_eq!(kept, [2, 20]);
        // An answer not kept is made again, the same.
        assert_eq!(content.load_json(limit(30)), content.load_json(limit(30)));
    }
}
