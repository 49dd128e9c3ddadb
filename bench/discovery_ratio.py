#!/usr/bin/env python3
"""How much faster is `skillcat check` than nagents' DirectorySkillDiscoverer?

Builds a tree of N skills (default 10,000) in a temporary directory, then times
  * nagents: `await DirectorySkillDiscoverer([tree], max_entries=M).discover()`
    in a fresh Python process, measuring only discover() (after imports);
  * skillcat: the whole `skillcat check --config FILE --json` process, from
    spawn to exit, with stdout read fully through a pipe;
one warm-up of each (page cache), then the median of --runs interleaved runs.
Both must report N skills and no diagnostics, and check must exit 0.

With --floor (a build of bench/walk_floor.c; `--floor auto` compiles it with cc), each
round also times the walk's system calls alone on the machine's cores: the floor under
any implementation of the walk, which drifts with the machine as skillcat's time does.

Prints a summary and exits 1 if nagents/skillcat is below --min-ratio
(2 on any other failure).

    python3 bench/discovery_ratio.py [--skills 10000] [--python PY] [--binary PATH] [--baseline PATH]
                                     [--floor PATH|auto]

Standard library only; nagents is needed only by the interpreter given with
--python (default: this one if it can import nagents, else REPO/.venv/bin/python).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NoReturn

from common import cpu_model, usable_cpus

REPO = Path(__file__).resolve().parent.parent
SKILLS_PER_TEAM = 100

# Runs in the nagents interpreter; prints one JSON line.
NAGENTS_PROBE = r"""
import asyncio, json, sys, time
from importlib.metadata import version
from nagents.skills import DirectorySkillDiscoverer

async def main():
    discoverer = DirectorySkillDiscoverer([sys.argv[1]], max_entries=int(sys.argv[2]))
    start = time.perf_counter()
    skills = await discoverer.discover()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "skills": len(skills), "diagnostics": list(discoverer.diagnostics),
            "nagents": version("nagents"), "python": sys.version.split()[0]}

print(json.dumps(asyncio.run(main())))
"""

WORDS = (
    "deploy rotate audit invoice schema migrate index cache queue retry backoff token "
    "render export import parse validate report alert metric trace budget review release "
    "rollback snapshot restore encrypt sign verify upload archive notify schedule"
).split()


class BenchError(Exception):
    pass


def fail(message: str) -> NoReturn:
    raise BenchError(message)


def build_tree(root: Path, count: int, seed: int = 20250) -> int:
    """Write `count` skills under root/team-XX/skill-NNNNN; return the number of entries."""
    rng = random.Random(seed)
    entries = 0

    def write(path: Path, text: str) -> None:
        nonlocal entries
        path.write_text(text, encoding="utf-8")
        entries += 1

    def mkdir(path: Path) -> None:
        nonlocal entries
        path.mkdir()
        entries += 1

    write(root / "README.md", "# Skills\n\nOne folder per team; one folder per skill.\n")
    write(root / ".editorconfig", "root = true\n[*.md]\ncharset = utf-8\n")
    for index in range(count):
        team = root / f"team-{index // SKILLS_PER_TEAM:02d}"
        if index % SKILLS_PER_TEAM == 0:
            mkdir(team)
            write(team / "OWNERS", f"owner-{index // SKILLS_PER_TEAM}@example.invalid\n")
        skill = team / f"skill-{index:05d}"
        mkdir(skill)
        topic = " ".join(rng.sample(WORDS, 3))
        steps = "\n".join(
            f"{step}. {rng.choice(WORDS).capitalize()} the {rng.choice(WORDS)} step, then check the "
            f"{rng.choice(WORDS)} output before continuing."
            for step in range(1, 5)
        )
        write(
            skill / "SKILL.md",
            f"---\nname: skill-{index:05d}\n"
            f"description: Handle {topic} tasks for team {index // SKILLS_PER_TEAM}. "
            f"Use when a request mentions {rng.choice(WORDS)} or {rng.choice(WORDS)} work.\n"
            f"license: MIT\nmetadata:\n  owner: team-{index // SKILLS_PER_TEAM:02d}\n---\n\n"
            f"# Skill {index:05d}: {topic}\n\n## Steps\n\n{steps}\n\n"
            f"## Pitfalls\n\nNever {rng.choice(WORDS)} without a {rng.choice(WORDS)} backup.\n",
        )
        if index % 10 == 0:
            mkdir(skill / "references")
            write(skill / "references" / "notes.md", f"Background for skill {index:05d}.\n")
        if index % 25 == 0:
            write(skill / "example.json", json.dumps({"skill": index, "words": rng.sample(WORDS, 4)}) + "\n")
    return entries


def can_import_nagents(python: str) -> bool:
    if python == sys.executable:
        return importlib.util.find_spec("nagents") is not None
    try:
        return subprocess.run([python, "-c", "import nagents.skills"], capture_output=True, timeout=120).returncode == 0
    except OSError:
        return False


def pick_python(requested: str | None) -> str:
    if requested:
        if not can_import_nagents(requested):
            fail(f"--python {requested}: cannot import nagents.skills (pip install nagents==0.25.2)")
        return requested
    if can_import_nagents(sys.executable):
        return sys.executable
    venv = REPO / ".venv" / "bin" / "python"
    if venv.exists() and can_import_nagents(str(venv)):
        return str(venv)
    fail(
        f"no Python with nagents: {sys.executable} cannot import it and {venv} "
        "is missing or cannot either; pass --python PATH (pip install nagents==0.25.2)"
    )


def build_binary() -> Path:
    print("building skillcat: cargo build --release --locked", file=sys.stderr, flush=True)
    result = subprocess.run(["cargo", "build", "--release", "--locked", "--quiet"], cwd=REPO)
    if result.returncode != 0:
        fail(f"cargo build --release --locked failed with exit code {result.returncode}")
    target = os.environ.get("CARGO_TARGET_DIR")
    metadata = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if metadata.returncode == 0:
        target = json.loads(metadata.stdout)["target_directory"]
    binary = Path(target or REPO / "target") / "release" / "skillcat"
    if not binary.is_file():
        fail(f"cargo build succeeded but {binary} does not exist")
    return binary


def time_nagents(python: str, tree: Path, max_entries: int) -> dict:
    result = subprocess.run(
        [python, "-c", NAGENTS_PROBE, str(tree), str(max_entries)], capture_output=True, text=True
    )
    if result.returncode != 0:
        fail(f"nagents discovery failed (exit {result.returncode}):\n{result.stderr.strip()}")
    return json.loads(result.stdout)


def time_skillcat(binary: Path, config: Path) -> dict:
    command = [str(binary), "check", "--config", str(config), "--json"]
    start = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        fail(
            f"{' '.join(command)} exited {result.returncode}\n"
            f"stderr: {result.stderr.decode(errors='replace')[:2000]}\n"
            f"stdout: {result.stdout.decode(errors='replace')[:2000]}"
        )
    try:
        report = json.loads(result.stdout)
        skills = len(report["skills"])
        diagnostics = report.get("diagnostics") or []
        error = report.get("error")
    except (ValueError, KeyError, TypeError) as problem:
        fail(f"skillcat check --json printed no valid report ({problem}): {result.stdout[:500]!r}")
    if error is not None:
        fail(f"skillcat check reported a source error: {error}")
    return {"seconds": seconds, "skills": skills, "diagnostics": diagnostics, "stdout_bytes": len(result.stdout)}


def build_floor(directory: Path) -> Path:
    """Compiles bench/walk_floor.c into `directory` with the system's C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        fail("--floor auto needs a C compiler (cc)")
    floor = directory / "walk_floor"
    result = subprocess.run([compiler, "-O2", "-pthread", "-o", str(floor), str(REPO / "bench" / "walk_floor.c")],
                            capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"compiling bench/walk_floor.c failed:\n{result.stderr.strip()}")
    return floor


def time_floor(floor: Path, tree: Path, threads: int) -> dict:
    """One run of the walk's system calls alone (after the one that walk_floor warms up with)."""
    result = subprocess.run([str(floor), str(tree), str(threads), "1"], capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"{floor} exited {result.returncode}: {result.stderr.strip()[:500]}")
    lines = result.stdout.splitlines()
    try:
        skills = int(lines[0].split(" SKILL.md read")[0].rsplit(" ", 1)[1])
        seconds = float(lines[1].removesuffix(" ms")) / 1000
    except (IndexError, ValueError):
        fail(f"{floor} printed no timing: {result.stdout[:300]!r}")
    return {"seconds": seconds, "skills": skills, "diagnostics": []}


def binary_version(binary: Path) -> str:
    try:
        result = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (result.stdout.strip() or "unknown") if result.returncode == 0 else "unknown"


def check_run(label: str, run: dict, expected: int) -> None:
    if run["skills"] != expected:
        fail(f"{label} found {run['skills']} skills, expected {expected}")
    if run["diagnostics"]:
        fail(f"{label} reported diagnostics: {run['diagnostics'][:3]}")


def measure(binary: Path, python: str, skills: int = 10_000, runs: int = 11, baseline: Path | None = None,
            floor: Path | None = None) -> dict:
    """Builds the tree, times both; raises BenchError when either misbehaves. With `baseline`
    (another skillcat build), times it too, in the same rounds, after `binary`. With `floor` (a
    build of bench/walk_floor.c), times the walk's system calls alone too, on the usable cores.

    The result: medians in ms, the ratio, every sample, the tree and the versions measured."""
    with tempfile.TemporaryDirectory(prefix="skillcat-bench-") as scratch:
        scratch_dir = Path(os.path.realpath(scratch))
        tree = scratch_dir / "skills"
        tree.mkdir()
        entries = build_tree(tree, skills)
        # nagents' default max_entries (10,000) would stop this walk; both get the same bound.
        max_entries = max(100_000, 2 * entries)
        config = scratch_dir / "skillcat.toml"
        config.write_text(
            "[[sources]]\n"
            'kind = "directory"\n'
            f"roots = [{json.dumps(str(tree))}]\n"
            f"max_entries = {max_entries}\n",
            encoding="utf-8",
        )

        warm_nagents = time_nagents(python, tree, max_entries)
        check_run("nagents", warm_nagents, skills)
        check_run("skillcat", time_skillcat(binary, config), skills)
        if baseline:
            check_run("baseline", time_skillcat(baseline, config), skills)
        threads = usable_cpus()
        if floor:
            check_run("floor", time_floor(floor, tree, threads), skills)
        nagents_runs, skillcat_runs, baseline_runs, floor_runs = [], [], [], []
        for _ in range(runs):
            nagents_runs.append(time_nagents(python, tree, max_entries))
            skillcat_runs.append(time_skillcat(binary, config))
            if baseline:
                baseline_runs.append(time_skillcat(baseline, config))
            if floor:
                floor_runs.append(time_floor(floor, tree, threads))
        for run in nagents_runs:
            check_run("nagents", run, skills)
        for run in skillcat_runs:
            check_run("skillcat", run, skills)
        for run in baseline_runs:
            check_run("baseline", run, skills)
        for run in floor_runs:
            check_run("floor", run, skills)

    nagents_ms = statistics.median(run["seconds"] for run in nagents_runs) * 1000
    skillcat_ms = statistics.median(run["seconds"] for run in skillcat_runs) * 1000
    compared = {}
    if baseline_runs:
        baseline_ms = statistics.median(run["seconds"] for run in baseline_runs) * 1000
        compared = {"baseline": str(baseline), "baseline_ms": baseline_ms,
                    "baseline_ratio": nagents_ms / baseline_ms if baseline_ms > 0 else float("inf"),
                    # Each round's two builds ran a moment apart: the median of their quotients
                    # holds up when the machine's speed drifts over the rounds.
                    "paired_quotient": statistics.median(
                        new["seconds"] / old["seconds"] for new, old in zip(skillcat_runs, baseline_runs)),
                    "baseline_samples_ms": [run["seconds"] * 1000 for run in baseline_runs]}
    if floor_runs:
        floor_ms = statistics.median(run["seconds"] for run in floor_runs) * 1000
        compared |= {"floor_ms": floor_ms, "floor_threads": threads,
                     # skillcat's time over the floor's, round by round, as for the baseline.
                     "floor_quotient": statistics.median(
                         ours["seconds"] / low["seconds"] for ours, low in zip(skillcat_runs, floor_runs)),
                     "floor_samples_ms": [run["seconds"] * 1000 for run in floor_runs]}
    return {
        "skills": skills,
        "entries": entries,
        "max_entries": max_entries,
        "runs": runs,
        "nagents_ms": nagents_ms,
        "skillcat_ms": skillcat_ms,
        "ratio": nagents_ms / skillcat_ms if skillcat_ms > 0 else float("inf"),
        "nagents_samples_ms": [run["seconds"] * 1000 for run in nagents_runs],
        "skillcat_samples_ms": [run["seconds"] * 1000 for run in skillcat_runs],
        "stdout_bytes": skillcat_runs[0]["stdout_bytes"],
        "nagents_version": warm_nagents["nagents"],
        "python_version": warm_nagents["python"],
        "python": python,
        **compared,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skills", type=int, default=10_000, help="number of skills in the tree (default 10000)")
    parser.add_argument("--python", help="Python interpreter that can import nagents")
    parser.add_argument("--binary", type=Path, help="skillcat binary (default: cargo build --release --locked)")
    parser.add_argument("--runs", type=int, default=11, help="timed runs of each, after one warm-up (default 11)")
    parser.add_argument("--min-ratio", type=float, default=20.0, help="fail below this ratio (default 20)")
    parser.add_argument("--baseline", type=Path,
                        help="another skillcat build, timed in the same rounds (right after --binary) for comparison")
    parser.add_argument("--floor",
                        help="a build of bench/walk_floor.c (or 'auto' to compile it): the walk's system calls "
                             "alone, timed in the same rounds")
    args = parser.parse_args()
    if args.skills < 1 or args.runs < 1:
        parser.error("--skills and --runs must be positive")

    try:
        python = pick_python(args.python)
        binary = args.binary.resolve() if args.binary else build_binary()
        baseline = args.baseline.resolve() if args.baseline else None
        with tempfile.TemporaryDirectory(prefix="skillcat-floor-") as scratch:
            floor = None
            if args.floor == "auto":
                floor = build_floor(Path(scratch))
            elif args.floor:
                floor = Path(args.floor).resolve()
            result = measure(binary, python, args.skills, args.runs, baseline, floor)
    except BenchError as error:
        print(f"discovery_ratio: {error}", file=sys.stderr)
        return 2

    ratio = result["ratio"]

    def samples(values: list[float]) -> str:
        return ", ".join(f"{value:.1f}" for value in values)

    print("skill discovery: nagents DirectorySkillDiscoverer vs skillcat check")
    print(f"machine:   {platform.system()} {platform.release()} {platform.machine()}; "
          f"nproc {usable_cpus()} (of {os.cpu_count()}); CPU {cpu_model()}")
    print(f"tree:      {args.skills} skills, {result['entries']} entries, max_entries {result['max_entries']}")
    print(f"nagents:   {result['nagents_version']} on Python {result['python_version']} ({python})")
    print(f"skillcat:  {binary} ({binary_version(binary)})")
    print(f"runs:      1 warm-up each, then {args.runs} interleaved; ms: "
          f"nagents [{samples(result['nagents_samples_ms'])}], skillcat [{samples(result['skillcat_samples_ms'])}]")
    print(f"nagents discover() median:        {result['nagents_ms']:10.1f} ms")
    print(f"skillcat check process median:    {result['skillcat_ms']:10.1f} ms "
          f"(stdout {result['stdout_bytes']} bytes)")
    print(f"ratio (nagents discover / skillcat check process): {ratio:.1f}x")
    if baseline:
        print(f"baseline:  {baseline} ({binary_version(baseline)}); ms: [{samples(result['baseline_samples_ms'])}]")
        print(f"baseline check process median:    {result['baseline_ms']:10.1f} ms; "
              f"ratio {result['baseline_ratio']:.1f}x; --binary takes {result['skillcat_ms'] / result['baseline_ms']:.2f}x "
              f"the baseline's time (median of the rounds' quotients: {result['paired_quotient']:.2f}x)")
    if "floor_ms" in result:
        print(f"floor:     the walk's system calls alone (bench/walk_floor.c, {result['floor_threads']} threads); "
              f"ms: [{samples(result['floor_samples_ms'])}]")
        print(f"floor median:                     {result['floor_ms']:10.1f} ms; skillcat check takes "
              f"{result['floor_quotient']:.2f}x the floor's time (median of the rounds' quotients); "
              f"20x nagents asks for {result['nagents_ms'] / 20:.1f} ms")
    if ratio < args.min_ratio:
        print(f"FAIL: ratio {ratio:.1f}x is below --min-ratio {args.min_ratio:g}x", file=sys.stderr)
        return 1
    print(f"OK: ratio is at least {args.min_ratio:g}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
