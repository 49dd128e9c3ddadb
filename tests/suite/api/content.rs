//! `GET /skills/{name}/content`: the whole file, guarded by the skill's tag, and what happens when
//! the file changed since the snapshot.

use super::conditional::matching_forms;
use super::{ALPHA, get, post_load, serve_two_skills, serve_two_skills_with, skill_etag};
use crate::support::http::Answer;
use crate::support::skills::write_skill;

#[tokio::test]
async fn content_is_the_whole_file_guarded_by_the_skill_etag() {
    let (_dir, app) = serve_two_skills().await;
    let tag = skill_etag(&app, "alpha").await;
    let answer = Answer::from(app.content("alpha").await).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("text/markdown; charset=utf-8"));
    assert_eq!(answer.header("etag"), Some(tag.as_str()));
    assert_eq!(answer.text(), ALPHA);
    for form in matching_forms(&tag) {
        let answer = get(&app, "/skills/alpha/content", &[("if-none-match", &form)]).await;
        assert_eq!(answer.status, 304, "If-None-Match: {form}");
        assert!(answer.body.is_empty());
        assert_eq!(answer.header("etag"), Some(tag.as_str()));
    }
    let passing = [tag.clone(), "*".to_owned(), format!("\"other\", {tag}")];
    for form in &passing {
        let answer = get(&app, "/skills/alpha/content", &[("if-match", form)]).await;
        assert_eq!(answer.status, 200, "If-Match: {form}");
        assert_eq!(answer.text(), ALPHA);
    }
    let beta = skill_etag(&app, "beta").await;
    // If-Match compares strongly: a weak tag never matches, even the current one.
    for form in [beta.as_str(), "\"other\"", &format!("W/{tag}"), "garbage"] {
        let problem =
            get(&app, "/skills/alpha/content", &[("if-match", form)]).await.problem(412, "precondition-failed");
        assert_eq!(problem["detail"], "the skill's current etag does not match If-Match");
    }
    get(&app, "/skills/gamma/content", &[]).await.problem(404, "skill-not-found");
    get(&app, "/skills/a.b/content", &[]).await.problem(400, "invalid-name");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_skill_that_changed_since_the_snapshot_is_409() {
    // Without the watcher the server only learns of a change when a request meets it.
    let (dir, app) = serve_two_skills_with(|options| options.live.watch = false).await;
    let old = skill_etag(&app, "alpha").await;
    let edited = ALPHA.replace("Do the alpha thing.", "Do the alpha thing differently.");
    write_skill(&dir.path().join("alpha"), &edited);
    let problem = get(&app, "/skills/alpha/content", &[]).await.problem(409, "skill-changed");
    assert_eq!(problem["detail"], "Skill 'alpha' changed; refresh discovery and retry");
    // The conflict asked for a rescan; the catalog then lists the new version.
    let body = app.wait_for_catalog(|body| body["skills"][0]["etag"] != old.as_str()).await;
    let new = body["skills"][0]["etag"].as_str().expect("etag").to_owned();
    let answer = get(&app, "/skills/alpha/content", &[("if-match", &new)]).await;
    assert_eq!((answer.status, answer.text()), (200, edited.as_str()));
    get(&app, "/skills/alpha/content", &[("if-match", &old)]).await.problem(412, "precondition-failed");

    std::fs::remove_dir_all(dir.path().join("beta")).expect("remove beta");
    post_load(&app, "beta", &[], None).await.problem(409, "skill-changed");
    app.wait_for_catalog(|body| body["skills"].as_array().is_some_and(|skills| skills.len() == 1)).await;
    post_load(&app, "beta", &[], None).await.problem(404, "skill-not-found");
    app.shutdown().await.unwrap();
}
