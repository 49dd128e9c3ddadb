//! Conditional requests: every `If-None-Match` form that means "the client's copy is current",
//! and entity tags that hold a comma.

use super::{ALPHA, get, post_load, root_of, skill_etag, two_skills};
use crate::support::server::TestApp;

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

/// An entity tag is a quoted string, and a comma is one of the characters it may hold (RFC 9110
/// `etagc`): a list of tags is split between tags, never inside one.
#[tokio::test]
async fn a_comma_inside_an_entity_tag_does_not_split_it() {
    let dir = two_skills();
    let app = TestApp::spawn_dir(dir.path()).await;
    let alpha = skill_etag(&app, "alpha").await;
    let manifest = get(&app, "/manifest", &[]).await.header("etag").expect("ETag").to_owned();
    let catalog = app.catalog_etag().await;
    for (path, tag) in
        [("/skills", &catalog), ("/skills/alpha", &alpha), ("/skills/alpha/content", &alpha), ("/manifest", &manifest)]
    {
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
