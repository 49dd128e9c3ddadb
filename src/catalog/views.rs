//! What is made from one version of the catalog, or of one skill, and kept with it: the catalog's
//! own views (the search index, the publication decisions) and the surfaces' encodings (pages,
//! the well-known indexes, MCP's entries). Each is made once, on first use, and lives as long as
//! its version: a skill's views are kept with the skill, which the next catalog version shares
//! while the skill is unchanged, so a new version costs only its changed skills.
//!
//! Views are kept by type, one value of each: a surface keeps its encodings here without the
//! catalog knowing its types.

use std::any::{Any, TypeId};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OnceCell;

use super::CatalogError;

/// The views of one version, by type.
#[derive(Default)]
pub struct Views {
    kept: Mutex<Vec<Kept>>,
}

struct Kept {
    kind: TypeId,
    /// An `OnceCell<Arc<T>>` for the type `T` of `kind`.
    cell: Arc<dyn Any + Send + Sync>,
    /// Whether the view depends on the skills alone (not on the listing's failure, say): then a
    /// catalog of the same skills whose listing changed keeps it.
    of_skills: bool,
}

impl std::fmt::Debug for Views {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Views").field("kept", &self.lock().len()).finish()
    }
}

impl Views {
    /// The cell of the view of type `T` that depends on the skills alone.
    pub fn of<T: Send + Sync + 'static>(&self) -> Arc<OnceCell<Arc<T>>> {
        self.cell(true)
    }

    /// The cell of the view of type `T` that shows the whole catalog as listed, its failure
    /// included: a catalog of the same skills whose listing changed makes it again.
    pub fn of_listing<T: Send + Sync + 'static>(&self) -> Arc<OnceCell<Arc<T>>> {
        self.cell(false)
    }

    fn cell<T: Send + Sync + 'static>(&self, of_skills: bool) -> Arc<OnceCell<Arc<T>>> {
        let kind = TypeId::of::<T>();
        let mut kept = self.lock();
        let cell = match kept.iter().find(|kept| kept.kind == kind) {
            Some(kept) => Arc::clone(&kept.cell),
            None => {
                let cell: Arc<dyn Any + Send + Sync> = Arc::new(OnceCell::<Arc<T>>::new());
                kept.push(Kept { kind, cell: Arc::clone(&cell), of_skills });
                cell
            }
        };
        drop(kept);
        cell.downcast::<OnceCell<Arc<T>>>().expect("each type's cell holds that type")
    }

    /// The views of a catalog of the same skills whose listing changed (a scan failed): the views
    /// of the skills, made already or not.
    pub(super) fn carried(&self) -> Views {
        let kept = self.lock();
        let carried = kept
            .iter()
            .filter(|kept| kept.of_skills)
            .map(|kept| Kept { kind: kept.kind, cell: Arc::clone(&kept.cell), of_skills: true })
            .collect();
        Views { kept: Mutex::new(carried) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Kept>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The view in `cell`, made by `make` if no one has: in a task of its own, which goes on when the
/// request that started it ends (a first view of a large catalog may take longer than a request
/// may), so the next request finds it made or waits for the same task.
pub async fn made_in_task<T, F>(cell: Arc<OnceCell<Arc<T>>>, make: F) -> Result<Arc<T>, CatalogError>
where
    T: Send + Sync + 'static,
    F: Future<Output = Result<T, CatalogError>> + Send + 'static,
{
    if let Some(made) = cell.get() {
        return Ok(Arc::clone(made));
    }
    let making =
        tokio::spawn(async move { cell.get_or_try_init(|| async { make.await.map(Arc::new) }).await.cloned() });
    match making.await {
        Ok(made) => made,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        // The runtime is shutting down.
        Err(_) => Err(CatalogError::NotReady),
    }
}

/// The value of blocking work, off the async workers; its panic resumed.
pub async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, CatalogError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => Ok(value),
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        // The runtime is shutting down.
        Err(_) => Err(CatalogError::NotReady),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_view_of_each_type_made_once_and_the_skills_views_carried() {
        let views = Views::default();
        let made = made_in_task(views.of::<String>(), async { Ok("index".to_owned()) }).await.unwrap();
        let again = made_in_task(views.of::<String>(), async { panic!("made once") }).await.unwrap();
        assert!(Arc::ptr_eq(&made, &again));
        views.of_listing::<u32>().set(Arc::new(7)).unwrap();
        assert_eq!(views.of_listing::<u32>().get().map(|page| **page), Some(7));
        let carried = views.carried();
        assert_eq!(carried.of::<String>().get().map(|index| index.as_str()), Some("index"));
        assert!(carried.of_listing::<u32>().get().is_none(), "a view of the listing is made again");
        // A failure is not kept: the next request makes the view again.
        let cell = Views::default().of::<String>();
        assert!(made_in_task(Arc::clone(&cell), async { Err(CatalogError::NotReady) }).await.is_err());
        assert!(made_in_task(cell, async { Ok("later".to_owned()) }).await.is_ok());
    }
}
