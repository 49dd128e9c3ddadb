//! Sending a request under the retry policy.

use std::time::Duration;

use reqwest::header::RETRY_AFTER;
use reqwest::{RequestBuilder, Response, StatusCode};

use crate::config::Settings;
use crate::error::ClientError;

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
            Ok(response) if retryable_status(response.status()) => match retry_after(response) {
                Some(wait) if wait > policy.max_backoff() => None,
                Some(wait) => Some(wait),
                None => Some(policy.backoff(retry)),
            },
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
    fn statuses_worth_a_retry() {
        for status in [500, 502, 503, 504, 429] {
            assert!(retryable_status(StatusCode::from_u16(status).unwrap()), "{status}");
        }
        for status in [400, 401, 403, 404, 409, 412, 413, 415, 422, 200, 304] {
            assert!(!retryable_status(StatusCode::from_u16(status).unwrap()), "{status}");
        }
    }
}
