//! The rescan loop: rescans when asked (file events, a stale read, the periodic timer), bursts of
//! requests collapsed into one, and a new snapshot published only when an answer would change.
//! A failed scan keeps the last good catalog, carrying the failure.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use futures_util::FutureExt as _;
use futures_util::StreamExt as _;
use skillcat_core::{CompositeDiscovery, ContentVersion, SourceError};
use tokio::sync::watch;

use super::watching::Roots;
use super::{LiveCatalog, LiveOptions, lock};
use crate::catalog::snapshot::{Catalog, CatalogFailure, CatalogState, Snapshot, SourceEntry};
use crate::catalog::views::blocking;
use crate::shutdown::stopped;

/// How many diagnostics the line of a new version names.
const FIRST_DIAGNOSTICS: usize = 3;

/// Skill files read at once while preparing a snapshot.
const CONCURRENT_READS: usize = 16;

/// How long to wait after a change for the burst it belongs to (an editor's save, a git checkout).
const SETTLE: Duration = Duration::from_millis(5);

/// Beyond this many changed paths in one rescan (a checkout of a whole tree), a full walk, which
/// lists folders on several threads, is faster than listing each named folder in turn.
const MAX_CHANGED_PATHS: usize = 4096;

impl LiveCatalog {
    pub(super) async fn run(self, options: LiveOptions, mut roots: Option<Roots>, mut shutdown: watch::Receiver<bool>) {
        // The next periodic rescan: every `--rescan-interval`, and at least every
        // `UNWATCHED_RESCAN` while some folder is not watched.
        let mut next_periodic: Option<tokio::time::Instant> = None;
        // Whether this rescan is the periodic one, which also checks the picture of the folders
        // the rescans of changes keep against the full walk.
        let mut verify = false;
        let requests = &self.inner.requests;
        loop {
            // Requests made before this rescan starts (while the last burst settled) are answered
            // by it; left pending, each burst would cost a second, redundant full rescan.
            let _ = requests.notify.notified().now_or_never();
            // Watch first, then scan: a change made after the watch is in place requests another
            // rescan, and one made before it is seen by this scan. (The other order loses changes
            // made between the scan and the watch, e.g. right after the first catalog is ready, or
            // right after a symlinked root flipped.)
            if let Some(watched) = roots.take() {
                let Some(watched) = self.refresh(watched).await else { return };
                roots = Some(watched);
            }
            if !self.rescan(std::mem::take(&mut verify), &mut roots).await {
                return;
            }
            let period = match (options.rescan_interval, self.inner.watching.has_gap()) {
                (_, true) => Some(self.inner.watching.unwatched_period),
                (configured, false) => configured,
            };
            let now = tokio::time::Instant::now();
            next_periodic = period.map(|period| match next_periodic {
                Some(next) if next > now => next.min(now + period),
                _ => now + period,
            });
            tokio::select! {
                () = requests.notify.notified() => tokio::time::sleep(SETTLE).await,
                () = async { tokio::time::sleep_until(next_periodic.expect("a period")).await }, if next_periodic.is_some() => {
                    next_periodic = None;
                    requests.full.store(true, Ordering::Release);
                    verify = true;
                }
                () = stopped(&mut shutdown) => return,
            }
        }
    }

    /// Discovers every source and publishes the result if it answers anything differently.
    /// Sources that can list again only what the changes named since the last rescan may have
    /// touched do, unless a full walk is due: at start, after lost events or a stale read, while a
    /// folder is not watched, and at the periodic rescan (`verify`), which also rescans from the
    /// changes first and counts any difference (the full walk's answer is the one published).
    /// The first scan's walk places the file watches (see `refresh`): they are finished after it,
    /// before its catalog is published, so that the catalog says what they left unwatched.
    /// `false`: the runtime is shutting down.
    async fn rescan(&self, verify: bool, roots: &mut Option<Roots>) -> bool {
        let started = Instant::now();
        let (sources, requests) = (&self.inner.sources, &self.inner.requests);
        let changed: Arc<Vec<PathBuf>> = Arc::new(std::mem::take(&mut *lock(&requests.changed)));
        let full = requests.full.swap(false, Ordering::AcqRel);
        let watched = self.inner.watching.stamp().is_some();
        let covered = watched && changed.len() <= MAX_CHANGED_PATHS && sources.cover(&changed);
        let scanned = if full || !covered {
            if verify && covered {
                let stamp = self.inner.watching.stamp();
                let from_changes = sources.scan(Some(&changed)).await;
                let walked = sources.scan(None).await;
                if stamp.is_some() && stamp == self.inner.watching.stamp() && !same_discovery(&from_changes, &walked) {
                    self.inner.metrics.picture_disagreement();
                    tracing::warn!("the rescan of changes and the full walk disagree; serving the full walk's catalog");
                }
                walked
            } else {
                sources.scan(None).await
            }
        } else {
            sources.scan(Some(&changed)).await
        };
        if roots.as_ref().is_some_and(Roots::walking) {
            let Some(watched) = self.finish_walk(roots.take().expect("walking")).await else { return false };
            *roots = Some(watched);
        }
        let state = match scanned {
            Ok(mut discovery) => {
                self.inner.metrics.set_failing(false);
                self.read_missing_versions(&mut discovery).await;
                discovery.diagnostics.extend(self.inner.watching.diagnostics());
                let entries: Vec<SourceEntry> = sources
                    .iter()
                    .map(|source| SourceEntry {
                        label: source.label().to_owned(),
                        kind: source.kind(),
                        commit: source.revision(),
                    })
                    .collect();
                // The first catalog is compressed before it is published (nothing is served yet);
                // later ones after, so that compressing never delays a change.
                let current = self.snapshot();
                let catalog = blocking(move || {
                    let previous = match &current.state {
                        CatalogState::Ready(catalog) => Some(&**catalog),
                        _ => None,
                    };
                    let catalog = Catalog::rebuild(previous, &discovery, &entries);
                    if let Some(catalog) = &catalog
                        && current.version == 0
                    {
                        catalog.compress(None);
                    }
                    catalog
                })
                .await;
                match catalog {
                    Ok(catalog) => catalog.map(|catalog| CatalogState::Ready(Box::new(catalog))),
                    // The runtime is shutting down.
                    Err(_) => return false,
                }
            }
            Err(failure) => self.failed(&failure),
        };
        let metrics = &self.inner.metrics;
        metrics.scan_finished(started.elapsed());
        // `None`: the same catalog as the published one. A full walk that changed nothing still
        // passed through as much memory as one that did (the walk's buffers, a whole discovery):
        // it is given back the same way, or the process would stay at its peak until a change.
        let Some(state) = state else {
            if full || !covered {
                tokio::task::spawn_blocking(crate::limits::give_back_free_memory);
            }
            return true;
        };
        if let CatalogState::Ready(catalog) = &state {
            metrics.set_catalog_size(catalog.skills.len());
            metrics.set_catalog_skills(catalog.skills.iter().map(|skill| skill.skill.name()));
        }
        let mut published = None;
        self.inner.snapshots.send_if_modified(|current| {
            if current.same_as(&state) {
                return false;
            }
            let version = current.version + 1;
            self.report(version, &state);
            let previous = std::mem::replace(current, Arc::new(Snapshot { version, state }));
            published = Some((Arc::clone(current), previous));
            true
        });
        if let Some((snapshot, previous)) = published {
            tokio::task::spawn_blocking(move || {
                if let CatalogState::Ready(catalog) = &snapshot.state {
                    // What did not change is taken from the version before, compressed already
                    // (unless the versions came faster than they were compressed).
                    let earlier = match &previous.state {
                        CatalogState::Ready(earlier) => Some(&**earlier),
                        _ => None,
                    };
                    catalog.compress(earlier);
                }
                drop((snapshot, previous));
                // The scan's and build's passing allocations (the walk's buffers, the discovery,
                // the previous listing) are freed by now.
                crate::limits::give_back_free_memory();
            });
        }
        true
    }

    /// What a failed scan leaves published. Before any good catalog it is the failure (every
    /// catalog route answers 503); after one, the last good catalog stays, carrying the failure.
    /// `None`: this failure is already published.
    fn failed(&self, failure: &SourceError) -> Option<CatalogState> {
        let metrics = &self.inner.metrics;
        metrics.scan_failed();
        metrics.set_failing(true);
        let source = self.inner.sources.label(failure.index).to_owned();
        let message = failure.error.explanation();
        let current = self.snapshot();
        match &current.state {
            CatalogState::Ready(catalog) => {
                if catalog.error.as_ref().is_some_and(|known| known.source == source && known.message == message) {
                    return None;
                }
                tracing::warn!(
                    source,
                    error = message,
                    "a scan failed; serving the last good catalog until it succeeds"
                );
                let since = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
                Some(CatalogState::Ready(Box::new(catalog.failing(CatalogFailure { source, message, since }))))
            }
            // The 503's detail is nagents' message alone, as a nagents source would raise it.
            CatalogState::Failed(known) if *known == failure.error.to_string() => None,
            _ => {
                tracing::warn!(source, error = message, "a scan failed; no catalog is served until one succeeds");
                Some(CatalogState::Failed(failure.error.to_string()))
            }
        }
    }

    /// One line for each new version: what it holds, what was skipped source by source, and the
    /// first few things skipped.
    fn report(&self, version: u64, state: &CatalogState) {
        let CatalogState::Ready(catalog) = state else { return };
        let diagnostics = (self.inner.sources.iter())
            .map(|source| {
                let label = source.label();
                let count = catalog.diagnostics.iter().filter(|diagnostic| diagnostic.source == label).count();
                format!("{label}: {count}")
            })
            .collect::<Vec<_>>()
            .join(", ");
        // The first few, so that a log says what was skipped, not only how much.
        let first: Vec<String> = (catalog.diagnostics.iter().take(FIRST_DIAGNOSTICS))
            .map(|diagnostic| format!("{}: {}", diagnostic.source, diagnostic.message))
            .collect();
        tracing::info!(
            version,
            skills = catalog.skills.len(),
            shadowed = catalog.shadowed.len(),
            diagnostics,
            first_diagnostics = ?first,
            failing = catalog.error.is_some(),
            "published a new catalog version"
        );
    }

    /// The tags cover each skill's content: sources that read contents to discover them (every
    /// directory and builtin source) give their versions with the scan; any other skill is read
    /// now, a few at a time.
    async fn read_missing_versions(&self, discovery: &mut CompositeDiscovery) {
        let sources = &self.inner.sources;
        let missing = discovery.skills.iter_mut().filter(|sourced| sourced.version.is_none());
        futures_util::stream::iter(missing)
            .for_each_concurrent(CONCURRENT_READS, |sourced| async move {
                let content = sources.get(sourced.source).load(&sourced.skill).await;
                sourced.version = content.ok().map(|content| ContentVersion::of(&content));
            })
            .await;
    }
}

/// Whether two scans give the same catalog (or fail the same way).
fn same_discovery(a: &Result<CompositeDiscovery, SourceError>, b: &Result<CompositeDiscovery, SourceError>) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => a.index == b.index && a.to_string() == b.to_string(),
        _ => false,
    }
}
