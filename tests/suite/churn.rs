//! The live catalog under churn, against live nagents: random sequences of changes (adds, edits,
//! renames, deletes, symlink flips, bursts of many changes at once) are made to a tree while a
//! server with its file watcher serves it; then the server's `/skills`, `/manifest` and budgeted
//! loads must equal nagents' answers for the final tree, and its whole `/skills` body (every
//! skill's tag, so every file's digest) and every file listing must equal those of a server
//! started fresh on that tree (a full walk). The first source's bounds are drawn small, so that
//! the entry or depth bound cuts the walk and a change early in walk order moves the bound for
//! everything after it. The server is run without the periodic rescan: only the rescans of the
//! changes the watcher named bring it there.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use skillcat::catalog::LiveOptions;

use crate::reference::run_reference;
use crate::support::churn::{Random, Tree};
use crate::support::conformance::{case_sources, describe_difference};
use crate::support::nagents;
use crate::support::server::TestApp;
use crate::support::tree::CaseRoot;

/// A skill entry of `GET /skills` as nagents' triple.
fn triple(entry: &Value) -> Value {
    json!([entry["name"], entry["description"], entry["location"]])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_random_churn_the_live_catalog_equals_nagents_and_a_full_walk() {
    let Some(python) = nagents::python("churn::after_random_churn_the_live_catalog_equals_nagents_and_a_full_walk")
    else {
        return;
    };
    let mut cases = Vec::new();
    let mut answers = Vec::new();
    let mut incremental = 0;
    for seed in 1..=10u64 {
        let mut random = Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let root = CaseRoot::new().expect("case root");
        let mut tree = Tree::new(Path::new(&root.root_path("")));
        tree.make_folders("r0");
        tree.make_folders("r1");
        for _ in 0..8 {
            tree.change(&mut random);
        }
        let first = json!({"roots": ["r0"], "max_entries": *random.pick(&[6u64, 11, 18, 10_000]), "max_depth": *random.pick(&[1u64, 2, 16])});
        let case_shape = json!({"entries": [], "sources": [first, {"roots": ["r1"]}], "token_limits": [3]});
        let sources = case_sources(&root, &case_shape);
        let live = TestApp::spawn_with(sources.clone(), |options| {
            options.live = LiveOptions { rescan_interval: None, watch: true };
        })
        .await;
        for _ in 0..6 {
            for _ in 0..=random.below(5) {
                tree.change(&mut random);
            }
            // Sometimes a pause, so that rescans run between the bursts and not only after.
            tokio::time::sleep(Duration::from_millis(*random.pick(&[0u64, 0, 3, 20]))).await;
        }
        let mut case = case_shape.clone();
        case["entries"] = json!(tree.entries());
        // The server settles on the final tree: wait until a full walk's answer is served, then
        // for quiet (no rescan for a while).
        let fresh = TestApp::spawn_with(sources, |options| {
            options.live = LiveOptions { rescan_interval: None, watch: false };
        })
        .await;
        let expected_body = fresh.skills().await.text().await.expect("body");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut body = String::new();
        while tokio::time::Instant::now() < deadline {
            body = live.skills().await.text().await.expect("body");
            if body == expected_body {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut answer = json!({"seed": seed});
        answer["body"] = json!(body);
        answer["fresh_body"] = json!(expected_body);
        let listed: Value = serde_json::from_str(&body).expect("a catalog");
        answer["skills"] = json!(listed["skills"].as_array().into_iter().flatten().map(triple).collect::<Vec<_>>());
        answer["shadowed"] = listed["shadowed"].clone();
        answer["diagnostics"] = listed["diagnostics"].clone();
        answer["manifest"] = json!(live.manifest().await.text().await.expect("manifest"));
        let mut loads = Vec::new();
        let mut files = Vec::new();
        for entry in listed["skills"].as_array().into_iter().flatten() {
            let name = entry["name"].as_str().expect("name");
            for limit in [10_000, 3] {
                let load: Value =
                    live.load(name, Some(json!({"token_limit": limit}))).await.json().await.expect("load");
                loads.push(json!({"name": name, "token_limit": limit, "result": load}));
            }
            let path = format!("/skills/{name}/files");
            let mine = live.get(&path).send().await.expect("files").text().await.expect("text");
            let theirs = fresh.get(&path).send().await.expect("files").text().await.expect("text");
            files.push((name.to_owned(), mine, theirs));
        }
        answer["loads"] = json!(loads);
        answer["files"] = json!(files);
        incremental += live.metric("skillcat_directory_scans_total{kind=\"incremental\"}").await;
        assert_eq!(live.metric("skillcat_rescan_disagreements_total").await, 0);
        cases.push(case);
        answers.push(root.relative(answer));
        live.shutdown().await.expect("clean shutdown");
        fresh.shutdown().await.expect("clean shutdown");
    }
    assert!(incremental >= 30, "the changes were rescanned from the picture ({incremental} rescans)");
    let reference = run_reference(&python, "cases", &json!(cases));
    let mut failures = Vec::new();
    let mut skills_seen = 0;
    let mut diagnostics_seen = 0;
    for (index, (answer, expected)) in answers.iter().zip(reference.as_array().expect("results")).enumerate() {
        let seed = &answer["seed"];
        let mut differences = Vec::new();
        let at = |what: &str| format!("seed {seed}: {what}");
        if answer["body"] != answer["fresh_body"] {
            differences.push(at("GET /skills differs from a full walk's"));
        }
        for (name, mine, theirs) in
            serde_json::from_value::<Vec<(String, String, String)>>(answer["files"].clone()).expect("file listings")
        {
            if mine != theirs {
                differences.push(at(&format!("the files of {name} differ from a full walk's")));
            }
        }
        assert!(expected["composite"]["error"].is_null(), "seed {seed}: nagents failed: {}", expected["composite"]);
        describe_difference(&expected["composite"]["skills"], &answer["skills"], &at("skills"), &mut differences);
        let shadowed: Vec<Value> = expected["composite"]["shadowed"]
            .as_array()
            .expect("shadowed")
            .iter()
            .map(|entry| json!({"name": entry[0], "location": entry[1], "source": format!("$T/r{}", entry[2])}))
            .collect();
        describe_difference(&json!(shadowed), &answer["shadowed"], &at("shadowed"), &mut differences);
        let diagnostics: Vec<Value> = expected["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .enumerate()
            .flat_map(|(source, result)| {
                result["diagnostics"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(move |message| json!({"source": format!("$T/r{source}"), "message": message}))
            })
            .collect();
        describe_difference(&json!(diagnostics), &answer["diagnostics"], &at("diagnostics"), &mut differences);
        describe_difference(&expected["manifest"], &answer["manifest"], &at("manifest"), &mut differences);
        describe_difference(&expected["loads"], &answer["loads"], &at("loads"), &mut differences);
        skills_seen += answer["skills"].as_array().map_or(0, Vec::len);
        diagnostics_seen += diagnostics.len();
        if !differences.is_empty() {
            failures.push(format!("case {index}:\n{}\n  case: {}", differences.join("\n"), cases[index]));
        }
    }
    eprintln!("churn: {skills_seen} skills, {diagnostics_seen} diagnostics, {incremental} rescans from the picture");
    assert!(skills_seen >= 30 && diagnostics_seen >= 5, "the churn exercises too little");
    assert!(failures.is_empty(), "{} case(s) differ:\n{}", failures.len(), failures.join("\n\n"));
}

/// Two sources over the same two roots, in the two orders: every skill of the second is shadowed
/// by the first, and a name under both roots is a duplicate inside each, so that many states of
/// the churn fail (nagents' `skill_catalog`) and the rescans after them must still see every
/// change since the last good one. After random churn the live catalog equals a fresh server's (a
/// full walk) — or, when the final tree itself fails, serves its last good catalog with that
/// failure. It never keeps a skill that is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_sources_after_churn_equal_a_full_walk() {
    let mut failures = Vec::new();
    let (mut good, mut failing) = (0, 0);
    for seed in 1..=16u64 {
        let mut random = Random(seed.wrapping_mul(0xd1b5_4a32_d192_ed03) | 1);
        let root = CaseRoot::new().expect("case root");
        let mut tree = Tree::new(Path::new(&root.root_path("")));
        tree.make_folders("r0");
        tree.make_folders("r1");
        for _ in 0..8 {
            tree.change(&mut random);
        }
        let case = json!({"sources": [{"roots": ["r0", "r1"]}, {"roots": ["r1", "r0"]}]});
        let sources = case_sources(&root, &case);
        let live = TestApp::spawn_with(sources.clone(), |options| {
            options.live = LiveOptions { rescan_interval: None, watch: true };
        })
        .await;
        for _ in 0..40 {
            tree.change(&mut random);
            tokio::time::sleep(Duration::from_millis(*random.pick(&[0u64, 0, 2, 10]))).await;
        }
        let fresh = TestApp::spawn_with(sources, |options| {
            options.live = LiveOptions { rescan_interval: None, watch: false };
        })
        .await;
        let expected = fresh.skills().await;
        let expected_status = expected.status().as_u16();
        let expected_body = expected.text().await.expect("body");
        let fails = expected_status != 200;
        let detail = if fails {
            let problem: Value = serde_json::from_str(&expected_body).expect("a problem");
            problem["detail"].as_str().expect("detail").to_owned()
        } else {
            String::new()
        };
        let settled = |body: &str| {
            if !fails {
                return body == expected_body;
            }
            // The last good catalog, carrying the failure; or no catalog at all yet.
            let listed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            let message = listed["error"]["message"].as_str().or(listed["detail"].as_str());
            message.is_some_and(|message| message.starts_with(&detail))
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut body = String::new();
        while tokio::time::Instant::now() < deadline {
            body = live.skills().await.text().await.expect("body");
            if settled(&body) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if fails {
            failing += 1;
        } else {
            good += 1;
        }
        if !settled(&body) {
            failures.push(format!(
                "seed {seed}: the live catalog is not a full walk's{}\n  live:  {body}\n  fresh: {expected_body}",
                if fails { " failure" } else { "" }
            ));
        }
        live.shutdown().await.expect("clean shutdown");
        fresh.shutdown().await.expect("clean shutdown");
    }
    eprintln!("overlapping churn: {good} final trees with a catalog, {failing} failing");
    assert!(good >= 4, "too few final trees give a catalog ({good})");
    assert!(failures.is_empty(), "{} of 16 differ:\n{}", failures.len(), failures.join("\n"));
}
