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

    /// The page kept for `key`, or the one `make` makes (kept while there is room). Pages are made
    /// outside the lock: two requests may make the same page at once, and the first one is kept.
    pub fn get_or_make<E>(&self, key: K, make: impl FnOnce() -> Result<Bytes, E>) -> Result<Bytes, E> {
        if let Some((_, page)) = self.entries.lock().expect("page cache").iter().find(|(known, _)| *known == key) {
            return Ok(page.clone());
        }
        let page = make()?;
        let mut entries = self.entries.lock().expect("page cache");
        if let Some((_, kept)) = entries.iter().find(|(known, _)| *known == key) {
            return Ok(kept.clone());
        }
        if entries.len() < Self::CAPACITY {
            entries.push((key, page.clone()));
        }
        Ok(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_kept_up_to_the_bound() {
        let cache = PageCache::<usize>::default();
        let mut made = 0;
        for round in 0..2 {
            for key in 0..PageCache::<usize>::CAPACITY + 10 {
                let page = cache
                    .get_or_make(key, || {
                        made += 1;
                        Ok::<_, ()>(Bytes::from(format!("{key}")))
                    })
                    .unwrap();
                assert_eq!(page, format!("{key}"), "round {round}");
            }
        }
        // The first round made every page; the second only those past the bound.
        assert_eq!(made, PageCache::<usize>::CAPACITY + 10 + 10);
    }
}
