//! What a fresh clone shows a newcomer: the README's links within itself (its table of contents
//! among them) lead to its headings, the licenses `Cargo.toml` declares are there in full, and
//! the manifest names no repository that does not exist.

use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap_or_else(|_| panic!("{path}"))
}

/// A heading's anchor as GitHub makes it: lowercase, spaces as hyphens, punctuation but `-` and
/// `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|character| match character {
            ' ' => Some('-'),
            '-' | '_' => Some(character),
            _ if character.is_alphanumeric() => Some(character),
            _ => None,
        })
        .collect()
}

#[test]
fn the_readme_s_own_links_lead_to_its_headings() {
    let readme = read("README.md");
    let mut anchors = Vec::new();
    let mut in_code = false;
    for line in readme.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            anchors.push(anchor(line.trim_start_matches('#')));
        }
    }
    assert_eq!(anchor("Rust: `skillcat-client`"), "rust-skillcat-client");
    assert_eq!(anchor("Deploying, speed and more"), "deploying-speed-and-more");
    let contents = readme.lines().find(|line| line.starts_with("**Contents:**")).expect("a table of contents");
    assert!(readme.find(contents).unwrap() < 3000, "the table of contents is on the first screen");
    let mut links = 0;
    for (start, _) in readme.match_indices("](#") {
        let target = &readme[start + 3..];
        let target = &target[..target.find(')').expect("a closed link")];
        assert!(anchors.iter().any(|known| known == target), "no heading for #{target}");
        links += 1;
    }
    // Every top-level section is in the table of contents.
    for line in readme.lines().filter(|line| line.starts_with("## ")) {
        let target = format!("(#{})", anchor(&line[3..]));
        assert!(
            readme.split("**Contents:**").nth(1).unwrap().split("\n\n").next().unwrap().contains(&target),
            "{line}"
        );
    }
    assert!(links > 20, "{links} links");
}

#[test]
fn the_declared_licenses_are_in_the_repository_and_no_repository_is_invented() {
    let manifest = read("Cargo.toml");
    assert!(manifest.contains("license = \"MIT OR Apache-2.0\""), "the license this test checks");
    assert!(read("LICENSE-MIT").contains("Permission is hereby granted, free of charge"));
    let apache = read("LICENSE-APACHE");
    assert!(apache.contains("Apache License") && apache.contains("Version 2.0, January 2004"));
    assert!(apache.contains("END OF TERMS AND CONDITIONS"), "the whole text");
    assert!(!manifest.contains("repository"), "Cargo.toml names no repository that does not exist");
    assert!(read("CHANGELOG.md").contains("## [Unreleased]"));
}
