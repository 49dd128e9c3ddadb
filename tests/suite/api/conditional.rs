//! Conditional requests: every `If-None-Match` form that means "the client's copy is current",
//! entity tags that hold a comma, `If-Match` on every route with a tag, and the tags of the
//! identity and gzip representations.

use super::catalog::many_skills;
use super::{ALPHA, get, post_load, root_of, serve_two_skills, skill_etag};
use crate::support::server::TestApp;
use crate::support::skills::write_skill;

/// The conditional forms that must all mean "the client's copy is current".
pub(super) fn matching_forms(tag: &str) -> Vec<String> {
    vec![tag.to_owned(), format!("\"other\", {tag}"), format!("W/{tag}"), format!("\"a\",W/{tag} , \"b\""), "*".into()]
}

/// Checks 304 for every matching `If-None-Match` form and 200 for a tag that does not match.
pub(super) async fn assert_conditional_get(app: &TestApp, path: &str, tag: &str) {
    for form in matching_forms(tag) {
        let answer = get(app, path, &[("if-none-match", &form)]).await;
        assert_eq!(answer.status, 304, "GET {path} with If-None-Match: {form}");
        assert!(answer.body.is_empty(), "a 304 has no body");
        assert_eq!(answer.header("etag"), Some(tag), "a 304 repeats the tag");
    }
    for other in ["\"other\"", "W/\"other\"", "garbage", ""] {
        let answer = get(app, path, &[("if-none-match", other)]).await;
        assert_eq!(answer.status, 200, "GET {path} with If-None-Match: {other}");
    }
}

/// The current tags of the `two_skills` catalog, of `alpha` (its entry and its content) and of
/// the manifest.
struct CurrentTags {
    catalog: String,
    alpha: String,
    manifest: String,
}

impl CurrentTags {
    async fn of(app: &TestApp) -> CurrentTags {
        let alpha = skill_etag(app, "alpha").await;
        let manifest = get(app, "/manifest", &[]).await.header("etag").expect("ETag").to_owned();
        let catalog = app.catalog_etag().await;
        CurrentTags { catalog, alpha, manifest }
    }

    /// Every GET route with a tag, and its tag.
    fn by_route(&self) -> [(&'static str, &String); 4] {
        [
            ("/skills", &self.catalog),
            ("/skills/alpha", &self.alpha),
            ("/skills/alpha/content", &self.alpha),
            ("/manifest", &self.manifest),
        ]
    }
}

/// An entity tag is a quoted string, and a comma is one of the characters it may hold (RFC 9110
/// `etagc`): a list of tags is split between tags, never inside one.
#[tokio::test]
async fn a_comma_inside_an_entity_tag_does_not_split_it() {
    let (dir, app) = serve_two_skills().await;
    let tags = CurrentTags::of(&app).await;
    for (path, tag) in tags.by_route() {
        for form in [
            format!("\"a,b\", {tag}"),
            format!("\"a,b\",{tag}"),
            format!("W/\"a,b\", {tag}"),
            format!("\"x,y\" , {tag} , \"z,\""),
        ] {
            let answer = get(&app, path, &[("if-none-match", &form)]).await;
            assert_eq!(answer.status, 304, "GET {path} with If-None-Match: {form}");
            assert_eq!(answer.header("etag"), Some(tag.as_str()), "a 304 repeats the tag");
        }
        for form in ["\"a,b\"", "\"a,b\", \"c\""] {
            let answer = get(&app, path, &[("if-none-match", form)]).await;
            assert_eq!(answer.status, 200, "GET {path} with If-None-Match: {form}");
        }
    }

    let root = root_of(&dir);
    for form in ["\"a,b\"", "\"x,y\", \"z\""] {
        get(&app, "/skills/alpha/content", &[("if-match", form)]).await.problem(412, "precondition-failed");
        post_load(&app, "alpha", &[("if-match", form)], None).await.problem(412, "precondition-failed");
    }
    let alpha = &tags.alpha;
    for form in [format!("\"x,y\", {alpha}"), format!("{alpha}, \"x,y\""), format!("\"x,y\",{alpha}")] {
        let answer = get(&app, "/skills/alpha/content", &[("if-match", &form)]).await;
        assert_eq!((answer.status, answer.text()), (200, ALPHA), "content with If-Match: {form}");
        let answer = post_load(&app, "alpha", &[("if-match", &form)], None).await;
        assert_eq!(answer.status, 200, "load with If-Match: {form}: {answer:?}");
        assert_eq!(answer.json()["location"], format!("{root}/alpha/SKILL.md"));
        assert_eq!(answer.json()["content"], ALPHA);
    }
    app.shutdown().await.unwrap();
}

/// `If-Match` holds on every GET route with an entity tag: the current tag (or `*`) lets the
/// request through, any other (a weak one included: the comparison is strong) is a 412.
#[tokio::test]
async fn if_match_is_honoured_on_every_route_with_a_tag() {
    let (dir, app) = serve_two_skills().await;
    let tags = CurrentTags::of(&app).await;
    for (path, tag) in tags.by_route() {
        for form in [tag.clone(), "*".to_owned(), format!("\"other\", {tag}")] {
            let answer = get(&app, path, &[("if-match", &form)]).await;
            assert_eq!(answer.status, 200, "GET {path} with If-Match: {form}");
            assert_eq!(answer.header("etag"), Some(tag.as_str()));
        }
        for form in ["\"other\"".to_owned(), format!("W/{tag}"), "garbage".to_owned(), String::new()] {
            let answer = get(&app, path, &[("if-match", &form)]).await;
            answer.problem(412, "precondition-failed");
        }
        // If-Match is evaluated first: a failed one is a 412 even where If-None-Match would be a 304.
        get(&app, path, &[("if-match", "\"other\""), ("if-none-match", tag)]).await.problem(412, "precondition-failed");
        let answer = get(&app, path, &[("if-match", tag), ("if-none-match", tag)]).await;
        assert_eq!(answer.status, 304, "GET {path} with If-Match and If-None-Match: {tag}");
    }
    // A tag that was current is not after a change.
    write_skill(&dir.path().join("gamma"), "---\nname: gamma\ndescription: New\n---\n");
    app.wait_for_catalog(|catalog| catalog["skills"].as_array().is_some_and(|skills| skills.len() == 3)).await;
    get(&app, "/skills", &[("if-match", &tags.catalog)]).await.problem(412, "precondition-failed");
    get(&app, "/manifest", &[("if-match", &tags.manifest)]).await.problem(412, "precondition-failed");
    app.shutdown().await.unwrap();
}

/// The identity and gzip representations of a body have their own tags. A client revalidating
/// gets a 304 for a representation it holds and accepts, under that representation's tag; for
/// one it no longer accepts, the body it does accept. `If-Match` keeps the representations it
/// names.
#[tokio::test]
async fn each_representation_is_revalidated_under_its_own_tag() {
    let dir = many_skills(30);
    let app = TestApp::spawn_dir(dir.path()).await;
    for path in ["/skills", "/manifest"] {
        let identity = get(&app, path, &[]).await;
        let gzip = get(&app, path, &[("accept-encoding", "gzip")]).await;
        let (i, g) = (identity.header("etag").expect("ETag"), gzip.header("etag").expect("ETag"));
        assert_eq!(gzip.header("content-encoding"), Some("gzip"), "{path} is large enough to be compressed");
        assert_ne!(i, g);
        let (both, weak_g, other) = (format!("{i}, {g}"), format!("W/{g}"), "\"other\"");
        // Accept-Encoding, If-None-Match, If-Match (`""`: no such header); then the status, and
        // the tag of the representation answered (`i` or `g`; any for a 412).
        let rows: Vec<(&str, &str, &str, u16, &str)> = vec![
            // Revalidation, each representation and the cross cases.
            ("gzip", g, "", 304, g),
            ("gzip", i, "", 304, i),
            ("identity", i, "", 304, i),
            ("", i, "", 304, i),
            ("identity", g, "", 200, i),
            ("", g, "", 200, i),
            ("gzip;q=0, *", g, "", 200, i),
            ("gzip", &both, "", 304, g),
            ("identity", &both, "", 304, i),
            ("gzip", &weak_g, "", 304, g),
            ("gzip", "*", "", 304, g),
            ("identity", "*", "", 304, i),
            ("gzip", other, "", 200, g),
            ("identity", other, "", 200, i),
            // If-Match: a client holding one representation gets that one, if it accepts it.
            ("gzip", "", g, 200, g),
            ("gzip", "", i, 200, i),
            ("gzip", "", "*", 200, g),
            ("gzip", "", &both, 200, g),
            ("identity", "", i, 200, i),
            ("identity", "", g, 412, ""),
            ("gzip;q=0", "", g, 412, ""),
            ("gzip", "", &weak_g, 412, ""),
            ("gzip", "", other, 412, ""),
            // Both: If-Match chooses, then If-None-Match is asked of what it chose.
            ("gzip", i, i, 304, i),
            ("gzip", g, g, 304, g),
            ("gzip", i, g, 200, g),
            ("identity", i, other, 412, ""),
        ];
        for (encoding, none_match, if_match, status, tag) in rows {
            let mut headers = Vec::new();
            for (name, value) in [("accept-encoding", encoding), ("if-none-match", none_match), ("if-match", if_match)]
            {
                if !value.is_empty() {
                    headers.push((name, value));
                }
            }
            let answer = get(&app, path, &headers).await;
            let what = format!("GET {path} with {headers:?}");
            if status == 412 {
                answer.problem(412, "precondition-failed");
                continue;
            }
            assert_eq!(answer.status, status, "{what}");
            assert_eq!(answer.header("etag"), Some(tag), "{what}");
            assert_eq!(answer.header("vary"), Some("accept-encoding"), "{what}");
            if status == 200 {
                let expected = if tag == g { (&gzip.body, Some("gzip")) } else { (&identity.body, None) };
                assert_eq!((&answer.body, answer.header("content-encoding")), expected, "{what}");
            } else {
                assert!(answer.body.is_empty(), "{what}: a 304 has no body");
            }
        }
    }
    app.shutdown().await.unwrap();
}
