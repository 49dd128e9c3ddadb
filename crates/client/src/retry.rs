//! Sending a request under the retry policy.

use std::hash::{BuildHasher as _, Hasher as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use reqwest::header::RETRY_AFTER;
use reqwest::{RequestBuilder, Response, StatusCode};

use crate::config::Settings;
use crate::error::ClientError;

/// A uniformly spread duration in `0..=max`. Backoff jitter needs no strong randomness: the
/// standard library's randomly keyed hasher over a counter and the clock spreads it well enough.
pub(crate) fn jitter(max: Duration) -> Duration {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    if max.is_zero() {
        return Duration::ZERO;
    }
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos());
    let fraction = (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64;
    max.mul_f64(fraction)
}

/// A `Retry-After` in delta-seconds. (An HTTP-date is not understood; the backoff applies then.)
fn retry_after(response: &Response) -> Option<Duration> {
    let value = response.headers().get(RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// Whether a request that got no answer may be sent again: the connection could not be made or
/// broke before an answer came. A timeout is not retried (it would multiply the wait).
fn retryable(error: &reqwest::Error) -> bool {
    error.is_connect() || (error.is_request() && !error.is_timeout())
}

/// Whether an answer's status is worth a retry.
fn retryable_status(status: StatusCode) -> bool {
    status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS
}

impl Settings {
    /// Sends the request `build` makes (with the token and the request timeout) and returns the
    /// answer, whatever its status, retrying an idempotent request as the policy allows. Only a
    /// request that got no answer is an error here.
    pub(crate) async fn send(&self, build: impl Fn() -> RequestBuilder) -> Result<Response, ClientError> {
        let mut retry = 0;
        loop {
            let outcome = build().timeout(self.request_timeout).send().await;
            let delay = match &outcome {
                Err(error) if retryable(error) => Some(self.retry.backoff(retry)),
                Ok(response) if retryable_status(response.status()) => match retry_after(response) {
                    Some(wait) if wait > self.retry.max_backoff() => None,
                    Some(wait) => Some(wait),
                    None => Some(self.retry.backoff(retry)),
                },
                _ => None,
            };
            match delay {
                Some(delay) if retry < self.retry.max_retries() => {
                    drop(outcome);
                    tokio::time::sleep(delay).await;
                    retry += 1;
                }
                _ => return outcome.map_err(ClientError::Transport),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_its_bound() {
        let max = Duration::from_millis(10);
        let samples: Vec<Duration> = (0..1000).map(|_| jitter(max)).collect();
        assert!(samples.iter().all(|sample| *sample <= max));
        let low = samples.iter().filter(|sample| **sample < max / 2).count();
        assert!((300..=700).contains(&low), "about half below the middle: {low}");
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn statuses_worth_a_retry() {
        for status in [500, 502, 503, 504, 429] {
            assert!(retryable_status(StatusCode::from_u16(status).unwrap()), "{status}");
        }
        for status in [400, 401, 403, 404, 409, 412, 413, 415, 422, 200, 304] {
            assert!(!retryable_status(StatusCode::from_u16(status).unwrap()), "{status}");
        }
    }
}
