#!/usr/bin/env python3
"""The search route and the catalog page at 10,000 skills, on this machine.

    bench/pages.py                  # builds the release binary; rewrites its section of docs/BENCHMARKS.md
    bench/pages.py --binary target/release/skillcat --no-doc

Rows (each with its target), named apart from bench/run's lettered rows:
  search  GET /search at 10,000 skills: the first search of a catalog version (it makes the index),
          then client-observed latency of mixed queries over one kept-alive connection (p99 <= 5 ms)
  page    the catalog page (/) at 10,000 skills in headless Chromium: the browser's own navigation
          timing, request start to the load event, each load a fresh navigation (p99 < 1 s)
  size    with --base-binary: the release binary's size against a build without the pages and search
          (grows by at most a few MiB)

Needs Debian's chromium and chromium-driver; Selenium comes from .venv (scripts/setup-reference
makes it when missing). Exit status 0 when every row ran, 1 when a target was missed, 2 when a
row could not be measured.
"""

from __future__ import annotations

import argparse
import http.client
import urllib.parse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# Selenium is in .venv: run there (scripts/setup-reference makes it, or remakes it when its pins
# changed, and returns at once otherwise).
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
except ImportError:
    if os.environ.get("SKILLCAT_PAGES_BENCH_REEXEC"):
        raise
    subprocess.run([str(REPO / "scripts/setup-reference")], check=True)
    python = REPO / ".venv/bin/python"
    os.environ["SKILLCAT_PAGES_BENCH_REEXEC"] = "1"
    os.execv(str(python), [str(python), __file__, *sys.argv[1:]])

sys.path.insert(0, str(HERE))

import discovery_ratio  # noqa: E402
import http_vs_nginx as web  # noqa: E402
from common import BenchError, ServerError, cargo_build, cpu_model, git_revision, log, percentile, usable_cpus  # noqa: E402

SKILLS = 10_000
BEGIN = "<!-- bench/pages.py: begin -->"
END = "<!-- bench/pages.py: end -->"


def queries(count: int, seed: int = 7) -> list[str]:
    """Mixed queries over the generated catalog's vocabulary: one word, two words, a word being
    typed (a prefix), a skill's name, and a word no skill has."""
    rng = random.Random(seed)
    words = list(discovery_ratio.WORDS)
    made = []
    for index in range(count):
        kind = index % 5
        if kind == 0:
            made.append(rng.choice(words))
        elif kind == 1:
            made.append(" ".join(rng.sample(words, 2)))
        elif kind == 2:
            word = rng.choice(words)
            made.append(word[: max(2, len(word) // 2)])
        elif kind == 3:
            made.append(f"skill-{rng.randrange(SKILLS):05d}")
        else:
            made.append("zyzzyva")
    return made


def search_histogram(port: int) -> tuple[int, int]:
    """From /metrics: the searches answered so far, and those answered within 5 ms (server-side,
    from the request's arrival at the router to its answer)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    within = total = None
    for line in text.splitlines():
        if line.startswith('skillcat_http_request_duration_seconds_bucket{route="/search",le="0.005"} '):
            within = int(line.split()[-1])
        elif line.startswith('skillcat_http_request_duration_seconds_count{route="/search"} '):
            total = int(line.split()[-1])
    if within is None or total is None:
        raise BenchError("/metrics has no latency histogram of /search")
    return total, within


def search_row(port: int, count: int) -> dict:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def search(query: str) -> tuple[float, dict]:
        target = "/search?limit=20&q=" + urllib.parse.quote(query)
        started = time.perf_counter()
        connection.request("GET", target)
        response = connection.getresponse()
        body = response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise BenchError(f"GET {target} answered {response.status}: {body[:200]!r}")
        return elapsed, json.loads(body)

    first, answer = search("check")
    if answer["total"] == 0:
        raise BenchError("the first search found nothing: the catalog is not the generated one")
    made = queries(count)
    for query in made[:200]:  # warm-up
        search(query)
    total_before, within_before = search_histogram(port)
    times = sorted(search(query)[0] * 1000 for query in made)
    connection.close()
    total_after, within_after = search_histogram(port)
    served = total_after - total_before
    return {"first_ms": first * 1000, "count": len(times), "p50_ms": percentile(times, 0.5),
            "p99_ms": percentile(times, 0.99), "max_ms": times[-1],
            "server_within_5ms": (within_after - within_before) / served if served else 0.0}


def page_row(port: int, loads: int) -> dict:
    profile = tempfile.mkdtemp(prefix="skillcat-bench-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("SKILLCAT_CHROMIUM", "/usr/bin/chromium")
    for argument in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--window-size=1280,900", f"--user-data-dir={profile}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(os.environ.get("SKILLCAT_CHROMEDRIVER",
                                                                              "/usr/bin/chromedriver")))
    try:
        # Every load fetches the page (no revalidation from the browser's cache).
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
        # The first load makes the page of this catalog version on the server.
        url = f"http://127.0.0.1:{port}/"
        driver.get(url)
        rows = driver.execute_script("return document.querySelectorAll('#listing tbody tr').length")
        heading = driver.execute_script("return document.querySelector('#listing h1').textContent")
        if heading != f"{SKILLS} skills":
            raise BenchError(f"the catalog page says {heading!r}, not {SKILLS} skills")
        timings = []
        for _ in range(loads):
            driver.get("about:blank")
            driver.get(url)
            entry = driver.execute_script(
                "const n = performance.getEntriesByType('navigation')[0];"
                "const paint = performance.getEntriesByName('first-contentful-paint')[0];"
                "return {response: n.responseEnd - n.startTime, dom: n.domContentLoadedEventEnd - n.startTime,"
                " load: n.loadEventEnd - n.startTime, paint: paint ? paint.startTime : null,"
                " bytes: n.decodedBodySize, transferred: n.transferSize};")
            timings.append(entry)
        loads_ms = sorted(entry["load"] for entry in timings)
        paints = sorted(entry["paint"] for entry in timings if entry["paint"] is not None)
        return {"rows": rows, "loads": len(timings), "bytes": timings[-1]["bytes"],
                "transferred": timings[-1]["transferred"],
                "response_p50_ms": percentile(sorted(entry["response"] for entry in timings), 0.5),
                "paint_p50_ms": percentile(paints, 0.5) if paints else None,
                "load_p50_ms": percentile(loads_ms, 0.5), "load_p99_ms": percentile(loads_ms, 0.99),
                "load_max_ms": loads_ms[-1]}
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def table(results: dict) -> list[dict]:
    search, page = results["search"], results["page"]
    return [
        {"row": "search", "what": f"GET /search, {SKILLS:,} skills, {search['count']:,} mixed queries (limit 20)",
         "measured": f"in the server: {100 * search['server_within_5ms']:.2f}% within 5 ms; at the client: "
                     f"p50 {search['p50_ms']:.2f} ms, p99 {search['p99_ms']:.2f} ms, max {search['max_ms']:.2f} ms "
                     f"(the first search, which makes the index: {search['first_ms']:.0f} ms)",
         "target": "p99 ≤ 5 ms in the server", "met": search["server_within_5ms"] >= 0.99},
        {"row": "page", "what": f"catalog page / in headless Chromium, {SKILLS:,} skills ({page['rows']} rows on "
                             f"page 1, {page['bytes'] / 1024:,.0f} KiB, {page['transferred'] / 1024:,.0f} KiB with gzip), "
                             f"{page['loads']} loads",
         "measured": f"load event p50 {page['load_p50_ms']:.0f} ms, p99 {page['load_p99_ms']:.0f} ms "
                     f"(response end p50 {page['response_p50_ms']:.0f} ms"
                     + (f", first paint p50 {page['paint_p50_ms']:.0f} ms)" if page["paint_p50_ms"] else ")"),
         "target": "p99 < 1 s", "met": page["load_p99_ms"] < 1000},
    ]


def size_row(binary: Path, base: Path, base_label: str) -> dict:
    mib = 1024 * 1024
    size, base_size = binary.stat().st_size, base.stat().st_size
    growth = (size - base_size) / mib
    return {"row": "size", "what": f"release binary size, against {base_label}",
            "measured": f"{size / mib:.2f} MiB against {base_size / mib:.2f} MiB: {growth:+.2f} MiB",
            "target": "≤ +4 MiB", "met": growth <= 4.0}


def markdown(results: dict, rows: list[dict], started: str) -> str:
    lines = [BEGIN, "",
             f"Measured {started} with `bench/pages.py` on {cpu_model()} ({usable_cpus()} usable cores), "
             f"commit {git_revision()}, the release binary.", "",
             "| row | what | skillcat | target | result |", "|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['row']} | {row['what']} | {row['measured']} | {row['target']} | "
                     f"{'met' if row['met'] else 'missed'} |")
    lines += ["", END]
    return "\n".join(lines)


def write_document(path: Path, section: str) -> None:
    text = path.read_text(encoding="utf-8")
    if BEGIN in text and END in text:
        before, rest = text.split(BEGIN, 1)
        after = rest.split(END, 1)[1]
        text = before + section + after
    else:
        text = text.rstrip("\n") + "\n\n## Search and pages\n\n" + section + "\n"
    path.write_text(text, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench/pages.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", type=Path, help="a built skillcat release binary (default: cargo build --release)")
    parser.add_argument("--queries", type=int, default=5000, help="searches measured (default 5000)")
    parser.add_argument("--loads", type=int, default=20, help="page loads measured (default 20)")
    parser.add_argument("--base-binary", type=Path, help="a release binary without the pages, for the size row")
    parser.add_argument("--base-label", default="the base build", help="what --base-binary was built from")
    parser.add_argument("--doc", type=Path, default=REPO / "docs/BENCHMARKS.md", help="document to update")
    parser.add_argument("--no-doc", action="store_true", help="write no document")
    args = parser.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    work = Path(os.path.realpath(tempfile.mkdtemp(prefix="skillcat-bench-pages-")))
    try:
        binary = args.binary.resolve() if args.binary else cargo_build([], "skillcat")
        tree = work / "tree"
        tree.mkdir()
        entries = discovery_ratio.build_tree(tree, SKILLS)
        config = web.write_config(work, tree, max(100_000, 2 * entries))
        server, port = web.start_skillcat(binary, ["--config", str(config)], work, usable_cpus(), SKILLS)
        try:
            log("h: searching")
            results = {"search": search_row(port, args.queries)}
            log("i: loading the catalog page in Chromium")
            results["page"] = page_row(port, args.loads)
            server.check_alive()
        finally:
            server.stop()
    except (BenchError, ServerError) as error:
        log(f"bench/pages.py: {error}")
        return 2
    finally:
        web.remove(work)
    log(json.dumps(results))
    rows = table(results)
    if args.base_binary:
        rows.append(size_row(binary, args.base_binary, args.base_label))
    section = markdown(results, rows, started)
    print(section)
    if not args.no_doc:
        write_document(args.doc, section)
        log(f"rewrote the pages section of {args.doc}")
    return 0 if all(row["met"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
