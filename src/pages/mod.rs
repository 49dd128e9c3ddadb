//! The pages people browse: the catalog (`/`) and a page per skill (`/ui/skills/{name}`), rendered
//! on the server from the snapshot and kept per catalog or skill version, a little JavaScript
//! (`/ui/app.js`: search as you type, live updates from `/events`, copy buttons), and the login
//! that lets a browser in when the server needs a token.
//!
//! Skills are untrusted: their Markdown is sanitized (`markdown`), and every page carries a strict
//! Content-Security-Policy (scripts and styles from this origin only, no inline script or style,
//! no frames, forms only to this origin), `nosniff` and `frame-ancestors 'none'`.

mod login;
mod markdown;
mod templates;

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;
use crate::catalog::{CatalogError, CatalogSkill, ETag, PreparedBody, blocking};
use crate::http::{
    Headers, HttpError, Problem, SkillPath, base_url, not_modified, precondition_holds, prepared, responses,
};
use crate::observability::LoadCounts;

/// Skills on one page of the catalog.
pub const PAGE_SIZE: usize = 500;

/// The policy of every page: only this origin's script, style, images and connections; no inline
/// script or style; no plugins, frames or base changes; forms post only here; no framing.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
                   form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/style.css");

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(catalog_page))
        .routes(routes!(skill_page))
        .routes(routes!(versions_page))
        .routes(routes!(script))
        .routes(routes!(style))
        .merge(login::router())
}

/// An HTML page with the headers every page carries.
pub fn html(body: impl Into<Body>) -> Response {
    let mut response = body.into().into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    secure(headers);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    response
}

/// A page kept for its version: tagged, conditional, gzip when the client takes it, with the
/// headers every page carries.
fn prepared_page(headers: &HeaderMap, page: &PreparedBody) -> Result<Response, HttpError> {
    let mut response = prepared(headers, page, "text/html; charset=utf-8")?;
    let headers = response.headers_mut();
    secure(headers);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    Ok(response)
}

/// The security headers of every page.
fn secure(headers: &mut HeaderMap) {
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
}

/// The frame of a page of `app` that follows `live`.
fn frame<'a>(app: &App, title: &'a str, live: templates::Live<'a>) -> templates::Frame<'a> {
    templates::Frame { title, live, login: app.tokens.is_some() }
}

/// An error as an HTML page (for a browser): its title and detail, and for a 401 the login form,
/// which comes back to `path` (the request's path and query).
pub fn error_page(problem: &Problem, path: &str) -> Bytes {
    let frame = templates::Frame { title: problem.title, live: templates::Live::None, login: false };
    let login = (problem.status == 401).then(|| login::safe_next(path));
    Bytes::from(templates::error(&frame, problem.status, problem.title, &problem.detail, login).into_string())
}

#[derive(Debug, Deserialize)]
struct CatalogQuery {
    page: Option<String>,
}

/// The catalog: every skill in name order ([`PAGE_SIZE`] to a page), a search box, the shadowed
/// skills and the diagnostics, and a badge that shows changes as they happen.
#[utoipa::path(get, path = "/", tag = "pages",
    params(
        ("page" = Option<u32>, Query, description = "The page of skills, from 1", minimum = 1),
        ("If-None-Match" = Option<String>, Header, description = "Tags from earlier answers; 304 if one is current"),
    ),
    responses(
        (status = 200, description = "The catalog page", body = String, content_type = "text/html; charset=utf-8",
            headers(("ETag" = String, description = "Strong tag of the page; the gzip representation has its own"))),
        (status = 304, description = "The client's copy is current"),
        (status = 400, description = "`page` is not a positive integer", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`page` is past the catalog's last page", body = Problem, content_type = "application/problem+json"),
        responses::RepresentationPreconditionFailed,
        responses::Unavailable,
    ))]
async fn catalog_page(State(app): State<Arc<App>>, uri: Uri, Headers(headers): Headers) -> Result<Response, HttpError> {
    let snapshot = app.catalog.snapshot();
    let catalog = snapshot.ready()?;
    let pages = catalog.skills.len().div_ceil(PAGE_SIZE).max(1);
    let query: CatalogQuery = serde_urlencoded::from_str(uri.query().unwrap_or_default())
        .map_err(|error| HttpError::InvalidQuery(format!("the query string cannot be read: {error}")))?;
    let number = match query.page {
        None => 1,
        Some(page) => match page.parse::<usize>() {
            Ok(number) if (1..=pages).contains(&number) => number,
            Ok(number) if number > pages => return Err(HttpError::PageNotFound(pages)),
            _ => return Err(HttpError::InvalidQuery("`page` must be a positive integer".to_owned())),
        },
    };
    let pages_kept = catalog.views.of_listing::<PageCache<usize>>();
    let kept = pages_kept.get_or_init(|| async { Arc::default() }).await;
    let start = (number - 1) * PAGE_SIZE;
    let skills = &catalog.skills[start..(start + PAGE_SIZE).min(catalog.skills.len())];
    let marked = match kept.get(&number) {
        Some(page) => page,
        None => {
            let view = templates::CatalogPage { catalog, number, pages, skills, count_mark: &COUNT_MARK };
            let live = templates::Live::Catalog(catalog.listing.etag.as_str());
            let page = templates::catalog(&frame(&app, "Catalog", live), &view).into_string();
            kept.insert(number, Bytes::from(page))
        }
    };
    let counts: Vec<LoadCounts> =
        skills.iter().map(|skill| app.metrics.skill_loads(skill.skill.name().as_str())).collect();
    let counted_kept = catalog.views.of_listing::<CountedPages>();
    let counted = counted_kept.get_or_init(|| async { Arc::default() }).await;
    prepared_page(&headers, &counted.page(number, &marked, &counts))
}

/// Where the catalog page's counts go, as rendered: like [`BASE_MARK`], a value no skill can
/// guess.
static COUNT_MARK: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| BASE_MARK.replace("base", "count"));

/// The catalog pages as last answered with their counts, by page number: made again only when a
/// count changed (a load of one of its skills), so that a page read more often than its skills
/// are loaded costs no rendering, and keeps its gzip form and its tag.
#[derive(Default)]
struct CountedPages(Mutex<Vec<(usize, Arc<PreparedBody>)>>);

impl CountedPages {
    /// `marked` (a page kept without its counts) with `counts` (one per row, in order) put in.
    fn page(&self, number: usize, marked: &PreparedBody, counts: &[LoadCounts]) -> Arc<PreparedBody> {
        let mut tagged = Vec::with_capacity(marked.etag.as_str().len() + counts.len() * 16);
        tagged.extend_from_slice(marked.etag.as_str().as_bytes());
        for count in counts {
            tagged.extend_from_slice(&count.total().to_le_bytes());
            tagged.extend_from_slice(&count.installs().to_le_bytes());
        }
        let etag = ETag::of(&[&tagged]);
        if let Some((_, page)) = lock(&self.0).iter().find(|(known, page)| *known == number && page.etag == etag) {
            return Arc::clone(page);
        }
        let text = std::str::from_utf8(&marked.bytes).expect("pages are UTF-8");
        let mut values = counts.iter().flat_map(|count| [count.total(), count.installs()]);
        let mut page = String::with_capacity(text.len());
        for (index, piece) in text.split(COUNT_MARK.as_str()).enumerate() {
            if index > 0 {
                page.push_str(&values.next().unwrap_or_default().to_string());
            }
            page.push_str(piece);
        }
        let page = PreparedBody::new(page.into_bytes(), etag);
        page.compress();
        let page = Arc::new(page);
        let mut kept = lock(&self.0);
        kept.retain(|(known, _)| *known != number);
        if kept.len() < PageCache::<usize>::CAPACITY {
            kept.push((number, Arc::clone(&page)));
        }
        page
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A skill: its `SKILL.md` rendered, its frontmatter, its files (each linking to its bytes), its
/// archive, and snippets to use it (curl, the Rust and Python clients, MCP, installers).
#[utoipa::path(get, path = "/ui/skills/{name}", tag = "pages",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
        ("If-None-Match" = Option<String>, Header, description = "Tags from earlier answers; 304 if one is current"),
    ),
    responses(
        (status = 200, description = "The skill's page", body = String, content_type = "text/html; charset=utf-8",
            headers(("ETag" = String, description = "Strong tag of the page (it covers the base URL its snippets name)"))),
        (status = 304, description = "The client's copy is current"),
        responses::InvalidName,
        responses::UnknownSkill,
        responses::Changed,
        responses::RepresentationPreconditionFailed,
        responses::Unavailable,
    ))]
async fn skill_page(
    State(app): State<Arc<App>>,
    SkillPath(name): SkillPath,
    Headers(headers): Headers,
) -> Result<Response, HttpError> {
    let snapshot = app.catalog.snapshot();
    let catalog = snapshot.ready()?;
    let skill = catalog.get(&name).ok_or_else(|| CatalogError::UnknownSkill(name.clone()))?;
    let pages = skill.views.of::<SkillPage>();
    let page = pages
        .get_or_try_init(|| async {
            let text = app.catalog.content(skill).await?;
            let not_installable = app.catalog.publication(skill).await.err().map(|why| why.to_string());
            let (login, skill) = (app.tokens.is_some(), Arc::clone(skill));
            let rendered = blocking(move || render_skill(login, &skill, text.text(), &BASE_MARK, not_installable));
            Ok::<_, HttpError>(Arc::new(SkillPage::of(&rendered.await.map_err(|_| HttpError::ShuttingDown)?)))
        })
        .await?;
    page.answer(&headers, &base_url(&app, &headers))
}

/// A skill's versions: each with its commit, time and tags, and links to its pinned archive and
/// content. Rendered for each request (a new commit or tag changes it without a new skill
/// version).
#[utoipa::path(get, path = "/ui/skills/{name}/versions", tag = "pages",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
    ),
    responses(
        (status = 200, description = "The skill's versions, newest first", body = String, content_type = "text/html; charset=utf-8"),
        responses::InvalidName,
        responses::UnknownSkill,
        responses::Unavailable,
    ))]
async fn versions_page(State(app): State<Arc<App>>, SkillPath(name): SkillPath) -> Result<Response, HttpError> {
    let versions = app.catalog.versions(&name).await?;
    let title = format!("{name}: versions");
    let page = templates::versions(&frame(&app, &title, templates::Live::None), &versions);
    Ok(html(page.into_string()))
}

/// Where a skill page names the server's base URL, as rendered: a value no skill can guess (it
/// never leaves the process), so that no text of the skill's is taken for it.
static BASE_MARK: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_nanos());
    let tag = ETag::of(&[&seed.to_le_bytes(), &std::process::id().to_le_bytes()]);
    format!("base-{}-base", tag.as_str().trim_matches('"'))
});

/// A skill's page, rendered once per skill version without the server's base URL (its snippets
/// name it): the pieces around each place it goes. An answer puts the base of its request (its
/// `Host`) between them, sharing the pieces: what a request can choose costs it a few bytes, not
/// a page.
struct SkillPage {
    pieces: Vec<Bytes>,
    etag: ETag,
}

impl SkillPage {
    fn of(page: &str) -> Self {
        let pieces: Vec<Bytes> =
            page.split(BASE_MARK.as_str()).map(|piece| Bytes::copy_from_slice(piece.as_bytes())).collect();
        let etag = ETag::of(&pieces.iter().map(|piece| piece.as_ref()).collect::<Vec<_>>());
        SkillPage { pieces, etag }
    }

    /// The page for `base`: tagged (the tag covers the base), conditional, sent as its pieces.
    fn answer(&self, headers: &HeaderMap, base: &str) -> Result<Response, HttpError> {
        let etag = ETag::of(&[self.etag.as_str().as_bytes(), base.as_bytes()]);
        let etag_header = HeaderValue::from_str(etag.as_str()).expect("tags are visible ASCII");
        if !precondition_holds(headers, &etag_header) {
            return Err(HttpError::NoMatchingRepresentation);
        }
        if not_modified(headers, &etag_header) {
            let mut response = (StatusCode::NOT_MODIFIED, [(header::ETAG, etag_header)]).into_response();
            secure(response.headers_mut());
            return Ok(response);
        }
        let base = Bytes::from(maud::html! { (base) }.into_string());
        let length: usize = self.pieces.iter().map(Bytes::len).sum::<usize>() + base.len() * (self.pieces.len() - 1);
        let mut frames = Vec::with_capacity(self.pieces.len() * 2);
        for (index, piece) in self.pieces.iter().enumerate() {
            if index > 0 {
                frames.push(Ok::<_, std::convert::Infallible>(base.clone()));
            }
            frames.push(Ok(piece.clone()));
        }
        let mut response = html(Body::from_stream(futures_util::stream::iter(frames)));
        let headers = response.headers_mut();
        headers.insert(header::ETAG, etag_header);
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        Ok(response)
    }
}

fn render_skill(login: bool, skill: &CatalogSkill, text: &str, base: &str, not_installable: Option<String>) -> String {
    let name = skill.skill.name().as_str();
    let (files, skipped) = match skill.files() {
        Ok((files, listed)) => (
            Ok(listed),
            files.listing.skipped().iter().map(|entry| (entry.path.clone(), entry.reason.to_string())).collect(),
        ),
        Err(error) => (Err(error.to_string()), Vec::new()),
    };
    let view = templates::SkillPage {
        skill,
        frontmatter: crate::spec::frontmatter_fields(text),
        body: markdown::render(crate::spec::body_after_frontmatter(text), name),
        files,
        skipped,
        not_installable,
        base,
    };
    let live = templates::Live::Skill { name, etag: skill.entry.etag.as_str() };
    let frame = templates::Frame { title: name, live, login };
    templates::skill(&frame, &view).into_string()
}

/// The pages' script: search as you type, live updates, copy buttons.
#[utoipa::path(get, path = "/ui/app.js", tag = "pages",
    responses((status = 200, description = "The script", body = String, content_type = "text/javascript; charset=utf-8")))]
async fn script() -> Response {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

/// The pages' style sheet.
#[utoipa::path(get, path = "/ui/style.css", tag = "pages",
    responses((status = 200, description = "The style sheet", body = String, content_type = "text/css; charset=utf-8")))]
async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

fn asset(text: &'static str, content_type: &'static str) -> Response {
    let mut response = text.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Pages kept by key, at most [`PageCache::CAPACITY`] of them: the keys come from requests (the
/// catalog's page numbers), so a client cannot make the cache grow without bound; past the bound
/// a page is made for its request alone.
#[derive(Debug)]
pub struct PageCache<K> {
    entries: Mutex<Vec<(K, Arc<PreparedBody>)>>,
}

impl<K> Default for PageCache<K> {
    fn default() -> Self {
        PageCache { entries: Mutex::new(Vec::new()) }
    }
}

impl<K: PartialEq> PageCache<K> {
    pub const CAPACITY: usize = 64;

    /// The page kept for `key`.
    pub fn get(&self, key: &K) -> Option<Arc<PreparedBody>> {
        let entries = self.entries.lock().expect("page cache");
        entries.iter().find(|(known, _)| known == key).map(|(_, page)| Arc::clone(page))
    }

    /// Prepares `page` (its tag, its gzip form) and keeps it for `key` while there is room;
    /// answers the page kept for `key` (when two requests made the same page at once, the first
    /// one's).
    pub fn insert(&self, key: K, page: Bytes) -> Arc<PreparedBody> {
        let etag = ETag::of(&[&page]);
        let page = PreparedBody::new(page.into(), etag);
        page.compress();
        let page = Arc::new(page);
        let mut entries = self.entries.lock().expect("page cache");
        if let Some((_, kept)) = entries.iter().find(|(known, _)| *known == key) {
            return Arc::clone(kept);
        }
        if entries.len() < Self::CAPACITY {
            entries.push((key, Arc::clone(&page)));
        }
        page
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_kept_up_to_the_bound() {
        let cache = PageCache::<usize>::default();
        for key in 0..PageCache::<usize>::CAPACITY + 10 {
            assert_eq!(cache.insert(key, Bytes::from(format!("{key}"))).bytes, format!("{key}"));
        }
        assert_eq!(cache.get(&0).unwrap().bytes, "0");
        let last = PageCache::<usize>::CAPACITY - 1;
        assert_eq!(cache.get(&last).unwrap().bytes, format!("{last}"));
        assert!(cache.get(&PageCache::<usize>::CAPACITY).is_none(), "past the bound nothing is kept");
        // The first page made for a key is the one answered, with its tag.
        let again = cache.insert(0, Bytes::from_static(b"again"));
        assert_eq!((again.bytes.as_ref(), &again.etag), (b"0".as_slice(), &ETag::of(&[b"0"])));
        // A page large enough is kept compressed too.
        assert!(cache.insert(1000, Bytes::from(vec![b'x'; 4096])).gzip().is_some());
    }
}
