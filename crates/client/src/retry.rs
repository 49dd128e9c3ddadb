//! Sending a request under the retry policy.

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderValue, RETRY_AFTER};
use reqwest::{RequestBuilder, Response, StatusCode};

use crate::config::{RetryPolicy, Settings};
use crate::error::ClientError;

/// How long a `Retry-After` asks to wait at `now`: its delay-seconds, or the time until its
/// HTTP date (none if the date has passed). `None` if it is neither.
fn retry_after(value: &HeaderValue, now: SystemTime) -> Option<Duration> {
    let value = value.to_str().ok()?.trim();
    if !value.is_empty() && value.bytes().all(|byte| byte.is_ascii_digit()) {
        // More seconds than fit are still more than any policy waits.
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The wait before sending again after an answer worth a retry: what its `Retry-After` asks, or
/// the backoff if it asks nothing understood. `None` if it asks for longer than the policy's
/// maximum: the answer is returned rather than waited out.
fn answer_delay(policy: &RetryPolicy, retry_after: Option<Duration>, retry: u32) -> Option<Duration> {
    match retry_after {
        Some(wait) if wait > policy.max_backoff() => None,
        Some(wait) => Some(wait),
        None => Some(policy.backoff(retry)),
    }
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

/// Sends the request `build` makes (with the token and the request timeout) and returns the
/// answer, whatever its status, retrying an idempotent request as the policy allows. Only a
/// request that got no answer is an error here.
pub(crate) async fn send(settings: &Settings, build: impl Fn() -> RequestBuilder) -> Result<Response, ClientError> {
    let policy = &settings.retry;
    let mut retry = 0;
    loop {
        let outcome = build().timeout(settings.request_timeout).send().await;
        let delay = match &outcome {
            Err(error) if retryable(error) => Some(policy.backoff(retry)),
            Ok(response) if retryable_status(response.status()) => {
                let asked = response.headers().get(RETRY_AFTER).and_then(|value| retry_after(value, SystemTime::now()));
                answer_delay(policy, asked, retry)
            }
            _ => None,
        };
        match delay {
            Some(delay) if retry < policy.max_retries() => {
                drop(outcome);
                tokio::time::sleep(delay).await;
                retry += 1;
            }
            _ => return outcome.map_err(ClientError::Transport),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let asked = |value: &str| retry_after(&HeaderValue::from_str(value).unwrap(), now);
        assert_eq!(asked("0"), Some(Duration::ZERO));
        assert_eq!(asked(" 120 "), Some(Duration::from_secs(120)));
        assert_eq!(asked("99999999999999999999999"), Some(Duration::from_secs(u64::MAX)));
        let date = |at: SystemTime| asked(&httpdate::fmt_http_date(at));
        assert_eq!(date(now + Duration::from_secs(30)), Some(Duration::from_secs(30)));
        assert_eq!(date(now), Some(Duration::ZERO));
        assert_eq!(date(now - Duration::from_secs(3600)), Some(Duration::ZERO), "a past date means now");
        // The obsolete date formats HTTP still accepts.
        assert_eq!(asked("Tuesday, 14-Nov-23 22:13:50 GMT"), Some(Duration::from_secs(30)));
        assert_eq!(asked("Tue Nov 14 22:13:50 2023"), Some(Duration::from_secs(30)));
        for unknown in ["", "-1", "1.5", "soon", "Tue, 14 Nov 2023 22:13:50"] {
            assert_eq!(asked(unknown), None, "{unknown:?}");
        }
    }

    #[test]
    fn a_retry_after_beyond_the_maximum_ends_the_retries_and_none_means_the_backoff() {
        let policy = RetryPolicy::new(3, Duration::from_millis(100), Duration::from_secs(2));
        assert_eq!(answer_delay(&policy, Some(Duration::ZERO), 0), Some(Duration::ZERO));
        assert_eq!(answer_delay(&policy, Some(Duration::from_secs(2)), 0), Some(Duration::from_secs(2)));
        assert_eq!(answer_delay(&policy, Some(Duration::from_secs(3)), 0), None);
        assert_eq!(answer_delay(&policy, Some(Duration::from_secs(u64::MAX)), 0), None);
        let backoff = answer_delay(&policy, None, 1).unwrap();
        assert!((Duration::from_millis(100)..=Duration::from_millis(200)).contains(&backoff), "{backoff:?}");
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
