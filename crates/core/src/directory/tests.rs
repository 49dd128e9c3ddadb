use super::*;

/// Set in a child process that runs one test alone.
const CHILD: &str = "SKILLCAT_TEST_ALONE";

/// Whether this is the child process that runs `test` alone (this same test binary, with no
/// other test beside it). In the parent, runs that child, checks that it ran the test and
/// passed, and gives false: tests that lower the process's limits must not starve the tests
/// running beside them.
pub(crate) fn in_child_alone(test: &str) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--test-threads", "1", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("1 passed"), "the child ran {test}: {stdout}");
    false
}

/// Out of descriptors, a scan fails; it never reports the folders it could not open as empty.
/// The descriptor limit is lowered in a child process (this same test binary, running only
/// this test), since it would starve every other test running beside it.
#[test]
fn a_scan_out_of_descriptors_fails_rather_than_reporting_empty_folders() {
    if !in_child_alone("directory::tests::a_scan_out_of_descriptors_fails_rather_than_reporting_empty_folders") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Deep enough that the walk holds more folders open than the limit leaves.
    let mut folder = dir.path().to_path_buf();
    for depth in 0..12 {
        for sibling in 0..4 {
            let skill = folder.join(format!("s{sibling}"));
            std::fs::create_dir_all(&skill).unwrap();
            std::fs::write(skill.join("SKILL.md"), format!("---\nname: s{depth}x{sibling}\ndescription: d\n---\n"))
                .unwrap();
        }
        folder = folder.join("s0");
    }
    let discoverer = DirectorySkillDiscoverer::new([dir.path()]).unwrap();
    assert_eq!(discoverer.scan_blocking().unwrap().skills.len(), 48, "the whole tree, with descriptors");
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count();
    let limit = rustix::process::Rlimit { current: Some(open as u64 + 4), maximum: Some(open as u64 + 4) };
    rustix::process::setrlimit(rustix::process::Resource::Nofile, limit).unwrap();
    let error = discoverer.scan_blocking().expect_err("out of descriptors");
    assert!(matches!(&error, SkillError::Io { source, .. } if source.raw_os_error() == Some(24)), "{error}");
    assert!(error.to_string().starts_with("the scan stopped at "), "{error}");
}

/// The walk prepares folders far ahead of itself, and a folder with subfolders stays open until
/// the walk has been through it; across all the folders being walked at once, what is held open
/// ahead is bounded (`listing::MAX_KEPT_AHEAD`), not a window per folder. Here two levels of wide
/// folders, each with subfolders, would hold two full windows open (`RUNS_AHEAD` runs of
/// `MAX_KEPT` descriptors each, at each level) were it not for that bound. At the second level
/// the descriptors held are the skills' `scripts/`, prepared with their skill and kept open for
/// the folder beneath them.
#[test]
fn a_scan_holds_a_bounded_number_of_folders_open_whatever_the_tree_s_width() {
    if !in_child_alone("directory::tests::a_scan_holds_a_bounded_number_of_folders_open_whatever_the_tree_s_width") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Wide enough for a full window of runs at both levels.
    let wide = listing::RUN * (listing::RUNS_AHEAD + 1) + 6;
    for team in 0..wide {
        for skill in 0..wide {
            let folder = dir.path().join(format!("t{team}/s{skill}"));
            std::fs::create_dir_all(folder.join("scripts/lib")).unwrap();
            let text = format!("---\nname: s{team}x{skill}\ndescription: d\n---\n");
            std::fs::write(folder.join("SKILL.md"), text).unwrap();
        }
    }
    let max_entries = NonZeroUsize::new(100_000).unwrap();
    let discoverer = DirectorySkillDiscoverer::with_limits([dir.path()], max_entries, DEFAULT_MAX_DEPTH).unwrap();
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    // The bound ahead, one path of the walk (the root, a team, a skill), each thread's folder
    // being prepared and the threads that list the skills' files afterwards, with room to spare.
    let allowed = open + listing::MAX_KEPT_AHEAD as u64 + 24;
    let windows = 2 * (listing::RUNS_AHEAD + 1) * listing::MAX_KEPT;
    assert!(windows as u64 > allowed - open, "the tree needs more than the bound without it");
    let limit = rustix::process::Rlimit { current: Some(allowed), maximum: Some(allowed) };
    rustix::process::setrlimit(rustix::process::Resource::Nofile, limit).unwrap();
    assert_eq!(discoverer.scan_blocking().unwrap().skills.len(), wide * wide);
}

/// One change to a tree, by paths relative to the root (from a small set, so that changes
/// meet: a rename onto a folder that a later step writes into, a delete of a folder holding a
/// skill, a symlink where a folder was).
#[derive(Debug, Clone)]
pub(crate) enum Change {
    Skill { folder: usize, name: usize, description: usize },
    Invalid { folder: usize },
    File { folder: usize, bytes: usize },
    Folder { folder: usize },
    Remove { folder: usize },
    Rename { from: usize, to: usize },
    Link { folder: usize, target: usize },
}

const FOLDERS: [&str; 9] = ["a", "b", "a/x", "a/y", "b/x", "a/x/deep", "c", "a/x/deep/er", "d/e"];

pub(crate) fn change() -> impl proptest::strategy::Strategy<Value = Change> {
    use proptest::prelude::*;
    let folder = 0..FOLDERS.len();
    prop_oneof![
        4 => (folder.clone(), 0..4usize, 0..3usize)
            .prop_map(|(folder, name, description)| Change::Skill { folder, name, description }),
        1 => folder.clone().prop_map(|folder| Change::Invalid { folder }),
        2 => (folder.clone(), 0..3usize).prop_map(|(folder, bytes)| Change::File { folder, bytes }),
        2 => folder.clone().prop_map(|folder| Change::Folder { folder }),
        2 => folder.clone().prop_map(|folder| Change::Remove { folder }),
        2 => (folder.clone(), folder.clone()).prop_map(|(from, to)| Change::Rename { from, to }),
        1 => (folder.clone(), folder).prop_map(|(folder, target)| Change::Link { folder, target }),
    ]
}

/// Makes the folders of `relative` that are missing; gives the paths made, outermost first.
fn make_folders(root: &std::path::Path, relative: &str) -> Vec<PathBuf> {
    let mut made = Vec::new();
    let mut path = root.to_path_buf();
    for part in relative.split('/') {
        path.push(part);
        if std::fs::symlink_metadata(&path).is_ok_and(|metadata| !metadata.is_dir()) {
            std::fs::remove_file(&path).unwrap();
            made.push(path.clone());
        }
        if std::fs::create_dir(&path).is_ok() {
            made.push(path.clone());
        }
    }
    made
}

/// `path` with its folder resolved (the path a watcher reports for the entry), if the folder
/// exists.
fn real(path: &std::path::Path) -> Option<PathBuf> {
    Some(path.parent()?.canonicalize().ok()?.join(path.file_name()?))
}

/// Applies `change` under `root`; gives every path a file watcher would name for it.
pub(crate) fn apply(root: &std::path::Path, change: &Change) -> Vec<PathBuf> {
    let at = |index: usize| root.join(FOLDERS[index]);
    match *change {
        Change::Skill { folder, name, description } => {
            let mut paths = make_folders(root, FOLDERS[folder]);
            let file = at(folder).join("SKILL.md");
            let name = ["one", "two", "three", "four"][name];
            std::fs::write(&file, format!("---\nname: {name}\ndescription: Version {description}.\n---\nBody\n"))
                .unwrap();
            paths.push(file);
            paths
        }
        Change::Invalid { folder } => {
            let mut paths = make_folders(root, FOLDERS[folder]);
            let file = at(folder).join("SKILL.md");
            std::fs::write(&file, "---\nname: not a valid name!\n---\n").unwrap();
            paths.push(file);
            paths
        }
        Change::File { folder, bytes } => {
            let mut paths = make_folders(root, &format!("{}/references", FOLDERS[folder]));
            let file = at(folder).join("references/notes.md");
            std::fs::write(&file, "x".repeat(bytes * 7)).unwrap();
            paths.push(file);
            paths
        }
        Change::Folder { folder } => make_folders(root, FOLDERS[folder]),
        Change::Remove { folder } => {
            // A watcher names the folder where it is, not where a symlinked path leads.
            let Some(path) = real(&at(folder)) else { return Vec::new() };
            match std::fs::symlink_metadata(&path) {
                Ok(metadata) if metadata.is_dir() => std::fs::remove_dir_all(&path).unwrap(),
                Ok(_) => std::fs::remove_file(&path).unwrap(),
                Err(_) => return Vec::new(),
            }
            vec![path]
        }
        Change::Rename { from, to } => {
            let (Some(from), Some(to)) = (real(&at(from)), real(&at(to))) else { return Vec::new() };
            if to.starts_with(&from) || std::fs::symlink_metadata(&to).is_ok() || std::fs::rename(&from, &to).is_err() {
                return Vec::new();
            }
            vec![from, to]
        }
        Change::Link { folder, target } => {
            let path = at(folder);
            let mut paths = make_folders(root, FOLDERS[folder]);
            match std::fs::symlink_metadata(&path) {
                Ok(metadata) if metadata.is_dir() => std::fs::remove_dir_all(&path).unwrap(),
                Ok(_) => std::fs::remove_file(&path).unwrap(),
                Err(_) => {}
            }
            std::os::unix::fs::symlink(at(target), &path).unwrap();
            paths.push(path);
            paths
        }
    }
}

/// A discovery as comparable text: skills, versions, files (with digests) and diagnostics,
/// or the error.
pub(crate) fn outcome(scan: Result<Discovery, SkillError>) -> String {
    match scan {
        Ok(discovery) => format!("{discovery:#?}"),
        Err(error) => format!("error: {error}"),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

    /// After any sequence of changes, a rescan of only what the changes named gives exactly
    /// what a full scan of the final tree gives, also where the entry or depth bound cuts the
    /// walk (a change early in walk order moves the bound for everything after it).
    #[test]
    fn a_rescan_of_the_changes_equals_a_full_scan(
        bursts in proptest::collection::vec(proptest::collection::vec(change(), 1..4), 1..8),
        max_entries in proptest::sample::select(vec![5usize, 9, 14, 10_000]),
        max_depth in proptest::sample::select(vec![1usize, 2, 16]),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("root");
        std::fs::create_dir(&root).unwrap();
        let entries = NonZeroUsize::new(max_entries).unwrap();
        let live = DirectorySkillDiscoverer::with_limits([&root], entries, max_depth).unwrap();
        let _ = live.scan_blocking();
        for burst in &bursts {
            let changed: Vec<PathBuf> = burst.iter().flat_map(|change| apply(&root, change)).collect();
            let rescanned = live.rescan_blocking(&changed);
            proptest::prop_assert!(rescanned.is_some(), "a rescan of changes beneath the root needs no full walk");
            let fresh = DirectorySkillDiscoverer::with_limits([&root], entries, max_depth).unwrap();
            proptest::prop_assert_eq!(outcome(rescanned.unwrap()), outcome(fresh.scan_blocking()), "after {:?}", burst);
        }
    }
}

/// With a folder view, the walk takes the digest of each skill's `SKILL.md` it reads, so that
/// listing the skills' files after it does not read them again: only of a file whose last change
/// has settled, that the last scan's digests do not cover, and only of a skill's file. The digest
/// the listing then holds is the file's.
#[test]
fn the_walk_takes_the_digests_of_the_settled_skill_files_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let write = |relative: &str, content: &str| {
        let path = dir.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    };
    let a = write("a/SKILL.md", "---\nname: a\ndescription: The first.\n---\nBody of a.\n");
    let b = write("b/SKILL.md", "---\nname: b\ndescription: The second.\n---\n");
    write("not-a-skill/SKILL.md", "---\nname: not a name\n---\n");
    write("a/notes.md", "Notes.\n");
    // Settled: changed longer ago than a write in progress could be.
    std::thread::sleep(std::time::Duration::from_millis(120));
    write("fresh/SKILL.md", "---\nname: fresh\ndescription: Just written.\n---\n");
    let key = |path: &std::path::Path| files::FileKey::of(&rustix::fs::stat(path).unwrap());
    let digest = |path: &std::path::Path| crate::files::Digest::of(&std::fs::read(path).unwrap());
    let roots = [AbsoluteRoot::new(dir.path().as_os_str()).unwrap()];
    let taken = |known: files::Hashes| {
        let digests = walk::scan(&roots, 1000, 16, false, None, Some(Arc::new(known)), None).digests;
        let count = digests.len();
        let taken: files::Hashes = digests.into_iter().collect();
        assert_eq!(taken.len(), count, "each file once");
        taken
    };
    let expected: files::Hashes = [(key(&a), digest(&a)), (key(&b), digest(&b))].into_iter().collect();
    assert_eq!(taken(files::Hashes::default()), expected);
    let known: files::Hashes = [(key(&a), digest(&a))].into_iter().collect();
    let expected: files::Hashes = [(key(&b), digest(&b))].into_iter().collect();
    assert_eq!(taken(known), expected, "a digest the last scan has is not taken again");
    let outcome = walk::scan(&roots, 1000, 16, false, None, None, None);
    assert!(outcome.digests.is_empty(), "nagents' view takes none");

    let discoverer = DirectorySkillDiscoverer::new([dir.path()]).unwrap();
    let discovery = discoverer.scan_blocking().unwrap();
    let listed = |name: &str| {
        let index = discovery.skills.iter().position(|skill| skill.name().as_str() == name).unwrap();
        let files = discovery.files[index].files().unwrap().to_vec();
        files.into_iter().map(|file| (file.path.to_string(), file.digest)).collect::<Vec<_>>()
    };
    let notes = dir.path().join("a/notes.md");
    assert_eq!(listed("a"), [("SKILL.md".to_owned(), digest(&a)), ("notes.md".to_owned(), digest(&notes))]);
    assert_eq!(listed("fresh"), [("SKILL.md".to_owned(), digest(&dir.path().join("fresh/SKILL.md")))]);
    assert_eq!(discoverer.files_hashed(), 4, "each file read and hashed once, by the walk or the listing");
}

/// A run prepares a folder's few subfolders together with it (`listing::NESTED`), and keeps those
/// open that the walk will open folders beneath; a folder with more stays open for the walk to
/// queue them itself. Either way the walk gives what a walk that opens each folder itself, one at
/// a time, gives: at every depth bound, and wherever the entry bound cuts it.
#[test]
fn subfolders_prepared_with_their_folder_walk_as_folders_opened_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let write = |relative: &str, name: &str| {
        let folder = root.join(relative);
        std::fs::create_dir_all(&folder).unwrap();
        let description = if name.len().is_multiple_of(5) { "" } else { "description: A skill.\n" };
        std::fs::write(folder.join("SKILL.md"), format!("---\nname: {name}\n{description}---\n")).unwrap();
    };
    // Teams enough that runs of the root take several (the walk queues runs of the next team's
    // skills while it walks one), as skills with more subfolders than a run prepares with them do.
    const TEAMS: usize = 9;
    for team in 0..TEAMS {
        for skill in 0..12 {
            let at = format!("t{team}/s{skill:02}");
            write(&at, &format!("s{team}-{skill}"));
            match skill % 4 {
                // A chain of single folders, deeper than most bounds below.
                1 => write(&format!("{at}/references/deep/er"), &format!("r{team}-{skill}")),
                // More subfolders than a run prepares beneath one folder.
                2 => {
                    for sub in 0..=listing::NESTED {
                        write(&format!("{at}/n{sub}"), &format!("n{team}-{skill}-{sub}"));
                    }
                }
                // Few subfolders, each with its own: they come with the skill, and stay open.
                3 => {
                    for sub in 0..3 {
                        for under in 0..3 {
                            write(&format!("{at}/m{sub}/u{under}"), &format!("m{team}-{skill}-{sub}-{under}"));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let summary = |outcome: walk::Outcome| {
        let found: Vec<String> = outcome.found.iter().map(|found| found.skill.location().to_owned()).collect();
        (found, outcome.diagnostics)
    };
    let root_of = |relative: &str| AbsoluteRoot::new(root.join(relative).as_os_str()).unwrap();
    let mut walked = 0;
    // The tree, and a skill of it as a root before the tree: the walk of the tree meets that
    // skill, prepared with its subfolders, again.
    for roots in [vec![root_of("")], vec![root_of("t0/s03"), root_of("")]] {
        for max_depth in 0..=6 {
            for max_entries in [7, 40, 95, 160, 290, 555, 10_000] {
                let full = summary(walk::scan(&roots, max_entries, max_depth, false, None, None, None));
                // The same walk from a picture that holds none of the tree (but knows every root,
                // opened by a walk with no entry bound): every folder is opened beneath its root
                // by the walk itself, one at a time, never prepared ahead.
                let mut picture = walk::scan(&roots, usize::MAX, max_depth, true, None, None, None).picture;
                for root in &roots {
                    picture.forget(root.as_bytes());
                }
                assert_eq!(picture.len(), 0);
                let sequential = walk::scan_from(&roots, max_entries, max_depth, picture, None);
                assert!(!sequential.lost);
                let one_at_a_time = summary(sequential);
                assert_eq!(
                    full,
                    one_at_a_time,
                    "{} roots, max_depth {max_depth}, max_entries {max_entries}",
                    roots.len()
                );
                walked = walked.max(full.0.len());
            }
        }
    }
    assert_eq!(walked, TEAMS * 12 + TEAMS * 3 * (1 + (listing::NESTED + 1) + 9), "the deepest walk finds every skill");
}

/// A helper out of work watches the queue for a while, then sleeps; a run pushed while it
/// watches and one pushed once it sleeps are both taken, never left waiting in the queue.
#[test]
fn a_helper_takes_runs_pushed_while_it_watches_and_after_it_slept() {
    use std::os::unix::ffi::OsStrExt as _;
    use std::sync::atomic::Ordering;

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().as_os_str().as_bytes().to_vec();
    let queue = Arc::new(listing::Queue { watch: true, ..listing::Queue::default() });
    let helper = {
        let queue = Arc::clone(&queue);
        std::thread::spawn(move || queue.serve())
    };
    for round in 0..60 {
        if round % 4 == 3 {
            // Long past the watch: the helper is asleep when the run comes (and does not watch
            // at its next wait, which follows a long one).
            std::thread::sleep(listing::SPIN * 10);
        }
        let slot = Arc::new(listing::Slot::default());
        queue.push(listing::Task {
            opener: listing::Opener::Root,
            folders: vec![listing::RunFolder::Path(root.clone())],
            levels: 0,
            slot: Arc::clone(&slot),
        });
        // Never taken by the test itself: only the helper can fill the slot.
        let filled = listing::spin_until(std::time::Duration::from_secs(10), || slot.filled.load(Ordering::Acquire));
        assert!(filled, "round {round}: the run was left in the queue");
        let run = slot.take(&mut listing::Waits::new(true));
        assert!(matches!(run[..], [listing::RunFolder::Prepared(_)]), "round {round}: unprepared");
    }
    queue.close();
    helper.join().unwrap();
}

/// A helper that panics while it prepares folders (here in the observer it tells of each folder
/// it opens: the server's file watch) makes the walk waiting for them panic too: the scan fails,
/// it never waits forever.
#[test]
fn a_helper_that_panics_makes_the_walk_waiting_for_it_panic_rather_than_wait_forever() {
    struct Faulty;
    impl FolderObserver for Faulty {
        fn opened(&self, _: &[u8], _: std::os::fd::BorrowedFd<'_>, _: bool) -> Option<u64> {
            panic!("the observer's fault");
        }
        fn listed(&self, _: u64, _: &[u8], _: &mut dyn Iterator<Item = &[u8]>) {}
    }

    use std::os::unix::ffi::OsStrExt as _;

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().as_os_str().as_bytes().to_vec();
    let queue = Arc::new(listing::Queue { observer: Some(Arc::new(Faulty)), ..listing::Queue::default() });
    let helper = {
        let queue = Arc::clone(&queue);
        std::thread::spawn(move || queue.serve())
    };
    let slot = Arc::new(listing::Slot::default());
    let folders = vec![listing::RunFolder::Path(root)];
    queue.push(listing::Task { opener: listing::Opener::Root, folders, levels: 0, slot: Arc::clone(&slot) });
    let (done, waited) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let taken = std::panic::catch_unwind(|| slot.take(&mut listing::Waits::new(false)).len());
        done.send(taken.is_err()).unwrap();
    });
    let panicked = waited.recv_timeout(std::time::Duration::from_secs(30)).expect("the walk waits forever");
    assert!(panicked, "the walk was handed folders that were never prepared");
    waiter.join().unwrap();
    assert!(helper.join().is_err(), "the helper's panic surfaces where it is joined");
    queue.close();
}

#[test]
fn spin_until_says_whether_the_condition_held_within_the_window() {
    use std::sync::atomic::{AtomicBool, Ordering};

    let window = std::time::Duration::from_millis(20);
    let started = std::time::Instant::now();
    assert!(!listing::spin_until(window, || false));
    assert!(started.elapsed() >= window);
    let flag = Arc::new(AtomicBool::new(false));
    let setter = {
        let flag = Arc::clone(&flag);
        std::thread::spawn(move || flag.store(true, Ordering::Release))
    };
    assert!(listing::spin_until(std::time::Duration::from_secs(10), || flag.load(Ordering::Acquire)));
    setter.join().unwrap();
}

#[test]
fn a_thread_watches_for_work_only_on_more_than_one_core_and_while_its_waits_are_short() {
    let asked = std::cell::Cell::new(0);
    let ready = || {
        asked.set(asked.get() + 1);
        false
    };
    let mut never = listing::Waits::new(false);
    never.watch(ready);
    never.ended();
    never.watch(ready);
    assert_eq!(asked.get(), 0, "on one core no wait is watched");
    let mut waits = listing::Waits::new(true);
    waits.watch(ready);
    assert!(asked.get() > 0, "the first wait is watched");
    waits.waited(listing::SPIN * 3);
    asked.set(0);
    waits.watch(ready);
    assert_eq!(asked.get(), 0, "after a long wait the next one sleeps at once");
    waits.waited(std::time::Duration::ZERO);
    waits.watch(ready);
    assert!(asked.get() > 0, "after a short wait the next one is watched again");
}

#[test]
fn a_folder_s_listing_gives_back_every_entry_sorted_with_its_kind_and_type() {
    use super::listing::{Buffers, Kind, relist};
    use rustix::fs::FileType;
    use std::os::unix::ffi::OsStrExt as _;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // Names of every length a name can have, code points above the ASCII ones, every kind.
    let long = "n".repeat(255);
    for name in ["b", "SKILL.md", "é", long.as_str(), "\u{10000}", "\u{ffff}"] {
        std::fs::write(root.join(name), "x").unwrap();
    }
    std::fs::create_dir(root.join("folder")).unwrap();
    std::fs::create_dir(root.join("SKILL.md.d")).unwrap();
    std::os::unix::fs::symlink("b", root.join("link")).unwrap();
    rustix::fs::mknodat(rustix::fs::CWD, root.join("fifo"), FileType::Fifo, rustix::fs::Mode::RUSR, 0).unwrap();
    let fd =
        rustix::fs::open(root, rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY, rustix::fs::Mode::empty())
            .unwrap();
    let folder = relist(&fd, root.as_os_str().as_bytes(), &mut Buffers::default());
    let listed: Vec<(Vec<u8>, Kind, FileType)> =
        folder.entries().map(|entry| (folder.name(entry).to_vec(), entry.kind, entry.file_type)).collect();
    let mut expected = vec![
        ("b", Kind::Other, FileType::RegularFile),
        ("SKILL.md", Kind::SkillFile, FileType::RegularFile),
        ("é", Kind::Other, FileType::RegularFile),
        (long.as_str(), Kind::Other, FileType::RegularFile),
        ("\u{10000}", Kind::Other, FileType::RegularFile),
        ("\u{ffff}", Kind::Other, FileType::RegularFile),
        ("folder", Kind::Directory, FileType::Directory),
        ("SKILL.md.d", Kind::Directory, FileType::Directory),
        ("link", Kind::Other, FileType::Symlink),
        ("fifo", Kind::Other, FileType::Fifo),
    ];
    // Code-point order, as Python sorts: U+FFFF before U+10000, unlike UTF-16.
    expected.sort_by(|a, b| a.0.cmp(b.0));
    let expected: Vec<(Vec<u8>, Kind, FileType)> =
        expected.into_iter().map(|(name, kind, file_type)| (name.as_bytes().to_vec(), kind, file_type)).collect();
    assert_eq!(listed, expected);
    assert_eq!(folder.len(), expected.len());
    let subfolders: Vec<&[u8]> = folder.subfolders().map(|entry| folder.name(entry)).collect();
    assert_eq!(subfolders, [b"SKILL.md.d".as_slice(), b"folder"]);
}

#[test]
fn a_short_listing_kept_within_its_folder_reads_as_one_kept_apart() {
    use super::listing::{Buffers, Listing, relist};
    use std::os::unix::ffi::OsStrExt as _;
    // 21 bytes of listing are kept within the folder (three for each entry, then its name), 22
    // apart; an empty folder lists nothing.
    for (names, within) in [
        (&[][..], true),
        (&["SKILL.md"][..], true),
        (&["SKILL.md", "abcdefg"][..], true),
        (&["SKILL.md", "abcdefgh"][..], false),
        (&["a", "b", "c", "d", "e", "f", "g"][..], false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        for name in names {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        let fd = rustix::fs::open(dir.path(), rustix::fs::OFlags::DIRECTORY, rustix::fs::Mode::empty()).unwrap();
        let folder = relist(&fd, dir.path().as_os_str().as_bytes(), &mut Buffers::default());
        assert_eq!(matches!(folder.listing, Listing::Within { .. }), within, "{names:?}");
        let listed: Vec<&[u8]> = folder.entries().map(|entry| folder.name(entry)).collect();
        let mut expected: Vec<&[u8]> = names.iter().map(|name| name.as_bytes()).collect();
        expected.sort();
        assert_eq!(listed, expected);
        assert_eq!(folder.len(), names.len());
    }
}
