//! Real git servers on loopback for the tests of git sources, and nagents over a checkout.
//!
//! - [`Repo`]: a working repository made with the `git` binary (fixed identity and dates, so that
//!   commit ids are deterministic) and the bare repository it pushes to, the one the servers serve.
//! - [`GitDaemon`]: `git daemon` serving `git://127.0.0.1:<port>/<name>` from a folder of bare
//!   repositories; killed on drop.
//! - [`HttpGit`]: smart HTTP, `git http-backend` behind a small CGI server run in this process; one
//!   repository may be private (HTTP Basic, any user, the token as password). Every request is
//!   recorded, so a test can tell whether the service fetched.
//! - [`expected_catalog`] and [`served_catalog`]: what nagents finds in checkouts of commits
//!   (`git archive`, extracted), with `<checkout>/` written `<url>#`, and the same view of what a
//!   server answers.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::process::ServeProcess;

/// How long a change the tests make may take to be served (a fetch after a hook, a retry).
pub const FETCH_DEADLINE: Duration = Duration::from_secs(15);

// ------------------------------------------------------------------------------------- git

/// `git` with a clean environment: no system or global configuration, a fixed identity, no
/// prompt.
pub fn git_command() -> Command {
    clean_environment(Command::new("git"))
}

fn clean_environment(mut command: Command) -> Command {
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()))
        .env("HOME", "/nonexistent")
        .env("LC_ALL", "C")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "Skillcat Tests")
        .env("GIT_AUTHOR_EMAIL", "tests@skillcat.invalid")
        .env("GIT_COMMITTER_NAME", "Skillcat Tests")
        .env("GIT_COMMITTER_EMAIL", "tests@skillcat.invalid");
    command
}

/// Runs `git -C dir args` and returns its standard output, trimmed; fails the test if git fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = git_command().arg("-C").arg(dir).args(args).output().expect("run git");
    assert!(
        output.status.success(),
        "git {args:?} in {}: {}\n{}",
        dir.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// A working repository at `work` and the bare repository `<base>/<name>` it pushes to.
pub struct Repo {
    pub work: PathBuf,
    pub bare: PathBuf,
    /// Commits made so far: each one's date is one second after the last.
    commits: u64,
}

impl Repo {
    /// `git init -b main` in `work` (which may hold files already) and an empty bare repository
    /// `<base>/<name>` whose HEAD is `main`.
    pub fn create(work: &Path, base: &Path, name: &str) -> Repo {
        std::fs::create_dir_all(work).expect("create the working tree");
        std::fs::create_dir_all(base).expect("create the base folder");
        git(work, &["init", "-q", "-b", "main"]);
        let bare = base.join(name);
        git(base, &["init", "-q", "--bare", "-b", "main", name]);
        Repo { work: work.to_owned(), bare, commits: 0 }
    }

    /// Commits everything in the working tree (an empty commit if nothing changed) with the next
    /// fixed date; returns the commit's id.
    pub fn commit(&mut self, message: &str) -> String {
        git(&self.work, &["add", "-A"]);
        self.commits += 1;
        let date = format!("@{} +0000", 1_700_000_000 + self.commits);
        let output = git_command()
            .arg("-C")
            .arg(&self.work)
            .args(["commit", "-q", "--allow-empty", "--no-verify", "--no-gpg-sign", "-m", message])
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date)
            .output()
            .expect("git commit");
        assert!(output.status.success(), "git commit: {}", String::from_utf8_lossy(&output.stderr));
        self.rev("HEAD")
    }

    /// Force-pushes the working repository's HEAD to `branch` of the bare repository.
    pub fn push(&self, branch: &str) {
        let bare = self.bare.to_str().expect("a UTF-8 path");
        git(&self.work, &["push", "-q", "--force", bare, &format!("HEAD:refs/heads/{branch}")]);
    }

    /// Commits and force-pushes to `main`; returns the commit's id.
    pub fn commit_and_push(&mut self, message: &str) -> String {
        let commit = self.commit(message);
        self.push("main");
        commit
    }

    /// An annotated tag `name` on `rev` in the bare repository (via the working one).
    pub fn tag(&mut self, name: &str, rev: &str) {
        self.commits += 1;
        let date = format!("@{} +0000", 1_700_000_000 + self.commits);
        let output = git_command()
            .arg("-C")
            .arg(&self.work)
            .args(["tag", "-f", "-a", "-m", name, name, rev])
            .env("GIT_COMMITTER_DATE", &date)
            .output()
            .expect("git tag");
        assert!(output.status.success(), "git tag: {}", String::from_utf8_lossy(&output.stderr));
        let bare = self.bare.to_str().expect("a UTF-8 path");
        git(&self.work, &["push", "-q", "--force", bare, &format!("refs/tags/{name}:refs/tags/{name}")]);
    }

    /// Deletes a ref (`refs/heads/x`, `refs/tags/v`) of the bare repository.
    pub fn delete_ref(&self, reference: &str) {
        git(&self.bare, &["update-ref", "-d", reference]);
    }

    /// The commit `rev` names in the working repository.
    pub fn rev(&self, rev: &str) -> String {
        git(&self.work, &["rev-parse", &format!("{rev}^{{commit}}")])
    }

    /// The commit a ref of the bare repository points at (what a server serves).
    pub fn served_rev(&self, reference: &str) -> String {
        git(&self.bare, &["rev-parse", &format!("{reference}^{{commit}}")])
    }

    /// The files of `rev` as `git archive` writes them, extracted into a fresh folder.
    pub fn checkout(&self, rev: &str) -> tempfile::TempDir {
        let into = tempfile::Builder::new().prefix("checkout").tempdir().expect("a checkout folder");
        let archive = git_command()
            .arg("-C")
            .arg(&self.work)
            .args(["archive", "--format=tar", rev])
            .output()
            .expect("git archive");
        assert!(archive.status.success(), "git archive: {}", String::from_utf8_lossy(&archive.stderr));
        let mut tar = Command::new("tar")
            .arg("-x")
            .arg("-C")
            .arg(into.path())
            .arg("-f")
            .arg("-")
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tar");
        tar.stdin.take().expect("stdin").write_all(&archive.stdout).expect("write the archive");
        let output = tar.wait_with_output().expect("tar");
        assert!(output.status.success(), "tar -x: {}", String::from_utf8_lossy(&output.stderr));
        into
    }

    /// Every blob of `rev`: path, mode (`100644`, `100755`, `120000`) and bytes.
    pub fn blobs(&self, rev: &str) -> Vec<(String, String, Vec<u8>)> {
        let listing = git(&self.work, &["ls-tree", "-r", "-z", "--full-tree", rev]);
        listing
            .split('\0')
            .filter(|line| !line.is_empty())
            .map(|line| {
                let (meta, path) = line.split_once('\t').expect("mode type id\\tpath");
                let mut parts = meta.split(' ');
                let mode = parts.next().expect("mode").to_owned();
                let _kind = parts.next();
                let id = parts.next().expect("id");
                let bytes = git_command()
                    .arg("-C")
                    .arg(&self.work)
                    .args(["cat-file", "blob", id])
                    .output()
                    .expect("git cat-file")
                    .stdout;
                (path.to_owned(), mode, bytes)
            })
            .collect()
    }
}

/// Copies the tree `from` into `to` (files, folders, symlinks as links, modes kept).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create a folder");
    for entry in std::fs::read_dir(from).expect("read a folder") {
        let entry = entry.expect("an entry");
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().expect("a file type");
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source).expect("readlink"), &target).expect("symlink");
        } else if kind.is_dir() {
            copy_tree(&source, &target);
        } else {
            std::fs::copy(&source, &target).expect("copy a file");
        }
    }
}

pub use super::files::write_file;

/// A port on 127.0.0.1 that was free a moment ago (nothing listens on it now).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("address").port()
}

// ------------------------------------------------------------------------------ git daemon

/// `git daemon` serving the bare repositories of a folder over git://; killed on drop.
pub struct GitDaemon {
    child: Child,
    pub port: u16,
}

impl GitDaemon {
    pub fn start(base: &Path) -> GitDaemon {
        Self::start_on(base, free_port())
    }

    /// Serves `base` on `port`; returns once it accepts connections (at most 10 s).
    pub fn start_on(base: &Path, port: u16) -> GitDaemon {
        // `git-daemon` itself: `git daemon` runs it as a child, which killing `git` leaves behind.
        let exec_path = git(Path::new("/"), &["--exec-path"]);
        let mut child = clean_environment(Command::new(Path::new(&exec_path).join("git-daemon")))
            .arg("--reuseaddr")
            .arg("--export-all")
            .arg("--informative-errors")
            .arg(format!("--base-path={}", base.display()))
            .arg("--listen=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg(base)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start git daemon");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait().expect("wait") {
                panic!("git daemon on port {port} exited: {status}");
            }
            assert!(Instant::now() < deadline, "git daemon does not accept connections on port {port}");
            std::thread::sleep(Duration::from_millis(10));
        }
        GitDaemon { child, port }
    }

    /// `git://127.0.0.1:<port>/<name>`.
    pub fn url(&self, name: &str) -> String {
        format!("git://127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ------------------------------------------------------------------------- smart HTTP (CGI)

/// A request the HTTP git server received, and how it answered.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    /// The user of a Basic `Authorization`, if one was sent.
    pub user: Option<String>,
    pub status: u16,
}

/// Smart HTTP: `git http-backend` for the bare repositories of a folder, behind a CGI server on
/// 127.0.0.1 run in a thread of this process; stopped on drop.
pub struct HttpGit {
    pub address: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A repository (`/<name>/...`) that only requests with the token as their Basic password reach.
#[derive(Clone)]
struct Private {
    name: String,
    token: String,
}

impl HttpGit {
    /// Serves `root`; the repository `private` (a name under `root`, if any) requires
    /// `Authorization: Basic base64(<any user>:<token>)`.
    pub fn start(root: &Path, private: Option<(&str, &str)>) -> HttpGit {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the HTTP git server");
        let address = listener.local_addr().expect("address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let private = private.map(|(name, token)| Private { name: name.to_owned(), token: token.to_owned() });
        let thread = {
            let (seen, stop, root) = (Arc::clone(&seen), Arc::clone(&stop), root.to_owned());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let (seen, root, private) = (Arc::clone(&seen), root.clone(), private.clone());
                    std::thread::spawn(move || handle(stream, &root, private.as_ref(), &seen));
                }
            })
        };
        HttpGit { address, seen, stop, thread: Some(thread) }
    }

    /// `http://127.0.0.1:<port>/<name>`.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/{name}", self.address)
    }

    /// Every request answered so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen").clone()
    }

    /// How many requests for the repository `name` were answered so far.
    pub fn requests_for(&self, name: &str) -> usize {
        let prefix = format!("/{name}/");
        self.seen().iter().filter(|seen| seen.path.starts_with(&prefix)).count()
    }
}

impl Drop for HttpGit {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect(self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads from a connection, with what was read beyond the head kept in front.
struct Incoming {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Incoming {
    /// Reads more bytes into the buffer; false at EOF.
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 16384];
        match self.stream.read(&mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(read) => {
                self.buffer.extend_from_slice(&chunk[..read]);
                true
            }
        }
    }

    fn take(&mut self, count: usize) -> Option<Vec<u8>> {
        while self.buffer.len() < count {
            if !self.fill() {
                return None;
            }
        }
        Some(self.buffer.drain(..count).collect())
    }

    fn line(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|window| window == b"\r\n") {
                let line = self.buffer.drain(..end + 2).take(end).collect();
                return Some(line);
            }
            if !self.fill() {
                return None;
            }
        }
    }

    /// A chunked body, decoded.
    fn chunked(&mut self) -> Option<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = self.line()?;
            let text = String::from_utf8_lossy(&line);
            let size = usize::from_str_radix(text.split(';').next()?.trim(), 16).ok()?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !self.line()?.is_empty() {}
                return Some(body);
            }
            body.extend(self.take(size)?);
            self.take(2)?;
        }
    }
}

/// Answers one request (then closes the connection), recorded in `seen` before it is answered.
fn handle(stream: TcpStream, root: &Path, private: Option<&Private>, seen: &Mutex<Vec<Seen>>) -> Option<()> {
    stream.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    let mut incoming = Incoming { stream, buffer: Vec::new() };
    let mut head = Vec::new();
    loop {
        let line = incoming.line()?;
        if line.is_empty() {
            break;
        }
        head.push(String::from_utf8_lossy(&line).into_owned());
        if head.len() > 200 {
            return None;
        }
    }
    let request_line = head.first()?.clone();
    let mut parts = request_line.split(' ');
    let (method, target) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let headers: Vec<(String, String)> = head[1..]
        .iter()
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let header = |name: &str| headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone());
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path.to_owned(), query.to_owned()),
        None => (target.clone(), String::new()),
    };
    let credentials = header("authorization").and_then(|value| {
        let encoded = value.strip_prefix("Basic ").or_else(|| value.strip_prefix("basic "))?;
        let decoded = String::from_utf8(base64_decode(encoded.trim())?).ok()?;
        let (user, password) = decoded.split_once(':')?;
        Some((user.to_owned(), password.to_owned()))
    });
    let user = credentials.as_ref().map(|(user, _)| user.clone());
    if header("expect").is_some_and(|value| value.eq_ignore_ascii_case("100-continue")) {
        incoming.stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").ok()?;
    }
    let body = if header("transfer-encoding").is_some_and(|value| value.to_ascii_lowercase().contains("chunked")) {
        incoming.chunked()?
    } else {
        let length = header("content-length").and_then(|value| value.parse().ok()).unwrap_or(0);
        incoming.take(length)?
    };
    let mut stream = incoming.stream;
    let refused = private.is_some_and(|private| {
        path.starts_with(&format!("/{}/", private.name))
            && credentials.as_ref().is_none_or(|(_, password)| *password != private.token)
    });
    let (status, response) = if refused {
        let body = b"authentication required\n";
        let mut response = format!(
            "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Type: text/plain\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        response.extend_from_slice(body);
        (401, response)
    } else {
        http_backend(root, &method, &path, &query, &headers, user.as_deref(), &body)
    };
    seen.lock().expect("seen").push(Seen { path, user, status });
    let _ = stream.write_all(&response);
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Some(())
}

/// Runs `git http-backend` for one request; returns the status and the whole HTTP response.
fn http_backend(
    root: &Path,
    method: &str,
    path: &str,
    query: &str,
    headers: &[(String, String)],
    user: Option<&str>,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mut command = git_command();
    command
        .arg("http-backend")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("SERVER_SOFTWARE", "skillcat-tests")
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("REQUEST_METHOD", method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_LENGTH", body.len().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(user) = user {
        command.env("REMOTE_USER", user);
    }
    for (name, value) in headers {
        match name.as_str() {
            "content-type" => {
                command.env("CONTENT_TYPE", value);
            }
            // The body is passed decoded from its transfer coding, with its length.
            "content-length" | "transfer-encoding" | "authorization" | "connection" | "expect" => {}
            other => {
                command.env(format!("HTTP_{}", other.to_ascii_uppercase().replace('-', "_")), value);
            }
        }
    }
    let mut child = command.spawn().expect("start git http-backend");
    let mut stdin = child.stdin.take().expect("stdin");
    let body = body.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let output = child.wait_with_output().expect("git http-backend");
    let _ = writer.join();
    let out = output.stdout;
    let (head_end, separator) = match (
        out.windows(4).position(|window| window == b"\r\n\r\n"),
        out.windows(2).position(|window| window == b"\n\n"),
    ) {
        (Some(crlf), Some(lf)) if lf < crlf => (lf, 2),
        (Some(crlf), _) => (crlf, 4),
        (None, Some(lf)) => (lf, 2),
        (None, None) => {
            let message = format!("git http-backend wrote no headers: {}", String::from_utf8_lossy(&output.stderr));
            let response = format!(
                "HTTP/1.1 500 Internal Server Error\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{message}",
                message.len()
            );
            return (500, response.into_bytes());
        }
    };
    let head = String::from_utf8_lossy(&out[..head_end]).into_owned();
    let content = &out[head_end + separator..];
    let mut status = 200u16;
    let mut reason = "OK".to_owned();
    let mut lines = Vec::new();
    for line in head.lines().map(|line| line.trim_end_matches('\r')).filter(|line| !line.is_empty()) {
        let Some((name, value)) = line.split_once(':') else { continue };
        if name.eq_ignore_ascii_case("status") {
            let value = value.trim();
            let (code, text) = value.split_once(' ').unwrap_or((value, ""));
            status = code.parse().unwrap_or(500);
            reason = text.to_owned();
        } else if !name.eq_ignore_ascii_case("content-length") && !name.eq_ignore_ascii_case("connection") {
            lines.push(format!("{}: {}", name.trim(), value.trim()));
        }
    }
    let mut response = format!("HTTP/1.1 {status} {reason}\r\n").into_bytes();
    for line in lines {
        response.extend_from_slice(line.as_bytes());
        response.extend_from_slice(b"\r\n");
    }
    response.extend_from_slice(format!("Content-Length: {}\r\nConnection: close\r\n\r\n", content.len()).as_bytes());
    response.extend_from_slice(content);
    (status, response)
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for byte in text.bytes().filter(|byte| *byte != b'=') {
        let value = ALPHABET.iter().position(|candidate| *candidate == byte)? as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

// ----------------------------------------------------------------------------- the service

/// The service binary: `skillcat serve --listen 127.0.0.1:0 <args>`, logging at info.
pub fn serve(args: &[String]) -> ServeProcess {
    let mut all = vec!["serve".to_owned(), "--listen".to_owned(), "127.0.0.1:0".to_owned()];
    all.extend(args.iter().cloned());
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    ServeProcess::start(&all, &[], "warn,skillcat=info")
}

/// `GET path` of a server: status and body as JSON (`Null` if not JSON).
pub async fn get_json(client: &reqwest::Client, server: &ServeProcess, path: &str) -> (u16, Value) {
    let response = client.get(server.url(path)).send().await.expect("GET");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Polls `GET /skills` (every 20 ms, at most `limit`) until its JSON body satisfies `check`;
/// returns it. On timeout fails with the last answer and the server's log.
pub async fn wait_catalog(
    client: &reqwest::Client,
    server: &ServeProcess,
    what: &str,
    limit: Duration,
    check: impl Fn(u16, &Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let (status, body) = get_json(client, server, "/skills").await;
        if check(status, &body) {
            return body;
        }
        if started.elapsed() > limit {
            let log = server.log();
            let tail = &log[log.len().saturating_sub(6000)..];
            panic!("{what}: not seen within {limit:?}; last answer {status} {body}\nserver log (end):\n{tail}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `GET /skills` answers 200 with `sources[index].commit == commit` for every pair.
pub async fn wait_commits(client: &reqwest::Client, server: &ServeProcess, commits: &[(usize, &str)]) -> Value {
    let what = format!("the commits {commits:?} served");
    wait_catalog(client, server, &what, FETCH_DEADLINE, |status, body| {
        status == 200 && commits.iter().all(|(index, commit)| body["sources"][*index]["commit"] == *commit)
    })
    .await
}

/// `POST /hooks/git` with `headers` and `body`: status and body (JSON or `Null`).
pub async fn hook(
    client: &reqwest::Client,
    server: &ServeProcess,
    headers: &[(&str, String)],
    body: &[u8],
) -> (u16, Value, Option<String>) {
    let mut request = client.post(server.url("/hooks/git")).body(body.to_vec());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.expect("POST /hooks/git");
    let status = response.status().as_u16();
    let content_type = response.headers().get("content-type").and_then(|value| value.to_str().ok()).map(str::to_owned);
    let text = response.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null), content_type)
}

/// A hook that fetches every git source: `Authorization: Bearer <secret>`, no body. Expects 202.
pub async fn hook_all(client: &reqwest::Client, server: &ServeProcess, secret: &str) -> Value {
    let (status, body, _) = hook(client, server, &[("authorization", format!("Bearer {secret}"))], b"").await;
    assert_eq!(status, 202, "POST /hooks/git with the bearer secret: {body}");
    body
}

/// `sha256=<hex HMAC-SHA256(secret, body)>`, GitHub's `X-Hub-Signature-256`.
pub fn github_signature(secret: &[u8], body: &[u8]) -> String {
    const BLOCK: usize = 64;
    let mut key = if secret.len() > BLOCK { Sha256::digest(secret).to_vec() } else { secret.to_vec() };
    key.resize(BLOCK, 0);
    let inner_key: Vec<u8> = key.iter().map(|byte| byte ^ 0x36).collect();
    let outer_key: Vec<u8> = key.iter().map(|byte| byte ^ 0x5c).collect();
    let inner = Sha256::new().chain_update(&inner_key).chain_update(body).finalize();
    let outer = Sha256::new().chain_update(&outer_key).chain_update(inner).finalize();
    format!("sha256={}", outer.iter().map(|byte| format!("{byte:02x}")).collect::<String>())
}

/// The value of a `/metrics` series (its full name and labels), if exported.
pub async fn metric(client: &reqwest::Client, server: &ServeProcess, series: &str) -> Option<f64> {
    let text = client.get(server.url("/metrics")).send().await.expect("GET /metrics").text().await.expect("text");
    text.lines()
        .find_map(|line| line.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
        .map(|value| value.trim().parse().expect("a number"))
}

// ------------------------------------------------------------------- nagents over a checkout

/// One source of a comparison: a path (`""`: the top) of one of the checkouts, its bounds, and
/// the label the service gives it.
pub struct Compared {
    pub checkout: usize,
    pub path: String,
    pub label: String,
    pub max_entries: Option<u64>,
    pub max_depth: Option<u64>,
}

impl Compared {
    pub fn new(checkout: usize, path: &str, label: &str) -> Compared {
        Compared { checkout, path: path.to_owned(), label: label.to_owned(), max_entries: None, max_depth: None }
    }
}

/// The tree at `dir` as entries of a conformance case (FORMAT.md), beneath `prefix`.
fn entries_of(dir: &Path, prefix: &[u8], out: &mut Vec<Value>) {
    let mut children: Vec<_> =
        std::fs::read_dir(dir).expect("read a checkout folder").map(|e| e.expect("entry")).collect();
    children.sort_by_key(|entry| entry.file_name());
    for child in children {
        let mut relative = prefix.to_vec();
        relative.push(b'/');
        relative.extend_from_slice(child.file_name().as_bytes());
        let mut entry = match std::str::from_utf8(&relative) {
            Ok(path) => json!({"path": path}),
            Err(_) => json!({"path_hex": hex(&relative)}),
        };
        let kind = child.file_type().expect("file type");
        if kind.is_symlink() {
            let target = std::fs::read_link(child.path()).expect("readlink").into_os_string();
            entry["symlink"] = json!(target.to_string_lossy());
            out.push(entry);
        } else if kind.is_dir() {
            entry["dir"] = json!(true);
            out.push(entry);
            entries_of(&child.path(), &relative, out);
        } else {
            let bytes = std::fs::read(child.path()).expect("read a checkout file");
            match String::from_utf8(bytes) {
                Ok(text) => entry["text"] = json!(text),
                Err(error) => entry["hex"] = json!(hex(error.as_bytes())),
            }
            out.push(entry);
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// One comparison to run: checkouts (each with the URL its locations are written under) and the
/// sources over them, in precedence order.
pub struct Expectation<'a> {
    pub checkouts: Vec<(&'a Path, String)>,
    pub sources: Vec<Compared>,
    pub token_limits: Vec<u64>,
}

impl Expectation<'_> {
    /// The conformance case nagents runs: checkout `i` beneath `repo<i>/`.
    fn case(&self) -> Value {
        let mut entries = Vec::new();
        for (index, (dir, _)) in self.checkouts.iter().enumerate() {
            let prefix = format!("repo{index}");
            entries.push(json!({"path": prefix, "dir": true}));
            entries_of(dir, prefix.as_bytes(), &mut entries);
        }
        let sources: Vec<Value> = self
            .sources
            .iter()
            .map(|source| {
                let root = if source.path.is_empty() {
                    format!("repo{}", source.checkout)
                } else {
                    format!("repo{}/{}", source.checkout, source.path)
                };
                let mut value = json!({"roots": [root]});
                if let Some(max_entries) = source.max_entries {
                    value["max_entries"] = json!(max_entries);
                }
                if let Some(max_depth) = source.max_depth {
                    value["max_depth"] = json!(max_depth);
                }
                value
            })
            .collect();
        json!({"entries": entries, "sources": sources, "token_limits": self.token_limits})
    }

    /// nagents' result for the case, in the shape of [`served_catalog`]: `$T/repo<i>/` written
    /// `<url>#`.
    fn expected(&self, result: &Value) -> Value {
        let mut replacements = Vec::new();
        for (index, (_, url)) in self.checkouts.iter().enumerate() {
            replacements.push((format!("$T/repo{index}/"), format!("{url}#")));
            replacements.push((format!("$T/repo{index}"), format!("{url}#")));
        }
        let result = rewrite(result.clone(), &replacements);
        assert!(result["composite"]["error"].is_null(), "nagents failed on the checkout: {}", result["composite"]);
        let per_source = result["sources"].as_array().expect("sources");
        let owner = |name: &Value| {
            per_source
                .iter()
                .position(|source| source["skills"].as_array().into_iter().flatten().any(|skill| skill[0] == *name))
                .map(|index| self.sources[index].label.clone())
        };
        let skills: Vec<Value> = result["composite"]["skills"]
            .as_array()
            .expect("skills")
            .iter()
            .map(|skill| {
                json!({"name": skill[0], "description": skill[1], "location": skill[2], "source": owner(&skill[0])})
            })
            .collect();
        let shadowed: Vec<Value> = result["composite"]["shadowed"]
            .as_array()
            .expect("shadowed")
            .iter()
            .map(|entry| {
                let index = entry[2].as_u64().expect("index") as usize;
                json!({"name": entry[0], "location": entry[1], "source": self.sources[index].label})
            })
            .collect();
        let diagnostics: Vec<Value> = per_source
            .iter()
            .zip(&self.sources)
            .flat_map(|(result, source)| {
                result["diagnostics"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|message| json!({"source": source.label, "message": message}))
            })
            .collect();
        let mut loads = result["loads"].as_array().cloned().unwrap_or_default();
        loads.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        json!({
            "skills": skills,
            "shadowed": shadowed,
            "diagnostics": diagnostics,
            "manifest": result["manifest"],
            "loads": loads,
        })
    }
}

fn rewrite(value: Value, replacements: &[(String, String)]) -> Value {
    match value {
        Value::String(mut text) => {
            for (from, to) in replacements {
                text = text.replace(from, to);
            }
            Value::String(text)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(|item| rewrite(item, replacements)).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(key, item)| (key, rewrite(item, replacements))).collect())
        }
        other => other,
    }
}

/// What nagents finds for each expectation (one run of the reference for them all).
pub fn expected_catalogs(python: &Path, expectations: &[Expectation<'_>]) -> Vec<Value> {
    let cases: Vec<Value> = expectations.iter().map(Expectation::case).collect();
    let results = crate::reference::run_reference(&python.to_owned(), "cases", &json!(cases));
    let results = results.as_array().expect("a list of results");
    assert_eq!(results.len(), expectations.len());
    expectations.iter().zip(results).map(|(expectation, result)| expectation.expected(result)).collect()
}

/// What nagents finds for one expectation.
pub fn expected_catalog(python: &Path, expectation: &Expectation<'_>) -> Value {
    expected_catalogs(python, std::slice::from_ref(expectation)).remove(0)
}

/// A server's catalog in the shape of [`expected_catalog`]: from `GET /skills` (the body given),
/// `GET /manifest`, and the loads of every skill at the default limit and at `token_limits`.
pub async fn served_catalog(
    client: &reqwest::Client,
    server: &ServeProcess,
    listing: &Value,
    token_limits: &[u64],
) -> Value {
    let skills: Vec<Value> = listing["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|skill| {
            let field = |key: &str| (key.to_owned(), skill[key].clone());
            Value::Object(["name", "description", "location", "source"].into_iter().map(field).collect())
        })
        .collect();
    let manifest = client.get(server.url("/manifest")).send().await.expect("GET /manifest").text().await.expect("text");
    let mut names: Vec<&str> = skills.iter().map(|skill| skill["name"].as_str().expect("name")).collect();
    names.sort_unstable();
    let mut limits = vec![u64::from(skillcat_core::DEFAULT_SKILL_TOKEN_LIMIT)];
    limits.extend_from_slice(token_limits);
    let mut loads = Vec::new();
    for name in names {
        for &limit in &limits {
            let response = client
                .post(server.url(&format!("/skills/{name}/load")))
                .json(&json!({"token_limit": limit}))
                .send()
                .await
                .expect("POST load");
            let result: Value = response.json().await.expect("a load");
            loads.push(json!({"name": name, "token_limit": limit, "result": result}));
        }
    }
    json!({
        "skills": skills,
        "shadowed": listing["shadowed"],
        "diagnostics": listing["diagnostics"],
        "manifest": manifest,
        "loads": loads,
    })
}

/// The differences between nagents' expectation and the served catalog, readable; empty if
/// they are equal.
pub fn differences(expected: &Value, served: &Value, at: &str) -> Vec<String> {
    let mut out = Vec::new();
    super::conformance::describe_difference(expected, served, at, &mut out);
    if out.is_empty() && expected != served {
        out.push(format!("{at}: differ (lengths):\n    nagents:  {expected}\n    skillcat: {served}"));
    }
    out
}

/// The labels a path of the filesystem gets as a `--git` URL: as given.
pub fn path_url(path: &Path) -> String {
    path.to_str().expect("a UTF-8 path").to_owned()
}

/// `file://<path>`.
pub fn file_url(path: &Path) -> String {
    format!("file://{}", path.to_str().expect("a UTF-8 path"))
}
