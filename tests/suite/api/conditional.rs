//! Conditional requests: every `If-None-Match` form that means "the client's copy is current".

use super::get;
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
