"""RemoteSkillDiscoverer against a real `skillcat serve`, compared with nagents' own sources.

Each test starts its own server over its own tree (see conftest.py), so edits stay local to it.
"""

import asyncio
import json
import os
import socket
import threading
import time

import pytest

# These tests drive real nagents agents. Without nagents they are skipped, with the reason in the
# summary (pytest.ini asks for it), unless SKILLCAT_REQUIRE_NAGENTS=1 (scripts/test sets it): then
# the import below fails the run, as a missing reference must.
if os.environ.get("SKILLCAT_REQUIRE_NAGENTS") != "1":
    pytest.importorskip(
        "nagents", reason="nagents is not installed (scripts/setup-reference installs it into .venv)"
    )

from conftest import http_get  # noqa: E402 - after the skip above
from skillcat_support import free_port  # noqa: E402
from skillcat_support import skill_md  # noqa: E402
from skillcat_support import write_atomic  # noqa: E402
from nagents import Agent  # noqa: E402
from nagents.skills import CompositeSkillDiscoverer  # noqa: E402
from nagents.skills import DirectorySkillDiscoverer  # noqa: E402
from nagents.skills import Skill  # noqa: E402
from nagents.skills import SkillDiscoverer  # noqa: E402
from skillcat_remote import CatalogFailure  # noqa: E402
from skillcat_remote import RemoteSkillDiscoverer  # noqa: E402
from skillcat_remote import SkillcatError  # noqa: E402
from skillcat_remote import SkillcatTimeout  # noqa: E402


def agent(discoverer, **options):
    return Agent(provider=None, session_manager=None, skill_discoverer=discoverer, **options)


def run(coroutine):
    return asyncio.run(coroutine)


async def outcome(awaitable):
    """('ok', value) or ('error', type, message), to compare two sources' behaviour."""
    try:
        return ("ok", await awaitable)
    except Exception as error:  # noqa: BLE001 - compared, not handled
        return ("error", type(error), str(error))


@pytest.fixture
def tree(tmp_path):
    """A tree with every kind of SKILL.md nagents reads or skips."""
    root = tmp_path / "skills"
    write_atomic(root / "alpha/SKILL.md", skill_md("alpha", "The alpha skill", "# Alpha\n\nDo alpha things.\n"))
    write_atomic(root / "plain/SKILL.md", "# Plain\n\nA plain Markdown skill without frontmatter.\n\nMore text.\n")
    quoted = "---\nname: 'quoted-name'\ndescription: \"Quoted: yes\"\n---\nQ\n"
    write_atomic(root / "nested/deeper/quoted/SKILL.md", quoted)
    write_atomic(root / "markup/SKILL.md", skill_md("markup", 'Escapes <b>bold</b> & "quotes" — ünïcödé ✓'))
    write_atomic(root / "fallback/SKILL.md", "# Only a heading\n")
    crlf = "---\r\nname: crlf\r\ndescription: Windows line ends\r\n---\r\nLine one\r\nLine two\r\n"
    write_atomic(root / "crlf/SKILL.md", crlf)
    write_atomic(root / "big/SKILL.md", skill_md("big", "A large skill", "ü" * 30_000 + "\nend\n"))
    for index in range(40):
        generated = skill_md(f"gen-{index:02}", f"Generated skill number {index}")
        write_atomic(root / f"gen/skill-{index:02}/SKILL.md", generated)
    # Skipped by nagents (and skillcat) with diagnostics, or ignored.
    write_atomic(root / "broken/SKILL.md", "---\nname: broken\ndescription: never closed\n")
    write_atomic(root / "latin1/SKILL.md", b"---\nname: latin1\n---\ncaf\xe9\n")
    write_atomic(root / "badname/SKILL.md", skill_md("bad name!", "An invalid name"))
    write_atomic(root / "notes/README.md", "not a skill\n")
    os.symlink(root / "alpha", root / "link-to-alpha")
    return root


def test_agent_matches_nagents_directory_discoverer(serve, tree):
    server = serve(tree)
    remote = RemoteSkillDiscoverer(server.url)
    local = DirectorySkillDiscoverer([tree])
    assert isinstance(remote, SkillDiscoverer)

    async def scenario():
        remote_agent, local_agent = agent(remote), agent(local)
        remote_skills = await remote_agent.refresh_skills()
        local_skills = await local_agent.refresh_skills()
        assert dict(remote_skills) == dict(local_skills)
        assert len(remote_skills) == 47
        assert all(type(skill) is Skill for skill in remote_skills.values())
        assert remote.diagnostics == local.diagnostics
        assert len(remote.diagnostics) == 3
        for name in local_skills:
            assert await remote_agent.load_skill(name) == await local_agent.load_skill(name)
        # The discoverer's own answers: the same descriptors in the same order, the same bytes.
        assert tuple(await remote.discover()) == tuple(await local.discover())
        for skill in await local.discover():
            assert await remote.load(skill) == await local.load(skill)
        # Budgeted loads are nagents' own cut of the same content.
        small_remote, small_local = agent(remote, skill_token_limit=100), agent(local, skill_token_limit=100)
        for name in ("big", "crlf", "markup"):
            assert await small_remote.load_skill(name) == await small_local.load_skill(name)
        assert (await small_remote.load_skill("big"))["truncated"] is True
        for missing in ("nope", "broken", "latin1"):
            assert await outcome(remote_agent.load_skill(missing)) == await outcome(local_agent.load_skill(missing))

    run(scenario())
    # The catalog is big enough that the server sends it gzip-compressed, which the client inflated.
    status, headers, _ = http_get(server.url + "/skills", {"Accept-Encoding": "gzip"})
    assert (status, headers.get("Content-Encoding")) == (200, "gzip")


def test_inside_nagents_composite_both_ways(serve, tmp_path):
    remote_tree, local_tree = tmp_path / "remote", tmp_path / "local"
    write_atomic(remote_tree / "shared/SKILL.md", skill_md("shared", "The remote shared skill", "REMOTE\n"))
    write_atomic(remote_tree / "remote-only/SKILL.md", skill_md("remote-only", "Only remote"))
    write_atomic(local_tree / "shared/SKILL.md", skill_md("shared", "The local shared skill", "LOCAL\n"))
    write_atomic(local_tree / "local-only/SKILL.md", skill_md("local-only", "Only local"))
    server = serve(remote_tree)

    async def scenario(remote_first):
        remote = RemoteSkillDiscoverer(server.url)
        sources = [remote, DirectorySkillDiscoverer([local_tree])]
        reference = [DirectorySkillDiscoverer([remote_tree]), DirectorySkillDiscoverer([local_tree])]
        if not remote_first:
            sources.reverse()
            reference.reverse()
        composed = agent(CompositeSkillDiscoverer(sources))
        expected = agent(CompositeSkillDiscoverer(reference))
        skills = await composed.refresh_skills()
        assert dict(skills) == dict(await expected.refresh_skills())
        assert sorted(skills) == ["local-only", "remote-only", "shared"]
        for name in skills:
            assert await composed.load_skill(name) == await expected.load_skill(name)
        return skills["shared"], (await composed.load_skill("shared"))["content"]

    shared, content = run(scenario(remote_first=True))
    assert (shared.description, shared.location) == ("The remote shared skill", str(remote_tree / "shared/SKILL.md"))
    assert content.endswith("REMOTE\n")
    shared, content = run(scenario(remote_first=False))
    assert (shared.description, shared.location) == ("The local shared skill", str(local_tree / "shared/SKILL.md"))
    assert content.endswith("LOCAL\n")


def test_etag_caching_revalidates_with_304(serve, tmp_path):
    root = tmp_path / "skills"
    write_atomic(root / "one/SKILL.md", skill_md("one", "First"))
    server = serve(root)
    remote = RemoteSkillDiscoverer(server.url)

    async def scenario():
        first = await remote.discover()
        ok, not_modified = server.metric("/skills", 200), server.metric("/skills", 304)
        second = await remote.discover()
        assert second is first  # the cached descriptors, nothing parsed
        assert server.metric("/skills", 304) == not_modified + 1
        # nagents' Agent refreshes at every boundary: each refresh is one 304.
        refreshing = agent(remote)
        await refreshing.refresh_skills()
        await refreshing.load_skill("one")  # refreshes first, then loads
        assert server.metric("/skills", 304) == not_modified + 3
        assert server.metric("/skills", 200) == ok

        with server.expecting_a_new_catalog():  # (its own polling GETs count as 200s too)
            write_atomic(root / "two/SKILL.md", skill_md("two", "Second"))
        ok = server.metric("/skills", 200)
        third = await remote.discover()
        assert [skill.name for skill in third] == ["one", "two"]
        assert server.metric("/skills", 200) == ok + 1
        assert await remote.discover() is third

    run(scenario())


def test_stale_descriptor_raises_refresh_discovery(serve, tmp_path):
    root = tmp_path / "skills"
    write_atomic(root / "alpha/SKILL.md", skill_md("alpha", "The alpha skill", "Version 1\n"))
    write_atomic(root / "beta/SKILL.md", skill_md("beta", "The beta skill"))
    server = serve(root)
    remote = RemoteSkillDiscoverer(server.url)
    local = DirectorySkillDiscoverer([root])

    async def scenario():
        alpha = {skill.name: skill for skill in await remote.discover()}["alpha"]
        await local.discover()
        # Same descriptor, new body: the old version can no longer be loaded. Whether the server
        # has rescanned yet (412) or not (409), the answer is the same.
        with server.expecting_a_new_catalog():
            write_atomic(root / "alpha/SKILL.md", skill_md("alpha", "The alpha skill", "Version 2\n"))
            with pytest.raises(ValueError, match="refresh discovery") as raised:
                await remote.load(alpha)
            assert str(raised.value) == "Skill 'alpha' changed; refresh discovery and retry"
        with pytest.raises(ValueError, match="refresh discovery"):
            await remote.load(alpha)
        # Discovery again: the same descriptor, now at its new version.
        assert {skill.name: skill for skill in await remote.discover()}["alpha"] == alpha
        assert (await remote.load(alpha)).endswith("Version 2\n")
        assert (await agent(remote).load_skill("alpha"))["content"].endswith("Version 2\n")

        # A vanished skill: 404 for the old descriptor, then nagents' own "Unknown skill".
        beta = {skill.name: skill for skill in await remote.discover()}["beta"]
        with server.expecting_a_new_catalog():
            (root / "beta/SKILL.md").unlink()
        with pytest.raises(ValueError, match="Skill 'beta' changed; refresh discovery and retry"):
            await remote.load(beta)
        (root / "beta").rmdir()
        assert await outcome(agent(remote).load_skill("beta")) == await outcome(agent(local).load_skill("beta"))

        # Descriptors this discoverer does not currently hold, as nagents' sources refuse them.
        stranger = Skill("alpha", "Another description", alpha.location)
        with pytest.raises(ValueError, match=r"^Skill 'alpha' is not in this remote catalog; refresh discovery$"):
            await remote.load(stranger)
        with pytest.raises(ValueError, match="refresh discovery"):
            await RemoteSkillDiscoverer(server.url).load(alpha)

    run(scenario())


def test_duplicate_name_raises_nagents_message(serve, tmp_path):
    root = tmp_path / "skills"
    write_atomic(root / "one/SKILL.md", skill_md("dup", "First"))
    write_atomic(root / "two/SKILL.md", skill_md("dup", "Second"))
    server = serve(root)

    async def scenario():
        local = await outcome(DirectorySkillDiscoverer([root]).discover())
        assert local == ("error", ValueError, f"Duplicate skill name 'dup' at {root / 'two/SKILL.md'}")
        assert await outcome(RemoteSkillDiscoverer(server.url).discover()) == local
        assert await outcome(agent(RemoteSkillDiscoverer(server.url)).refresh_skills()) == local
        assert await outcome(agent(RemoteSkillDiscoverer(server.url)).load_skill("dup")) == local

        # Repaired: the same discoverer recovers on its next discovery.
        remote = RemoteSkillDiscoverer(server.url)
        assert (await outcome(remote.discover()))[1] is ValueError
        with server.expecting_a_new_catalog():
            write_atomic(root / "two/SKILL.md", skill_md("two", "Second"))
        assert [skill.name for skill in await remote.discover()] == ["dup", "two"]

    run(scenario())


def test_after_a_good_catalog_a_failed_source_keeps_it_and_says_why(serve, tmp_path):
    root = tmp_path / "skills"
    write_atomic(root / "one/SKILL.md", skill_md("dup", "First"))
    server = serve(root)
    remote = RemoteSkillDiscoverer(server.url)

    async def scenario():
        assert [skill.name for skill in await remote.discover()] == ["dup"]
        assert remote.catalog_error is None

        # A second skill of the same name: the server keeps its last good catalog, says why.
        with server.expecting_a_new_catalog():
            write_atomic(root / "two/SKILL.md", skill_md("dup", "Second"))
        assert [skill.name for skill in await remote.discover()] == ["dup"]
        error = remote.catalog_error
        assert isinstance(error, CatalogFailure)
        assert error.source == str(root)
        assert error.message == (
            f"Duplicate skill name 'dup' at {root / 'two/SKILL.md'} (the other is at {root / 'one/SKILL.md'})"
        )
        assert error.since.endswith("Z")
        skill = (await remote.discover())[0]
        assert await remote.load(skill) == skill_md("dup", "First")

        # Repaired: the failure clears.
        with server.expecting_a_new_catalog():
            write_atomic(root / "two/SKILL.md", skill_md("two", "Second"))
        assert [skill.name for skill in await remote.discover()] == ["dup", "two"]
        assert remote.catalog_error is None

    run(scenario())


def test_unreachable_server_raises_within_timeout():
    remote = RemoteSkillDiscoverer(f"http://127.0.0.1:{free_port()}", timeout=2.0)
    started = time.monotonic()
    with pytest.raises(SkillcatError, match="could not reach skillcat") as raised:
        run(remote.discover())
    assert isinstance(raised.value, OSError)
    assert time.monotonic() - started < 2.0


def test_silent_server_times_out_without_blocking_the_loop():
    with socket.socket() as silent:  # accepts connections (backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        remote = RemoteSkillDiscoverer(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.5)

        async def scenario():
            ticks = 0

            async def ticker():
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            task = asyncio.create_task(ticker())
            started = time.monotonic()
            try:
                with pytest.raises(SkillcatTimeout, match=r"did not answer within 0\.5s") as raised:
                    await remote.discover()
            finally:
                task.cancel()
            assert isinstance(raised.value, TimeoutError) and isinstance(raised.value, OSError)
            return time.monotonic() - started, ticks

        started = time.monotonic()
        elapsed, ticks = run(scenario())
        assert 0.45 <= elapsed < 1.5
        assert ticks >= 10  # the event loop kept running while the request waited
        assert time.monotonic() - started < 2.0  # and no worker thread outlived the deadline by much


def test_trickling_server_is_cut_at_the_deadline():
    """One byte at a time never trips a per-read timeout; the whole answer has one deadline."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def trickle():
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
            while not stop.wait(0.05):
                try:
                    connection.sendall(b" ")
                except OSError:
                    return

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        remote = RemoteSkillDiscoverer(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.5)
        started = time.monotonic()
        with pytest.raises(SkillcatTimeout):
            run(remote.discover())
        assert time.monotonic() - started < 1.5
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def test_token_is_sent_and_never_shown(fake):
    token = "s3cret-token-value"
    remote = RemoteSkillDiscoverer(fake.url + "/prefix/", token=token)

    async def scenario():
        (skill,) = await remote.discover()
        assert await remote.discover() == (skill,)
        assert await remote.load(skill) == "Fake ✓\n"

    run(scenario())
    paths = [path for path, _ in fake.requests]
    assert paths == ["/prefix/skills", "/prefix/skills", "/prefix/skills/fake/content"]
    assert all(headers["Authorization"] == f"Bearer {token}" for _, headers in fake.requests)
    assert "If-None-Match" not in fake.requests[0][1]
    assert fake.requests[1][1]["If-None-Match"] == '"v1"'
    assert fake.requests[2][1]["If-Match"] == '"e1"'
    for shown in (repr(remote), str(remote), repr(vars(remote))):
        assert token not in shown
    assert repr(remote) == f"RemoteSkillDiscoverer({fake.url + '/prefix/'!r}, token=<redacted>, timeout=10.0)"

    anonymous = RemoteSkillDiscoverer(fake.url)
    run(anonymous.discover())
    assert fake.requests[-1][0] == "/skills"
    assert "Authorization" not in fake.requests[-1][1]
    assert repr(anonymous) == f"RemoteSkillDiscoverer({fake.url!r}, token=None, timeout=10.0)"


def test_token_against_a_server_that_requires_one(serve, tmp_path):
    write_atomic(tmp_path / "skills" / "alpha" / "SKILL.md", skill_md("alpha", "The first skill"))
    tokens = tmp_path / "tokens"
    tokens.write_text("agent-token\n")
    server = serve(tmp_path / "skills", token_file=tokens)

    remote = RemoteSkillDiscoverer(server.url, token="agent-token")
    assert list(run(agent(remote).refresh_skills())) == ["alpha"]
    skills = run(remote.discover())
    assert run(remote.load(skills[0])) == skill_md("alpha", "The first skill")

    for refused in (RemoteSkillDiscoverer(server.url), RemoteSkillDiscoverer(server.url, token="other")):
        with pytest.raises(SkillcatError, match="401") as raised:
            run(refused.discover())
        assert raised.value.status == 401


def test_error_answers(fake):
    duplicate = "Duplicate skill name 'x' at /p/SKILL.md"
    fake.problem("/skills", 503, "catalog-unavailable", duplicate, **{"Retry-After": "1"})
    with pytest.raises(ValueError) as raised:
        run(RemoteSkillDiscoverer(fake.url).discover())
    assert type(raised.value) is ValueError and str(raised.value) == duplicate

    fake.problem("/skills", 503, "not-ready", "the catalog is not ready yet", **{"Retry-After": "1"})
    with pytest.raises(SkillcatError) as raised:
        run(RemoteSkillDiscoverer(fake.url).discover())
    error = raised.value
    assert (error.status, error.kind, error.retry_after) == (503, "not-ready", "1")
    assert error.detail == "the catalog is not ready yet"
    assert str(error) == "skillcat answered 503 Service Unavailable: the catalog is not ready yet"

    fake.problem("/skills", 401, "unauthorized", "a bearer token is required")
    with pytest.raises(SkillcatError, match="401") as raised:
        run(RemoteSkillDiscoverer(fake.url).discover())
    assert raised.value.status == 401

    fake.answers["/skills"] = (200, {"Content-Type": "application/json"}, b"<html>")
    with pytest.raises(SkillcatError, match="not UTF-8 JSON"):
        run(RemoteSkillDiscoverer(fake.url).discover())

    bad = {"skills": [{"name": "bad name", "description": "d", "location": "/l", "etag": '"e"'}]}
    fake.answers["/skills"] = (200, {"Content-Type": "application/json"}, json.dumps(bad).encode())
    with pytest.raises(ValueError, match="Skill name must contain"):  # nagents' own validation
        run(RemoteSkillDiscoverer(fake.url).discover())

    del fake.answers["/skills"]
    remote = RemoteSkillDiscoverer(fake.url)

    async def load_with(status, kind):
        fake.problem("/skills/fake/content", status, kind, "whatever")
        (skill,) = await remote.discover()
        return await outcome(remote.load(skill))

    for status, kind in ((404, "skill-not-found"), (409, "skill-changed"), (412, "precondition-failed")):
        changed = ("error", ValueError, "Skill 'fake' changed; refresh discovery and retry")
        assert run(load_with(status, kind)) == changed
    assert run(load_with(503, "catalog-unavailable")) == ("error", ValueError, "whatever")
    assert run(load_with(503, "overloaded"))[1] is SkillcatError


@pytest.mark.parametrize(
    "base_url",
    ["ftp://h/", "localhost:8080", "http://", "http://user:pw@h/", "http://h/?q=1", "http://h/#f", "http://h:x/"],
)
def test_invalid_base_url(base_url):
    with pytest.raises(ValueError):
        RemoteSkillDiscoverer(base_url)


@pytest.mark.parametrize(
    "options", [{"timeout": 0}, {"timeout": -1}, {"timeout": float("nan")}, {"token": "a\nb"}, {"token": ""}]
)
def test_invalid_options(options):
    with pytest.raises(ValueError):
        RemoteSkillDiscoverer("http://127.0.0.1:1", **options)


def test_base_url_with_trailing_slash_against_the_server(serve, tmp_path):
    root = tmp_path / "skills"
    write_atomic(root / "one/SKILL.md", skill_md("one", "First"))
    server = serve(root)
    remote = RemoteSkillDiscoverer(server.url + "/")

    async def scenario():
        (skill,) = await remote.discover()
        for _ in range(20):  # the kept-alive connection serves call after call
            assert await remote.discover() == (skill,)
            assert (await remote.load(skill)).endswith("Body.\n")
        remote.close()
        assert await remote.discover() == (skill,)

    run(scenario())


def test_search_answers_ranked_hits_with_excerpts(serve, tmp_path):
    root = tmp_path / "skills"
    write_atomic(root / "pdf-tools/SKILL.md", skill_md("pdf-tools", "Fill PDF forms", "# PDF\n\nMerge PDF files.\n"))
    write_atomic(root / "docx/SKILL.md", skill_md("docx", "Edit Word documents", "Export to PDF on request.\n"))
    write_atomic(root / "slides/SKILL.md", skill_md("slides", "Make decks"))
    server = serve(root)
    remote = RemoteSkillDiscoverer(server.url)

    async def scenario():
        found = await remote.search("pdf")
        assert [hit.name for hit in found.hits] == ["pdf-tools", "docx"]
        assert found.total == 2
        docx = found.hits[1]
        assert docx.description == "Edit Word documents"
        assert docx.excerpt_text == "Export to PDF on request."
        assert [text for text, highlighted in docx.excerpt if highlighted] == ["PDF"]
        assert docx.etag.startswith('"') and found.etag.startswith('"')
        limited = await remote.search("pdf merge files", limit=1)
        assert [hit.name for hit in limited.hits] == ["pdf-tools"]
        assert limited.total == 1
        assert (await remote.search("  ")).total == 0  # no words: nothing matches
        with pytest.raises(SkillcatError) as refused:
            await remote.search("x" * 257)
        assert (refused.value.status, refused.value.kind) == (400, "invalid-query")
        with pytest.raises(ValueError):
            await remote.search("pdf", limit=0)

    run(scenario())
