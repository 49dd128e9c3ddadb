//! Live nagents for the comparisons that run it: a Python that imports `nagents.skills`.
//!
//! Where none is found, a comparison is skipped, and says so where it is seen: libtest keeps what
//! a passing test prints with `eprintln!` to itself, so the notice is written to the process's
//! stderr directly. With `SKILLCAT_REQUIRE_NAGENTS=1` (scripts/test sets it) a missing nagents
//! fails the test instead.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// `SKILLCAT_NAGENTS_PYTHON`, else the repository's `.venv/bin/python`, if it imports nagents;
/// otherwise `None` after a `skipped: <test>: ...` line.
pub fn python(test: &str) -> Option<PathBuf> {
    let candidate = std::env::var_os("SKILLCAT_NAGENTS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
    let works = Command::new(&candidate)
        .args(["-c", "import nagents.skills"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if works {
        return Some(candidate);
    }
    assert!(
        std::env::var_os("SKILLCAT_REQUIRE_NAGENTS").is_none_or(|value| value != "1"),
        "SKILLCAT_REQUIRE_NAGENTS=1 but {} cannot import nagents",
        candidate.display()
    );
    let _ = writeln!(
        std::io::stderr().lock(),
        "skipped: {test}: no Python with nagents at {} (scripts/setup-reference installs one; or set \
         SKILLCAT_NAGENTS_PYTHON)",
        candidate.display()
    );
    None
}
