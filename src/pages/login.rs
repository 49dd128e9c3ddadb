//! The browser's login, for a server with a token file: a form takes one of the tokens and sets
//! it as an `HttpOnly`, `SameSite=Strict` cookie, which the authentication layer accepts in place
//! of an `Authorization` header on safe methods (GET, HEAD) only. Every route that changes
//! anything, or costs more than a read, still needs the header, so a page of another site can make
//! a browser send nothing that acts with the cookie; and `SameSite=Strict` keeps the cookie off
//! every request another site starts. The login and logout forms themselves are refused unless the
//! browser says the request comes from this origin (`Sec-Fetch-Site`, `Origin`), so another site
//! cannot log a browser in with a token of its choosing either.

use std::sync::Arc;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::Extension;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{html, templates};
use crate::app::App;
use crate::auth::Penalty;
use crate::http::auth::COOKIE;
use crate::http::{BoundedBody, HttpError, Problem};

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(login_page, login)).routes(routes!(logout))
}

/// Where a login goes on to: a path of this server, else the catalog.
pub fn safe_next(next: &str) -> &str {
    let local = next.starts_with('/') && !next.starts_with("//") && !next.starts_with("/\\");
    if local && !next.bytes().any(|byte| byte.is_ascii_control()) { next } else { "/" }
}

#[derive(Debug, Deserialize)]
struct NextQuery {
    next: Option<String>,
}

/// The login form.
#[utoipa::path(get, path = "/ui/login", tag = "pages",
    params(("next" = Option<String>, Query, description = "The path to go on to once logged in")),
    responses((status = 200, description = "The login page", body = String, content_type = "text/html; charset=utf-8")))]
async fn login_page(State(app): State<Arc<App>>, uri: axum::http::Uri) -> Response {
    // A query that cannot be read names no path to go on to.
    let query: Option<NextQuery> = serde_urlencoded::from_str(uri.query().unwrap_or_default()).ok();
    let next = query.and_then(|query| query.next).unwrap_or_default();
    let frame = templates::Frame { title: "Log in", live: templates::Live::None, login: false };
    let refused = app.tokens.is_none().then_some("This server needs no token: every page is open.");
    html(templates::login(&frame, safe_next(&next), refused).into_string())
}

/// The login form.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct LoginForm {
    /// One of the server's tokens.
    token: String,
    /// The path of this server to go on to (anything else goes to the catalog).
    #[serde(default)]
    #[schema(default = "/")]
    next: String,
}

/// Checks a token and sets it as the login cookie, then goes on to `next`.
#[utoipa::path(post, path = "/ui/login", tag = "pages",
    request_body(content = LoginForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "Logged in: the cookie is set, and Location is where to go on to"),
        (status = 400, description = "A form without a token", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "The token is not valid: the login page again", body = String, content_type = "text/html; charset=utf-8"),
        (status = 429, description = "This client has too many wrong tokens waiting for their answer: the login page again, with Retry-After", body = String, content_type = "text/html; charset=utf-8"),
        (status = 403, description = "The request does not come from this server's own pages", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "A body that is not a form", body = Problem, content_type = "application/problem+json"),
    ))]
async fn login(
    State(app): State<Arc<App>>,
    client: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    BoundedBody(body): BoundedBody,
) -> Result<Response, HttpError> {
    same_origin(&headers)?;
    if !is_form(&headers) {
        return Err(HttpError::UnsupportedMediaType);
    }
    let form: LoginForm = serde_urlencoded::from_bytes(&body)
        .map_err(|_| HttpError::BadRequest("the form needs one `token` field".to_owned()))?;
    let next = safe_next(&form.next);
    let Some(store) = &app.tokens else {
        return Ok(see_other(next, None));
    };
    let token = form.token.trim();
    let client = client.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |Extension(ConnectInfo(peer))| peer.ip());
    let frame = templates::Frame { title: "Log in", live: templates::Live::None, login: false };
    if store.current().check(token.as_bytes()).is_none() {
        match store.throttle().failed(client, "the login form") {
            Penalty::None => {}
            Penalty::Wait(delay, _waiting) => tokio::time::sleep(delay).await,
            Penalty::Refuse(seconds) => {
                let why = format!("Too many wrong tokens from here; try again in {seconds} s.");
                let mut page = html(templates::login(&frame, next, Some(&why)).into_string());
                *page.status_mut() = StatusCode::TOO_MANY_REQUESTS;
                page.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
                return Ok(page);
            }
        }
        let mut page = html(templates::login(&frame, next, Some("That token is not valid.")).into_string());
        *page.status_mut() = StatusCode::UNAUTHORIZED;
        return Ok(page);
    }
    // A valid token is a b64token: nothing in it needs quoting in a cookie.
    let secure = if forwarded_https(&headers) { "; Secure" } else { "" };
    Ok(see_other(next, Some(format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict{secure}"))))
}

/// Forgets the login cookie.
#[utoipa::path(post, path = "/ui/logout", tag = "pages",
    responses(
        (status = 303, description = "Logged out: the cookie is cleared, and Location is the catalog"),
        (status = 403, description = "The request does not come from this server's own pages", body = Problem, content_type = "application/problem+json"),
    ))]
async fn logout(headers: HeaderMap) -> Result<Response, HttpError> {
    same_origin(&headers)?;
    Ok(see_other("/", Some(format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"))))
}

fn see_other(location: &str, cookie: Option<String>) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    if let Ok(location) = HeaderValue::from_str(location) {
        headers.insert(header::LOCATION, location);
    } else {
        headers.insert(header::LOCATION, HeaderValue::from_static("/"));
    }
    if let Some(cookie) = cookie.and_then(|cookie| HeaderValue::from_str(&cookie).ok()) {
        headers.insert(header::SET_COOKIE, cookie);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"))
}

fn forwarded_https(headers: &HeaderMap) -> bool {
    headers.get("x-forwarded-proto").is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"https"))
}

/// Refuses a form another site's page made the browser send: a browser says where a request
/// comes from in `Sec-Fetch-Site` and `Origin`; either one naming another site refuses it.
/// (A client that is no browser sends neither, and needs no protection from other sites.)
fn same_origin(headers: &HeaderMap) -> Result<(), HttpError> {
    if let Some(site) = headers.get("sec-fetch-site")
        && !matches!(site.as_bytes(), b"same-origin" | b"none")
    {
        return Err(HttpError::CrossSite);
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let host = headers.get(header::HOST).map(HeaderValue::as_bytes).unwrap_or_default();
    let origin = origin.as_bytes();
    let matches = [b"http://".as_slice(), b"https://".as_slice()]
        .iter()
        .any(|scheme| origin.strip_prefix(*scheme).is_some_and(|rest| rest.eq_ignore_ascii_case(host)));
    if matches { Ok(()) } else { Err(HttpError::CrossSite) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn a_login_goes_on_only_to_this_server() {
        assert_eq!(safe_next("/ui/skills/a?x=1"), "/ui/skills/a?x=1");
        for unsafe_next in ["", "https://evil.example", "//evil.example", "/\\evil.example", "javascript:x", "/a\r\nb"]
        {
            assert_eq!(safe_next(unsafe_next), "/", "{unsafe_next:?}");
        }
    }

    #[test]
    fn forms_from_other_sites_are_refused() {
        let host = ("host", "127.0.0.1:8080");
        assert!(same_origin(&headers(&[host])).is_ok(), "no browser");
        assert!(
            same_origin(&headers(&[host, ("origin", "http://127.0.0.1:8080"), ("sec-fetch-site", "same-origin")]))
                .is_ok()
        );
        assert!(same_origin(&headers(&[host, ("origin", "https://evil.example")])).is_err());
        assert!(same_origin(&headers(&[host, ("origin", "null")])).is_err());
        assert!(same_origin(&headers(&[host, ("sec-fetch-site", "cross-site")])).is_err());
        assert!(same_origin(&headers(&[host, ("sec-fetch-site", "same-site")])).is_err());
        assert!(same_origin(&headers(&[host, ("origin", "http://127.0.0.1:8080.evil.example")])).is_err());
    }
}
