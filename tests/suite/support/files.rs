//! What the tests of a skill's files share: writing files, digests, and the paths that must
//! never reach outside a skill.

use std::net::SocketAddr;
use std::path::Path;

use sha2::{Digest as _, Sha256};

use super::http::raw_request;

/// What must never reach a client: the content of a file outside every skill.
pub const SECRET: &[u8] = b"the-secret-outside-the-skill";

/// Writes `bytes` at `path`, creating its folders.
pub fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("create the folder");
    std::fs::write(path, bytes).expect("write");
}

/// `sha256:<hex>` of `bytes`, as listings spell digests.
pub fn digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    format!("sha256:{}", hash.iter().map(|byte| format!("{byte:02x}")).collect::<String>())
}

/// Asks for paths beneath `prefix` (a route to the files of a skill with `SKILL.md`,
/// `scripts/run.sh`, a `references/` folder and a hidden `.git/config`, beside a `secret.txt`
/// holding [`SECRET`] one level up): only the listed files are served, every trick is a
/// problem, and no answer holds the secret.
pub async fn assert_paths_stay_inside(address: SocketAddr, prefix: &str) {
    let table: &[(&str, u16)] = &[
        ("SKILL.md", 200),
        ("scripts/run.sh", 200),
        ("scripts%2Frun.sh", 200),
        ("..%2Fsecret.txt", 404),
        ("../secret.txt", 404),
        ("%2e%2e/secret.txt", 404),
        ("%2e%2e%2fsecret.txt", 404),
        ("scripts/../SKILL.md", 404),
        ("./SKILL.md", 404),
        ("scripts//run.sh", 404),
        ("scripts/run.sh/", 404),
        ("scripts%5Crun.sh", 404),
        ("SKILL.md%00", 404),
        (".git/config", 404),
        ("%2egit/config", 404),
        ("references", 404),
        ("nothing.txt", 404),
        ("/etc/passwd", 404),
        ("%2Fetc%2Fpasswd", 404),
        ("%FF%FE", 400),
    ];
    for (path, expected) in table {
        let answer = raw_request(address, "GET", &format!("{prefix}/{path}"), &[], b"").await;
        assert_eq!(answer.status, *expected, "{path}: {answer:?}");
        assert!(!answer.body.windows(SECRET.len()).any(|window| window == SECRET), "{path}");
        if *expected != 200 {
            assert_eq!(answer.header("content-type"), Some("application/problem+json"), "{path}");
        }
    }
    let long = "a/".repeat(3000) + "b";
    assert_eq!(raw_request(address, "GET", &format!("{prefix}/{long}"), &[], b"").await.status, 404);
}

/// Writes `bytes` at `path` (creating its folders) with `mode`.
pub fn write_file(path: &Path, bytes: &[u8], mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("create the folder");
    std::fs::write(path, bytes).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}
