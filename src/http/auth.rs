//! Bearer-token authentication: with a token file, every route but the probes needs
//! `Authorization: Bearer <token>`, or, for a browser's safe requests, the login cookie that the
//! pages' login form sets.

use axum::http::{HeaderMap, Request, header};

use super::error::HttpError;
use crate::app::App;
use crate::auth::{Penalty, TokenDigest, Tokens, Waiting};

/// Routes reached without credentials: the probes (a kubelet carries none), the git webhook (a
/// git host cannot send them; the webhook secret authenticates it), and the login form with what
/// it needs to show (its script and style sheet), which reveal nothing of the catalog.
pub const OPEN_ROUTES: &[&str] =
    &["/healthz", "/readyz", "/hooks/git", "/ui/login", "/ui/logout", "/ui/app.js", "/ui/style.css"];

/// The cookie that carries a browser's token (set by the pages' login form).
pub const COOKIE: &str = "skillcat_token";

/// The token a request was let in with (as its digest), for streams that must end when the token
/// is revoked.
#[derive(Debug, Clone, Copy)]
pub struct Authenticated(pub TokenDigest);

/// A refused request: its error, and how long its answer must wait (a wrong token beyond its
/// client's share, see `crate::auth::Throttle`).
pub struct Refused {
    pub error: HttpError,
    pub wait: Option<(std::time::Duration, Waiting)>,
}

impl From<HttpError> for Refused {
    fn from(error: HttpError) -> Self {
        Refused { error, wait: None }
    }
}

/// Authentication, in the gate of every route: lets the request through (marked
/// [`Authenticated`]) or refuses it with a 401 (answered late when its client has presented many
/// wrong tokens, or 429 when it has too many such answers waiting). `route` is the request's
/// route template (`None` when no route matched), which decides whether it is an open one.
/// `peer` is the connection's peer where the caller knows it; otherwise the request's own
/// ([`client_address`]) is the client that a wrong token counts against.
pub fn check<B>(
    app: &App,
    request: &mut Request<B>,
    route: Option<&str>,
    peer: Option<std::net::SocketAddr>,
) -> Result<(), Refused> {
    let Some(store) = &app.tokens else {
        return Ok(());
    };
    if route.is_some_and(|route| OPEN_ROUTES.contains(&route)) {
        return Ok(());
    }
    let tokens = store.current();
    let (checked, how) = match authenticate(request.headers(), &tokens) {
        // A browser's login cookie stands in for the header on safe methods only: nothing a
        // cookie lets through changes anything (see `pages::login`).
        Err(HttpError::MissingToken) if request.method().is_safe() => match cookie_token(request.headers()) {
            Some(token) => (tokens.check(token).ok_or(HttpError::InvalidToken), "the login cookie"),
            None => return Err(HttpError::MissingToken.into()),
        },
        Err(HttpError::MissingToken) => return Err(HttpError::MissingToken.into()),
        checked => (checked, "the Authorization header"),
    };
    match checked {
        Ok(digest) => {
            request.extensions_mut().insert(Authenticated(digest));
            Ok(())
        }
        Err(error) => {
            let client = peer.map_or_else(|| client_address(request), |peer| peer.ip());
            Err(match store.throttle().failed(client, how) {
                Penalty::None => Refused { error, wait: None },
                Penalty::Wait(delay, waiting) => Refused { error, wait: Some((delay, waiting)) },
                Penalty::Refuse(seconds) => HttpError::TooManyFailures(seconds).into(),
            })
        }
    }
}

/// The address a request came from (the server records each connection's peer; a router driven
/// in-process has none, and its requests count as one client's).
pub fn client_address<B>(request: &Request<B>) -> std::net::IpAddr {
    request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), |info| info.0.ip())
}

/// The token of the [`COOKIE`] among the request's cookies, if there is one.
pub fn cookie_token(headers: &HeaderMap) -> Option<&[u8]> {
    headers.get_all(header::COOKIE).iter().flat_map(|line| line.as_bytes().split(|&byte| byte == b';')).find_map(
        |pair| {
            let pair = pair.trim_ascii();
            let (name, value) = pair.split_at(pair.iter().position(|&byte| byte == b'=')?);
            (name == COOKIE.as_bytes()).then(|| &value[1..])
        },
    )
}

/// Checks the one `Authorization` header: scheme `Bearer` (any case), then the token.
fn authenticate(headers: &HeaderMap, tokens: &Tokens) -> Result<TokenDigest, HttpError> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => return Err(HttpError::MissingToken),
        (Some(value), None) => value.as_bytes(),
        // Two credentials: which one is meant is anybody's guess.
        (Some(_), Some(_)) => return Err(HttpError::InvalidToken),
    };
    let Some(space) = value.iter().position(|&byte| byte == b' ') else {
        return Err(if value.eq_ignore_ascii_case(b"bearer") {
            HttpError::InvalidToken
        } else {
            HttpError::MissingToken
        });
    };
    let (scheme, token) = value.split_at(space);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return Err(HttpError::MissingToken);
    }
    tokens.check(token.trim_ascii()).ok_or(HttpError::InvalidToken)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn cookies(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    fn check(values: &[&[u8]]) -> Result<(), &'static str> {
        let tokens = Tokens::parse("t0ken\nother.token==\n", std::path::Path::new("tokens")).unwrap();
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(header::AUTHORIZATION, HeaderValue::from_bytes(value).unwrap());
        }
        authenticate(&headers, &tokens).map(|_| ()).map_err(|error| match error {
            HttpError::MissingToken => "missing",
            HttpError::InvalidToken => "invalid",
            _ => "other",
        })
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        assert_eq!(cookie_token(&cookies(&[("cookie", "a=1; skillcat_token=t0k; b=2")])), Some(&b"t0k"[..]));
        assert_eq!(cookie_token(&cookies(&[("cookie", "a=1"), ("cookie", "skillcat_token=x")])), Some(&b"x"[..]));
        assert_eq!(cookie_token(&cookies(&[("cookie", "skillcat_tokens=x; xskillcat_token=y")])), None);
        assert_eq!(cookie_token(&cookies(&[])), None);
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
