//! Security properties of directory discovery (DESIGN.md, "Directory discovery (security-critical)"):
//! nothing beneath a root is ever followed through a symlink, neither during a scan nor during a
//! load; a FIFO never blocks; oversized files are refused without being read; and a load refuses a
//! file that is no longer the one discovered.
//!
//! Every fixture lives in its own temporary directory. Anything that could hang if a guarantee
//! broke (a FIFO, a sparse file, a racing swap) runs on a thread joined with a timeout.

use std::ffi::OsStr;
use std::fs;
use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rustix::fs::{FileType, Mode, OFlags, RenameFlags};
use skillcat_core::{DirectorySkillDiscoverer, Discovery, MAX_FILE_BYTES, Skill, SkillDiscoverer, SkillError};

/// In every outside file, so that content read through a followed symlink is recognizable.
const SECRET: &str = "SECRET-OUTSIDE";
/// How long anything that must not block may take.
const BOUND: Duration = Duration::from_secs(10);

/// A temporary directory, by its canonical path so that expected locations are exact strings.
struct Fixture {
    _tmp: tempfile::TempDir,
    base: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("temporary directory");
        let base = fs::canonicalize(tmp.path()).expect("canonical temporary directory");
        Fixture { _tmp: tmp, base }
    }

    fn path(&self, relative: impl AsRef<Path>) -> PathBuf {
        self.base.join(relative)
    }

    /// `base/relative` as the string discovery prints (the base is canonical and UTF-8).
    fn text(&self, relative: &str) -> String {
        let base = self.base.to_str().expect("UTF-8 temporary directory");
        if relative.is_empty() { base.to_owned() } else { format!("{base}/{relative}") }
    }

    fn dir(&self, relative: impl AsRef<Path>) -> PathBuf {
        let path = self.path(relative);
        fs::create_dir_all(&path).expect("create directory");
        path
    }

    fn file(&self, relative: impl AsRef<Path>, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(relative);
        fs::create_dir_all(path.parent().expect("parent")).expect("create parent");
        fs::write(&path, content).expect("write file");
        path
    }

    fn symlink(&self, relative: impl AsRef<Path>, target: impl AsRef<Path>) -> PathBuf {
        let path = self.path(relative);
        symlink(target, &path).expect("create symlink");
        path
    }

    fn fifo(&self, relative: impl AsRef<Path>) -> PathBuf {
        let path = self.path(relative);
        mkfifo(&path);
        path
    }
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(rustix::fs::CWD, path, FileType::Fifo, Mode::from_raw_mode(0o644), 0).expect("mkfifo");
}

fn discoverer(root: impl AsRef<OsStr>) -> DirectorySkillDiscoverer {
    DirectorySkillDiscoverer::new([root.as_ref()]).expect("discoverer")
}

/// Runs `work` on its own thread and fails the test if it does not finish within [`BOUND`].
fn within<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (sender, receiver) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = sender.send(work());
    });
    match receiver.recv_timeout(BOUND) {
        Ok(value) => {
            worker.join().expect("worker finished");
            value
        }
        Err(RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(worker.join().expect_err("a worker that sent nothing panicked"))
        }
        Err(RecvTimeoutError::Timeout) => panic!("{what} did not finish within {BOUND:?}: it blocked"),
    }
}

fn scan(discoverer: &DirectorySkillDiscoverer) -> Discovery {
    let discoverer = discoverer.clone();
    within("scan", move || discoverer.scan_blocking()).expect("scan succeeds")
}

fn load(discoverer: &DirectorySkillDiscoverer, skill: &Skill) -> Result<String, SkillError> {
    let (discoverer, skill) = (discoverer.clone(), skill.clone());
    within("load", move || discoverer.load_blocking(&skill))
}

/// The same load through the async trait, on a current-thread runtime.
fn load_async(discoverer: &DirectorySkillDiscoverer, skill: &Skill) -> Result<String, SkillError> {
    let (discoverer, skill) = (discoverer.clone(), skill.clone());
    within("async load", move || {
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        runtime.block_on(SkillDiscoverer::load(&discoverer, &skill))
    })
}

fn assert_stale(result: Result<String, SkillError>, what: &str) {
    match result {
        Err(error) if error.is_stale() => {
            assert!(!error.to_string().contains(SECRET), "{what}: the error shows outside content: {error}");
        }
        Err(error) => panic!("{what}: expected a stale error, got: {error}"),
        Ok(content) => panic!("{what}: expected a stale error, but the load returned {:?}", preview(&content)),
    }
}

fn preview(text: &str) -> &str {
    &text[..text.floor_char_boundary(200)]
}

fn names(discovery: &Discovery) -> Vec<&str> {
    discovery.skills.iter().map(|skill| skill.name().as_str()).collect()
}

fn skill<'a>(discovery: &'a Discovery, name: &str) -> &'a Skill {
    discovery
        .skills
        .iter()
        .find(|skill| skill.name().as_str() == name)
        .unwrap_or_else(|| panic!("no skill {name} in {:?}", names(discovery)))
}

/// Reads `relative` beneath `root` with one `O_NOFOLLOW` open per component: the file at a
/// location, reached without any symlink.
fn read_beneath(root: &Path, relative: &[u8]) -> std::io::Result<Vec<u8>> {
    let directory = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut folder: OwnedFd = rustix::fs::open(root, directory, Mode::empty())?;
    let parts: Vec<&[u8]> = relative.split(|&b| b == b'/').collect();
    let (file, folders) = parts.split_last().expect("a relative path");
    for part in folders {
        folder = rustix::fs::openat(&folder, *part, directory, Mode::empty())?;
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&folder, *file, flags, Mode::empty())?;
    let stat = rustix::fs::fstat(&fd)?;
    assert_eq!(FileType::from_raw_mode(stat.st_mode), FileType::RegularFile, "{}", String::from_utf8_lossy(relative));
    let mut content = Vec::new();
    fs::File::from(fd).read_to_end(&mut content)?;
    Ok(content)
}

fn inside(description: &str) -> String {
    format!("---\ndescription: {description}\n---\n# Inside\n\nThe inside body of {description}.\n")
}

/// The same metadata as `inside(description)`, with a secret body.
fn lookalike(description: &str) -> String {
    format!("---\ndescription: {description}\n---\n# Outside\n\n{SECRET} body.\n")
}

fn outside(description: &str) -> String {
    format!("---\ndescription: {SECRET} {description}\n---\n# Outside\n\n{SECRET} body.\n")
}

// 1. Symlinks swapped in between discovery and load.

/// A folder, a `SKILL.md`, an intermediate ancestor and a folder pointing elsewhere inside the root
/// are each replaced by a symlink to identical bytes after discovery: the metadata would match,
/// so only the refusal to follow a symlink can make the load fail.
#[test]
fn symlinks_swapped_in_after_discovery_are_never_loaded() {
    let fx = Fixture::new();
    let content = "---\ndescription: Swapped between discovery and load.\n---\nThe same bytes everywhere.\n";
    for relative in ["root/folder", "root/file", "root/a/b/deep", "root/rel", "root/rel-copy"] {
        fx.file(format!("{relative}/SKILL.md"), content);
    }
    for relative in ["out/folder", "out/file", "out/a/b/deep"] {
        fx.file(format!("{relative}/SKILL.md"), content);
    }
    let discoverer = discoverer(fx.path("root"));
    let discovery = scan(&discoverer);
    assert_eq!(names(&discovery), ["deep", "file", "folder", "rel", "rel-copy"]);
    for skill in &discovery.skills {
        assert_eq!(load(&discoverer, skill).expect("loads before the swap"), content);
    }

    // The folder itself, moved out of the root and replaced by a symlink to an identical folder.
    fs::rename(fx.path("root/folder"), fx.path("parked-folder")).unwrap();
    fx.symlink("root/folder", fx.path("out/folder"));
    // The file itself.
    fs::remove_file(fx.path("root/file/SKILL.md")).unwrap();
    fx.symlink("root/file/SKILL.md", fx.path("out/file/SKILL.md"));
    // An intermediate ancestor of root/a/b/deep.
    fs::rename(fx.path("root/a"), fx.path("parked-a")).unwrap();
    fx.symlink("root/a", fx.path("out/a"));
    // A relative symlink to an identical folder inside the root: still a symlink, still refused.
    fs::rename(fx.path("root/rel"), fx.path("parked-rel")).unwrap();
    fx.symlink("root/rel", "rel-copy");

    for name in ["folder", "file", "deep", "rel"] {
        let skill = skill(&discovery, name);
        assert_stale(load(&discoverer, skill), &format!("load_blocking of {name} after the swap"));
        assert_stale(load_async(&discoverer, skill), &format!("async load of {name} after the swap"));
    }
    // What was not swapped still loads.
    assert_eq!(load(&discoverer, skill(&discovery, "rel-copy")).unwrap(), content);

    // A fresh scan does not follow the swapped-in symlinks either.
    let rescan = scan(&discoverer);
    assert_eq!(names(&rescan), ["rel-copy"], "diagnostics: {:?}", rescan.diagnostics);
}

// 2. Racing swaps.

/// Swaps real skill folders, `SKILL.md` files and intermediate folders with symlinks to an outside
/// tree (and a `SKILL.md` with a FIFO) as fast as possible, with atomic `RENAME_EXCHANGE`, while
/// scanning and loading: nothing discovered or loaded may ever come from outside the root.
#[test]
fn racing_symlink_swaps_never_leak_outside_content() {
    let fx = Fixture::new();
    let root = fx.dir("root");
    let root_prefix = format!("{}/", fx.text("root"));
    let folders = [
        ("sw", "root/sw"),
        ("sv", "root/sv"),
        ("f", "root/f"),
        ("g", "root/g"),
        ("p", "root/p"),
        ("deep", "root/m/deep"),
        ("deeper", "root/n/deeper"),
        ("still", "root/still"),
    ];
    for (name, folder) in folders {
        fx.file(format!("{folder}/SKILL.md"), inside(&format!("INSIDE {name}")));
    }
    // Outside look-alikes with the same metadata (a load that followed would succeed and return
    // the secret body) and outside files with their own metadata (a scan that followed would
    // publish the secret description).
    fx.file("out/sw/SKILL.md", lookalike("INSIDE sw"));
    fx.file("out/sv/SKILL.md", outside("sv"));
    fx.file("out/f/SKILL.md", lookalike("INSIDE f"));
    fx.file("out/g/SKILL.md", outside("g"));
    fx.file("out/m/deep/SKILL.md", lookalike("INSIDE deep"));
    fx.file("out/n/deeper/SKILL.md", outside("deeper"));
    // The counterparts wait outside the root, so that whatever is parked is never discovered.
    fx.dir("park");
    fx.symlink("park/sw", fx.path("out/sw"));
    fx.symlink("park/sv", fx.path("out/sv"));
    fx.symlink("park/f-SKILL.md", fx.path("out/f/SKILL.md"));
    fx.symlink("park/g-SKILL.md", fx.path("out/g/SKILL.md"));
    fx.fifo("park/p-SKILL.md");
    fx.symlink("park/m", fx.path("out/m"));
    fx.symlink("park/n", fx.path("out/n"));
    let pairs: Vec<(PathBuf, PathBuf)> = [
        ("root/sw", "park/sw"),
        ("root/sv", "park/sv"),
        ("root/f/SKILL.md", "park/f-SKILL.md"),
        ("root/g/SKILL.md", "park/g-SKILL.md"),
        ("root/p/SKILL.md", "park/p-SKILL.md"),
        ("root/m", "park/m"),
        ("root/n", "park/n"),
    ]
    .iter()
    .map(|(a, b)| (fx.path(a), fx.path(b)))
    .collect();

    let done = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicUsize::new(0));
    let swapper = {
        let (done, swaps) = (Arc::clone(&done), Arc::clone(&swaps));
        let scratch = fx.path("park/scratch");
        std::thread::spawn(move || {
            // Ends the scanning loop even if this thread panics.
            let _done = SetOnDrop(done);
            let deadline = Instant::now() + Duration::from_millis(1500);
            let mut atomic = true;
            while Instant::now() < deadline && swaps.load(Ordering::Relaxed) < 400_000 {
                for (a, b) in &pairs {
                    if atomic {
                        match rustix::fs::renameat_with(rustix::fs::CWD, a, rustix::fs::CWD, b, RenameFlags::EXCHANGE) {
                            Ok(()) => {}
                            // A file system without RENAME_EXCHANGE: three renames, a window
                            // where the entry is missing, otherwise the same swap.
                            Err(rustix::io::Errno::INVAL) if swaps.load(Ordering::Relaxed) == 0 => atomic = false,
                            Err(error) => panic!("RENAME_EXCHANGE {a:?} {b:?}: {error}"),
                        }
                    }
                    if !atomic {
                        fs::rename(a, &scratch).expect("rename to scratch");
                        fs::rename(b, a).expect("rename into place");
                        fs::rename(&scratch, b).expect("rename from scratch");
                    }
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };

    let discoverer = discoverer(&root);
    let stats = {
        let done = Arc::clone(&done);
        within("scanning and loading during swaps", move || {
            let (mut scans, mut loaded, mut stale) = (0usize, 0usize, 0usize);
            while !done.load(Ordering::Acquire) {
                let discovery = discoverer.scan_blocking().expect("scan succeeds");
                scans += 1;
                for skill in &discovery.skills {
                    let name = skill.name().as_str();
                    assert!(skill.location().starts_with(&root_prefix), "location outside the root: {skill:?}");
                    assert!(!skill.location().contains("/park/") && !skill.location().contains("/out/"), "{skill:?}");
                    assert_eq!(skill.description(), format!("INSIDE {name}"), "discovered outside content: {skill:?}");
                    match discoverer.load_blocking(skill) {
                        Ok(content) => {
                            assert!(!content.contains(SECRET), "loaded outside content for {name}: {content:?}");
                            assert_eq!(content, inside(&format!("INSIDE {name}")));
                            loaded += 1;
                        }
                        Err(error) if error.is_stale() => stale += 1,
                        Err(error) => panic!("load of {name} failed with a non-stale error: {error}"),
                    }
                }
                for diagnostic in &discovery.diagnostics {
                    assert!(!diagnostic.contains(SECRET), "diagnostic shows outside content: {diagnostic}");
                }
            }
            (scans, loaded, stale)
        })
    };
    swapper.join().expect("swapper");
    let (scans, loaded, stale) = stats;
    assert!(scans > 0 && loaded > 0, "scans {scans}, loads {loaded}");
    assert!(swaps.load(Ordering::Relaxed) > 0);
    eprintln!("race: {} swaps, {scans} scans, {loaded} loads, {stale} stale", swaps.load(Ordering::Relaxed));
}

/// Sets the flag when dropped, also while unwinding.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

// 3. FIFOs.

/// A FIFO named `SKILL.md` (directly, or behind a symlink) is neither opened nor discovered.
#[test]
fn a_fifo_named_skill_md_does_not_block_discovery() {
    let fx = Fixture::new();
    fx.file("root/ok/SKILL.md", inside("ok"));
    fx.dir("root/pipe");
    fx.fifo("root/pipe/SKILL.md");
    fx.fifo("outside-fifo");
    fx.dir("root/linked");
    fx.symlink("root/linked/SKILL.md", fx.path("outside-fifo"));
    let discoverer = discoverer(fx.path("root"));
    let discovery = scan(&discoverer);
    assert_eq!(names(&discovery), ["ok"], "diagnostics: {:?}", discovery.diagnostics);
}

/// A FIFO swapped in for a discovered `SKILL.md`, or for its folder, makes the load stale at once.
#[test]
fn a_fifo_swapped_in_after_discovery_makes_load_stale_without_blocking() {
    let fx = Fixture::new();
    fx.file("root/file/SKILL.md", inside("file"));
    fx.file("root/folder/SKILL.md", inside("folder"));
    let discoverer = discoverer(fx.path("root"));
    let discovery = scan(&discoverer);
    assert_eq!(names(&discovery), ["file", "folder"]);

    fs::remove_file(fx.path("root/file/SKILL.md")).unwrap();
    fx.fifo("root/file/SKILL.md");
    fs::rename(fx.path("root/folder"), fx.path("parked-folder")).unwrap();
    fx.fifo("root/folder");

    assert_stale(load(&discoverer, skill(&discovery, "file")), "load of a SKILL.md swapped for a FIFO");
    assert_stale(load(&discoverer, skill(&discovery, "folder")), "load of a folder swapped for a FIFO");
    assert_eq!(names(&scan(&discoverer)), Vec::<&str>::new());
}

// 4. Special names and path tricks.

/// Folder names that look like path syntax, or contain whitespace, newlines and backslashes, or
/// are as long as a name can be, are plain names: each skill is discovered at exactly its folder
/// and loads exactly its own bytes.
#[test]
fn special_folder_names_are_plain_names() {
    let fx = Fixture::new();
    let root = fx.dir("root");
    let long = "n".repeat(255);
    let folders: Vec<&[u8]> = vec![
        b"...",
        b"..a",
        b"a..",
        b". .",
        b" spaces inside and around ",
        b"new\nline",
        b"back\\slash",
        b"..\\..",
        b"%2e%2e%2f",
        b"-",
        b"SKILL.md",
        "caf\u{e9}-\u{1f600}".as_bytes(),
        long.as_bytes(),
    ];
    let content =
        |index: usize| format!("---\nname: n{index}\ndescription: Special name {index}.\n---\nBody {index}.\n");
    let mut expected = Vec::new();
    for (index, folder) in folders.iter().enumerate() {
        let path = root.join(OsStr::from_bytes(folder));
        fs::create_dir(&path).unwrap();
        fs::write(path.join("SKILL.md"), content(index)).unwrap();
        let folder = std::str::from_utf8(folder).unwrap();
        expected.push((format!("{}/{folder}/SKILL.md", fx.text("root")), content(index)));
    }
    let discoverer = discoverer(&root);
    let discovery = scan(&discoverer);
    assert!(discovery.diagnostics.is_empty(), "{:?}", discovery.diagnostics);
    assert_eq!(discovery.skills.len(), expected.len(), "{:?}", names(&discovery));
    for skill in &discovery.skills {
        let (location, content) = expected
            .iter()
            .find(|(location, _)| location == skill.location())
            .unwrap_or_else(|| panic!("unexpected location {:?}", skill.location()));
        assert_eq!(skill.description(), content.lines().nth(2).unwrap().strip_prefix("description: ").unwrap());
        assert_eq!(&load(&discoverer, skill).expect("loads"), content, "{location:?}");
    }
}

/// Roots are made absolute lexically: `root/../root/./` is `root`, and `link/../root` is the
/// sibling `root` even when `link` points somewhere else entirely.
#[test]
fn roots_resolve_lexically() {
    let fx = Fixture::new();
    fx.file("root/x/SKILL.md", inside("lexical"));
    fx.file("far/root/x/SKILL.md", outside("physical"));
    fx.dir("far/deep");
    fx.symlink("link", fx.path("far/deep"));

    let dotted = discoverer(format!("{}/root/../root/./", fx.text("")));
    assert_eq!(dotted.roots()[0].display(), fx.text("root"));
    let discovery = scan(&dotted);
    assert_eq!(discovery.skills.len(), 1, "{discovery:?}");
    assert_eq!(discovery.skills[0].location(), format!("{}/x/SKILL.md", fx.text("root")));
    assert_eq!(load(&dotted, &discovery.skills[0]).unwrap(), inside("lexical"));

    let through_link = discoverer(format!("{}/link/../root", fx.text("")));
    assert_eq!(through_link.roots()[0].display(), fx.text("root"));
    let discovery = scan(&through_link);
    assert_eq!(discovery.skills.len(), 1, "{discovery:?}");
    assert_eq!(discovery.skills[0].description(), "lexical");
    assert_eq!(discovery.skills[0].location(), format!("{}/x/SKILL.md", fx.text("root")));
}

/// The root may be a symlink (or pass through one); symlinks beneath it (to `/`, to the root, to
/// parents, to themselves, to an outside file, to a device) are never followed, so the scan ends
/// quickly with exactly the one real skill.
#[test]
fn a_symlinked_root_works_but_nothing_beneath_it_is_followed() {
    let fx = Fixture::new();
    fx.file("real/a/SKILL.md", inside("real"));
    fx.file("out/SKILL.md", outside("file"));
    fx.file("out/sub/SKILL.md", outside("sub"));
    fx.symlink("rootlink", fx.path("real"));
    fx.symlink("real/slash", "/");
    fx.symlink("real/root-absolute", fx.path("real"));
    fx.symlink("real/root-via-link", "../rootlink");
    fx.symlink("real/up", "..");
    fx.symlink("real/dot", ".");
    fx.symlink("real/loop1", "loop2");
    fx.symlink("real/loop2", "loop1");
    fx.symlink("real/dangling", "no-such-entry");
    fx.symlink("real/out", fx.path("out"));
    fx.symlink("real/a/inner-up", "../..");
    fx.dir("real/file-link");
    fx.symlink("real/file-link/SKILL.md", fx.path("out/SKILL.md"));
    fx.dir("real/device");
    fx.symlink("real/device/SKILL.md", "/dev/zero");
    fx.symlink("SKILL.md", fx.path("out/SKILL.md"));

    let discoverer = discoverer(fx.path("rootlink"));
    let discovery = scan(&discoverer);
    assert_eq!(names(&discovery), ["a"], "{discovery:?}");
    assert_eq!(discovery.skills[0].location(), format!("{}/a/SKILL.md", fx.text("rootlink")));
    assert_eq!(load(&discoverer, &discovery.skills[0]).unwrap(), inside("real"));

    // A root that passes through a symlink.
    let nested = self::discoverer(fx.path("rootlink/a"));
    let discovery = scan(&nested);
    assert_eq!(names(&discovery), ["a"], "{discovery:?}");
    assert_eq!(discovery.skills[0].location(), format!("{}/a/SKILL.md", fx.text("rootlink")));
    assert_eq!(load(&nested, &discovery.skills[0]).unwrap(), inside("real"));
}

// 5. and 6. Sizes.

const TOO_LARGE: &str = "SKILL.md exceeds 4000000 bytes";

/// Bytes this process has read with `read(2)` and the like, from `/proc/self/io` when available.
fn bytes_read() -> Option<u64> {
    let io = fs::read_to_string("/proc/self/io").ok()?;
    io.lines().find_map(|line| line.strip_prefix("rchar:")).and_then(|value| value.trim().parse().ok())
}

/// `len` bytes of valid UTF-8 that parse to the given description.
fn sized(description: &str, len: usize) -> Vec<u8> {
    let mut content = inside(description).into_bytes();
    assert!(content.len() <= len);
    content.resize(len, b'x');
    content
}

/// A file of exactly 4,000,000 bytes is read; one byte more, or a sparse gigabyte, is skipped with
/// nagents' diagnostic, and the gigabyte is not read: the scan stays within the time bound and
/// the process's `rchar` grows by far less than a gigabyte.
#[test]
fn oversized_files_are_skipped_with_a_diagnostic() {
    assert_eq!(MAX_FILE_BYTES, 4_000_000);
    let fx = Fixture::new();
    fx.file("root/exact/SKILL.md", sized("exact", MAX_FILE_BYTES));
    fx.file("root/over/SKILL.md", sized("over", MAX_FILE_BYTES + 1));
    let sparse = fx.file("root/sparse/SKILL.md", inside("sparse"));
    fs::OpenOptions::new().write(true).open(&sparse).unwrap().set_len(1 << 30).unwrap();

    let discoverer = discoverer(fx.path("root"));
    let (started, read_before) = (Instant::now(), bytes_read());
    let discovery = scan(&discoverer);
    let read = bytes_read().zip(read_before).map(|(after, before)| after - before);
    eprintln!("scan with a sparse 1 GiB SKILL.md took {:?} and read {read:?} bytes", started.elapsed());
    // The whole test process (other tests run concurrently) read far less than the gigabyte.
    if let Some(read) = read {
        assert!(read < 768 << 20, "the scan read {read} bytes: the sparse gigabyte was read");
    }
    assert_eq!(names(&discovery), ["exact"]);
    assert_eq!(
        discovery.diagnostics,
        [
            format!("{}/over/SKILL.md: {TOO_LARGE}", fx.text("root")),
            format!("{}/sparse/SKILL.md: {TOO_LARGE}", fx.text("root")),
        ]
    );
    let content = load(&discoverer, &discovery.skills[0]).expect("a file of exactly the limit loads");
    assert_eq!(content.len(), MAX_FILE_BYTES);
}

/// A file that grows after discovery still loads up to the limit, and is stale one byte beyond it.
#[test]
fn a_file_grown_past_the_limit_after_discovery_is_stale() {
    let fx = Fixture::new();
    let path = fx.file("root/grows/SKILL.md", inside("grows"));
    let discoverer = discoverer(fx.path("root"));
    let discovery = scan(&discoverer);
    let grows = skill(&discovery, "grows");
    assert_eq!(load(&discoverer, grows).unwrap(), inside("grows"));

    let mut file = fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(&vec![b'x'; MAX_FILE_BYTES - inside("grows").len()]).unwrap();
    assert_eq!(load(&discoverer, grows).expect("same metadata, at the limit").len(), MAX_FILE_BYTES);
    file.write_all(b"x").unwrap();
    assert_stale(load(&discoverer, grows), "load of a file grown past the limit");
    // A sparse hole far past the limit: stale as quickly.
    file.set_len(1 << 30).unwrap();
    assert_stale(load(&discoverer, grows), "load of a file grown to a sparse gigabyte");
}

// 7. Never escapes the root, on random trees.

const NAMES: [&str; 3] = ["a", "b", "SKILL.md"];

#[derive(Debug, Clone, Copy)]
enum Target {
    OutsideDir,
    OutsideFile,
    Slash,
    Parent,
    GrandParent,
    FarUp,
    Dot,
    RootAbsolute,
    Sibling,
    Dangling,
    ProcRoot,
}

#[derive(Debug, Clone, Copy)]
enum Node {
    /// A directory at the path.
    Dir,
    /// A regular `SKILL.md` in the directory at the path.
    Skill,
    /// A FIFO `SKILL.md` in the directory at the path.
    Fifo,
    /// A symlink at the path.
    Link(Target),
}

fn target_strategy() -> impl Strategy<Value = Target> {
    prop_oneof![
        Just(Target::OutsideDir),
        Just(Target::OutsideFile),
        Just(Target::Slash),
        Just(Target::Parent),
        Just(Target::GrandParent),
        Just(Target::FarUp),
        Just(Target::Dot),
        Just(Target::RootAbsolute),
        Just(Target::Sibling),
        Just(Target::Dangling),
        Just(Target::ProcRoot),
    ]
}

fn entry_strategy() -> impl Strategy<Value = (Vec<usize>, Node)> {
    let node = prop_oneof![
        2 => Just(Node::Dir),
        3 => Just(Node::Skill),
        1 => Just(Node::Fifo),
        4 => target_strategy().prop_map(Node::Link),
    ];
    (prop::collection::vec(0..NAMES.len(), 0..4), node)
}

/// Creates the directories of `components` under `root`, refusing to go through anything that is
/// not a real directory; the resulting path, or `None` when something else is in the way.
fn real_dirs(root: &Path, components: &[usize]) -> Option<PathBuf> {
    let mut path = root.to_path_buf();
    for &component in components {
        path.push(NAMES[component]);
        match fs::symlink_metadata(&path) {
            Ok(metadata) if metadata.file_type().is_dir() => {}
            Ok(_) => return None,
            Err(_) => fs::create_dir(&path).ok()?,
        }
    }
    Some(path)
}

/// Builds `entries` under `root`; entries that conflict with earlier ones are skipped.
fn build_tree(fx: &Fixture, root: &Path, entries: &[(Vec<usize>, Node)]) {
    for (index, (components, node)) in entries.iter().enumerate() {
        match node {
            Node::Dir => {
                real_dirs(root, components);
            }
            Node::Skill | Node::Fifo => {
                let Some(folder) = real_dirs(root, components) else { continue };
                let path = folder.join("SKILL.md");
                if fs::symlink_metadata(&path).is_ok() {
                    continue;
                }
                if let Node::Fifo = node {
                    mkfifo(&path);
                } else {
                    let content = format!("---\nname: s{index}\ndescription: inside {index}\n---\nbody {index}\n");
                    fs::write(&path, content).unwrap();
                }
            }
            Node::Link(target) => {
                let Some((last, parents)) = components.split_last() else { continue };
                let Some(folder) = real_dirs(root, parents) else { continue };
                let path = folder.join(NAMES[*last]);
                if fs::symlink_metadata(&path).is_ok() {
                    continue;
                }
                let target: PathBuf = match target {
                    Target::OutsideDir => fx.path("out"),
                    Target::OutsideFile => fx.path("out/SKILL.md"),
                    Target::Slash => "/".into(),
                    Target::Parent => "..".into(),
                    Target::GrandParent => "../..".into(),
                    Target::FarUp => "../../../../../..".into(),
                    Target::Dot => ".".into(),
                    Target::RootAbsolute => root.to_path_buf(),
                    Target::Sibling => "a".into(),
                    Target::Dangling => "no-such-entry".into(),
                    Target::ProcRoot => "/proc/self/root".into(),
                };
                symlink(target, path).unwrap();
            }
        }
    }
}

/// The model: every regular `SKILL.md` reachable from `root` through real directories only.
fn expected_locations(directory: &Path, out: &mut Vec<String>) {
    for entry in fs::read_dir(directory).unwrap() {
        let entry = entry.unwrap();
        let file_type = entry.file_type().unwrap();
        if file_type.is_dir() {
            expected_locations(&entry.path(), out);
        } else if file_type.is_file() && entry.file_name() == "SKILL.md" {
            out.push(entry.path().to_str().unwrap().to_owned());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 32,
        failure_persistence: None,
        max_shrink_time: 10_000,
        ..ProptestConfig::default()
    })]

    /// On random trees of real folders, `SKILL.md` files, FIFOs and symlinks (to an outside tree
    /// full of `SKILL.md` files, to `/`, to parents, to the root, dangling), discovery finds
    /// exactly the regular `SKILL.md` files reachable without a symlink, and each loads exactly
    /// the bytes at its location.
    #[test]
    fn discovery_never_escapes_the_root(entries in prop::collection::vec(entry_strategy(), 1..24)) {
        let fx = Fixture::new();
        fx.file("out/SKILL.md", format!("---\nname: outside\ndescription: {SECRET}\n---\n{SECRET}\n"));
        fx.file("out/sub/SKILL.md", format!("---\nname: outside-sub\ndescription: {SECRET}\n---\n{SECRET}\n"));
        let root = fx.dir("root");
        build_tree(&fx, &root, &entries);
        let mut expected = Vec::new();
        expected_locations(&root, &mut expected);
        expected.sort();

        // One scan and every load, on a thread: a regression that blocks fails this case (and
        // the shrinking that follows is bounded by max_shrink_time).
        let discoverer = discoverer(&root);
        let (discovery, loads) = within("scan and loads", move || {
            let discovery = discoverer.scan_blocking().expect("scan succeeds");
            let loads: Vec<_> = discovery.skills.iter().map(|skill| discoverer.load_blocking(skill)).collect();
            (discovery, loads)
        });
        let prefix = format!("{}/", fx.text("root"));
        let mut locations: Vec<String> = discovery.skills.iter().map(|skill| skill.location().to_owned()).collect();
        locations.sort();
        prop_assert_eq!(&locations, &expected, "diagnostics: {:?}", discovery.diagnostics);
        for (skill, content) in discovery.skills.iter().zip(loads) {
            prop_assert!(skill.location().starts_with(&prefix), "{:?}", skill);
            prop_assert!(!skill.description().contains(SECRET), "{:?}", skill);
            let content = content.expect("a static tree loads");
            prop_assert!(!content.contains(SECRET));
            let relative = &skill.location().as_bytes()[prefix.len()..];
            let on_disk = read_beneath(&root, relative).expect("the file at the location");
            prop_assert_eq!(content.as_bytes(), on_disk.as_slice());
        }
    }
}
