"""The folder of a skill through RemoteSkillDiscoverer: listing, verified reads, atomic downloads.

Against a real `skillcat serve` where the server's behaviour matters, and against the scripted
FakeSkillcat (conftest.py) for what a real server never sends: corrupt bytes, hostile paths.
"""

import asyncio
import hashlib
import os
import stat

import pytest

if os.environ.get("SKILLCAT_REQUIRE_NAGENTS") != "1":
    pytest.importorskip(
        "nagents", reason="nagents is not installed (scripts/setup-reference installs it into .venv)"
    )

from skillcat_support import skill_md  # noqa: E402 - after the skip above
from skillcat_support import write_atomic  # noqa: E402
from skillcat_remote import Downloaded  # noqa: E402
from skillcat_remote import RemoteSkillDiscoverer  # noqa: E402
from skillcat_remote import SkillcatCorruptFile  # noqa: E402
from skillcat_remote import SkillcatError  # noqa: E402


def run(coroutine):
    return asyncio.run(coroutine)


def snapshot(root):
    """{relative path: (kind, mode, bytes)} of everything beneath ``root``, symlinks not followed:
    two folders are equal, modes included, exactly when their snapshots are."""
    found = {}
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            relative = os.path.relpath(path, root)
            if stat.S_ISDIR(info.st_mode):
                found[relative] = ("folder", stat.S_IMODE(info.st_mode), None)
            elif stat.S_ISLNK(info.st_mode):
                found[relative] = ("symlink", None, os.readlink(path))
            else:
                with open(path, "rb") as stream:
                    found[relative] = ("file", stat.S_IMODE(info.st_mode), stream.read())
    return found


def chmod_tree(root):
    """Source modes as git checks them out (0755 executables, 0644 files, 0755 folders), whatever
    the umask of the machine running the tests."""
    for folder, folders, files in os.walk(root):
        for name in folders:
            os.chmod(os.path.join(folder, name), 0o755)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755 if os.stat(path).st_mode & stat.S_IXUSR else 0o644)
    os.chmod(root, 0o755)


@pytest.fixture
def folder_skill(tmp_path):
    """A skill folder like the public collections' (scripts, references, assets), with what is
    never served beside it: a hidden file, a hidden folder and a symlink."""
    root = tmp_path / "skills"
    skill = root / "toolbox"
    write_atomic(skill / "SKILL.md", skill_md("toolbox", "A skill with supporting files", "Run scripts/run.sh.\n"))
    write_atomic(skill / "scripts/run.sh", "#!/bin/sh\necho hi\n")
    os.chmod(skill / "scripts/run.sh", 0o755)
    write_atomic(skill / "scripts/helper.py", "print('help')\n")
    write_atomic(skill / "references/guide.md", "# Guide\n" + "text ✓ " * 2000)
    write_atomic(skill / "assets/logo.bin", bytes(range(256)) * 40)
    write_atomic(skill / "assets/empty.txt", b"")
    write_atomic(skill / "docs/a folder/ü n i.txt", "unicode and spaces\n")
    chmod_tree(skill)
    write_atomic(skill / ".env", "SECRET=1\n")
    write_atomic(skill / ".git/config", "[core]\n")
    os.symlink("/etc/passwd", skill / "passwd-link")
    return root, skill


def served_view(skill):
    """What the server serves of ``skill``: everything but hidden names and symlinks."""
    view = snapshot(skill)
    return {
        path: entry
        for path, entry in view.items()
        if entry[0] != "symlink" and not any(part.startswith(".") for part in path.split(os.sep))
    }


def test_a_download_equals_the_source_folder_byte_for_byte_modes_included(serve, folder_skill, tmp_path):
    root, skill = folder_skill
    server = serve(root)
    remote = RemoteSkillDiscoverer(server.url)
    into = tmp_path / "project" / ".agents" / "skills"
    into.mkdir(parents=True)

    async def scenario():
        (toolbox,) = await remote.discover()
        listing = await remote.list_files(toolbox)
        local = {path: data for path, (kind, _, data) in served_view(skill).items() if kind == "file"}
        assert [file.path for file in listing.files] == sorted(path.replace(os.sep, "/") for path in local)
        for file in listing.files:
            data = local[file.path]
            assert (file.size, file.digest) == (len(data), "sha256:" + hashlib.sha256(data).hexdigest())
            assert file.executable == (file.path == "scripts/run.sh")
            assert await remote.read_file(toolbox, file) == data
        assert [entry.path for entry in listing.skipped] == ["passwd-link"]
        return await remote.download(toolbox, into / "toolbox")

    done = run(scenario())
    assert isinstance(done, Downloaded)
    assert (done.name, done.files, done.replaced, done.leftover) == ("toolbox", 7, False, None)
    assert snapshot(into / "toolbox") == served_view(skill)
    assert os.listdir(into) == ["toolbox"], "no staging folder is left beside it"


def test_missing_folders_above_the_target_are_created_as_the_cli_creates_them(serve, folder_skill, tmp_path):
    root, skill = folder_skill
    server = serve(root)
    remote = RemoteSkillDiscoverer(server.url)
    into = tmp_path / "fresh-project" / ".agents" / "skills"

    async def scenario():
        (toolbox,) = await remote.discover()
        return await remote.download(toolbox, into / "toolbox")

    done = run(scenario())
    assert (done.name, done.replaced) == ("toolbox", False)
    assert snapshot(into / "toolbox") == served_view(skill)
    assert os.listdir(into) == ["toolbox"]


def test_an_existing_target_is_refused_unless_replace_and_then_swapped(serve, folder_skill, tmp_path):
    root, skill = folder_skill
    server = serve(root)
    remote = RemoteSkillDiscoverer(server.url)
    target = tmp_path / "toolbox"
    write_atomic(target / "old.txt", "mine\n")

    async def scenario():
        (toolbox,) = await remote.discover()
        with pytest.raises(FileExistsError):
            await remote.download(toolbox, target)
        assert snapshot(target) == {"old.txt": ("file", stat.S_IMODE(os.stat(target / "old.txt").st_mode), b"mine\n")}
        done = await remote.download(toolbox, str(target), replace=True)
        assert done.replaced and done.leftover is None
        # A file is never replaced, with or without replace.
        write_atomic(tmp_path / "a-file", "x")
        for replace in (False, True):
            with pytest.raises(FileExistsError):
                await remote.download(toolbox, tmp_path / "a-file", replace)

    run(scenario())
    assert snapshot(target) == served_view(skill)
    assert sorted(os.listdir(tmp_path)) == ["a-file", "skills", "toolbox"]


def test_a_skill_changed_on_the_server_is_stale_and_nothing_is_written(serve, folder_skill, tmp_path):
    root, skill = folder_skill
    server = serve(root)
    remote = RemoteSkillDiscoverer(server.url)
    (toolbox,) = run(remote.discover())
    listing = run(remote.list_files(toolbox))
    with server.expecting_a_new_catalog():
        write_atomic(skill / "references/guide.md", "# Changed\n")
    changed = "Skill 'toolbox' changed; refresh discovery and retry"
    with pytest.raises(ValueError, match=changed):
        run(remote.list_files(toolbox))
    with pytest.raises(ValueError, match=changed):
        run(remote.download(toolbox, tmp_path / "toolbox"))
    guide = next(file for file in listing.files if file.path == "references/guide.md")
    with pytest.raises(ValueError, match=changed):
        run(remote.read_file(toolbox, guide))
    assert sorted(os.listdir(tmp_path)) == ["skills"]
    # After discovering again, the new version downloads.
    (toolbox,) = run(remote.discover())
    run(remote.download(toolbox, tmp_path / "toolbox"))
    assert (tmp_path / "toolbox/references/guide.md").read_text() == "# Changed\n"


def test_files_need_the_token_of_a_server_that_requires_one(serve, folder_skill, tmp_path):
    root, _ = folder_skill
    tokens = tmp_path / "tokens"
    tokens.write_text("agent-token\n")
    server = serve(root, token_file=tokens)
    remote = RemoteSkillDiscoverer(server.url, token="agent-token")
    (toolbox,) = run(remote.discover())
    assert run(remote.download(toolbox, tmp_path / "toolbox")).files == 7


def test_corrupt_bytes_are_an_error_and_leave_nothing(fake, tmp_path):
    fake.serve_files({"SKILL.md": (b"# Fake\n", False), "data.bin": (b"good", False)}, sent={"data.bin": b"evil"})
    remote = RemoteSkillDiscoverer(fake.url)
    write_atomic(tmp_path / "kept/old.txt", "old")
    before = snapshot(tmp_path)

    async def scenario():
        (skill,) = await remote.discover()
        listing = await remote.list_files(skill)
        with pytest.raises(SkillcatCorruptFile, match="hashes to"):
            await remote.read_file(skill, listing.files[1])
        for target, replace in ((tmp_path / "fresh", False), (tmp_path / "kept", True)):
            with pytest.raises(SkillcatCorruptFile):
                await remote.download(skill, target, replace)

    run(scenario())
    assert snapshot(tmp_path) == before
    for sent, match in ((b"goo", "3 bytes, not the 4"), (b"goodies", "longer than listed")):
        fake.serve_files({"SKILL.md": (b"# Fake\n", False), "data.bin": (b"good", False)}, sent={"data.bin": sent})
        (skill,) = run(remote.discover())
        listing = run(remote.list_files(skill))
        with pytest.raises(SkillcatCorruptFile, match=match):
            run(remote.read_file(skill, listing.files[1]))


@pytest.mark.parametrize(
    "path",
    [
        "../escaped.txt",
        "../../../escaped.txt",
        "scripts/../../escaped.txt",
        "/tmp/skillcat-escaped.txt",
        ".git/hooks/post-checkout",
        "..",
        "a\\..\\..\\escaped.txt",
        "a//b",
        "nul\0byte",
    ],
)
def test_a_listing_naming_paths_outside_the_folder_writes_nothing_anywhere(fake, tmp_path, path):
    fake.serve_files({"SKILL.md": (b"# Fake\n", False), path: (b"#!/bin/sh\necho pwned\n", True)})
    remote = RemoteSkillDiscoverer(fake.url)
    into = tmp_path / "project/.agents/skills"
    into.mkdir(parents=True)
    before = snapshot(tmp_path)
    escape = os.path.normpath(os.path.join(into, path.replace("\0", "")))

    async def scenario():
        (skill,) = await remote.discover()
        with pytest.raises(SkillcatError, match="unsafe path"):
            await remote.list_files(skill)
        with pytest.raises(SkillcatError, match="unsafe path"):
            await remote.download(skill, into / "fake")

    run(scenario())
    assert snapshot(tmp_path) == before
    assert path == ".." or not os.path.exists(escape)
    # Refused whole: not one file was fetched.
    assert not [request for request, _ in fake.requests if "/files/" in request]


def test_a_listing_that_cannot_be_one_folder_is_refused(fake):
    remote = RemoteSkillDiscoverer(fake.url)
    (skill,) = run(remote.discover())
    fake.serve_files({"SKILL.md": (b"#", False), "a": (b"", False), "a/b": (b"", False)})
    with pytest.raises(SkillcatError, match="both as a file and as a folder"):
        run(remote.list_files(skill))
    fake.serve_files({f"f{index}": (b"", False) for index in range(513)})
    with pytest.raises(SkillcatError, match="more than 512"):
        run(remote.list_files(skill))


def test_a_skill_over_the_bounds_on_the_server_is_a_422_error(fake):
    detail = "the skill has more than 512 files (counting stopped at 513)"
    fake.problem("/skills/fake/files", 422, "files-unavailable", detail)
    remote = RemoteSkillDiscoverer(fake.url)
    (skill,) = run(remote.discover())
    with pytest.raises(SkillcatError) as raised:
        run(remote.list_files(skill))
    assert (raised.value.status, raised.value.kind, raised.value.detail) == (422, "files-unavailable", detail)
    requests = [(path, headers.get("If-Match")) for path, headers in fake.requests]
    assert requests[-1] == ("/skills/fake/files", '"e1"')


def test_the_writing_refuses_on_its_own_what_a_checked_listing_never_holds(tmp_path):
    import skillcat_remote

    def entry(path, data=b""):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        return skillcat_remote.RemoteFile(path, len(data), digest, "text/plain", False), data

    write_atomic(tmp_path / "kept/SKILL.md", "old")
    before = snapshot(tmp_path)
    # '..' is a real folder to openat (O_NOFOLLOW does not stop it): the path check must.
    with pytest.raises(SkillcatError, match="unsafe path"):
        skillcat_remote._install(str(tmp_path / "fresh"), [entry("SKILL.md"), entry("../escaped")], False)
    # A file where a folder was made (two names one on a case-folding filesystem would be the
    # same): O_EXCL refuses it, and the staging folder goes.
    for target, replace in (("fresh", False), ("kept", True)):
        with pytest.raises(FileExistsError):
            skillcat_remote._install(str(tmp_path / target), [entry("SKILL.md"), entry("x/y"), entry("x")], replace)
    assert snapshot(tmp_path) == before


def test_the_staging_folder_holds_no_skill_md_until_everything_else_is_written(tmp_path):
    # nagents walks hidden folders: a scan meeting a SKILL.md in the staging folder would see the
    # skill twice and fail, so every SKILL.md appears only at the end.
    import skillcat_remote

    def entry(path, data):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        return skillcat_remote.RemoteFile(path, len(data), digest, "text/markdown", False), data

    contents = [entry("SKILL.md", b"# A"), entry("nested/inner/SKILL.md", b"# B"), entry("x", b"")]
    root = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for file, data in contents:
            skillcat_remote._write_file(root, file.path, data, file.executable)
        names = [name for _, _, files in os.walk(tmp_path) for name in files]
        assert "SKILL.md" not in names and names.count(".SKILL.md.skillcat-part") == 2
        for file, _ in contents[:2]:
            skillcat_remote._publish_skill_file(root, file.path)
    finally:
        os.close(root)
    found = sorted(
        os.path.relpath(os.path.join(folder, name), tmp_path)
        for folder, _, files in os.walk(tmp_path)
        for name in files
    )
    assert found == ["SKILL.md", "nested/inner/SKILL.md", "x"]
    assert (tmp_path / "nested/inner/SKILL.md").read_bytes() == b"# B"
