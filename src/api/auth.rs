//! Bearer-token authentication: with a token file, every route but the probes needs
//! `Authorization: Bearer <token>`.

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, header};

use super::error::ApiError;
use crate::app::App;
use crate::auth::{TokenDigest, Tokens};

/// Routes reached without credentials: the probes (a kubelet carries none), and the login form
/// with what it needs to show (its script and style sheet), which reveal nothing of the catalog.
pub(super) const OPEN_ROUTES: &[&str] =
    &["/healthz", "/readyz", "/ui/login", "/ui/logout", "/ui/app.js", "/ui/style.css"];

/// The token a request was let in with (as its digest), for streams that must end when the token
/// is revoked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Authenticated(pub TokenDigest);

/// Authentication, in the gate of every route: lets the request through (marked
/// [`Authenticated`]) or refuses it with a 401.
pub(super) fn check(app: &App, request: &mut Request) -> Result<(), ApiError> {
    let Some(store) = &app.tokens else {
        return Ok(());
    };
    let route = request.extensions().get::<MatchedPath>().map(MatchedPath::as_str);
    if route.is_some_and(|route| OPEN_ROUTES.contains(&route)) {
        return Ok(());
    }
    let tokens = store.current();
    let digest = match authenticate(request.headers(), &tokens) {
        // A browser's login cookie stands in for the header on safe methods only: nothing a
        // cookie lets through changes anything (see `pages::login`).
        Err(ApiError::MissingToken) if request.method().is_safe() => {
            match super::pages::cookie_token(request.headers()) {
                Some(token) => tokens.check(token).ok_or(ApiError::InvalidToken)?,
                None => return Err(ApiError::MissingToken),
            }
        }
        checked => checked?,
    };
    request.extensions_mut().insert(Authenticated(digest));
    Ok(())
}

/// Checks the one `Authorization` header: scheme `Bearer` (any case), then the token.
fn authenticate(headers: &HeaderMap, tokens: &Tokens) -> Result<TokenDigest, ApiError> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => return Err(ApiError::MissingToken),
        (Some(value), None) => value.as_bytes(),
        // Two credentials: which one is meant is anybody's guess.
        (Some(_), Some(_)) => return Err(ApiError::InvalidToken),
    };
    let Some(space) = value.iter().position(|&byte| byte == b' ') else {
        return Err(if value.eq_ignore_ascii_case(b"bearer") {
            ApiError::InvalidToken
        } else {
            ApiError::MissingToken
        });
    };
    let (scheme, token) = value.split_at(space);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return Err(ApiError::MissingToken);
    }
    tokens.check(token.trim_ascii()).ok_or(ApiError::InvalidToken)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn check(values: &[&[u8]]) -> Result<(), &'static str> {
        let tokens = Tokens::parse("t0ken\nother.token==\n", std::path::Path::new("tokens")).unwrap();
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(header::AUTHORIZATION, HeaderValue::from_bytes(value).unwrap());
        }
        authenticate(&headers, &tokens).map(|_| ()).map_err(|error| match error {
            ApiError::MissingToken => "missing",
            ApiError::InvalidToken => "invalid",
            _ => "other",
        })
    }

    #[test]
    fn credentials_are_checked_strictly() {
        assert_eq!(check(&[b"Bearer t0ken"]), Ok(()));
        assert_eq!(check(&[b"bearer t0ken"]), Ok(()));
        assert_eq!(check(&[b"BEARER   other.token=="]), Ok(()));
        assert_eq!(check(&[]), Err("missing"));
        assert_eq!(check(&[b"Basic dDBrZW46"]), Err("missing"));
        assert_eq!(check(&[b"t0ken"]), Err("missing"));
        assert_eq!(check(&[b"Bearer"]), Err("invalid"));
        assert_eq!(check(&[b"Bearer "]), Err("invalid"));
        assert_eq!(check(&[b"Bearer t0ke"]), Err("invalid"));
        assert_eq!(check(&[b"Bearer t0ken2"]), Err("invalid"));
        assert_eq!(check(&[b"Bearer T0KEN"]), Err("invalid"));
        assert_eq!(check(&[b"Bearer t0ken t0ken"]), Err("invalid"));
        assert_eq!(check(&[b"Bearer t0ken", b"Bearer t0ken"]), Err("invalid"));
        assert_eq!(check(&[b"Bearer \xfft0ken"]), Err("invalid"));
    }
}
