"""skillcat against nginx serving the identical bytes, measured with wrk.

For one catalog (a tree of skills) this module
  * starts `skillcat serve` on the tree, fetches the bodies it answers (GET /skills identity and
    gzip, its ETag, and POST /skills/NAME/load for one large skill), and stops it;
  * writes those exact bytes into an nginx document root and a minimal nginx.conf in a
    temporary prefix;
  * then, one server at a time (the other is not running), starts the server, checks every case
    answers the expected status and bytes, and for each case runs wrk for a warm-up and then for
    the measured duration, with a Lua script that prints the exact p50/p90/p99 of the run.

The cases: GET /skills (identity, the main row; gzip as a secondary row), GET /skills with
If-None-Match -> 304 (each server's own tag), and POST /skills/NAME/load. The 304 is also asked of
the hyper floor (bench/hyper-floor: hyper answering a fixed 304 with nothing else), in the same
rounds, as the least any server built on hyper can do on this machine.

The 304 and the load are also run paced (keys "304-paced", "load-paced"): each connection waits
`pace_ms` after every answer before its next request, so both servers get the same offered load,
well below what either can answer. wrk and the servers then do not take every slice of the
cores, and the tail is the server's own rather than the scheduler's wait for a core.

Standard library only.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from common import (
    BenchError,
    Process,
    Server,
    cpu_seconds,
    current_user_and_group,
    free_port,
    log,
    memory_of,
    process_tree,
    request,
    runtime_env,
    target_dir,
    wait_until,
    which,
)

LOAD_REQUEST_BODY = b'{"token_limit": 10000}'
LARGE_SKILL = "large-skill"


# --- tools -------------------------------------------------------------------------------------


def ensure_tools(nginx: str | None, wrk: str | None) -> tuple[str, str]:
    """The nginx and wrk executables; installs Debian's packages when missing and root.

    The nginx package must not start the system service: while installing, a policy-rc.d that
    denies every service start is put in place (unless one exists), and removed afterwards.
    """
    nginx_path = nginx or which("nginx", "/usr/sbin", "/usr/local/sbin")
    wrk_path = wrk or which("wrk", "/usr/local/bin")
    missing = [package for package, path in (("nginx", nginx_path), ("wrk", wrk_path)) if not path]
    if missing:
        if os.geteuid() != 0:
            raise BenchError(
                f"missing {' and '.join(missing)}: install with `sudo apt-get install {' '.join(missing)}` "
                "(or pass --nginx/--wrk), or run this as root to let it install them"
            )
        install_packages(missing)
        nginx_path = nginx or which("nginx", "/usr/sbin", "/usr/local/sbin")
        wrk_path = wrk or which("wrk", "/usr/local/bin")
        if not nginx_path or not wrk_path:
            raise BenchError(f"apt-get installed {missing} but nginx or wrk is still not found")
    return str(nginx_path), str(wrk_path)


def install_packages(packages: list[str]) -> None:
    policy = Path("/usr/sbin/policy-rc.d")
    created = False
    if not policy.exists():
        policy.write_text("#!/bin/sh\n# Written by skillcat's bench/run during apt-get install: no service starts.\nexit 101\n")
        policy.chmod(0o755)
        created = True
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        log(f"installing {' '.join(packages)} with apt-get (no service is started)")
        update = subprocess.run(["apt-get", "update", "-qq"], env=env)
        if update.returncode != 0:
            raise BenchError(f"apt-get update failed with exit code {update.returncode}")
        install = subprocess.run(
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages], env=env
        )
        if install.returncode != 0:
            raise BenchError(f"apt-get install {' '.join(packages)} failed with exit code {install.returncode}")
    finally:
        if created:
            policy.unlink(missing_ok=True)


# --- the trees ---------------------------------------------------------------------------------


def large_skill_text(target_bytes: int = 20_000) -> str:
    """A SKILL.md of about `target_bytes` bytes (under the default budget of 40,000 bytes)."""
    head = (
        f"---\nname: {LARGE_SKILL}\n"
        "description: Run a large release checklist end to end. Use when a request asks for the full "
        "release procedure, including rollback, audit and notification steps.\n---\n\n"
        "# Release checklist\n\n"
    )
    sections = []
    index = 0
    size = len(head.encode())
    while size < target_bytes:
        index += 1
        section = (
            f"## Step {index}: verify \"stage {index}\"\n\n"
            f"1. Check the `stage-{index}` dashboard; every metric must be green for 10 minutes.\n"
            f"2. Run `make verify STAGE={index}` and keep its report under reports/stage-{index}.txt.\n"
            "3. If a check fails: roll back with the previous tag, open an incident, and notify the "
            "owners listed in OWNERS <release@example.invalid>.\n\n"
        )
        sections.append(section)
        size += len(section.encode())
    return head + "".join(sections)


def write_config(work: Path, tree: Path, max_entries: int) -> Path:
    config = work / "skillcat.toml"
    config.write_text(
        f'[[sources]]\nkind = "directory"\nroots = [{json.dumps(str(tree))}]\nmax_entries = {max_entries}\n',
        encoding="utf-8",
    )
    return config


# --- skillcat ----------------------------------------------------------------------------------


def start_skillcat(binary: Path, arguments: list[str], work: Path, workers: int, expect_skills: int | None) -> tuple[Server, int]:
    """`skillcat serve` on a free port with `workers` runtime threads; ready, with the catalog."""
    port = free_port()
    server = Server(binary, arguments, listen=f"127.0.0.1:{port}", timeout=180, env=runtime_env(workers),
                    log_path=work / f"skillcat-{port}.log")
    if expect_skills is not None:
        def complete() -> bool:
            answer = request(port, "GET", "/skills")
            return answer.status == 200 and len(json.loads(answer.body)["skills"]) == expect_skills

        try:
            wait_until(complete, 60, f"GET /skills did not list {expect_skills} skills", server)
        except BaseException:
            server.stop()
            raise
    return server, port


# --- nginx -------------------------------------------------------------------------------------


def nginx_conf(prefix: Path, port: int, workers: int, catalog: Path, load_path: str | None, load_file: Path | None) -> str:
    lines = ["# Written by skillcat's bench/run."]
    if os.geteuid() == 0:
        # Root's workers would otherwise switch to `nobody`; run them as the current user.
        name, group = current_user_and_group()
        lines.append(f"user {name} {group};")
    lines += [
        f"worker_processes {workers};",
        "daemon off;",
        "master_process on;",
        f"pid {prefix}/nginx.pid;",
        f"error_log {prefix}/error.log warn;",
        "events {",
        "    worker_connections 1024;",
        "}",
        "http {",
        "    access_log off;",
        "    server_tokens off;",
        "    default_type application/json;",
        "    sendfile on;",
        "    etag on;",
        "    gzip off;",
        "    keepalive_timeout 75s;",
        "    keepalive_requests 1000000;",
        f"    client_body_temp_path {prefix}/tmp/body;",
        f"    proxy_temp_path {prefix}/tmp/proxy;",
        f"    fastcgi_temp_path {prefix}/tmp/fastcgi;",
        f"    uwsgi_temp_path {prefix}/tmp/uwsgi;",
        f"    scgi_temp_path {prefix}/tmp/scgi;",
        "    server {",
        f"        listen 127.0.0.1:{port};",
        "        location = /skills {",
        f"            alias {catalog};",
        "            gzip_static on;",
        "        }",
    ]
    if load_path and load_file:
        # nginx's static module answers POST with 405; the error page turns it into an internal
        # GET of the same location, so the body is the file, sent from the page cache.
        lines += [
            f"        location = {load_path} {{",
            f"            alias {load_file};",
            "            error_page 405 =200 $uri;",
            "        }",
        ]
    lines += [
        "        location / {",
        "            return 404;",
        "        }",
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def start_nginx(nginx: str, work: Path, workers: int, catalog: Path, load_path: str | None, load_file: Path | None) -> tuple[Process, int]:
    prefix = work / "nginx"
    (prefix / "tmp").mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(nginx_conf(prefix, port, workers, catalog, load_path, load_file), encoding="utf-8")
    test = subprocess.run([nginx, "-t", "-q", "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(conf)],
                          capture_output=True, text=True)
    if test.returncode != 0:
        raise BenchError(f"nginx -t rejected {conf}:\n{test.stderr.strip()}")
    server = Process([nginx, "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(conf)], name="nginx",
                     log_path=work / f"nginx-{port}.log")
    try:
        wait_until(lambda: request(port, "GET", "/skills", timeout=2).status == 200, 30, "nginx did not answer", server)
    except BaseException:
        server.stop()
        raise
    return server, port


# --- the hyper floor -----------------------------------------------------------------------------

HYPER_FLOOR = Path(__file__).resolve().parent / "hyper-floor"


def floor_binary(explicit: Path | None) -> Path:
    """bench/hyper-floor's release binary: `explicit`, or built (into target/hyper-floor)."""
    if explicit:
        if not explicit.is_file():
            raise BenchError(f"--floor {explicit}: no such file")
        return explicit.resolve()
    target = target_dir() / "hyper-floor"
    command = ["cargo", "build", "--release", "--locked", "--manifest-path", str(HYPER_FLOOR / "Cargo.toml")]
    log(f"building: {' '.join(command)}")
    result = subprocess.run(command, env=dict(os.environ, CARGO_TARGET_DIR=str(target)))
    if result.returncode != 0:
        raise BenchError(f"{' '.join(command)} failed with exit code {result.returncode}")
    return target / "release" / "hyper-floor"


def start_floor(floor: Path, work: Path, workers: int) -> tuple[Process, int]:
    port = free_port()
    server = Process([floor, f"127.0.0.1:{port}"], name="hyper-floor", env=runtime_env(workers),
                     log_path=work / f"hyper-floor-{port}.log")
    try:
        wait_until(lambda: "serving address=" in server.log_tail(), 30, "the hyper floor did not start", server)
    except BaseException:
        server.stop()
        raise
    return server, port


# --- wrk ---------------------------------------------------------------------------------------

WRK_DONE = r"""
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK_RESULT {\"requests\": %.0f, \"duration_us\": %.0f, \"bytes\": %.0f, " ..
    "\"errors\": {\"connect\": %.0f, \"read\": %.0f, \"write\": %.0f, \"status\": %.0f, \"timeout\": %.0f}, " ..
    "\"p50_us\": %.0f, \"p90_us\": %.0f, \"p99_us\": %.0f, \"max_us\": %.0f, \"mean_us\": %.3f}\n",
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
"""


@dataclass
class WrkSettings:
    wrk: str
    threads: int
    connections: int
    duration: float
    warmup: float
    # What a paced case waits on each connection after an answer (wrk's `delay()`, whole ms).
    pace_ms: int = 1


def wrk_script(directory: Path, method: str, body: bytes | None, content_type: str | None,
               pace_ms: int | None = None) -> Path:
    lines = [f'wrk.method = "{method}"']
    if pace_ms is not None:
        lines.append(f"function delay() return {pace_ms} end")
    if body is not None:
        lines.append(f"wrk.body = [==[{body.decode()}]==]")
    if content_type:
        lines.append(f'wrk.headers["Content-Type"] = "{content_type}"')
    paced = f"-paced-{pace_ms}ms" if pace_ms is not None else ""
    script = directory / f"wrk-{method.lower()}-{len(body or b'')}{paced}.lua"
    script.write_text("\n".join(lines) + "\n" + WRK_DONE, encoding="utf-8")
    return script


def run_wrk(settings: WrkSettings, url: str, script: Path, headers: dict[str, str], seconds: float) -> dict:
    command = [
        settings.wrk, "-t", str(settings.threads), "-c", str(settings.connections),
        "-d", f"{max(1, round(seconds))}s", "--timeout", "5s", "-s", str(script),
    ]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    command.append(url)
    client_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120)
    client_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for line in result.stdout.splitlines():
        if line.startswith("WRK_RESULT "):
            data = json.loads(line[len("WRK_RESULT "):])
            break
    else:
        raise BenchError(f"wrk printed no result (exit {result.returncode}):\n{result.stdout}\n{result.stderr}")
    if data["requests"] <= 0:
        raise BenchError(f"wrk made no request: {' '.join(command)}\n{result.stdout}")
    errors = {kind: count for kind, count in data["errors"].items() if count}
    if errors:
        raise BenchError(f"wrk saw errors {errors}: {' '.join(command)}")
    data["rps"] = data["requests"] / (data["duration_us"] / 1e6)
    # The client's CPU time per request: on a machine that runs both, it is what the server's
    # rate is bounded by once the server's own share is small.
    client_seconds = (client_after.ru_utime + client_after.ru_stime) - (client_before.ru_utime + client_before.ru_stime)
    data["client_cpu_us_per_request"] = client_seconds / data["requests"] * 1e6
    data["bytes_per_response"] = data["bytes"] / data["requests"]
    return data


# --- cases -------------------------------------------------------------------------------------


@dataclass
class Case:
    key: str            # e.g. "get", "get-gzip", "304", "load"
    method: str
    path: str
    body: bytes | None
    expected_status: int
    expected_body: bytes
    encoding: str | None = None          # Accept-Encoding to send
    conditional: bool = False            # send If-None-Match with the server's own tag
    paced: bool = False                  # each connection waits WrkSettings.pace_ms between requests


@dataclass
class ServerRun:
    """One server's measurements for every case, over the rounds."""
    runs: dict[str, list[dict]] = field(default_factory=dict)
    memory: list[dict[str, int]] = field(default_factory=list)


def headers_for(case: Case, etag: str | None) -> dict[str, str]:
    headers = {}
    if case.encoding:
        headers["Accept-Encoding"] = case.encoding
    if case.conditional:
        assert etag is not None
        headers["If-None-Match"] = etag
    if case.body is not None:
        headers["Content-Type"] = "application/json"
    return headers


def verify(server: str, port: int, cases: list[Case], etag: str | None) -> None:
    """Every case answers the expected status and exactly the expected bytes."""
    for case in cases:
        answer = request(port, case.method, case.path, headers_for(case, etag), case.body)
        if answer.status != case.expected_status:
            raise BenchError(f"{server} {case.method} {case.path} ({case.key}) answered {answer.status}, "
                             f"expected {case.expected_status}: {answer.body[:300]!r}")
        if answer.body != case.expected_body:
            raise BenchError(f"{server} {case.method} {case.path} ({case.key}) answered {len(answer.body)} bytes "
                             f"that differ from the {len(case.expected_body)} expected")
        wants_gzip = case.encoding == "gzip" and case.expected_status == 200
        if wants_gzip != (answer.headers.get("content-encoding") == "gzip"):
            raise BenchError(f"{server} {case.path} ({case.key}): Content-Encoding {answer.headers.get('content-encoding')!r}")


def measure_server(settings: WrkSettings, port: int, cases: list[Case], etag: str | None, scripts: Path,
                   server: str, pids: list[int], results: ServerRun) -> None:
    url_base = f"http://127.0.0.1:{port}"
    for case in cases:
        pace = settings.pace_ms if case.paced else None
        script = wrk_script(scripts, case.method, case.body, "application/json" if case.body is not None else None, pace)
        headers = {name: value for name, value in headers_for(case, etag).items() if name != "Content-Type"}
        url = url_base + case.path
        if settings.warmup > 0:
            run_wrk(settings, url, script, headers, settings.warmup)
        cpu_before = cpu_seconds(pids)
        data = run_wrk(settings, url, script, headers, settings.duration)
        # The server's own CPU time per request, whatever share of the cores wrk took.
        data["cpu_us_per_request"] = (cpu_seconds(pids) - cpu_before) / data["requests"] * 1e6
        data["connections"] = settings.connections
        if pace is not None:
            data["pace_ms"] = pace
        log(f"    {server:8} {case.key:9} {data['rps']:10.0f} req/s  p50 {data['p50_us'] / 1000:7.3f} ms  "
            f"p99 {data['p99_us'] / 1000:7.3f} ms  {data['cpu_us_per_request']:6.1f} µs CPU/request  "
            f"(wrk {data['client_cpu_us_per_request']:6.1f} µs)  "
            f"({data['bytes_per_response']:.0f} B/response)")
        results.runs.setdefault(case.key, []).append(data)


@dataclass
class CatalogResult:
    skills: int
    body_bytes: int
    gzip_bytes: int | None
    load_bytes: int | None
    skillcat: ServerRun
    nginx: ServerRun
    floor: ServerRun
    baseline: ServerRun = field(default_factory=ServerRun)

    def median(self, server: str, key: str, metric: str) -> float | None:
        runs = getattr(self, server).runs.get(key)
        if not runs:
            return None
        return statistics.median(run[metric] for run in runs)


def measure_catalog(
    *,
    binary: Path,
    nginx: str,
    settings: WrkSettings,
    tree: Path,
    max_entries: int,
    skills: int,
    load_skill: str | None,
    rows: str,
    workers: int,
    rounds: int,
    work: Path,
    floor: Path | None = None,
    baseline: Path | None = None,
) -> CatalogResult:
    """The rows of one catalog, `rounds` times, one server at a time: skillcat, nginx, the floor
    (the 304 only) and, with `baseline`, another skillcat build, always right next to `binary`
    (the order is reversed every other round), so that the two builds' quotient in each round
    holds up when the machine's speed drifts over the rounds."""
    config = write_config(work, tree, max_entries)
    arguments = ["--config", str(config)]
    log(f"  skillcat on {skills} skills: fetching the bodies to serve from nginx")
    server, port = start_skillcat(binary, arguments, work, workers, skills)
    try:
        identity = request(port, "GET", "/skills")
        gzip = request(port, "GET", "/skills", {"Accept-Encoding": "gzip"})
        skillcat_etag = identity.headers["etag"]
        load = None
        if load_skill:
            load = request(port, "POST", f"/skills/{load_skill}/load", {"Content-Type": "application/json"},
                           LOAD_REQUEST_BODY)
            if load.status != 200:
                raise BenchError(f"POST /skills/{load_skill}/load answered {load.status}: {load.body[:300]!r}")
    finally:
        server.stop()
    if identity.status != 200 or identity.headers.get("content-encoding"):
        raise BenchError(f"GET /skills answered {identity.status} {identity.headers}")
    has_gzip = gzip.status == 200 and gzip.headers.get("content-encoding") == "gzip"

    docroot = work / "docroot"
    docroot.mkdir(exist_ok=True)
    catalog_file = docroot / "catalog.json"
    catalog_file.write_bytes(identity.body)
    gzip_file = docroot / "catalog.json.gz"
    if has_gzip:
        gzip_file.write_bytes(gzip.body)
    else:
        gzip_file.unlink(missing_ok=True)
    load_file = None
    load_path = None
    if load is not None:
        load_file = docroot / "load.json"
        load_file.write_bytes(load.body)
        load_path = f"/skills/{load_skill}/load"

    cases = []
    if "a" in rows:
        cases.append(Case("get", "GET", "/skills", None, 200, identity.body))
        if has_gzip:
            cases.append(Case("get-gzip", "GET", "/skills", None, 200, gzip.body, encoding="gzip"))
    if "b" in rows:
        cases.append(Case("304", "GET", "/skills", None, 304, b"", conditional=True))
        cases.append(Case("304-paced", "GET", "/skills", None, 304, b"", conditional=True, paced=True))
    if load is not None:
        cases.append(Case("load", "POST", load_path, LOAD_REQUEST_BODY, 200, load.body))
        cases.append(Case("load-paced", "POST", load_path, LOAD_REQUEST_BODY, 200, load.body, paced=True))

    scripts = work / "wrk"
    scripts.mkdir(exist_ok=True)
    result = CatalogResult(skills, len(identity.body), len(gzip.body) if has_gzip else None,
                           len(load.body) if load is not None else None, ServerRun(), ServerRun(), ServerRun())
    # The floor answers only the 304.
    floor_cases = [case for case in cases if case.key in ("304", "304-paced")] if floor else []
    servers = ["skillcat"] + (["baseline"] if baseline else []) + ["nginx"] + (["floor"] if floor_cases else [])
    for round_index in range(rounds):
        order = servers if round_index % 2 == 0 else servers[::-1]
        for name in order:
            log(f"  round {round_index + 1}/{rounds}: {name} alone, {skills} skills")
            served = cases
            if name == "skillcat":
                server, port = start_skillcat(binary, arguments, work, workers, skills)
                etag = skillcat_etag
            elif name == "baseline":
                assert baseline is not None
                server, port = start_skillcat(baseline, arguments, work, workers, skills)
                # Its own tag; it must answer the same bytes (`verify`), or the two builds would
                # not be doing the same work.
                etag = request(port, "GET", "/skills").headers["etag"]
            elif name == "nginx":
                server, port = start_nginx(nginx, work, workers, catalog_file, load_path, load_file)
                etag = request(port, "GET", "/skills").headers["etag"]
            else:
                assert floor is not None
                server, port = start_floor(floor, work, workers)
                etag = request(port, "GET", "/skills").headers["etag"]
                served = floor_cases
            try:
                verify(name, port, served, etag)
                measure_server(settings, port, served, etag, scripts, name, process_tree(server.pid), getattr(result, name))
                if name == "skillcat":
                    result.skillcat.memory.append(memory_of(server.pid))
                server.check_alive()
            finally:
                status = server.stop()
            if status not in (0, None) and name in ("skillcat", "baseline"):
                raise BenchError(f"skillcat exited with status {status}:\n{server.log_tail()}")
    return result


def nginx_version(nginx: str) -> str:
    result = subprocess.run([nginx, "-v"], capture_output=True, text=True)
    text = (result.stderr or result.stdout).strip()
    return text.split(":", 1)[1].strip() if ":" in text else text or "unknown"


def wrk_version(wrk: str) -> str:
    result = subprocess.run([wrk, "-v"], capture_output=True, text=True)
    for line in (result.stdout + result.stderr).splitlines():
        if line.startswith("wrk "):
            return " ".join(line.split()[:2])
    return "unknown"


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
