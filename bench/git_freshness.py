#!/usr/bin/env python3
"""Freshness of a git source: how long after a push's webhook GET /skills shows it, and how soon a
server restarted on an existing state dir is ready.

For each size (200 and 10,000 skills) it builds a tree with `discovery_ratio.build_tree` (teams of
skills, a tenth of them with a `references/` folder, as bench/scale.py), commits it in a working
repository and pushes it to a bare repository that a real `git daemon` serves on loopback
(`git://127.0.0.1:PORT/skills.git`). The release binary then serves that URL as its one source
(`--git URL --no-builtin` at 200 skills; at 10,000 a `--config` file, whose `max_entries` is raised
above the tree's entries), with a fresh `--state-dir` and `--webhook-secret-file`. The source
keeps its default interval (a fetch every 60 s): the webhook is what makes it fetch.

- Push -> visible: edits of a description, new skills and deleted skills, in turn, each committed
  and pushed (`git push` to the bare repository from the working clone); right after the push
  returns, `POST /hooks/git` with the secret as a bearer token. Each change is timed from the
  hook's 202 until a GET /skills polled in a tight loop on one keep-alive connection (conditional
  on the last ETag, so an unchanged catalog costs a 304) shows both the pushed commit in
  `"sources"` and the change. Reported: p50/p99/max, the mean fetch
  (`skillcat_git_fetch_seconds_total` over `skillcat_git_fetches_total{outcome="ok"}`) and the mean
  rescan (`skillcat_scan_duration_seconds`) the changes cost, and for comparison the mean `git fetch`
  of the same push from the same daemon into a bare mirror (run after the change is seen, never
  alongside the server's fetch). Target: p99 <= 2 s.
- Restart on the state dir (10,000 skills): the server is stopped (SIGTERM), then started again on
  the same state dir, first with the git daemon stopped (the remote refuses connections: the
  mirror alone must be served), then with it running again on the same port. Each start is timed
  from the spawn until GET /readyz answers 200 and GET /skills lists every skill at the last
  pushed commit. Target: <= 3 s (the slowest start). The page cache is warm: the state dir was
  just written.

Standard library and the `git` executable (with `git daemon`). Trees, repositories and state dirs
go to a temporary directory and are deleted afterwards (unless --keep).

    python3 bench/git_freshness.py                          # 200 and 10,000 skills
    python3 bench/git_freshness.py --quick --binary target/release/skillcat
    RUST_LOG=skillcat=debug python3 bench/git_freshness.py --sizes 10000 --keep   # the server's log kept

Exit status: 0 when every target is met, 1 when one is missed, 2 when the setup failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import discovery_ratio  # noqa: E402
import report  # noqa: E402
from common import (  # noqa: E402
    BenchError,
    Process,
    Server,
    ServerError,
    cargo_build,
    free_port,
    keep_or_remove,
    log,
    percentile,
    request,
    skill_md,
    wait_until,
    write_atomic,
)
from scale import Poller, metrics  # noqa: E402

# skillcat's default bound on the entries (folders and files) one source may walk.
DEFAULT_MAX_ENTRIES = 10_000
SECRET = "bench-webhook-secret"
REPOSITORY = "skills.git"
# git run with no user or system configuration, and an author of its own.
GIT_ENV = dict(
    os.environ,
    GIT_CONFIG_NOSYSTEM="1",
    GIT_CONFIG_GLOBAL=os.devnull,
    GIT_TERMINAL_PROMPT="0",
    GIT_AUTHOR_NAME="bench",
    GIT_AUTHOR_EMAIL="bench@example.invalid",
    GIT_COMMITTER_NAME="bench",
    GIT_COMMITTER_EMAIL="bench@example.invalid",
)


# --- git ---------------------------------------------------------------------------------------


def git(*arguments: str, cwd: Path) -> str:
    """`git ARGUMENTS` in `cwd`; its standard output, stripped."""
    try:
        result = subprocess.run(["git", *arguments], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        raise BenchError("git is not installed (apt-get install git)") from None
    if result.returncode != 0:
        raise BenchError(f"git {' '.join(arguments)} exited {result.returncode}: {result.stderr.strip()[-500:]}")
    return result.stdout.strip()


def commit_and_push(checkout: Path, message: str) -> str:
    """Commits everything in the working clone and pushes it; the new commit's id."""
    git("add", "-A", cwd=checkout)
    git("commit", "-q", "-m", message, cwd=checkout)
    git("push", "-q", "origin", "main", cwd=checkout)
    return git("rev-parse", "HEAD", cwd=checkout)


def start_daemon(base: Path, port: int, log_path: Path) -> Process:
    """`git daemon` serving every repository under `base` on 127.0.0.1:`port`, answering."""
    daemon = Process(
        ["git", "daemon", "--reuseaddr", f"--base-path={base}", "--export-all", "--listen=127.0.0.1", f"--port={port}"],
        name="git daemon", env=GIT_ENV, log_path=log_path,
    )
    url = f"git://127.0.0.1:{port}/{REPOSITORY}"

    def answers() -> bool:
        probe = subprocess.run(["git", "ls-remote", url], env=GIT_ENV, capture_output=True, timeout=30)
        return probe.returncode == 0

    try:
        wait_until(answers, 30, f"git daemon did not answer on {url}", daemon)
    except BaseException:
        daemon.stop()
        raise
    return daemon


def tree_size(path: Path) -> int:
    return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file())


# --- the server --------------------------------------------------------------------------------


def fetch_metrics(port: int) -> dict[str, float]:
    """The git sources' fetches (ok, failed, seconds) and the rescans (count, seconds), summed over
    sources."""
    values = metrics(port)
    totals = {"fetches": 0.0, "failed": 0.0, "fetch_s": 0.0, "scans": 0.0, "scan_s": 0.0}
    for series, value in values.items():
        if series.startswith("skillcat_git_fetches_total{"):
            totals["fetches" if 'outcome="ok"' in series else "failed"] += value
        elif series.startswith("skillcat_git_fetch_seconds_total{"):
            totals["fetch_s"] += value
    totals["scans"] = values.get("skillcat_scan_duration_seconds_count", 0.0)
    totals["scan_s"] = values.get("skillcat_scan_duration_seconds_sum", 0.0)
    return totals


def difference(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {key: after[key] - before.get(key, 0.0) for key in after}


def webhook(port: int, url: str) -> tuple[float, float]:
    """POST /hooks/git as GitHub names a repository (the bearer secret proves it); when it was sent
    and when its 202 arrived."""
    body = json.dumps({"ref": "refs/heads/main", "repository": {"git_url": url, "clone_url": url}}).encode()
    sent = time.perf_counter()
    answer = request(port, "POST", "/hooks/git",
                     {"Authorization": f"Bearer {SECRET}", "Content-Type": "application/json"}, body)
    arrived = time.perf_counter()
    if answer.status != 202:
        raise BenchError(f"POST /hooks/git answered {answer.status}: {answer.body[:300]!r}")
    if not json.loads(answer.body).get("fetching"):
        raise BenchError(f"POST /hooks/git started no fetch: {answer.body[:300]!r}")
    return sent, arrived


def start_server(binary: Path, arguments: list[str], log_path: Path) -> Server:
    """The server, started on a port chosen here (RUST_LOG=warn hides the line in which a server on
    port 0 says its own); `ready_after` is its first 200 (or 503 catalog-unavailable) of /readyz."""
    environment = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
    return Server(binary, arguments, listen=f"127.0.0.1:{free_port()}", timeout=300, probe_timeout=1.0,
                  env=environment, log_path=log_path)


def listing(port: int, commit: str, skills: int, spawned: float, timeout: float) -> dict:
    """Waits until GET /readyz answers 200 and GET /skills lists `skills` skills at `commit`; the
    milliseconds from `spawned` to each."""
    wait_until(lambda: request(port, "GET", "/readyz").status == 200, timeout, "GET /readyz answered no 200")
    ready_at = time.perf_counter()
    poller = Poller(port)
    needle = f'"commit":"{commit}"'.encode()
    try:
        seen = poller.wait_for(lambda body: needle in body, time.perf_counter() + timeout)
    finally:
        poller.close()
    if seen is None:
        raise BenchError(f"GET /skills did not show commit {commit} within {timeout:.0f} s")
    listed = json.loads(poller.body)
    count = len(listed["skills"])
    if count != skills:
        raise BenchError(f"GET /skills lists {count} skills at {commit}, {skills} expected")
    return {"readyz_ms": (ready_at - spawned) * 1000, "listed_ms": (max(seen, ready_at) - spawned) * 1000,
            "error_entry": "error" in listed}


# --- the measurement ---------------------------------------------------------------------------


def changes(checkout: Path, port: int, url: str, count: int, timeout: float, reference: Path) -> dict:
    """Edits, adds and deletes in turn, each committed, pushed and announced by a webhook; the
    latency of each from the hook's 202 until GET /skills shows its commit and the change, and the
    fetch and rescan time each cost. For comparison, once a change is seen (so never alongside the
    server's fetch), `git fetch` brings it into `reference`, a bare mirror of the same URL."""
    folders = skill_folders(checkout)
    poller = Poller(port)
    poller.poll()
    per_change: list[dict] = []
    missed: list[str] = []
    push_ms: list[float] = []
    for change in range(count):
        kind = ("edit", "add", "delete")[change % 3]
        if kind == "edit":
            folder = folders[(change * 7919) % len(folders)]
            description = f"Edited by change {change} of the git bench."
            write_atomic(folder / "SKILL.md", skill_md(folder.name, description, f"\n# {folder.name}\n\nEdited.\n"))
            needle = json.dumps(description).encode()
            shows = lambda body, needle=needle: needle in body  # noqa: E731
        elif kind == "add":
            name = f"added-{change:05d}"
            folder = folders[(change * 104729) % len(folders)].parent / name
            write_atomic(folder / "SKILL.md", skill_md(name, "Added by the git bench.", f"\n# {name}\n"))
            folders.append(folder)
            needle = f'"name":"{name}"'.encode()
            shows = lambda body, needle=needle: needle in body  # noqa: E731
        else:
            folder = folders.pop((change * 15485863) % len(folders))
            shutil.rmtree(folder)
            needle = f'"name":"{folder.name}"'.encode()
            shows = lambda body, needle=needle: needle not in body  # noqa: E731
        pushing = time.perf_counter()
        commit = commit_and_push(checkout, f"{kind} {folder.name}")
        push_ms.append((time.perf_counter() - pushing) * 1000)
        before = fetch_metrics(port)
        sent, accepted = webhook(port, url)
        at_commit = f'"commit":"{commit}"'.encode()
        seen = poller.wait_for(lambda body: at_commit in body and shows(body), accepted + timeout)
        if seen is None:
            state = "its commit shown without the change" if at_commit in poller.body else "its commit not shown"
            missed.append(f"{kind} {folder.name}: not seen within {timeout:.0f} s ({state})")
            log(f"  {missed[-1]}")
            continue
        cost = difference(fetch_metrics(port), before)
        fetching = time.perf_counter()
        git("fetch", "-q", "origin", cwd=reference)
        per_change.append({
            "kind": kind, "latency_ms": max(0.0, seen - accepted) * 1000, "hook_ms": (accepted - sent) * 1000,
            "fetches": cost["fetches"], "fetch_ms": cost["fetch_s"] * 1000,
            "scans": cost["scans"], "scan_ms": cost["scan_s"] * 1000,
            "git_fetch_ms": (time.perf_counter() - fetching) * 1000,
        })
    poller.close()
    latencies = sorted(item["latency_ms"] for item in per_change)
    summary = {}
    if latencies:
        summary = {"p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99), "max": latencies[-1],
                   "min": latencies[0], "mean": sum(latencies) / len(latencies)}
    return {"changes": count, "seen": len(per_change), "missed": missed, "latency_ms": summary,
            "per_change": per_change, "push_ms_mean": sum(push_ms) / len(push_ms) if push_ms else None,
            "git_fetch_ms_mean": sum(item["git_fetch_ms"] for item in per_change) / len(per_change) if per_change else None,
            "skills_after": count_skills(checkout)}


def skill_folders(checkout: Path) -> list[Path]:
    """The skill folders of a `discovery_ratio.build_tree` tree (team-XX/NAME), not .git's."""
    return sorted(folder for team in checkout.glob("team-*") for folder in team.iterdir() if folder.is_dir())


def count_skills(checkout: Path) -> int:
    return sum(1 for folder in skill_folders(checkout) if (folder / "SKILL.md").is_file())


def measure(binary: Path, skills: int, count: int, restarts: int = 0, change_timeout: float = 30.0,
            keep: bool = False) -> dict:
    """A git source of `skills` skills: `count` pushes timed from webhook to visible, then
    (`restarts` > 0) that many restarts on its state dir with the remote unreachable and as many
    with it reachable."""
    if not binary.is_file():
        raise BenchError(f"no binary at {binary}")
    if shutil.which("git") is None:
        raise BenchError("git is not installed (apt-get install git)")
    work = Path(os.path.realpath(tempfile.mkdtemp(prefix="skillcat-git-")))
    checkout, base, state = work / "checkout", work / "served", work / "state"
    for folder in (checkout, base, state):
        folder.mkdir()
    secret = work / "webhook-secret"
    secret.write_text(SECRET + "\n")
    result: dict = {"skills": skills}
    daemon: Process | None = None
    server: Server | None = None
    try:
        started = time.perf_counter()
        entries = discovery_ratio.build_tree(checkout, skills)
        git("init", "-q", "-b", "main", cwd=checkout)
        git("init", "-q", "--bare", "-b", "main", str(base / REPOSITORY), cwd=work)
        git("remote", "add", "origin", str(base / REPOSITORY), cwd=checkout)
        first_commit = commit_and_push(checkout, f"{skills} skills")
        log(f"  {skills:,} skills ({entries:,} entries) committed and pushed in {time.perf_counter() - started:.1f} s")
        result["entries"] = entries

        port = free_port()
        url = f"git://127.0.0.1:{port}/{REPOSITORY}"
        daemon = start_daemon(base, port, work / "daemon.log")
        arguments = ["--state-dir", str(state), "--webhook-secret-file", str(secret)]
        # Folders and files each count as an entry; leave room for the skills the run adds.
        needed = entries + 2 * count + 16
        if needed > DEFAULT_MAX_ENTRIES:
            config = work / "skillcat.toml"
            max_entries = max(100_000, 2 * needed)
            config.write_text(f'[[sources]]\nkind = "git"\nurl = {json.dumps(url)}\nmax_entries = {max_entries}\n',
                              encoding="utf-8")
            arguments += ["--config", str(config)]
            result["how"] = f"--config (max_entries = {max_entries:,})"
        else:
            arguments += ["--no-builtin", "--git", url]
            result["how"] = "--git"
        log(f"  skillcat on {url} with {result['how']}, an empty state dir")
        server = start_server(binary, arguments, work / "server-first.log")
        first = listing(server.port, first_commit, skills, server.spawned, 120)
        result["first_start"] = {**first, "mirror_bytes": tree_size(state)}
        log(f"  first start (clone and scan): ready and listing after {first['listed_ms']:,.0f} ms")

        git("clone", "-q", "--mirror", url, str(work / "reference.git"), cwd=work)
        before = fetch_metrics(server.port)
        result["changes"] = changes(checkout, server.port, url, count, change_timeout, work / "reference.git")
        totals = difference(fetch_metrics(server.port), before)
        result["fetch"] = {
            "fetches": totals["fetches"], "failed": totals["failed"],
            "mean_ms": totals["fetch_s"] / totals["fetches"] * 1000 if totals["fetches"] else None,
            "scans": totals["scans"],
            "scan_mean_ms": totals["scan_s"] / totals["scans"] * 1000 if totals["scans"] else None,
        }
        last_commit = git("rev-parse", "HEAD", cwd=checkout)
        skills_now = result["changes"]["skills_after"]
        result["exit"] = server.stop()
        server = None

        if restarts:
            result["mirror_bytes"] = tree_size(state)
            result["restarts"] = {}
            for reachable in (False, True):
                if reachable:
                    daemon = start_daemon(base, port, work / "daemon-again.log")
                else:
                    daemon.stop()
                    daemon = None
                mode = "reachable" if reachable else "unreachable"
                runs = []
                for attempt in range(restarts):
                    server = start_server(binary, arguments, work / f"server-{mode}-{attempt}.log")
                    runs.append(listing(server.port, last_commit, skills_now, server.spawned, 60))
                    runs[-1]["exit"] = server.stop()
                    server = None
                    log(f"  restart, remote {mode}: ready after {runs[-1]['readyz_ms']:,.0f} ms, "
                        f"listing every skill after {runs[-1]['listed_ms']:,.0f} ms")
                result["restarts"][mode] = runs
    finally:
        if server is not None:
            server.stop()
        if daemon is not None:
            daemon.stop()
        keep_or_remove(work, keep, result)
    return result


# --- standalone --------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--binary", type=Path, help="a built skillcat release binary (default: cargo build --release)")
    parser.add_argument("--quick", action="store_true", help="smoke test: fewer changes and one restart of each kind")
    parser.add_argument("--sizes", default="200,10000", help="catalog sizes (default 200,10000)")
    parser.add_argument("--changes", type=int, help="pushes per size (default 30 at 200, 15 above; quick 9 and 6)")
    parser.add_argument("--restarts", type=int,
                        help="restarts of each kind, at 10,000 skills and above (default 3; quick 1)")
    parser.add_argument("--json", type=Path, help="also write every measurement as JSON to this file")
    parser.add_argument("--keep", action="store_true", help="keep the repositories, state dirs and server logs")
    args = parser.parse_args()
    try:
        sizes = [int(size) for size in args.sizes.split(",")]
    except ValueError:
        parser.error("--sizes takes numbers separated by commas")
    if min(sizes) < 1 or (args.changes is not None and args.changes < 1):
        parser.error("--sizes and --changes must be positive")
    restarts = args.restarts if args.restarts is not None else (1 if args.quick else 3)

    results: dict = {}
    errors: dict[str, str] = {}
    try:
        binary = args.binary.resolve() if args.binary else cargo_build([], "skillcat")
        for skills in sizes:
            count = args.changes or ((9 if skills <= 1000 else 6) if args.quick else (30 if skills <= 1000 else 15))
            log(f"git freshness at {skills:,} skills, {count} pushes")
            results[f"git_{skills}"] = measure(binary, skills, count, restarts if skills >= 10_000 else 0,
                                               keep=args.keep)
    except (BenchError, ServerError) as error:
        log(f"bench/git_freshness.py: {error}")
        errors["i"] = str(error)
    table = report.git_rows(results, errors)
    for row in table:
        print(f"[{row['verdict']:>6}] {row['id']}  {row['what']}")
        for key in ("skillcat", "reference", "target", "error"):
            if row.get(key, "—") != "—":
                print(f"           {key + ':':<11}{row[key]}")
    print()
    print(report.summary_line(table))
    for outcome in results.values():
        if outcome.get("work"):
            print(f"kept {outcome['work']}")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "errors": errors}, indent=2) + "\n")
        log(f"wrote {args.json}")
    if errors:
        return 2
    return 1 if any(row["verdict"] == "missed" for row in table) else 0


if __name__ == "__main__":
    sys.exit(main())
