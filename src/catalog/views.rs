//! What is made from a catalog version on first use and kept with it: the search index and the
//! pages. A skill's views are kept with the skill, which the next catalog version shares while
//! the skill is unchanged.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;

use super::search::{SearchDocument, SearchIndex};
use super::snapshot::{ETag, PreparedBody};

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
    entries: Mutex<Vec<(K, Arc<PreparedBody>)>>,
}

impl<K> Default for PageCache<K> {
    fn default() -> Self {
        PageCache { entries: Mutex::new(Vec::new()) }
    }
}

impl<K: PartialEq> PageCache<K> {
    pub const CAPACITY: usize = 64;

    /// The page kept for `key`.
    pub fn get(&self, key: &K) -> Option<Arc<PreparedBody>> {
        let entries = self.entries.lock().expect("page cache");
        entries.iter().find(|(known, _)| known == key).map(|(_, page)| Arc::clone(page))
    }

    /// Prepares `page` (its tag, its gzip form) and keeps it for `key` while there is room;
    /// answers the page kept for `key` (when two requests made the same page at once, the first
    /// one's).
    pub fn insert(&self, key: K, page: Bytes) -> Arc<PreparedBody> {
        let etag = ETag::of(&[&page]);
        let page = PreparedBody::new(page.into(), etag);
        page.compress();
        let page = Arc::new(page);
        let mut entries = self.entries.lock().expect("page cache");
        if let Some((_, kept)) = entries.iter().find(|(known, _)| *known == key) {
            return Arc::clone(kept);
        }
        if entries.len() < Self::CAPACITY {
            entries.push((key, Arc::clone(&page)));
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
            assert_eq!(cache.insert(key, Bytes::from(format!("{key}"))).bytes, format!("{key}"));
        }
        assert_eq!(cache.get(&0).unwrap().bytes, "0");
        let last = PageCache::<usize>::CAPACITY - 1;
        assert_eq!(cache.get(&last).unwrap().bytes, format!("{last}"));
        assert!(cache.get(&PageCache::<usize>::CAPACITY).is_none(), "past the bound nothing is kept");
        // The first page made for a key is the one answered, with its tag.
        let again = cache.insert(0, Bytes::from_static(b"again"));
        assert_eq!((again.bytes.as_ref(), &again.etag), (b"0".as_slice(), &ETag::of(&[b"0"])));
        // A page large enough is kept compressed too.
        assert!(cache.insert(1000, Bytes::from(vec![b'x'; 4096])).gzip().is_some());
    }
}
