//! Waiting for something to happen, with a deadline instead of a fixed sleep.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long anything the tests expect may take to become visible.
pub const DEADLINE: Duration = Duration::from_secs(5);

/// Polls `check` until it holds and returns how long that took; fails the test after
/// [`DEADLINE`].
pub async fn eventually<F, Fut>(what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < DEADLINE, "{what}: not seen within {DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.elapsed()
}
