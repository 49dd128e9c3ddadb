//! The OpenAPI document of every surface's routes (generated from their `#[utoipa::path]`s, checked
//! in as `openapi/openapi.json`), and the route that serves it.

use std::sync::{Arc, OnceLock};

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;
use crate::http::Problem;
use crate::http::auth::OPEN_ROUTES;

/// `/openapi.json`.
pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(openapi_json))
}

#[derive(OpenApi)]
#[openapi(
    info(title = "skillcat", description = "A skill catalog for LLM agents: catalog snapshots with ETags, a bounded prompt manifest, token-budgeted loads and change events. Errors are RFC 9457 problem details."),
    tags(
        (name = "skills", description = "The catalog and its skills"),
        (name = "files", description = "The files of a skill's folder, and its archive"),
        (name = "installers", description = "The well-known indexes installers read, of the skills whose names follow the agentskills.io rules"),
        (name = "catalog", description = "The manifest and change events"),
        (name = "operations", description = "Health, readiness, metrics and this document"),
        (name = "pages", description = "HTML pages for people: the catalog, a page per skill, the login; errors are HTML pages for browsers"),
    ),
    components(schemas(Problem))
)]
struct ApiDoc;

/// The OpenAPI document, as served at `/openapi.json` and checked in as `openapi/openapi.json`.
pub fn openapi_document() -> String {
    let (bounded, unbounded) = super::routers();
    let mut document = OpenApiRouter::<Arc<App>>::with_openapi(ApiDoc::openapi()).merge(bounded).into_openapi();
    document.merge(unbounded.merge(router()).into_openapi());
    // axum's catch-all segment (`{*path}`, which may hold slashes) is a plain parameter in
    // OpenAPI, where a path parameter's value may hold anything percent-encoded.
    let paths = std::mem::take(&mut document.paths.paths);
    document.paths.paths = paths.into_iter().map(|(path, item)| (path.replace("{*", "{"), item)).collect();
    // A load's body is optional (an empty body takes the default), which the path macro cannot
    // say without also allowing a JSON `null` body.
    let load = document.paths.paths.get_mut("/skills/{name}/load").and_then(|item| item.post.as_mut());
    if let Some(body) = load.and_then(|operation| operation.request_body.as_mut()) {
        body.required = Some(utoipa::openapi::Required::False);
    }
    declare_bearer_auth(&mut document);
    declare_host_requirement(&mut document);
    document.to_pretty_json().expect("the document serializes") + "\n"
}

/// Bearer authentication: the scheme and its 401 answer on every operation but the probes. It is
/// optional (`{}` or bearer), since only a server with a token file requires it.
fn declare_bearer_auth(document: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder, header::Header};

    let scheme = SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer));
    document.components.get_or_insert_with(Default::default).add_security_scheme("bearer", scheme);
    document.security =
        Some(vec![SecurityRequirement::default(), SecurityRequirement::new("bearer", Vec::<String>::new())]);
    let unauthorized = ResponseBuilder::new()
        .description("Missing or invalid bearer token (only when the server runs with --token-file)")
        .header(
            "WWW-Authenticate",
            Header::new(utoipa::openapi::ObjectBuilder::new().schema_type(utoipa::openapi::schema::Type::String)),
        )
        .content(
            "application/problem+json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build(),
        )
        .build();
    let throttled = ResponseBuilder::new()
        .description(
            "This client has too many answers to wrong tokens waiting (only when the server runs with \
             --token-file); Retry-After says when to try again",
        )
        .header(
            "Retry-After",
            Header::new(utoipa::openapi::ObjectBuilder::new().schema_type(utoipa::openapi::schema::Type::Integer)),
        )
        .content(
            "application/problem+json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build(),
        )
        .build();
    for (path, item) in &mut document.paths.paths {
        let open = OPEN_ROUTES.contains(&path.as_str());
        for operation in [&mut item.get, &mut item.post].into_iter().flatten() {
            if open {
                operation.security = Some(Vec::new());
            } else {
                operation.responses.responses.insert("401".to_owned(), unauthorized.clone().into());
                operation.responses.responses.entry("429".to_owned()).or_insert_with(|| throttled.clone().into());
            }
        }
    }
}

/// The 400 every operation gives a request whose `Host` header is missing, repeated or invalid
/// (`require_one_host`); an operation that documents a 400 already says so in its description.
fn declare_host_requirement(document: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};

    const WHY: &str = "a missing, repeated or invalid Host header";
    let bad_host = ResponseBuilder::new()
        .description(format!("Bad request: {WHY}"))
        .content(
            "application/problem+json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build(),
        )
        .build();
    for item in document.paths.paths.values_mut() {
        for operation in [&mut item.get, &mut item.post].into_iter().flatten() {
            match operation.responses.responses.get_mut("400") {
                Some(RefOr::T(response)) => response.description = format!("{}, or {WHY}", response.description),
                Some(RefOr::Ref(_)) => {}
                None => {
                    operation.responses.responses.insert("400".to_owned(), bad_host.clone().into());
                }
            }
        }
    }
}

/// This API's OpenAPI 3.1 description (the same document as `openapi/openapi.json`).
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json")))]
async fn openapi_json() -> Response {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    let document = DOCUMENT.get_or_init(openapi_document);
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], document.as_str()).into_response()
}
