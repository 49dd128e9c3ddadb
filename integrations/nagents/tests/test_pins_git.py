"""Pinned skills of a git source through RemoteSkillDiscoverer: a repository made with `git`,
several commits and tags, served by `skillcat serve --git file://...`; older versions pinned by
digest and by the digest a tag resolves to, each compared with the files at its commit."""

import json
import os
import subprocess

import pytest

if os.environ.get("SKILLCAT_REQUIRE_NAGENTS") != "1":
    pytest.importorskip(
        "nagents", reason="nagents is not installed (scripts/setup-reference installs it into .venv)"
    )

from skillcat_support import Server  # noqa: E402 - after the skip above
from skillcat_support import skill_md  # noqa: E402
from skillcat_support import write_atomic  # noqa: E402
from nagents.skills import budget_skill_content  # noqa: E402
from nagents.skills import parse_skill_metadata  # noqa: E402
from skillcat_remote import RemoteSkillDiscoverer  # noqa: E402
from test_pins import agent  # noqa: E402
from test_pins import folder_files  # noqa: E402
from test_pins import run  # noqa: E402
from test_pins import served_version  # noqa: E402
from test_pins import version_of  # noqa: E402


GIT_ENV = {
    "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
    "HOME": "/nonexistent",
    "LC_ALL": "C",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_AUTHOR_NAME": "Skillcat Tests",
    "GIT_AUTHOR_EMAIL": "tests@skillcat.invalid",
    "GIT_COMMITTER_NAME": "Skillcat Tests",
    "GIT_COMMITTER_EMAIL": "tests@skillcat.invalid",
}


def git(repo, *arguments, when=None):
    env = dict(GIT_ENV)
    if when is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"{when} +0000"
    done = subprocess.run(["git", "-C", str(repo), *arguments], env=env, capture_output=True, check=False)
    assert done.returncode == 0, f"git {arguments}: {done.stderr.decode(errors='replace')}"
    return done.stdout


def files_at(repo, commit, folder):
    """{path: (bytes, executable)} of ``folder`` at ``commit``, paths relative to it."""
    found = {}
    for line in git(repo, "ls-tree", "-r", "-z", commit, "--", folder + "/").split(b"\0"):
        if not line:
            continue
        meta, path = line.split(b"\t", 1)
        mode, kind, blob = meta.decode().split()
        if kind == "blob" and mode in ("100644", "100755"):
            relative = path.decode()[len(folder) + 1 :]
            found[relative] = (git(repo, "cat-file", "blob", blob), mode == "100755")
    return found


class History:
    """A repository of three commits, served: ``toolbox`` edited in each (its script executable),
    ``retired`` deleted by the third; tags ``v1`` (lightweight, on the first) and ``v2``
    (annotated, on the second)."""

    def __init__(self, work, commits, server):
        self.work = work
        self.commits = commits
        self.server = server
        self.expected = [files_at(work, sha, "toolbox") for sha in commits]
        self.versions = [version_of(files) for files in self.expected]


@pytest.fixture
def history(skillcat_bin, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    commits = []

    def commit(message, when):
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", message, when=when)
        commits.append(git(work, "rev-parse", "HEAD").decode().strip())

    write_atomic(work / "toolbox/SKILL.md", skill_md("toolbox", "Toolbox, first", "First body.\n"))
    write_atomic(work / "toolbox/scripts/run.sh", "#!/bin/sh\necho one\n")
    os.chmod(work / "toolbox/scripts/run.sh", 0o755)
    write_atomic(work / "retired/SKILL.md", skill_md("retired", "Deleted later", "Old.\n"))
    commit("first", "2026-01-01T00:00:00")
    git(work, "tag", "v1")
    write_atomic(work / "toolbox/SKILL.md", skill_md("toolbox", "Toolbox, second", "Second body.\n" * 50))
    write_atomic(work / "toolbox/references/notes.md", "# Notes ✓\n")
    commit("second", "2026-01-02T00:00:00")
    git(work, "tag", "-a", "-m", "annotated", "v2")
    write_atomic(work / "toolbox/scripts/run.sh", "#!/bin/sh\necho three\n")
    (work / "retired/SKILL.md").unlink()
    (work / "retired").rmdir()
    commit("third", "2026-01-03T00:00:00")
    bare = tmp_path / "served.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    server = Server(
        skillcat_bin,
        ["--log-format", "json", "--no-builtin", "--rescan-interval", "0",
         "--state-dir", str(tmp_path / "state"), "--git", f"file://{bare}"],
    )
    try:
        yield History(work, commits, server)
    finally:
        server.stop()


def test_git_history_pins_an_older_version_by_digest_and_by_tag(history, tmp_path):
    work, commits, server = history.work, history.commits, history.server
    expected, versions = history.expected, history.versions
    assert len(set(versions)) == 3
    assert served_version(server, "toolbox") == versions[2]
    # The tag resolves to the digest of the files at its commit; pinned by that digest.
    assert served_version(server, "toolbox", "v2") == versions[1]
    retired = version_of(files_at(work, commits[0], "retired"))
    assert served_version(server, "retired", "v1") == retired

    for index, pins in ((0, {"toolbox": versions[0], "retired": retired}), (1, {"toolbox": versions[1]})):
        remote = RemoteSkillDiscoverer(server.url, pins=pins)

        async def scenario(remote=remote, index=index, pins=pins):
            skills = {skill.name: skill for skill in await remote.discover()}
            # A skill the current catalog no longer has is still there, pinned.
            assert sorted(skills) == sorted(pins)
            assert skills["toolbox"].description == ("Toolbox, first", "Toolbox, second")[index]
            assert await remote.load(skills["toolbox"]) == expected[index]["SKILL.md"][0].decode()
            listing = await remote.list_files(skills["toolbox"])
            assert listing.version == versions[index]
            assert {file.path for file in listing.files} == set(expected[index])
            done = await remote.download(skills["toolbox"], tmp_path / f"toolbox-{index}")
            assert done.version == versions[index]
            assert folder_files(tmp_path / f"toolbox-{index}") == expected[index]
            if "retired" in pins:
                assert await remote.load(skills["retired"]) == skill_md("retired", "Deleted later", "Old.\n")
            # The descriptor is what nagents reads in the SKILL.md of that commit, and an
            # agent's budgeted load nagents' own cut of it.
            text = expected[index]["SKILL.md"][0].decode()
            assert parse_skill_metadata(text, skills["toolbox"].location, "toolbox") == skills["toolbox"]
            result = await agent(remote, skill_token_limit=50).load_skill("toolbox")
            assert result == budget_skill_content(skills["toolbox"], text, 50)
            assert result["truncated"] is (index == 1)

        run(scenario())
    # The current version, unpinned, is the last commit's.
    plain = RemoteSkillDiscoverer(server.url)

    async def current():
        skills = {skill.name: skill for skill in await plain.discover()}
        assert sorted(skills) == ["toolbox"]
        return (await plain.list_files(skills["toolbox"])).version

    assert run(current()) == versions[2]


def test_a_lock_written_by_skillcat_download_pins_the_python_client(history, skillcat_bin, tmp_path):
    """`skillcat download --version v1 --lock` (the CLI) writes the lock; the Python client reads
    it and loads exactly what the CLI installed."""
    server, expected, versions = history.server, history.expected, history.versions
    lock, into = tmp_path / "skills-lock.json", tmp_path / "installed"
    done = subprocess.run(
        [str(skillcat_bin), "download", "--from", server.url + "/", "--version", "v1", "--lock", str(lock),
         "--into", str(into), "toolbox"],
        capture_output=True, check=False, timeout=60,
        # Straight to the server on loopback, whatever proxy the environment names.
        env={name: value for name, value in os.environ.items() if "proxy" not in name.lower()},
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    written = json.loads(lock.read_bytes())
    assert written == {"lockfile_version": 1, "skills": {"toolbox": {"source": server.url, "version": versions[0]}}}
    # The bytes the contract gives, the same in both languages.
    assert lock.read_text() == json.dumps(written, indent=2, sort_keys=True) + "\n"
    assert folder_files(into / "toolbox") == expected[0]
    remote = RemoteSkillDiscoverer(server.url, lock=lock)
    assert remote.pins == {"toolbox": versions[0]}

    async def scenario():
        (skill,) = await remote.discover()
        assert await remote.load(skill) == (into / "toolbox/SKILL.md").read_text()
        assert (await remote.list_files(skill)).version == versions[0]

    run(scenario())
