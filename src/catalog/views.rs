//! What is made from a catalog version on first use and kept with it: the search index and the
//! pages. A skill's views are kept with the skill, which the next catalog version shares while
//! the skill is unchanged.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;

use super::search::{SearchDocument, SearchIndex};

/// The views of one catalog version.
#[derive(Debug, Default)]
pub struct CatalogViews {
    pub(super) search: tokio::sync::OnceCell<Arc<SearchIndex>>,
    /// The catalog's HTML pages, by page number.
    pub pages: PageCache<usize>,
}

impl CatalogViews {
    /// The views of a catalog of the same skills whose listing changed (a scan failed): the same
    /// index; the pages, which show the failure, are made again.
    pub(super) fn carried(&self) -> Self {
        CatalogViews {
            search: tokio::sync::OnceCell::new_with(self.search.get().cloned()),
            pages: PageCache::default(),
        }
    }
}

/// The views of one skill version.
#[derive(Debug, Default)]
pub struct SkillViews {
    pub(super) search: tokio::sync::OnceCell<Arc<SearchDocument>>,
    /// The skill's HTML page, by the origin its snippets name.
    pub pages: PageCache<Box<str>>,
}

/// Pages kept by key, at most [`PageCache::CAPACITY`] of them: the keys come from requests (a
/// `Host` header, a page number), so a client cannot make the cache grow without bound; past the
/// bound a page is made for its request alone.
#[derive(Debug)]
pub struct PageCache<K> {
    entries: Mutex<Vec<(K, Bytes)>>,
}

impl<K> Default for PageCache<K> {
    fn default() -> Self {
        PageCache { entries: Mutex::new(Vec::new()) }
    }
}

impl<K: PartialEq> PageCache<K> {
    pub const CAPACITY: usize = 64;

    /// The page kept for `key`.
    pub fn get(&self, key: &K) -> Option<Bytes> {
        let entries = self.entries.lock().expect("page cache");
        entries.iter().find(|(known, _)| known == key).map(|(_, page)| page.clone())
    }

    /// Keeps `page` for `key` while there is room; answers the page kept for `key` (when two
    /// requests made the same page at once, the first one's).
    pub fn insert(&self, key: K, page: Bytes) -> Bytes {
        let mut entries = self.entries.lock().expect("page cache");
        if let Some((_, kept)) = entries.iter().find(|(known, _)| *known == key) {
            return kept.clone();
        }
        if entries.len() < Self::CAPACITY {
            entries.push((key, page.clone()));
        }
        page
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_kept_up_to_the_bound() {
        let cache = PageCache::<usize>::default();
        for key in 0..PageCache::<usize>::CAPACITY + 10 {
            assert_eq!(cache.insert(key, Bytes::from(format!("{key}"))), format!("{key}"));
        }
        assert_eq!(cache.get(&0).unwrap(), "0");
        assert_eq!(
            cache.get(&(PageCache::<usize>::CAPACITY - 1)).unwrap(),
            format!("{}", PageCache::<usize>::CAPACITY - 1)
        );
        assert!(cache.get(&PageCache::<usize>::CAPACITY).is_none(), "past the bound nothing is kept");
        // The first page made for a key is the one answered.
        assert_eq!(cache.insert(0, Bytes::from_static(b"again")), "0");
    }
}
