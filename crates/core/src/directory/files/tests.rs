use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use rustix::fs::{FileType, Mode};

use super::super::DirectorySkillDiscoverer;
use crate::discover::{Discovery, SkillError};
use crate::files::*;
use crate::skill::Skill;

const SECRET: &[u8] = b"SECRET-OUTSIDE";

struct Fixture {
    _tmp: tempfile::TempDir,
    base: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        Fixture { _tmp: tmp, base }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.base.join(relative)
    }

    fn file(&self, relative: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, content).unwrap();
        path
    }

    fn skill(&self, folder: &str, name: &str) {
        self.file(&format!("{folder}/SKILL.md"), format!("---\nname: {name}\ndescription: d\n---\nbody\n"));
    }

    fn fifo(&self, relative: &str) {
        let mode = Mode::from_raw_mode(0o644);
        rustix::fs::mknodat(rustix::fs::CWD, self.path(relative), FileType::Fifo, mode, 0).unwrap();
    }

    /// A source over `root` (relative to the fixture) that trusts every file's status at
    /// once: tests change files faster than their times tick.
    fn discoverer(&self, root: &str) -> DirectorySkillDiscoverer {
        let mut discoverer = DirectorySkillDiscoverer::new([self.path(root)]).unwrap();
        Arc::get_mut(&mut discoverer.inner).unwrap().settle_seconds = -3600;
        discoverer
    }
}

fn scan(discoverer: &DirectorySkillDiscoverer) -> Discovery {
    let discovery = discoverer.scan_blocking().unwrap();
    assert_eq!(discovery.files.len(), discovery.skills.len());
    discovery
}

fn listing<'d>(discovery: &'d Discovery, name: &str) -> &'d FileListing {
    let index = discovery.skills.iter().position(|skill| skill.name().as_str() == name).unwrap();
    &discovery.files[index]
}

fn skill<'d>(discovery: &'d Discovery, name: &str) -> &'d Skill {
    discovery.skills.iter().find(|skill| skill.name().as_str() == name).unwrap()
}

fn paths(listing: &FileListing) -> Vec<&str> {
    listing.files().unwrap().iter().map(|file| file.path.as_str()).collect()
}

fn skipped(listing: &FileListing) -> Vec<(&str, &SkipReason)> {
    listing.skipped().iter().map(|entry| (entry.path.as_str(), &entry.reason)).collect()
}

fn path(text: &str) -> SkillFilePath {
    SkillFilePath::parse(text).unwrap()
}

/// Runs `work` on a thread and fails if it takes longer than a blocked open would.
fn bounded<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || sender.send(work()));
    receiver.recv_timeout(Duration::from_secs(10)).expect("finished without blocking")
}

#[test]
fn files_are_listed_in_code_point_order_with_digests_and_modes() {
    let fixture = Fixture::new();
    fixture.skill("s", "s");
    let script = fixture.file("s/scripts/run.sh", "#!/bin/sh\necho hi\n");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    fixture.file("s/references/guide.md", "# Guide\n");
    fixture.file("s/a-b.txt", "dash");
    fixture.file("s/a/b.txt", "slash");
    fixture.file("s/Z.txt", "upper");
    fixture.file("s/é.txt", "accent");
    fixture.file("s/empty", "");
    // Hidden names are neither listed nor reported, at any depth.
    fixture.file("s/.env", "TOKEN=1");
    fixture.file("s/.git/config", "[core]");
    fixture.file("s/scripts/.cache/x", "x");

    let discovery = scan(&fixture.discoverer(""));
    let files = listing(&discovery, "s");
    assert_eq!(
        paths(files),
        ["SKILL.md", "Z.txt", "a-b.txt", "a/b.txt", "empty", "references/guide.md", "scripts/run.sh", "é.txt"]
    );
    assert!(files.skipped().is_empty(), "{:?}", files.skipped());
    for file in files.files().unwrap() {
        let bytes = fs::read(fixture.path(&format!("s/{}", file.path))).unwrap();
        assert_eq!((file.size, file.digest), (bytes.len() as u64, Digest::of(&bytes)), "{}", file.path);
        assert_eq!(file.executable, file.path.as_str() == "scripts/run.sh", "{}", file.path);
    }
    assert_eq!(files.total_size(), files.files().unwrap().iter().map(|file| file.size).sum::<u64>());
}

#[test]
fn a_nested_skills_files_belong_to_both_skills() {
    let fixture = Fixture::new();
    fixture.skill("outer", "outer");
    fixture.file("outer/top.md", "top");
    fixture.skill("outer/inner", "inner");
    fixture.file("outer/inner/ref/deep.md", "deep");
    fixture.fifo("outer/inner/pipe");
    // Under a hidden folder: discovered (nagents walks hidden folders), listed on its own,
    // and not among the files of the skill around it.
    fixture.skill("outer/.hidden/secret", "secret");
    fixture.file("outer/.hidden/secret/notes.md", "n");

    let discoverer = fixture.discoverer("");
    let discovery = scan(&discoverer);
    assert_eq!(paths(listing(&discovery, "outer")), ["SKILL.md", "inner/SKILL.md", "inner/ref/deep.md", "top.md"]);
    assert_eq!(skipped(listing(&discovery, "outer")), [("inner/pipe", &SkipReason::Fifo)]);
    let inner = listing(&discovery, "inner");
    assert_eq!(paths(inner), ["SKILL.md", "ref/deep.md"]);
    assert_eq!(skipped(inner), [("pipe", &SkipReason::Fifo)]);
    assert_eq!(paths(listing(&discovery, "secret")), ["SKILL.md", "notes.md"]);
    // The inner listing, cut from the outer one, is the one a walk of its own gives.
    let alone = scan(&fixture.discoverer("outer/inner"));
    assert_eq!(listing(&alone, "inner"), inner);
    // The nested skill's files were read once, not once per skill.
    assert_eq!(discoverer.files_hashed(), 6);

    // An enclosing skill over a bound does not take its nested skills' listings with it.
    for index in 0..MAX_SKILL_FILES {
        fixture.file(&format!("outer/bulk/{index}"), "");
    }
    let discovery = scan(&discoverer);
    assert!(matches!(listing(&discovery, "outer").files(), Err(FilesUnavailable::TooManyFiles { .. })));
    assert_eq!(listing(&discovery, "inner"), inner);
}

/// Skills are listed in the byte order of their folders' paths, where `a-b/` and `a.c/` come
/// before `a/`: each skill's nested skills still follow it, so their listings are cut from its.
#[test]
fn nested_skills_beside_names_that_sort_before_a_slash_are_listed_as_alone() {
    let fixture = Fixture::new();
    for (folder, name) in
        [("a", "a"), ("a/A", "upper"), ("a/A/x", "deep"), ("a-b", "dash"), ("a-b/in", "in"), ("a.c", "dot")]
    {
        fixture.skill(folder, name);
        fixture.file(&format!("{folder}/own.md"), folder);
    }
    let discoverer = fixture.discoverer("");
    let discovery = scan(&discoverer);
    assert_eq!(discovery.skills.len(), 6);
    assert_eq!(
        paths(listing(&discovery, "a")),
        ["A/SKILL.md", "A/own.md", "A/x/SKILL.md", "A/x/own.md", "SKILL.md", "own.md"]
    );
    for (folder, name) in [("a/A", "upper"), ("a/A/x", "deep"), ("a-b", "dash"), ("a-b/in", "in"), ("a.c", "dot")] {
        let alone = scan(&fixture.discoverer(folder));
        assert_eq!(listing(&discovery, name), listing(&alone, name), "{folder}");
    }
    // Every file read once, nested ones included.
    assert_eq!(discoverer.files_hashed(), 12);
}

/// A first scan lists the files of a skill whose folder holds no folders while its walk has the
/// folder open; later scans list them after the walk: both list alike, hostile entries too, and
/// the digests the first took spare the later ones every read.
#[test]
fn a_first_scan_lists_folders_without_folders_as_later_scans_do() {
    use std::os::unix::ffi::OsStrExt as _;
    let fixture = Fixture::new();
    fixture.skill("flat", "flat");
    fixture.file("flat/notes.md", "notes");
    let script = fixture.file("flat/run.sh", "#!/bin/sh\n");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    fixture.file("flat/.env", "TOKEN=1");
    fixture.fifo("flat/pipe");
    symlink(fixture.path("flat/notes.md"), fixture.path("flat/link.md")).unwrap();
    fs::write(fixture.path("flat").join(std::ffi::OsStr::from_bytes(b"bad\xff.txt")), "x").unwrap();
    // Its files are those of the skill around it too, read once.
    fixture.skill("outer", "outer");
    fixture.skill("outer/inner", "inner");
    fixture.file("outer/inner/own.md", "own");

    let discoverer = fixture.discoverer("");
    let first = bounded(move || (scan(&discoverer), discoverer));
    let (first, discoverer) = first;
    assert_eq!(paths(listing(&first, "flat")), ["SKILL.md", "notes.md", "run.sh"]);
    assert_eq!(
        skipped(listing(&first, "flat")),
        [("bad\u{fffd}.txt", &SkipReason::NotUtf8), ("link.md", &SkipReason::Symlink), ("pipe", &SkipReason::Fifo)]
    );
    assert_eq!(paths(listing(&first, "outer")), ["SKILL.md", "inner/SKILL.md", "inner/own.md"]);
    assert_eq!(discoverer.files_hashed(), 6);
    let later = scan(&discoverer);
    assert_eq!(later.files, first.files);
    assert_eq!(discoverer.files_hashed(), 6, "the first scan's digests are kept");
}

#[test]
fn symlinks_fifos_and_sockets_are_reported_never_listed_or_read() {
    let fixture = Fixture::new();
    fixture.skill("s", "s");
    let outside = fixture.file("outside/secret.txt", SECRET);
    fixture.file("outside/SKILL.md", "---\nname: outside\ndescription: d\n---\n");
    symlink(&outside, fixture.path("s/link.txt")).unwrap();
    symlink(fixture.path("outside"), fixture.path("s/linked-folder")).unwrap();
    symlink("SKILL.md", fixture.path("s/relative-link")).unwrap();
    fixture.fifo("s/pipe");
    let _socket = std::os::unix::net::UnixListener::bind(fixture.path("s/sub/socket")).or_else(|_| {
        fs::create_dir_all(fixture.path("s/sub")).unwrap();
        std::os::unix::net::UnixListener::bind(fixture.path("s/sub/socket"))
    });
    fixture.file("s/sub/ok.md", "ok");

    let discoverer = fixture.discoverer("s");
    let discovery = bounded(move || (scan(&discoverer), discoverer));
    let (discovery, discoverer) = discovery;
    let files = listing(&discovery, "s");
    assert_eq!(paths(files), ["SKILL.md", "sub/ok.md"]);
    assert_eq!(
        skipped(files),
        [
            ("link.txt", &SkipReason::Symlink),
            ("linked-folder", &SkipReason::Symlink),
            ("pipe", &SkipReason::Fifo),
            ("relative-link", &SkipReason::Symlink),
            ("sub/socket", &SkipReason::Socket),
        ]
    );
    let skill = skill(&discovery, "s").clone();
    for unlisted in ["link.txt", "linked-folder/secret.txt", "pipe", "relative-link", "sub/socket"] {
        let (discoverer, skill) = (discoverer.clone(), skill.clone());
        let error = bounded(move || discoverer.read_file_blocking(&skill, &path(unlisted), 1 << 20)).unwrap_err();
        assert!(matches!(error, SkillError::Changed { .. }), "{unlisted}: {error}");
    }
    assert_eq!(discoverer.read_file_blocking(&skill, &path("sub/ok.md"), 2).unwrap(), b"ok");
}

#[test]
fn names_that_cannot_be_paths_are_reported() {
    use std::os::unix::ffi::OsStrExt;
    let fixture = Fixture::new();
    fixture.skill("s", "s");
    fs::write(fixture.path("s").join(std::ffi::OsStr::from_bytes(b"bad\xff.txt")), "x").unwrap();
    fixture.file("s/back\\slash", "x");
    let discovery = scan(&fixture.discoverer("s"));
    let files = listing(&discovery, "s");
    assert_eq!(paths(files), ["SKILL.md"]);
    assert_eq!(
        skipped(files),
        [
            ("back\\slash", &SkipReason::InvalidPath(InvalidFilePath::Backslash)),
            ("bad\u{fffd}.txt", &SkipReason::NotUtf8),
        ]
    );
}

#[test]
fn a_skill_over_a_bound_keeps_its_entry_and_has_no_listing() {
    let fixture = Fixture::new();
    fixture.skill("many", "many");
    for index in 0..MAX_SKILL_FILES {
        fixture.file(&format!("many/files/{index:03}"), "");
    }
    fixture.skill("fits", "fits");
    for index in 0..MAX_SKILL_FILES - 1 {
        fixture.file(&format!("fits/files/{index:03}"), "");
    }
    fixture.skill("large", "large");
    // Sparse: the bound is checked on the size before anything is read.
    let big = fs::File::create(fixture.path("large/assets/big.bin")).or_else(|_| {
        fs::create_dir_all(fixture.path("large/assets")).unwrap();
        fs::File::create(fixture.path("large/assets/big.bin"))
    });
    big.unwrap().set_len(MAX_SKILL_BYTES).unwrap();
    fixture.skill("deep", "deep");
    let deep = (0..=MAX_SKILL_DEPTH).map(|_| "d").collect::<Vec<_>>().join("/");
    fixture.file(&format!("deep/{deep}/f"), "");
    fixture.skill("crowded", "crowded");
    for index in 0..MAX_SKILL_ENTRIES {
        fixture.file(&format!("crowded/.{index}"), "");
    }

    let discoverer = fixture.discoverer("");
    let discovery = scan(&discoverer);
    let names: Vec<&str> = discovery.skills.iter().map(|skill| skill.name().as_str()).collect();
    assert_eq!(names, ["crowded", "deep", "fits", "large", "many"]);
    assert_eq!(listing(&discovery, "fits").files().unwrap().len(), MAX_SKILL_FILES);

    let error = listing(&discovery, "many").files().unwrap_err();
    assert_eq!(*error, FilesUnavailable::TooManyFiles { counted: 513 });
    assert!(error.to_string().starts_with("the skill has more than 512 files (counting stopped at 513)"));
    assert!(listing(&discovery, "many").skipped().is_empty());

    let error = listing(&discovery, "large").files().unwrap_err();
    let counted = MAX_SKILL_BYTES + fs::metadata(fixture.path("large/SKILL.md")).unwrap().len();
    assert!(matches!(error, FilesUnavailable::TooLarge { path, .. } if path == "assets/big.bin"), "{error}");
    assert!(error.to_string().contains("more than 16 MiB (16777216 bytes)"), "{error}");
    assert!(error.to_string().contains(&format!("{counted} bytes counted when 'assets/big.bin'")), "{error}");

    let error = listing(&discovery, "deep").files().unwrap_err();
    assert!(matches!(error, FilesUnavailable::TooDeep { path } if path.matches('/').count() == 32), "{error}");
    let error = listing(&discovery, "crowded").files().unwrap_err();
    assert_eq!(*error, FilesUnavailable::TooManyEntries { counted: MAX_SKILL_ENTRIES + 1 });

    // Nothing of a skill over a bound is served, and nothing of the large file was read.
    let many = skill(&discovery, "many");
    let error = discoverer.read_file_blocking(many, &path("SKILL.md"), 1 << 20).unwrap_err();
    assert!(matches!(error, SkillError::Changed { .. }), "{error}");
    assert!(discoverer.files_hashed() < 2 * MAX_SKILL_FILES as u64 + 5, "{}", discoverer.files_hashed());
}

#[test]
fn reads_return_the_listed_bytes_and_refuse_anything_else() {
    let fixture = Fixture::new();
    fixture.skill("s", "s");
    fixture.file("s/scripts/run.py", "print(1)\n");
    let discoverer = fixture.discoverer("");
    let discovery = scan(&discoverer);
    let skill = skill(&discovery, "s");
    let file = listing(&discovery, "s").get(&path("scripts/run.py")).unwrap().clone();
    let bytes = discoverer.read_file_blocking(skill, &file.path, file.size).unwrap();
    assert_eq!(Digest::of(&bytes), file.digest);
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    assert_eq!(runtime.block_on(discoverer.read_file(skill, &file.path, file.size)).unwrap(), bytes);

    let changed = |result: Result<Vec<u8>, SkillError>| matches!(result, Err(SkillError::Changed { .. }));
    assert!(changed(discoverer.read_file_blocking(skill, &path("scripts/missing.py"), 100)));
    assert!(changed(discoverer.read_file_blocking(skill, &file.path, file.size - 1)), "over max_bytes");
    let stale = Skill::new("s", "other", skill.location()).unwrap();
    let error = discoverer.read_file_blocking(&stale, &file.path, 100).unwrap_err();
    assert!(matches!(error, SkillError::NotInCatalog { .. }), "{error}");

    // Grown past what the caller accepts: refused, not cut.
    fixture.file("s/scripts/run.py", "print(1)\nprint(2)\n");
    assert!(changed(discoverer.read_file_blocking(skill, &file.path, file.size)));
    // Removed: the listing is stale.
    fs::remove_file(fixture.path("s/scripts/run.py")).unwrap();
    assert!(changed(discoverer.read_file_blocking(skill, &file.path, 100)));
}

#[test]
fn a_file_or_folder_swapped_after_the_scan_is_never_followed_nor_blocks() {
    let fixture = Fixture::new();
    fixture.skill("s", "s");
    fixture.file("s/doc.md", "doc");
    fixture.file("s/refs/guide.md", "guide");
    fixture.file("outside/doc.md", SECRET);
    fixture.file("outside/guide.md", SECRET);
    let discoverer = fixture.discoverer("");
    let discovery = scan(&discoverer);
    let skill = skill(&discovery, "s").clone();
    let read = |relative: &str| {
        let (discoverer, skill, relative) = (discoverer.clone(), skill.clone(), path(relative));
        bounded(move || discoverer.read_file_blocking(&skill, &relative, 1 << 20))
    };
    assert_eq!(read("doc.md").unwrap(), b"doc");

    fs::remove_file(fixture.path("s/doc.md")).unwrap();
    symlink(fixture.path("outside/doc.md"), fixture.path("s/doc.md")).unwrap();
    assert!(matches!(read("doc.md"), Err(SkillError::Changed { .. })), "a symlink");
    fs::remove_file(fixture.path("s/doc.md")).unwrap();
    fixture.fifo("s/doc.md");
    assert!(matches!(read("doc.md"), Err(SkillError::Changed { .. })), "a FIFO");
    fs::remove_file(fixture.path("s/doc.md")).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(fixture.path("s/doc.md")).unwrap();
    assert!(matches!(read("doc.md"), Err(SkillError::Changed { .. })), "a socket");

    fs::rename(fixture.path("s/refs"), fixture.path("refs-moved")).unwrap();
    symlink(fixture.path("outside"), fixture.path("s/refs")).unwrap();
    assert!(matches!(read("refs/guide.md"), Err(SkillError::Changed { .. })), "a folder symlink");
    fs::remove_file(fixture.path("s/refs")).unwrap();
    fs::rename(fixture.path("refs-moved"), fixture.path("s/refs")).unwrap();
    assert_eq!(read("refs/guide.md").unwrap(), b"guide");
    // The skill folder itself swapped for a symlink to a copy.
    fs::rename(fixture.path("s"), fixture.path("s-moved")).unwrap();
    symlink(fixture.path("s-moved"), fixture.path("s")).unwrap();
    assert!(matches!(read("refs/guide.md"), Err(SkillError::Changed { .. })), "a skill folder symlink");
}

/// While scans list and hash, a file keeps being swapped for a symlink to a secret, a FIFO
/// and back, and a folder for a symlink to a folder of secrets and back. No scan blocks, no
/// listing ever carries a secret's digest, and no read returns one.
#[test]
fn swaps_during_scans_are_skipped_never_followed() {
    let fixture = Fixture::new();
    fixture.skill("s", "s");
    fixture.file("s/target.md", "real content");
    fixture.file("s/sub/inside.md", "real content inside");
    let secret = fixture.file("outside/inside.md", SECRET);
    symlink(fixture.path("outside"), fixture.path("s/.link")).unwrap();
    let (cwd, exchange) = (rustix::fs::CWD, rustix::fs::RenameFlags::EXCHANGE);
    let stop = Arc::new(AtomicBool::new(false));
    let swappers = [0, 1].map(|swapper| {
        let (stop, folder, secret) = (Arc::clone(&stop), fixture.path("s"), secret.clone());
        std::thread::spawn(move || {
            let mode = Mode::from_raw_mode(0o644);
            let mut round = 0u32;
            while !stop.load(Ordering::Relaxed) {
                if swapper == 0 {
                    let (target, staging) = (folder.join("target.md"), folder.join(".staging"));
                    let _ = fs::remove_file(&staging);
                    match round % 3 {
                        0 => symlink(&secret, &staging).unwrap(),
                        1 => rustix::fs::mknodat(rustix::fs::CWD, &staging, FileType::Fifo, mode, 0).unwrap(),
                        _ => fs::write(&staging, format!("real content {round}")).unwrap(),
                    }
                    fs::rename(&staging, &target).unwrap();
                } else {
                    // `sub` is a folder, then a symlink to the folder of the secret, and back.
                    rustix::fs::renameat_with(cwd, folder.join("sub"), cwd, folder.join(".link"), exchange).unwrap();
                }
                round += 1;
            }
            if swapper == 1 && round % 2 == 1 {
                rustix::fs::renameat_with(cwd, folder.join("sub"), cwd, folder.join(".link"), exchange).unwrap();
            }
        })
    });
    let discoverer = fixture.discoverer("");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let secret = Digest::of(SECRET);
        for _ in 0..300 {
            let discovery = discoverer.scan_blocking().unwrap();
            let files = &discovery.files[0];
            assert!(files.files().unwrap().iter().all(|file| file.digest != secret), "{files:?}");
            let target = files.get(&path("target.md"));
            let skipped = files.skipped().iter().find(|entry| entry.path == "target.md");
            assert!(target.is_some() != skipped.is_some(), "{files:?}");
            if let Some(entry) = skipped {
                let expected = [SkipReason::Symlink, SkipReason::Fifo, SkipReason::Changed];
                assert!(expected.contains(&entry.reason), "{entry:?}");
            }
            for read in ["target.md", "sub/inside.md"] {
                if let Ok(bytes) = discoverer.read_file_blocking(&discovery.skills[0], &path(read), 64) {
                    assert!(bytes.starts_with(b"real content"), "{read}: {bytes:?}");
                }
            }
        }
        sender.send(()).unwrap();
    });
    let finished = receiver.recv_timeout(Duration::from_secs(30));
    stop.store(true, Ordering::Relaxed);
    for swapper in swappers {
        swapper.join().unwrap();
    }
    finished.expect("every scan finished, none failed");
}

#[test]
fn a_rescan_hashes_only_files_whose_status_changed() {
    let fixture = Fixture::new();
    for skill in 0..5 {
        fixture.skill(&format!("s{skill}"), &format!("s{skill}"));
        for file in 0..4 {
            fixture.file(&format!("s{skill}/refs/{file}.md"), format!("file {file} of {skill}"));
        }
    }
    let discoverer = fixture.discoverer("");
    let first = scan(&discoverer);
    assert_eq!(discoverer.files_hashed(), 25);
    assert_eq!(scan(&discoverer), first);
    assert_eq!(discoverer.files_hashed(), 25, "nothing changed, nothing read");

    fixture.file("s1/refs/2.md", "file 2 of 1, longer");
    let second = scan(&discoverer);
    assert_eq!(discoverer.files_hashed(), 26);
    let changed = listing(&second, "s1").get(&path("refs/2.md")).unwrap();
    assert_eq!(changed.digest, Digest::of(b"file 2 of 1, longer"));

    // A file replaced by another one (a new inode) is read, whatever its size and times.
    let staging = fixture.file("staging", "file 0 of 3");
    fs::rename(staging, fixture.path("s3/refs/0.md")).unwrap();
    scan(&discoverer);
    assert_eq!(discoverer.files_hashed(), 27);

    // The digests kept are those of the files the last scan listed.
    fs::remove_dir_all(fixture.path("s4")).unwrap();
    scan(&discoverer);
    assert_eq!(discoverer.inner.hashes.lock().unwrap().len(), 20);
}

/// Out of descriptors while listing files, a scan fails; it never publishes the skill with
/// an empty or partial listing. The limit is lowered in a child process (this test binary,
/// running only this test), since it would starve the tests running beside it.
#[test]
fn a_listing_out_of_descriptors_fails_the_scan() {
    if !super::super::tests::in_child_alone("directory::files::tests::a_listing_out_of_descriptors_fails_the_scan") {
        return;
    }
    let fixture = Fixture::new();
    fixture.skill("s", "s");
    let deep = ["d"; 24].join("/");
    fixture.file(&format!("s/{deep}/f"), "f");
    // The walk stops above the deep folders; the files of the skill are beneath them.
    let max_entries = std::num::NonZeroUsize::new(100).unwrap();
    let discoverer = DirectorySkillDiscoverer::with_limits([fixture.path("")], max_entries, 1).unwrap();
    assert!(scan(&discoverer).files[0].get(&path(&format!("{deep}/f"))).is_some(), "with descriptors");
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    let limit = rustix::process::Rlimit { current: Some(open + 8), maximum: Some(open + 8) };
    rustix::process::setrlimit(rustix::process::Resource::Nofile, limit).unwrap();
    let error = discoverer.scan_blocking().expect_err("out of descriptors");
    assert!(matches!(&error, SkillError::Io { source, .. } if source.raw_os_error() == Some(24)), "{error}");
    let prefix = format!("the scan stopped at {}/s/d/d/", fixture.base.display());
    assert!(error.to_string().starts_with(&prefix), "{error}");
}

/// Large catalogs are listed on several threads, each a run of skills in folder order; the
/// listings are the same as one thread's, nested skills at the edge of a run included.
#[test]
fn large_catalogs_are_listed_alike_on_every_thread() {
    let fixture = Fixture::new();
    for index in 0..700usize {
        fixture.skill(&format!("s{index:03}"), &format!("s{index:03}"));
        fixture.file(&format!("s{index:03}/refs/own.md"), format!("{index}"));
        if index.is_multiple_of(7) {
            fixture.skill(&format!("s{index:03}/inner"), &format!("inner{index:03}"));
        }
    }
    let mut discoverer = fixture.discoverer("");
    Arc::get_mut(&mut discoverer.inner).unwrap().max_entries = 100_000;
    let discovery = scan(&discoverer);
    assert_eq!(discovery.skills.len(), 800);
    for (skill, files) in discovery.skills.iter().zip(&discovery.files) {
        let name = skill.name().as_str();
        let index: usize = name.trim_start_matches(char::is_alphabetic).parse().unwrap();
        if name.starts_with("inner") {
            assert_eq!(paths(files), ["SKILL.md"], "{name}");
        } else if index.is_multiple_of(7) {
            assert_eq!(paths(files), ["SKILL.md", "inner/SKILL.md", "refs/own.md"], "{name}");
        } else {
            assert_eq!(paths(files), ["SKILL.md", "refs/own.md"], "{name}");
        }
        let own = files.get(&path("refs/own.md")).map(|file| file.digest);
        assert!(own.is_none() || own == Some(Digest::of(index.to_string().as_bytes())), "{name}");
    }
    let hashed = discoverer.files_hashed();
    assert_eq!(scan(&discoverer), discovery);
    assert_eq!(discoverer.files_hashed(), hashed, "a rescan reads nothing, whichever thread listed what");
}

/// File times tick coarsely: a file changed just before a scan is read again by the next one,
/// since a write right after the first read could have left its status as it was.
#[test]
fn files_changed_just_before_a_scan_are_hashed_again() {
    let fixture = Fixture::new();
    fixture.skill("s", "s");
    let discoverer = DirectorySkillDiscoverer::new([fixture.path("")]).unwrap();
    scan(&discoverer);
    scan(&discoverer);
    assert_eq!(discoverer.files_hashed(), 2);
}

/// nagents' view alone: the same skills, versions and diagnostics as the folder view's scan, in
/// the same walk, with no file listed or read beyond the `SKILL.md`s, nothing kept to rescan
/// from, and loads as before; a file read is refused (no listing says what the file is).
#[test]
fn descriptors_only_scans_find_what_the_folder_view_finds_and_list_no_files() {
    let fixture = Fixture::new();
    fixture.skill("a", "a");
    fixture.skill("b/nested", "nested");
    fixture.file("a/references/guide.md", "# Guide\n");
    fixture.file("b/nested/run.sh", "echo\n");
    fixture.file("c/SKILL.md", "---\nname: c\ndescription: \"unclosed\n---\n");
    fixture.fifo("a/pipe");

    let folder_view = fixture.discoverer("");
    let full = scan(&folder_view);
    let descriptors = fixture.discoverer("").descriptors_only();
    assert!(folder_view.lists_files() && !descriptors.lists_files());
    let hashed = descriptors.files_hashed();
    let only = descriptors.scan_blocking().unwrap();
    assert_eq!((&only.skills, &only.versions, &only.diagnostics), (&full.skills, &full.versions, &full.diagnostics));
    assert_eq!(only.skills.len(), 2);
    assert_eq!(only.diagnostics.len(), 1, "{:?}", only.diagnostics);
    assert!(only.files.is_empty(), "no listing: {:?}", only.files);
    assert_eq!(descriptors.files_hashed(), hashed, "no file read to be hashed");
    assert_eq!(descriptors.folders_seen(), 0, "no picture kept");
    assert!(!descriptors.covers(&fixture.path("a/SKILL.md")));
    assert!(descriptors.rescan_blocking(&[fixture.path("a/SKILL.md")]).is_none(), "only a full scan can tell");

    let a = skill(&only, "a");
    assert!(descriptors.load_blocking(a).unwrap().contains("name: a"));
    let error = descriptors.read_file_blocking(a, &path("references/guide.md"), 1 << 20).unwrap_err();
    assert!(error.is_stale(), "{error}");
    // The same source with its folder view reads it.
    let a = skill(&full, "a");
    assert_eq!(folder_view.read_file_blocking(a, &path("references/guide.md"), 1 << 20).unwrap(), b"# Guide\n");
}
