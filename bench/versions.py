#!/usr/bin/env python3
"""Versions of a git source's skills at 10,000 skills and 2,000 commits (issue 23's "Done when").

The repository is generated with `git fast-import` (seeded, so every run builds the same one) and
cached: 10,000 skills in folders `skills/s00000` ... (`SKILL.md` with name and description
frontmatter; every fourth also has a `reference.md`), committed at once, then 1,999 commits on
`main` that each edit, add or delete one to five skills (a tenth of the edits fall on 50 "hot"
skills; an add is sometimes the re-add of a deleted skill with its last content), a tag every 100
commits (annotated and lightweight in turn). The release binary serves it as a `file://` git source
from a config file (`max_entries` raised above the tree's entries; `GET /skills` must list every
skill of the head with no diagnostic) with a fresh state dir, and the run measures:

1. start -> history ready: from the spawn until the server logs "built the history" (its log filter
   is `warn,skillcat::sources::git=debug`: the git source's lines only, nothing per request); the
   elapsed time the server gives for the build is shown next to it. Information.
2. the first `GET /skills/{name}/versions` of a skill, after the history is ready: many different
   skills (a seeded sample of the head's catalog, the hot skills among them), each asked once on
   one keep-alive connection; p50 and p95. Target: p95 <= 200 ms.
3. a repeated `/versions` of the same skill: the sampled skills with the most versions, each asked
   again and again; p50 and p95. Target: p95 <= 5 ms.
4. `POST /skills/{name}/load?version=<an older digest>` against `POST /skills/{name}/load`, on
   skills with an older version in the history, both warmed with one request each, then asked in
   turn (current, pinned) round after round; the ratio of the medians (and of the p95s), and the
   server's CPU per request of each over blocks of the same requests. Target: ratio of the medians
   <= 2x.
5. memory: VmRSS and VmHWM (/proc/PID/status) of the server with `history = 1000` after all of the
   above, against the same repository served with `history = 1` after the same requests (its pinned
   loads of older versions answer 404 there: its history is the head alone). Target: VmRSS ratio
   <= 1.5x.

Before measuring it checks that pinned answers are right: for sampled (skill, version) pairs of the
/versions answers (older versions among them), `GET /skills/{name}/content?version=V` equals
`git show <commit>:skills/<name>/SKILL.md` of the commit /versions names, the version equals the
digest of the folder at that commit recomputed from git (`<mode> <sha256> <path>` lines), a pin by
commit prefix and by tag answers the folder at that commit, and the pinned load is the SKILL.md of
the version; any mismatch stops the run.

    python3 bench/versions.py                                    # builds the release binary
    python3 bench/versions.py --binary target/release/skillcat [--quick] [--json FILE] [--keep]

Standard library and `git`. The repository is cached under --cache (default
$TMPDIR/skillcat-bench-cache); state dirs and logs go to a temporary directory, deleted unless
--keep. Exit status: 0 when every target is met, 1 when one is missed, 2 when the setup failed.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402
from common import (  # noqa: E402
    BenchError,
    Server,
    ServerError,
    cargo_build,
    cpu_seconds,
    free_port,
    keep_or_remove,
    load_average,
    log,
    memory_of,
    percentile,
    wait_until,
)

SKILLS = 10_000
COMMITS = 2_000
SEED = 23
HISTORY = 1_000
# Bumped whenever the generator changes, so that a cached repository of an older generator is
# not used.
GENERATOR = 1
HOT = 50
LOAD_BODY = b'{"token_limit": 10000}'
GIT_ENV = dict(
    os.environ,
    GIT_CONFIG_NOSYSTEM="1",
    GIT_CONFIG_GLOBAL=os.devnull,
    GIT_TERMINAL_PROMPT="0",
)
EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z, the first commit's time; one commit a minute after it


# --- the repository ----------------------------------------------------------------------------


def git(*arguments: str, cwd: Path, binary: bool = False) -> str | bytes:
    try:
        result = subprocess.run(["git", *arguments], cwd=cwd, env=GIT_ENV, capture_output=True, timeout=600)
    except FileNotFoundError:
        raise BenchError("git is not installed (apt-get install git)") from None
    if result.returncode != 0:
        raise BenchError(f"git {' '.join(arguments)} exited {result.returncode}: "
                         f"{result.stderr.decode(errors='replace').strip()[-500:]}")
    return result.stdout if binary else result.stdout.decode().strip()


def skill_text(name: str, revision: int, commit: int) -> bytes:
    lines = [
        "---",
        f"name: {name}",
        f"description: Skill {name} of the versions bench, revision {revision}. Use it when the bench asks for {name}.",
        "---",
        f"# {name}",
        "",
        f"Revision {revision}, written by commit {commit}.",
        "",
    ]
    for step in range(1, 4 + int(name[1:]) % 5):
        lines.append(f"{step}. Step {step} of {name}: read the input, check it, and answer (revision {revision}).")
    return ("\n".join(lines) + "\n").encode()


def reference_text(name: str, revision: int) -> bytes:
    return f"# Reference for {name}\n\nNotes, revision {revision}.\n".encode()


class Generator:
    """The repository's history, commit by commit, as `git fast-import` commands. A skill's state is
    (revision of SKILL.md, the commit that wrote it, revision of reference.md or None)."""

    def __init__(self, skills: int, commits: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.skills, self.commits = skills, commits
        self.live: dict[str, tuple[int, int, int | None]] = {}
        self.order: list[str] = []  # the live names, for uniform random choices
        self.position: dict[str, int] = {}
        self.deleted: dict[str, tuple[int, int, int | None]] = {}
        self.next_name = skills
        self.hot = [f"s{index:05d}" for index in range(0, skills, max(1, skills // HOT))][:HOT]
        self.stats = {"edits": 0, "adds": 0, "readds": 0, "deletes": 0, "tags": 0}

    def _add_live(self, name: str, state: tuple[int, int, int | None]) -> None:
        self.live[name] = state
        self.position[name] = len(self.order)
        self.order.append(name)

    def _remove_live(self, name: str) -> tuple[int, int, int | None]:
        index = self.position.pop(name)
        last = self.order.pop()
        if last != name:
            self.order[index] = last
            self.position[last] = index
        return self.live.pop(name)

    @staticmethod
    def _file(path: str, data: bytes) -> bytes:
        return b"M 100644 inline " + path.encode() + b"\ndata " + str(len(data)).encode() + b"\n" + data + b"\n"

    def _folder(self, name: str, state: tuple[int, int, int | None]) -> bytes:
        """Every file of the skill in `state`."""
        revision, written, reference = state
        out = self._file(f"skills/{name}/SKILL.md", skill_text(name, revision, written))
        if reference is not None:
            out += self._file(f"skills/{name}/reference.md", reference_text(name, reference))
        return out

    def _change(self, number: int, touched: set[str]) -> tuple[str, bytes] | None:
        """One change of commit `number`, on a skill not in `touched`."""
        roll = self.rng.random()
        if roll < 0.7:
            name = self.rng.choice(self.hot) if self.rng.random() < 0.1 else None
            if name is None or name not in self.live:
                name = self.order[self.rng.randrange(len(self.order))]
            if name in touched:
                return None
            revision, written, reference = self.live[name]
            self.stats["edits"] += 1
            if self.rng.random() < 0.25:
                reference = (reference or 0) + 1
                self.live[name] = (revision, written, reference)
                return f"edit {name}/reference.md", self._file(f"skills/{name}/reference.md", reference_text(name, reference))
            self.live[name] = (revision + 1, number, reference)
            return f"edit {name}", self._file(f"skills/{name}/SKILL.md", skill_text(name, revision + 1, number))
        if roll < 0.85:
            if self.deleted and self.rng.random() < 0.3:
                # A skill deleted before comes back with the files it had: its old version again.
                name = sorted(self.deleted)[self.rng.randrange(len(self.deleted))]
                if name in touched:
                    return None
                state = self.deleted.pop(name)
                self.stats["readds"] += 1
                verb = "re-add"
            else:
                name = f"s{self.next_name:05d}"
                self.next_name += 1
                state = (1, number, 1 if self.rng.random() < 0.25 else None)
                self.stats["adds"] += 1
                verb = "add"
            self._add_live(name, state)
            return f"{verb} {name}", self._folder(name, state)
        name = self.order[self.rng.randrange(len(self.order))]
        if name in touched:
            return None
        self.deleted[name] = self._remove_live(name)
        self.stats["deletes"] += 1
        return f"delete {name}", f"D skills/{name}\n".encode()

    def stream(self):
        """The fast-import commands, a commit (and its tag) at a time."""
        for number in range(1, self.commits + 1):
            timestamp = EPOCH + 60 * number
            changes = []
            if number == 1:
                message = f"{self.skills} skills"
                for index in range(self.skills):
                    name = f"s{index:05d}"
                    state = (1, number, 1 if index % 4 == 0 else None)
                    self._add_live(name, state)
                    changes.append(self._folder(name, state))
            else:
                done: list[str] = []
                touched: set[str] = set()
                for _ in range(self.rng.randint(1, 5)):
                    change = self._change(number, touched)
                    if change:
                        done.append(change[0])
                        touched.add(change[0].split()[-1].split("/")[0])
                        changes.append(change[1])
                message = ", ".join(done) or "nothing changed"
            message_bytes = message.encode()
            head = (f"commit refs/heads/main\nmark :{number}\n"
                    f"author bench <bench@example.invalid> {timestamp} +0000\n"
                    f"committer bench <bench@example.invalid> {timestamp} +0000\n"
                    f"data {len(message_bytes)}\n").encode() + message_bytes + b"\n"
            yield head + b"".join(changes) + b"\n"
            if number % 100 == 0:
                self.stats["tags"] += 1
                tag = f"v{number // 100}"
                if (number // 100) % 2:
                    text = f"Release {tag}".encode()
                    yield (f"tag {tag}\nfrom :{number}\ntagger bench <bench@example.invalid> {timestamp} +0000\n"
                           f"data {len(text)}\n").encode() + text + b"\n"
                else:
                    yield f"reset refs/tags/{tag}\nfrom :{number}\n\n".encode()


def repository(cache: Path, skills: int, commits: int, seed: int) -> tuple[Path, dict]:
    """The bare repository of `skills` skills and `commits` commits (generated once, then taken
    from `cache`), and what the generator did."""
    path = cache / f"versions-g{GENERATOR}-{skills}-{commits}-{seed}.git"
    manifest = path / "bench-manifest.json"
    if manifest.is_file():
        try:
            made = json.loads(manifest.read_text())
            if git("rev-parse", "refs/heads/main", cwd=path) == made["head"]:
                log(f"repository: cached at {path}")
                return path, made
        except (BenchError, ValueError, KeyError):
            pass
    shutil.rmtree(path, ignore_errors=True)
    cache.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=path.name + ".", dir=cache))
    started = time.perf_counter()
    git("init", "-q", "--bare", "-b", "main", str(partial), cwd=cache)
    generator = Generator(skills, commits, seed)
    importer = subprocess.Popen(["git", "fast-import", "--quiet", "--done"], cwd=partial, env=GIT_ENV,
                                stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for chunk in generator.stream():
            importer.stdin.write(chunk)
        importer.stdin.write(b"done\n")
        importer.stdin.close()
    except BrokenPipeError:
        pass
    error = importer.stderr.read().decode(errors="replace")
    if importer.wait() != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise BenchError(f"git fast-import exited {importer.returncode}: {error[-1000:]}")
    git("gc", "-q", cwd=partial)
    made = {
        "head": git("rev-parse", "refs/heads/main", cwd=partial),
        "skills_at_head": len(generator.live),
        "commits": int(git("rev-list", "--count", "--first-parent", "main", cwd=partial)),
        "entries_at_head": 1 + len(generator.live) + sum(2 if state[2] is not None else 1
                                                         for state in generator.live.values()),
        "changes": generator.stats,
        "hot": generator.hot,
        "generated_s": round(time.perf_counter() - started, 1),
    }
    (partial / "bench-manifest.json").write_text(json.dumps(made, indent=2) + "\n")
    os.replace(partial, path)
    log(f"repository: {commits:,} commits, {made['skills_at_head']:,} skills at the head, generated with "
        f"git fast-import in {made['generated_s']} s ({path})")
    return path, made


def folder_version(repo: Path, commit: str, name: str) -> str:
    """The version of skill `name` at `commit` recomputed from git: the sha256 of its files'
    `<mode> <sha256> <path>` lines in code-point path order."""
    listing = git("ls-tree", "-r", "-z", commit, f"skills/{name}/", cwd=repo, binary=True)
    lines = []
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, path = entry.partition(b"\t")
        mode, kind, blob = meta.split()
        if kind != b"blob":
            continue
        data = git("cat-file", "blob", blob.decode(), cwd=repo, binary=True)
        relative = path.decode()[len(f"skills/{name}/"):]
        lines.append((relative, f"{'755' if mode == b'100755' else '644'} {hashlib.sha256(data).hexdigest()} {relative}\n"))
    lines.sort(key=lambda line: line[0])
    return "sha256:" + hashlib.sha256("".join(line for _, line in lines).encode()).hexdigest()


# --- the server --------------------------------------------------------------------------------


class Client:
    """One keep-alive connection; each request timed from its send to the end of its body."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes, dict, float]:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        for attempt in (0, 1):
            started = time.perf_counter()
            try:
                self.connection.request(method, path, body=body, headers=headers)
                response = self.connection.getresponse()
                data = response.read()
                return (response.status, data, {k.lower(): v for k, v in response.getheaders()},
                        (time.perf_counter() - started) * 1000)
            except (http.client.HTTPException, ConnectionError):
                self.connection.close()
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def get_json(self, path: str) -> dict:
        status, data, _, _ = self.call("GET", path)
        if status != 200:
            raise BenchError(f"GET {path} answered {status}: {data[:300]!r}")
        return json.loads(data)

    def close(self) -> None:
        self.connection.close()


def start(binary: Path, repo: Path, history: int, max_entries: int, work: Path, label: str) -> Server:
    state = work / f"state-{label}"
    state.mkdir()
    config = work / f"skillcat-{label}.toml"
    config.write_text(f'[[sources]]\nkind = "git"\nurl = {json.dumps(repo.as_uri())}\nhistory = {history}\n'
                      f'max_entries = {max_entries}\n', encoding="utf-8")
    env = dict(os.environ, RUST_LOG="warn,skillcat::sources::git=debug")
    return Server(binary, ["--config", str(config), "--state-dir", str(state), "--log-format", "json"],
                  listen=f"127.0.0.1:{free_port()}", timeout=300, probe_timeout=2.0, env=env,
                  log_path=work / f"server-{label}.log")


def history_built(server: Server) -> dict | None:
    for record in server.log_records():
        if record.get("message") == "built the history":
            return record
    return None


def elapsed_ms(text: str) -> float | None:
    """A Rust Duration's Debug form (`1.234567s`, `850.2ms`, `12µs`) in milliseconds."""
    for suffix, factor in (("ms", 1.0), ("µs", 1e-3), ("us", 1e-3), ("ns", 1e-6), ("s", 1000.0)):
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * factor
            except ValueError:
                return None
    return None


def wait_for_history(server: Server, timeout: float) -> dict:
    """Waits for the "built the history" line; the milliseconds from the spawn until it was seen."""
    found: dict = {}

    def built() -> bool:
        record = history_built(server)
        if record is not None:
            found.update(record)
        return record is not None

    wait_until(built, timeout, "the server logged no \"built the history\"", server)
    seen = time.perf_counter()
    fields = found.get("fields", found)
    return {"ready_ms": (seen - server.spawned) * 1000, "readyz_ms": server.ready_after * 1000,
            "build_ms": elapsed_ms(str(fields.get("elapsed", ""))), "record": found}


def stats(values: list[float]) -> dict:
    ordered = sorted(values)
    return {"count": len(ordered), "p50": percentile(ordered, 0.5), "p95": percentile(ordered, 0.95),
            "max": ordered[-1], "mean": statistics.fmean(ordered)}


def catalog_check(client: Client, made: dict) -> dict:
    listing = client.get_json("/skills")
    skills = listing["skills"]
    diagnostics = listing.get("diagnostics") or []
    errors = [key for key in ("error", "errors") if listing.get(key)]
    if len(skills) != made["skills_at_head"] or diagnostics or errors:
        raise BenchError(f"GET /skills lists {len(skills):,} skills ({made['skills_at_head']:,} at the head) with "
                         f"diagnostics {json.dumps(diagnostics)[:500]} {errors}: is max_entries too small?")
    sources = listing.get("sources") or []
    if not any(made["head"] in json.dumps(source) for source in sources):
        raise BenchError(f"GET /skills does not serve the head {made['head']}: {json.dumps(sources)[:300]}")
    return {"skills": len(skills), "diagnostics": len(diagnostics), "names": sorted(skill["name"] for skill in skills)}


# --- the measurement ---------------------------------------------------------------------------


def plan(names: list[str], made: dict, first: int, seed: int) -> list[str]:
    """The skills whose first /versions is timed: the hot ones, then a seeded sample of the rest."""
    rng = random.Random(seed + 1)
    hot = [name for name in made["hot"] if name in set(names)]
    rest = sorted(set(names) - set(hot))
    return hot[: first // 5] + rng.sample(rest, first - len(hot[: first // 5]))


def measure_server(client: Client, server: Server, sample: list[str], pinned_plan: list[tuple[str, str]] | None,
                   repeats: int, rounds: int, has_history: bool, cpu_requests: int) -> dict:
    """Steps 2-4 on one server; `pinned_plan` (skill, older digest) comes from the first server's
    answers when given, else from this one's."""
    out: dict = {}
    first, versions_of = [], {}
    for name in sample:
        status, data, _, took = client.call("GET", f"/skills/{name}/versions?limit=1000")
        if status != 200:
            raise BenchError(f"GET /skills/{name}/versions answered {status}: {data[:300]!r}")
        first.append(took)
        versions_of[name] = json.loads(data)["versions"]
    out["first_versions_ms"] = stats(first)
    counts = [len(versions) for versions in versions_of.values()]
    out["versions_per_skill"] = {"mean": statistics.fmean(counts), "max": max(counts),
                                 "with_older": sum(1 for count in counts if count > 1)}

    busiest = sorted(sample, key=lambda name: (-len(versions_of[name]), name))[:20]
    repeated = []
    for _ in range(repeats):
        for name in busiest:
            status, data, _, took = client.call("GET", f"/skills/{name}/versions?limit=1000")
            if status != 200:
                raise BenchError(f"GET /skills/{name}/versions answered {status}")
            repeated.append(took)
    out["repeated_versions_ms"] = stats(repeated)
    out["repeated_skills"] = len(busiest)

    if pinned_plan is None:
        pinned_plan = [(name, next(entry["version"] for entry in versions_of[name] if not entry["current"]))
                       for name in busiest if any(not entry["current"] for entry in versions_of[name])][:20]
    out["pinned_plan"] = pinned_plan
    current_path = lambda name: f"/skills/{name}/load"  # noqa: E731
    pinned_path = lambda name, version: f"/skills/{name}/load?version={version}"  # noqa: E731
    for name, version in pinned_plan:  # a first request of each, untimed
        for path in (current_path(name), pinned_path(name, version)):
            status, data, _, _ = client.call("POST", path, LOAD_BODY)
            if status != 200 and not (not has_history and "version=" in path and status == 404):
                raise BenchError(f"POST {path} answered {status}: {data[:300]!r}")
    current, pinned = [], []
    for _ in range(rounds):
        for name, version in pinned_plan:
            current.append(client.call("POST", current_path(name), LOAD_BODY)[3])
            pinned.append(client.call("POST", pinned_path(name, version), LOAD_BODY)[3])
    out["load_current_ms"], out["load_pinned_ms"] = stats(current), stats(pinned)
    # The server's CPU per request: a block of each kind (the tick is 10 ms: blocks of seconds).
    pids = [server.pid]
    blocks = max(rounds, -(-cpu_requests // len(pinned_plan)))
    for kind in ("current", "pinned"):
        before, started = cpu_seconds(pids), time.perf_counter()
        count = 0
        for _ in range(blocks):
            for name, version in pinned_plan:
                client.call("POST", current_path(name) if kind == "current" else pinned_path(name, version), LOAD_BODY)
                count += 1
        out[f"load_{kind}_cpu_us"] = (cpu_seconds(pids) - before) / count * 1e6
        out[f"load_{kind}_wall_ms"] = (time.perf_counter() - started) / count * 1000
    return out | {"versions_of": versions_of}


def verify(client: Client, repo: Path, versions_of: dict, made: dict, seed: int, pairs: int) -> list[dict]:
    """Pinned answers against git itself; BenchError at the first mismatch."""
    rng = random.Random(seed + 2)
    candidates = sorted((name, entry["version"], entry["commit"], entry["current"])
                        for name, entries in versions_of.items() for entry in entries)
    older = [item for item in candidates if not item[3]]
    chosen = rng.sample(older, min(len(older), pairs - pairs // 4)) + rng.sample(candidates, min(len(candidates), pairs // 4))
    checked = []
    for name, version, commit, current in chosen:
        expected = git("show", f"{commit}:skills/{name}/SKILL.md", cwd=repo, binary=True)
        status, body, headers, _ = client.call("GET", f"/skills/{name}/content?version={version}")
        assert status == 200, f"{name}@{version}: /content answered {status}: {body[:200]!r}"
        assert body == expected, f"{name}@{version}: /content differs from git show {commit}:skills/{name}/SKILL.md"
        recomputed = folder_version(repo, commit, name)
        assert recomputed == version, f"{name}: /versions says {version} at {commit}, git's folder is {recomputed}"
        assert version in headers.get("etag", ""), f"{name}@{version}: ETag {headers.get('etag')!r}"
        # The same folder by commit prefix.
        status, body, _, _ = client.call("GET", f"/skills/{name}/content?version={commit[:12]}")
        assert status == 200 and body == expected, f"{name}@{commit[:12]}: {status}, differs from git show"
        status, body, _, _ = client.call("POST", f"/skills/{name}/load?version={version}", LOAD_BODY)
        assert status == 200, f"{name}@{version}: load answered {status}"
        loaded = json.loads(body)
        text = loaded.get("content") if isinstance(loaded, dict) else None
        marker = next(line for line in expected.decode().splitlines() if line.startswith("Revision "))
        assert text is not None and marker in text, f"{name}@{version}: the pinned load lacks {marker!r}"
        checked.append({"skill": name, "version": version, "commit": commit, "current": current})
    # A pin by tag: the folder at the tagged commit, for a skill that existed there.
    for tag in ("v11", "v14", "v20"):
        try:
            tagged = git("rev-parse", f"{tag}^{{commit}}", cwd=repo)
        except BenchError:
            continue
        for name in sorted(versions_of)[:3]:
            try:
                expected = git("show", f"{tagged}:skills/{name}/SKILL.md", cwd=repo, binary=True)
            except BenchError:
                continue
            status, body, _, _ = client.call("GET", f"/skills/{name}/content?version={tag}")
            assert status == 200 and body == expected, f"{name}@{tag}: {status}, differs from git show {tag}"
            checked.append({"skill": name, "version": tag, "commit": tagged, "current": None})
    return checked


def measure(binary: Path, cache: Path, quick: bool = False, keep: bool = False, seed: int = SEED) -> dict:
    if not binary.is_file():
        raise BenchError(f"no binary at {binary}")
    if shutil.which("git") is None:
        raise BenchError("git is not installed (apt-get install git)")
    repo, made = repository(cache, SKILLS, COMMITS, seed)
    max_entries = max(100_000, 4 * made["entries_at_head"])
    first_count, repeats, rounds, pairs, cpu_requests = (40, 10, 10, 8, 500) if quick else (300, 50, 50, 24, 4000)
    work = Path(os.path.realpath(tempfile.mkdtemp(prefix="skillcat-versions-")))
    result: dict = {"skills": made["skills_at_head"], "commits": made["commits"], "history": HISTORY,
                    "max_entries": max_entries, "changes": made["changes"], "repository": str(repo),
                    "load_at_start": load_average()}
    servers: list[Server] = []
    try:
        runs = {}
        pinned_plan = None
        sample: list[str] = []
        for history in (HISTORY, 1):
            label = f"history-{history}"
            log(f"skillcat on {repo.as_uri()}, history = {history}, max_entries = {max_entries:,}")
            server = start(binary, repo, history, max_entries, work, label)
            servers.append(server)
            client = Client(server.port)
            run: dict = {}
            if history > 1:
                run["history_ready"] = wait_for_history(server, 600)
                log(f"  ready (/readyz 200) after {run['history_ready']['readyz_ms']:,.0f} ms; history built "
                    f"after {run['history_ready']['ready_ms']:,.0f} ms (the build: {run['history_ready']['build_ms']} ms)")
            else:
                run["readyz_ms"] = server.ready_after * 1000
            checked = catalog_check(client, made)
            run["catalog"] = {key: value for key, value in checked.items() if key != "names"}
            if not sample:
                sample = plan(checked["names"], made, first_count, seed)
            run["memory_ready_kib"] = memory_of(server.pid)
            run.update(measure_server(client, server, sample, pinned_plan, repeats, rounds, history > 1, cpu_requests))
            versions_of = run.pop("versions_of")
            if history > 1:
                pinned_plan = run["pinned_plan"]
                if not pinned_plan:
                    raise BenchError("no sampled skill has an older version to pin")
                run["verified"] = verify(client, repo, versions_of, made, seed, pairs)
                log(f"  verified {len(run['verified'])} pinned answers against git")
            time.sleep(0.5)
            run["memory_kib"] = memory_of(server.pid)
            log(f"  first /versions p50 {run['first_versions_ms']['p50']:.1f} ms p95 {run['first_versions_ms']['p95']:.1f} ms; "
                f"repeated p50 {run['repeated_versions_ms']['p50']:.2f} ms p95 {run['repeated_versions_ms']['p95']:.2f} ms; "
                f"load current p50 {run['load_current_ms']['p50']:.2f} ms, pinned p50 {run['load_pinned_ms']['p50']:.2f} ms; "
                f"VmRSS {run['memory_kib']['VmRSS'] / 1024:.1f} MiB, VmHWM {run['memory_kib']['VmHWM'] / 1024:.1f} MiB")
            client.close()
            server.check_alive()
            run["exit"] = server.stop()
            servers.remove(server)
            runs[label] = run
        result["runs"] = runs
        result["load_at_end"] = load_average()
    finally:
        for server in servers:
            server.stop()
        keep_or_remove(work, keep, result)
    return result


# --- standalone --------------------------------------------------------------------------------


def default_cache() -> Path:
    return Path(tempfile.gettempdir()) / "skillcat-bench-cache"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--binary", type=Path, help="a built skillcat release binary (default: cargo build --release)")
    parser.add_argument("--quick", action="store_true", help="smoke test: fewer skills asked, fewer rounds")
    parser.add_argument("--cache", type=Path, default=default_cache(),
                        help="where the generated repository is kept (default $TMPDIR/skillcat-bench-cache)")
    parser.add_argument("--json", type=Path, help="also write every measurement as JSON to this file")
    parser.add_argument("--keep", action="store_true", help="keep the state dirs and the servers' logs")
    args = parser.parse_args()
    results: dict = {}
    errors: dict[str, str] = {}
    try:
        binary = args.binary.resolve() if args.binary else cargo_build([], "skillcat")
        results["versions"] = measure(binary, args.cache, args.quick, args.keep)
    except (BenchError, ServerError, AssertionError) as error:
        log(f"bench/versions.py: {type(error).__name__}: {error}")
        errors["j"] = f"{type(error).__name__}: {error}"
    table = report.versions_rows(results, errors)
    for row in table:
        print(f"[{row['verdict']:>6}] {row['id']}  {row['what']}")
        for key in ("skillcat", "reference", "ratio", "target", "error"):
            if row.get(key, "—") != "—":
                print(f"           {key + ':':<11}{row[key]}")
    print()
    print(report.summary_line(table))
    if results.get("versions", {}).get("work"):
        print(f"kept {results['versions']['work']}")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "errors": errors}, indent=2) + "\n")
        log(f"wrote {args.json}")
    if errors:
        return 2
    return 1 if any(row["verdict"] == "missed" for row in table) else 0


if __name__ == "__main__":
    sys.exit(main())
