"""Schemathesis with every check against the served /openapi.json, run twice by
scripts/reliability: against a server without a token file (no request needs a token) and against
one with a token file (every request carries the bearer token). The document must tell the truth
for both: bearer security is optional, and a 401 is documented.

The tree has two sources so that the catalog carries shadowed entries and diagnostics as well as
skills (every part of the response schemas is exercised), and one long skill so that budgeted
loads truncate. `/events` is left out: it streams until the server stops, so no response of it
ever completes (the SIGTERM test covers it). Schemathesis runs in a scratch directory (it keeps
example databases and crash files in its working directory), with no hooks: every check's every
verdict counts. Exit status 1 if schemathesis failed or the server misbehaved around it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import harness
from harness import Server


def build_tree(first: Path, second: Path) -> None:
    skills = {
        first: {
            "alpha": ("alpha", "The alpha skill", "# Alpha\n\nStep one.\n"),
            "beta": ("beta", "The beta skill", "# Beta\n\n" + "A long line of guidance text. " * 4000),
            "nested/gamma": ("gamma", "A nested skill", "Body of gamma.\n"),
            "broken": ("not a valid name!", "skipped with a diagnostic", "never listed\n"),
        },
        second: {
            "alpha": ("alpha", "Shadowed by the first source", "Hidden.\n"),
            "delta": ("delta", "Only in the second source", "Delta body. Unicode too: \u00e9\u4e2d\u2028.\n"),
        },
    }
    for root, entries in skills.items():
        for folder, (name, description, body) in entries.items():
            harness.write_skill(root / folder, harness.skill_md(name, description, body))


def main() -> int:
    parser = harness.argument_parser(__doc__)
    parser.add_argument("--st", type=Path, required=True, help="the schemathesis command")
    parser.add_argument("--seed", default="1", help="the generation seed ('random' for a new one)")
    parser.add_argument("--max-examples", type=int, default=100)
    parser.add_argument("--without-token", action="store_true", help="serve without a token file")
    args = harness.parse_arguments(parser)
    mode = "without a token file" if args.without_token else "with a token file"

    workdir = Path(tempfile.mkdtemp(prefix="skillcat-schemathesis-"))
    first, second, scratch = workdir / "first", workdir / "second", workdir / "scratch"
    scratch.mkdir()
    build_tree(first, second)
    with Server(args.binary, [first, second], workdir, token=not args.without_token) as server:
        url = f"http://{server.host}:{server.port}"
        catalog = server.get("/skills").json()
        print(f"schemathesis: server pid {server.pid} at {url} {mode}: {len(catalog['skills'])} skills, "
              f"{len(catalog['shadowed'])} shadowed, {len(catalog['diagnostics'])} diagnostics", flush=True)
        command = [
            str(args.st.absolute()), "run", f"{url}/openapi.json",
            "--checks", "all",
            "--exclude-path", "/events",
        ]
        for name, value in server.auth.items():
            command += ["--header", f"{name}: {value}"]
        command += [
            "--max-examples", str(args.max_examples),
            "--request-timeout", "10",
            "--generation-database", "none",
            # The bodies carry `token_limit`, which the default sanitizer hides as a secret.
            "--output-sanitize", "false",
            "--no-color",
        ]
        if args.seed != "random":
            command += ["--seed", args.seed]
        # No hooks from the environment either: nothing may waive a verdict.
        env = {key: value for key, value in os.environ.items() if key != "SCHEMATHESIS_HOOKS"}
        result = subprocess.run(command, cwd=scratch, env=env, stdin=subprocess.DEVNULL)
        code, took = server.stop()
        errors, warnings = harness.log_problems(server.log_lines())

    failures = []
    if result.returncode != 0:
        failures.append(f"schemathesis exited with {result.returncode} (its report is above)")
    if code != 0:
        failures.append(f"the server exited with {code} ({took:.1f} s after SIGTERM)")
    failures.extend(f"server log: {line}" for line in errors)
    if warnings:
        print(f"schemathesis: {len(warnings)} WARN lines in the server log, e.g. {warnings[0]}")
    return harness.verdict(f"schemathesis {mode}", failures, workdir)


if __name__ == "__main__":
    sys.exit(main())
