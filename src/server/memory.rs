//! Giving memory back after a burst of connections.
//!
//! Every connection holds buffers while it lives; when thousands come and go (a wave of event
//! streams, a flood of unfinished requests), glibc keeps the freed pages in its arenas, and the
//! process stays at its peak. Once connections fall well below their peak, `malloc_trim` hands
//! the free pages back to the system.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, watch};

/// How often the connection count is looked at.
const PERIOD: Duration = Duration::from_secs(2);

/// A drop by this many connections from the peak is worth a trim.
const DROP: usize = 128;

/// Trims after connections fell by [`DROP`] from their peak, until shutdown.
pub(super) async fn trim_after_bursts(slots: Arc<Semaphore>, max: usize, mut shutdown: watch::Receiver<bool>) {
    let mut peak = 0;
    let mut ticker = tokio::time::interval(PERIOD);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            () = crate::shutdown::stopped(&mut shutdown) => return,
        }
        let open = max.saturating_sub(slots.available_permits());
        peak = peak.max(open);
        if peak - open >= DROP {
            peak = open;
            let _ = tokio::task::spawn_blocking(crate::limits::give_back_free_memory).await;
        }
    }
}
