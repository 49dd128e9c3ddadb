//! Skill contents already read and verified, kept while nothing on disk may have changed.
//!
//! A content (and the load answers made from it) is keyed by the skill's tag and stamped with
//! the watcher's change count taken *before* the file was read. It is served again only while
//! that count is unchanged, that is while no file event at all arrived since: then the file is
//! still what was read. Without a complete watcher there is no count, and every request reads
//! the file. The cache is bounded in bytes and forgets its oldest entries first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;

use super::ETag;

/// The bytes of content kept at most (load answers of an entry count too).
const BUDGET_BYTES: usize = 4 << 20;

/// Load answers kept per content (for different token limits).
const LOADS_PER_CONTENT: usize = 2;

/// A verified content and the load answers made from it.
#[derive(Debug)]
pub struct Content {
    pub text: Arc<str>,
    loads: Mutex<Vec<(u32, Bytes)>>,
}

impl Content {
    /// The text as a response body (shared, not copied).
    pub fn body(&self) -> Bytes {
        Bytes::from_owner(SharedText(Arc::clone(&self.text)))
    }

    /// The load answer for `limit`, if made before.
    pub fn load(&self, limit: u32) -> Option<Bytes> {
        let loads = self.loads.lock().expect("load answers");
        loads.iter().find(|(known, _)| *known == limit).map(|(_, body)| body.clone())
    }

    /// Keeps the load answer for `limit` (for the first few limits asked for).
    pub fn store_load(&self, limit: u32, body: Bytes) {
        let mut loads = self.loads.lock().expect("load answers");
        if loads.len() < LOADS_PER_CONTENT && loads.iter().all(|(known, _)| *known != limit) {
            loads.push((limit, body));
        }
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
pub struct ContentCache {
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
    pub fn get(&self, etag: &ETag, stamp: Option<u64>) -> Option<Arc<Content>> {
        let stamp = stamp?;
        let state = self.state.lock().expect("content cache");
        let (content, read_at) = state.entries.get(etag)?;
        (*read_at == stamp).then(|| Arc::clone(content))
    }

    /// Keeps `text`, read and verified as the version tagged `etag` after the change count was
    /// `stamp` (nothing is kept without one); returns it as a [`Content`] either way.
    pub fn insert(&self, etag: &ETag, text: String, stamp: Option<u64>) -> Arc<Content> {
        let content = Arc::new(Content { text: Arc::from(text), loads: Mutex::default() });
        let size = content.text.len() * (1 + LOADS_PER_CONTENT);
        let Some(stamp) = stamp.filter(|_| size <= BUDGET_BYTES / 8) else {
            return content;
        };
        let mut state = self.state.lock().expect("content cache");
        if let Some((old, _)) = state.entries.insert(etag.clone(), (Arc::clone(&content), stamp)) {
            state.bytes -= old.text.len() * (1 + LOADS_PER_CONTENT);
        } else {
            state.order.push_back(etag.clone());
        }
        state.bytes += size;
        while state.bytes > BUDGET_BYTES {
            let Some(oldest) = state.order.pop_front() else { break };
            if let Some((evicted, _)) = state.entries.remove(&oldest) {
                state.bytes -= evicted.text.len() * (1 + LOADS_PER_CONTENT);
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

    #[test]
    fn a_content_is_served_only_under_the_stamp_it_was_read_at() {
        let cache = ContentCache::default();
        cache.insert(&tag("a"), "text".into(), Some(7));
        assert_eq!(&*cache.get(&tag("a"), Some(7)).unwrap().text, "text");
        assert!(cache.get(&tag("a"), Some(8)).is_none(), "a file event since");
        assert!(cache.get(&tag("a"), None).is_none(), "no complete watcher");
        assert!(cache.get(&tag("b"), Some(7)).is_none());
        // Without a stamp nothing is kept.
        cache.insert(&tag("c"), "text".into(), None);
        assert!(cache.get(&tag("c"), Some(7)).is_none());
    }

    #[test]
    fn the_cache_stays_within_its_budget_forgetting_the_oldest_first() {
        let cache = ContentCache::default();
        let text = "x".repeat(BUDGET_BYTES / 8 / (1 + LOADS_PER_CONTENT));
        for index in 0..40 {
            cache.insert(&tag(&index.to_string()), text.clone(), Some(1));
            let bytes = cache.state.lock().unwrap().bytes;
            assert!(bytes <= BUDGET_BYTES, "{bytes}");
        }
        assert!(cache.get(&tag("0"), Some(1)).is_none());
        assert!(cache.get(&tag("39"), Some(1)).is_some());
        // Replacing an entry does not count it twice; too large a content is not kept.
        cache.insert(&tag("39"), text.clone(), Some(2));
        assert!(cache.state.lock().unwrap().bytes <= BUDGET_BYTES);
        cache.insert(&tag("huge"), "x".repeat(BUDGET_BYTES), Some(1));
        assert!(cache.get(&tag("huge"), Some(1)).is_none());
    }

    #[test]
    fn a_few_load_answers_are_kept_per_content() {
        let cache = ContentCache::default();
        let content = cache.insert(&tag("a"), "text".into(), Some(1));
        for limit in [10, 20, 30] {
            content.store_load(limit, Bytes::from(limit.to_string()));
        }
        assert_eq!(content.load(10).unwrap(), "10");
        assert_eq!(content.load(20).unwrap(), "20");
        assert!(content.load(30).is_none());
    }
}
