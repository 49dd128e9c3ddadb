//! The secret of `POST /hooks/git`: git hosts cannot send the service's bearer tokens, so a push
//! webhook proves itself with this secret instead — GitHub signs the body (`X-Hub-Signature-256:
//! sha256=<HMAC-SHA256 hex>`), GitLab sends the secret (`X-Gitlab-Token`), and anything else may
//! send `Authorization: Bearer <secret>`. Every comparison takes the same time whatever the
//! values; the secret appears in no error, log line or `Debug` output.

use std::path::Path;

use axum::http::{HeaderMap, header};
use hmac::{Hmac, Mac};
use sha2::{Digest as _, Sha256};

/// Why the secret file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WebhookSecretError {
    #[error("cannot read the webhook secret file {path}: {source}")]
    Read { path: std::path::PathBuf, source: std::io::Error },
    #[error("the webhook secret file {path} holds no secret")]
    Empty { path: std::path::PathBuf },
}

/// The webhook secret.
#[derive(Clone)]
pub struct WebhookSecret {
    secret: Vec<u8>,
    digest: [u8; 32],
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(..)")
    }
}

impl WebhookSecret {
    /// The secret: the file's first line, without surrounding whitespace.
    pub fn read(path: &Path) -> Result<Self, WebhookSecretError> {
        let text =
            crate::config::read_small(path).map_err(|source| WebhookSecretError::Read { path: path.into(), source })?;
        let secret = text.lines().next().unwrap_or_default().trim();
        if secret.is_empty() {
            return Err(WebhookSecretError::Empty { path: path.into() });
        }
        Ok(Self::new(secret.as_bytes()))
    }

    pub fn new(secret: &[u8]) -> Self {
        WebhookSecret { secret: secret.to_vec(), digest: Sha256::digest(secret).into() }
    }

    /// Whether a request with `headers` and `body` was sent by someone who knows the secret.
    pub fn verify(&self, headers: &HeaderMap, body: &[u8]) -> bool {
        if let Some(signature) = headers.get("x-hub-signature-256") {
            let Some(hex) = signature.as_bytes().strip_prefix(b"sha256=") else { return false };
            let Some(signature) = decode_hex(hex) else { return false };
            let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes any key");
            mac.update(body);
            return mac.verify_slice(&signature).is_ok();
        }
        if let Some(token) = headers.get("x-gitlab-token") {
            return self.equals(token.as_bytes());
        }
        if let Some(authorization) = headers.get(header::AUTHORIZATION) {
            let value = authorization.as_bytes();
            return value.len() > 7
                && value[..7].eq_ignore_ascii_case(b"bearer ")
                && self.equals(value[7..].trim_ascii());
        }
        false
    }

    /// Equality with the secret in constant time (of fixed-size digests).
    fn equals(&self, presented: &[u8]) -> bool {
        let presented: [u8; 32] = Sha256::digest(presented).into();
        let difference = self.digest.iter().zip(presented.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(difference) == 0
    }
}

fn decode_hex(hex: &[u8]) -> Option<Vec<u8>> {
    if hex.len() != 64 {
        return None;
    }
    hex.chunks(2)
        .map(|pair| {
            let digit = |c: u8| (c as char).to_digit(16);
            Some((digit(pair[0])? * 16 + digit(pair[1])?) as u8)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(name: &str, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
        headers
    }

    #[test]
    fn github_signatures_gitlab_tokens_and_bearer_secrets() {
        let secret = WebhookSecret::new(b"It's a Secret to Everybody");
        // GitHub's documented example (docs: "Validating webhook deliveries").
        let body = b"Hello, World!";
        let signed = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(secret.verify(&headers("x-hub-signature-256", signed), body));
        assert!(!secret.verify(&headers("x-hub-signature-256", signed), b"Hello, World?"));
        let forged = "sha256=657107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(!secret.verify(&headers("x-hub-signature-256", forged), body));
        for bad in ["sha1=757107ea", "sha256=", "sha256=zz", &signed[..70]] {
            assert!(!secret.verify(&headers("x-hub-signature-256", bad), body), "{bad}");
        }
        assert!(secret.verify(&headers("x-gitlab-token", "It's a Secret to Everybody"), b""));
        assert!(!secret.verify(&headers("x-gitlab-token", "It's a Secret to Everybod"), b""));
        assert!(secret.verify(&headers("authorization", "Bearer It's a Secret to Everybody"), b""));
        assert!(secret.verify(&headers("authorization", "bearer It's a Secret to Everybody"), b""));
        assert!(!secret.verify(&headers("authorization", "Basic It's a Secret to Everybody"), b""));
        assert!(!secret.verify(&HeaderMap::new(), b""));
        assert_eq!(format!("{secret:?}"), "WebhookSecret(..)");
    }
}
