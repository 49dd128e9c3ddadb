"""Pinned skills through RemoteSkillDiscoverer: ``pins=`` and lock files.

Against a real `skillcat serve` over folders (one version per skill, the current one), compared
with nagents' own sources; against the scripted FakeSkillcat (conftest.py) for what a real server
never sends: another version than the one asked for, tampered bytes. Older versions, from a git
source's history: test_pins_git.py.
"""

import asyncio
import hashlib
import json
import os
import stat

import pytest

if os.environ.get("SKILLCAT_REQUIRE_NAGENTS") != "1":
    pytest.importorskip(
        "nagents", reason="nagents is not installed (scripts/setup-reference installs it into .venv)"
    )

from conftest import http_get  # noqa: E402 - after the skip above
from skillcat_support import skill_md  # noqa: E402
from skillcat_support import write_atomic  # noqa: E402
from nagents import Agent  # noqa: E402
from nagents.skills import DirectorySkillDiscoverer  # noqa: E402
from skillcat_remote import PinnedVersionError  # noqa: E402
from skillcat_remote import RemoteSkillDiscoverer  # noqa: E402
from skillcat_remote import SkillcatCorruptFile  # noqa: E402
from skillcat_remote import listing_version  # noqa: E402

WRONG = "sha256:" + "0" * 64


def run(coroutine):
    return asyncio.run(coroutine)


def agent(discoverer, **options):
    return Agent(provider=None, session_manager=None, skill_discoverer=discoverer, **options)


def version_of(files):
    """The version of a skill made of ``files`` ({path: (bytes, executable)}), computed here from
    the definition: SHA-256 of the lines ``<mode> <sha256 hex> <path>\\n`` in code-point order."""
    lines = "".join(
        f"{'755' if executable else '644'} {hashlib.sha256(data).hexdigest()} {path}\n"
        for path, (data, executable) in sorted(files.items())
    )
    return "sha256:" + hashlib.sha256(lines.encode()).hexdigest()


def folder_files(root):
    """{path: (bytes, executable)} of the files a skill's folder serves: regular files beneath it,
    no hidden name, no symlink."""
    found = {}
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if not name.startswith(".")]
        for name in files:
            path = os.path.join(folder, name)
            if name.startswith(".") or os.path.islink(path):
                continue
            with open(path, "rb") as stream:
                data = stream.read()
            found[os.path.relpath(path, root).replace(os.sep, "/")] = (data, bool(os.stat(path).st_mode & stat.S_IXUSR))
    return found


def served_version(server, name, version=None):
    query = "" if version is None else f"?version={version}"
    status, _, body = http_get(f"{server.url}/skills/{name}{query}")
    assert status == 200, body
    return json.loads(body)["version"]


def write_lock(path, skills):
    """A lock file as `skillcat download --lock` writes it: sorted keys, 2-space indent, one
    trailing newline."""
    path.write_text(json.dumps({"lockfile_version": 1, "skills": skills}, indent=2, sort_keys=True) + "\n")
    return path


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "skills"
    toolbox = root / "toolbox"
    write_atomic(toolbox / "SKILL.md", skill_md("toolbox", "A skill with supporting files", "Run scripts/run.sh.\n"))
    write_atomic(toolbox / "scripts/run.sh", "#!/bin/sh\necho hi\n")
    os.chmod(toolbox / "scripts/run.sh", 0o755)
    write_atomic(toolbox / "references/guide.md", "# Guide\n" + "text ✓ " * 2000)
    write_atomic(toolbox / "assets/logo.bin", bytes(range(256)) * 40)
    write_atomic(toolbox / "docs/a folder/ü n i.txt", "unicode and spaces\n")
    write_atomic(root / "big/SKILL.md", skill_md("big", "A large skill", "ü" * 30_000 + "\nend\n"))
    write_atomic(root / "crlf/SKILL.md", "---\r\nname: crlf\r\ndescription: Windows line ends\r\n---\r\nLine one\r\n")
    write_atomic(root / "plain/SKILL.md", skill_md("plain", "An unpinned skill"))
    return root


def test_a_pin_of_the_current_version_is_discovered_and_loaded_identically(serve, tree, tmp_path):
    server = serve(tree)
    pins = {name: served_version(server, name) for name in ("toolbox", "big", "crlf")}
    # The server's version is the definition's, computed here from the folder.
    assert pins["toolbox"] == version_of(folder_files(tree / "toolbox"))
    pinned = RemoteSkillDiscoverer(server.url, pins=pins)
    plain = RemoteSkillDiscoverer(server.url)
    local = DirectorySkillDiscoverer([tree])
    assert pinned.pins == pins

    async def scenario():
        skills = tuple(await pinned.discover())
        assert skills == tuple(await plain.discover()) == tuple(await local.discover())
        for skill in skills:
            assert await pinned.load(skill) == await local.load(skill)
        toolbox = next(skill for skill in skills if skill.name == "toolbox")
        listing = await pinned.list_files(toolbox)
        assert listing.version == pins["toolbox"] == listing_version(listing.files)
        assert listing.files == (await plain.list_files(toolbox)).files
        done = await pinned.download(toolbox, tmp_path / "installed")
        assert done.version == pins["toolbox"]
        assert folder_files(tmp_path / "installed") == folder_files(tree / "toolbox")
        # A second discovery (a 304 for the catalog) keeps the pinned descriptors.
        assert tuple(await pinned.discover()) == skills
        # Loads through nagents agents, within and over a budget, are nagents' own of the same files.
        for limit in (100, 10_000):
            remote_agent, local_agent = agent(pinned, skill_token_limit=limit), agent(local, skill_token_limit=limit)
            for name in ("toolbox", "big", "crlf", "plain"):
                assert await remote_agent.load_skill(name) == await local_agent.load_skill(name)
        assert (await agent(pinned, skill_token_limit=100).load_skill("big"))["truncated"] is True

    run(scenario())


def test_a_pin_of_another_version_raises_naming_the_skill_and_the_version(serve, tree):
    server = serve(tree)
    current = served_version(server, "toolbox")
    for pins in ({"toolbox": WRONG}, {"toolbox": current, "never-was": WRONG}):
        remote = RemoteSkillDiscoverer(server.url, pins=pins)
        with pytest.raises(PinnedVersionError) as caught:
            run(remote.discover())
        assert isinstance(caught.value, ValueError)
        name = "toolbox" if "never-was" not in pins else "never-was"
        assert (caught.value.name, caught.value.version) == (name, WRONG)
        assert f"'{name}'" in str(caught.value) and WRONG in str(caught.value)
        # The agent's refresh fails the same way: no catalog with the current version instead.
        with pytest.raises(ValueError, match=WRONG):
            run(agent(remote).refresh_skills())


def test_invalid_pins_are_refused_at_once():
    for pins, error in (
        ({"toolbox": "v1"}, ValueError),
        ({"toolbox": "sha256:" + "A" * 64}, ValueError),
        ({"toolbox": WRONG[:-1]}, ValueError),
        ({"bad name!": WRONG}, ValueError),
        ({"toolbox": None}, ValueError),
        (["toolbox"], TypeError),
    ):
        with pytest.raises(error):
            RemoteSkillDiscoverer("http://127.0.0.1:1", pins=pins)


def test_a_lock_file_pins_the_skills_of_its_source(serve, tree, tmp_path):
    server = serve(tree)
    current = served_version(server, "toolbox")
    lock = write_lock(
        tmp_path / "skills-lock.json",
        {
            "toolbox": {"source": server.url, "version": current},
            # Another server's entries are not this discoverer's: ignored, however wrong here.
            "big": {"source": "http://elsewhere.invalid:8080", "version": WRONG},
            "unknown-here": {"source": server.url + "/prefix", "version": WRONG},
        },
    )
    # The base URL as given, a trailing slash or not.
    for base_url in (server.url, server.url + "/"):
        remote = RemoteSkillDiscoverer(base_url, lock=lock)
        assert remote.pins == {"toolbox": current}
        local = DirectorySkillDiscoverer([tree])

        async def scenario(remote=remote, local=local):
            skills = tuple(await remote.discover())
            assert skills == tuple(await local.discover())
            for skill in skills:
                assert await remote.load(skill) == await local.load(skill)

        run(scenario())

    # A pin given in pins= wins over the lock's for the same name, either way round.
    wrong_lock = write_lock(tmp_path / "wrong-lock.json", {"toolbox": {"source": server.url, "version": WRONG}})
    remote = RemoteSkillDiscoverer(server.url, lock=wrong_lock, pins={"toolbox": current})
    assert remote.pins == {"toolbox": current}
    assert [skill.name for skill in run(remote.discover())] == ["big", "crlf", "plain", "toolbox"]
    remote = RemoteSkillDiscoverer(server.url, lock=lock, pins={"toolbox": WRONG})
    with pytest.raises(PinnedVersionError, match="toolbox"):
        run(remote.discover())
    with pytest.raises(PinnedVersionError, match=WRONG):
        run(RemoteSkillDiscoverer(server.url, lock=wrong_lock).discover())

    # A lock that is not one is refused when the discoverer is made, naming the file.
    bad = tmp_path / "bad-lock.json"
    for text in (
        "not json",
        json.dumps({"lockfile_version": 2, "skills": {}}),
        json.dumps({"lockfile_version": 1}),
        json.dumps({"lockfile_version": 1, "skills": {"toolbox": {"version": current}}}),
        json.dumps({"lockfile_version": 1, "skills": {"toolbox": {"source": server.url, "version": "v1"}}}),
        json.dumps({"lockfile_version": 1, "skills": {"toolbox": {"source": server.url}}}),
        # Another server's entry, but not one of a lock.
        json.dumps({"lockfile_version": 1, "skills": {"toolbox": {"source": "http://other", "version": "v1"}}}),
        json.dumps({"lockfile_version": 1, "skills": {"bad name!": {"source": "http://other", "version": WRONG}}}),
    ):
        bad.write_text(text)
        with pytest.raises(ValueError, match="bad-lock.json"):
            RemoteSkillDiscoverer(server.url, lock=bad)
    with pytest.raises(FileNotFoundError):
        RemoteSkillDiscoverer(server.url, lock=tmp_path / "missing.json")


def test_a_pinned_folder_skill_edited_on_the_server_fails_and_never_falls_back(serve, tree, tmp_path):
    """A folder source has only its current version: once the folder changes, the pinned version is
    gone, and every read of it fails naming the skill and the version."""
    server = serve(tree)
    pinned_version = served_version(server, "toolbox")
    remote = RemoteSkillDiscoverer(server.url, pins={"toolbox": pinned_version})
    plain = RemoteSkillDiscoverer(server.url)
    original = (tree / "toolbox/SKILL.md").read_text()

    async def before():
        skills = {skill.name: skill for skill in await remote.discover()}
        assert await remote.load(skills["toolbox"]) == original
        return skills

    skills = run(before())
    edited = skill_md("toolbox", "Edited since it was pinned", "New body.\n")
    with server.expecting_a_new_catalog():
        write_atomic(tree / "toolbox/SKILL.md", edited)
    assert served_version(server, "toolbox") != pinned_version

    async def after():
        again = {skill.name: skill for skill in await remote.discover()}
        # The pinned descriptor is the one of the pinned version, not the edited one.
        assert again["toolbox"] == skills["toolbox"]
        assert again["toolbox"].description == "A skill with supporting files"
        toolbox = again["toolbox"]
        for attempt in (lambda: remote.load(toolbox), lambda: remote.download(toolbox, tmp_path / "out")):
            with pytest.raises(PinnedVersionError) as caught:
                await attempt()
            assert (caught.value.name, caught.value.version) == ("toolbox", pinned_version)
            assert "'toolbox'" in str(caught.value) and pinned_version in str(caught.value)
            assert "version-not-found" in str(caught.value)
        assert not (tmp_path / "out").exists()
        # Through an agent: nagents' ValueError, never the edited text.
        with pytest.raises(ValueError, match=pinned_version):
            await agent(remote).load_skill("toolbox")
        # The unpinned skills of the same discoverer are current as ever.
        assert await remote.load(again["plain"]) == (tree / "plain/SKILL.md").read_text()
        current = {skill.name: skill for skill in await plain.discover()}
        assert await plain.load(current["toolbox"]) == edited

    run(after())
    # A new discoverer with the same pin fails to discover.
    with pytest.raises(PinnedVersionError, match=pinned_version):
        run(RemoteSkillDiscoverer(server.url, pins={"toolbox": pinned_version}).discover())


# --- what a real server never sends -------------------------------------------------------------

FAKE_FILES = {"SKILL.md": (b"---\nname: fake\ndescription: A fake, pinned\n---\nPinned body.\n", False),
              "scripts/run.sh": (b"#!/bin/sh\necho pinned\n", True)}
FAKE_VERSION = version_of(FAKE_FILES)


def serve_pinned(fake, files=FAKE_FILES, version=FAKE_VERSION, descriptor_version=None, listed=None, sent=None):
    """Makes ``fake`` serve skill ``fake`` at ``version`` (``?version=`` on every route): its
    descriptor (claiming ``descriptor_version``), a listing of ``listed`` (default ``files``)
    claiming ``version``, and the bytes of ``files`` or, per path, of ``sent``."""
    query = f"?version={version}"
    descriptor = {"name": "fake", "description": "A fake, pinned", "location": "/f@pinned", "source": "s",
                  "etag": '"p1"', "version": descriptor_version or version}
    json_headers = {"Content-Type": "application/json"}
    fake.answers["/skills/fake" + query] = (200, json_headers, json.dumps(descriptor).encode())
    entries = [
        {"path": path, "size": len(data), "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
         "media_type": "application/octet-stream", "executable": executable}
        for path, (data, executable) in sorted((listed or files).items())
    ]
    listing = {"name": "fake", "etag": '"p1"', "version": version, "files": entries, "skipped": []}
    fake.answers["/skills/fake/files" + query] = (200, json_headers, json.dumps(listing).encode())
    served = {path: data for path, (data, _) in files.items()}
    served.update(sent or {})
    markdown = {"Content-Type": "text/markdown; charset=utf-8"}
    fake.answers["/skills/fake/content" + query] = (200, markdown, served["SKILL.md"])
    for path, data in served.items():
        fake.answers[f"/skills/fake/files/{path}{query}"] = (200, {}, data)


def test_pinned_reads_ask_for_the_version_and_check_it(fake, tmp_path):
    serve_pinned(fake)
    remote = RemoteSkillDiscoverer(fake.url, pins={"fake": FAKE_VERSION})

    async def scenario():
        (skill,) = await remote.discover()
        assert (skill.description, skill.location) == ("A fake, pinned", "/f@pinned")
        assert await remote.load(skill) == FAKE_FILES["SKILL.md"][0].decode()
        done = await remote.download(skill, tmp_path / "fake")
        assert (done.files, done.version) == (2, FAKE_VERSION)
        assert folder_files(tmp_path / "fake") == FAKE_FILES

    run(scenario())
    paths = [path for path, _ in fake.requests]
    query = f"?version={FAKE_VERSION}"
    assert paths == [
        "/skills",
        "/skills/fake" + query,
        "/skills/fake/files" + query,
        "/skills/fake/content" + query,
        "/skills/fake/files/SKILL.md" + query,
        "/skills/fake/files/scripts/run.sh" + query,
    ]
    # Pinned reads are identified by the version alone, never by the current etag.
    assert all("If-Match" not in headers for path, headers in fake.requests if "?version=" in path)


def test_an_answer_that_is_not_the_pinned_version_is_refused(fake, tmp_path):
    other = version_of({"SKILL.md": (b"other\n", False)})
    tampered = {"SKILL.md": (b"---\nname: fake\ndescription: A fake, pinned\n---\nTampered.\n", False)}

    def attempt(action, problem=None, **serving):
        fake.answers.clear()
        serve_pinned(fake, **serving)
        if problem is not None:
            fake.problem(*problem)
        remote = RemoteSkillDiscoverer(fake.url, pins={"fake": FAKE_VERSION})

        async def scenario():
            (skill,) = await remote.discover()
            return await action(remote, skill)

        with pytest.raises(PinnedVersionError) as caught:
            run(scenario())
        assert (caught.value.name, caught.value.version) == ("fake", FAKE_VERSION)
        assert "'fake'" in str(caught.value) and FAKE_VERSION in str(caught.value)
        return caught.value

    def load(remote, skill):
        return remote.load(skill)

    async def read_script(remote, skill):
        listing = await remote.list_files(skill)
        return await remote.read_file(skill, next(file for file in listing.files if file.path == "scripts/run.sh"))

    # A server that ignores ?version= and sends the current descriptor.
    assert "descriptor" in str(attempt(load, descriptor_version=other))
    # A listing whose lines hash to another version than it claims.
    assert "listed are version" in str(attempt(load, listed={**FAKE_FILES, **tampered}))
    # SKILL.md bytes other than the listed ones.
    assert "SKILL.md hashes to" in str(attempt(load, sent={"SKILL.md": tampered["SKILL.md"][0]}))
    # A file's bytes other than the listed ones: a corrupt file, and not the version.
    error = attempt(read_script, sent={"scripts/run.sh": b"#!/bin/sh\necho tampered\n"})
    assert isinstance(error, SkillcatCorruptFile)
    # A file the server no longer has at the version: its problem (longer than the file) read
    # whole, the version named, no corrupt file.
    gone = (f"/skills/fake/files/scripts/run.sh?version={FAKE_VERSION}", 404, "version-not-found", "gone " + "x" * 200)
    error = attempt(read_script, problem=gone)
    assert "version-not-found: gone xxx" in str(error) and not isinstance(error, SkillcatCorruptFile)
    # A version the server does not have: its problem's detail in the message.
    fake.answers.clear()
    fake.problem(
        f"/skills/fake?version={FAKE_VERSION}", 404, "version-not-found", f"skill 'fake' has no version {FAKE_VERSION}"
    )
    with pytest.raises(PinnedVersionError, match="version-not-found: skill 'fake' has no version"):
        run(RemoteSkillDiscoverer(fake.url, pins={"fake": FAKE_VERSION}).discover())
