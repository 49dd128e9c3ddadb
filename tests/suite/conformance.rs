//! skillcat against nagents' recorded results on the fixtures of `tests/conformance/`.
//!
//! `expected.json` is written by `tests/conformance/nagents_reference.py record` from nagents
//! itself; a case where skillcat differs on purpose is listed in `deviations.json` with the reason
//! and skillcat's own expected result, and the test also checks that nagents really differs there.

use crate::support::conformance::{describe_difference, evaluate, read_json};

#[test]
fn fixtures_match_nagents() {
    let cases = read_json("cases.json");
    let expected = read_json("expected.json");
    let deviations = read_json("deviations.json");
    assert_eq!(expected["nagents"], "0.25.2", "expected.json must be recorded with nagents 0.25.2");
    let cases = cases["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), expected["cases"].as_object().expect("cases").len(), "expected.json is out of date");
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let recorded = &expected["cases"][name];
        assert!(!recorded.is_null(), "no recorded result for case {name}: rerun nagents_reference.py record");
        let actual = evaluate(case);
        let wanted = match deviations["cases"].get(name) {
            Some(deviation) => {
                assert_ne!(recorded, &deviation["skillcat"], "case {name} is listed as a deviation but nagents agrees");
                &deviation["skillcat"]
            }
            None => recorded,
        };
        let mut differences = Vec::new();
        describe_difference(wanted, &actual, name, &mut differences);
        if !differences.is_empty() {
            failures.push(differences.join("\n"));
        }
    }
    assert!(failures.is_empty(), "{} case(s) differ:\n{}", failures.len(), failures.join("\n\n"));
}

/// Prints skillcat's result for the cases named in `SKILLCAT_SHOW_CASES` (comma-separated), to
/// review before recording a deliberate deviation in `deviations.json`. A tool, not a check.
#[test]
#[ignore = "a review tool: SKILLCAT_SHOW_CASES=a,b cargo test --test suite show_cases -- --ignored --nocapture"]
fn show_cases() {
    let names = std::env::var("SKILLCAT_SHOW_CASES").expect("set SKILLCAT_SHOW_CASES to the cases to show");
    let cases = read_json("cases.json");
    for case in cases["cases"].as_array().expect("cases") {
        if names.split(',').any(|name| name == case["name"]) {
            println!("{}", serde_json::to_string_pretty(&evaluate(case)).expect("json"));
        }
    }
}
