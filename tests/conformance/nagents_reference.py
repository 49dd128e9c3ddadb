#!/usr/bin/env python3
"""Reference runner for the skillcat conformance fixtures (see FORMAT.md).

Usage:
    python nagents_reference.py record   # cases.json -> expected.json (next to this file)
    python nagents_reference.py case     # one case object on stdin -> its result on stdout
    python nagents_reference.py cases    # a JSON list of cases on stdin -> a list of results
    python nagents_reference.py pure     # pure-function inputs on stdin -> their results (see pure())

Needs Python 3.9+ and nagents (0.25.2) only. Every case is built in a fresh
directory T whose absolute path is exactly 64 bytes; every occurrence of T in
the output is written as "$T". Trees are created with directory descriptors
(openat-style), so paths longer than PATH_MAX can be built, and symlinks are
never followed while building.
"""

import asyncio
import importlib.metadata
import json
import os
import platform
import shutil
import sys
import tempfile

from nagents.skills import CompositeSkillDiscoverer
from nagents.skills import DEFAULT_SKILL_TOKEN_LIMIT
from nagents.skills import DirectorySkillDiscoverer
from nagents.skills import budget_skill_content
from nagents.skills import Skill
from nagents.skills import parse_skill_metadata
from nagents.skills import render_skill_manifest
from nagents.skills.types import explicit_skill_names

ROOT_LENGTH = 64
HERE = os.path.dirname(os.path.abspath(__file__))
ENTRY_KINDS = ("text", "hex", "fill", "dir", "symlink", "fifo")


class CaseError(Exception):
    """The case object itself is invalid (not an odd tree: a malformed description)."""


# --------------------------------------------------------------------------- temp root


def make_root():
    """Return (base, T): base is the mkdtemp directory to delete, T the 64-byte case root."""
    base = os.path.realpath(tempfile.mkdtemp(prefix="tmp", dir=tempfile.gettempdir()))
    try:
        try:
            base_bytes = base.encode("utf-8")
        except UnicodeEncodeError:
            raise CaseError(f"temporary directory {base!r} is not valid UTF-8; set TMPDIR") from None
        padding = ROOT_LENGTH - len(base_bytes) - 1
        if padding < 1:
            raise CaseError(
                f"temporary directory {base!r} is {len(base_bytes)} bytes long; a {ROOT_LENGTH}-byte case "
                f"root needs at most {ROOT_LENGTH - 2} bytes (set TMPDIR to a shorter directory)"
            )
        root = base + "/" + "t" * padding
        os.mkdir(root, 0o755)
        assert len(root.encode("utf-8")) == ROOT_LENGTH
        return base, root
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise


# --------------------------------------------------------------------------- building


def _entry_parts(entry):
    if "path" in entry and "path_hex" in entry:
        raise CaseError("entry has both path and path_hex")
    if "path" in entry:
        if not isinstance(entry["path"], str):
            raise CaseError("entry path must be a string")
        try:
            raw = entry["path"].encode("utf-8")
        except UnicodeEncodeError:
            raise CaseError(f"entry path {entry['path']!r} is not valid UTF-8 text") from None
    elif "path_hex" in entry:
        try:
            raw = bytes.fromhex(entry["path_hex"])
        except (TypeError, ValueError):
            raise CaseError(f"entry path_hex {entry['path_hex']!r} is not hex") from None
    else:
        raise CaseError("entry needs path or path_hex")
    parts = raw.split(b"/")
    for part in parts:
        if part in (b"", b".", b"..") or b"\0" in part:
            raise CaseError(f"entry path {raw!r} must be relative, without empty, '.', '..' or NUL components")
    return parts


def _open_dir(parent_fd, name):
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)


def _open_parent(root_fd, parts):
    """Open (creating, mode 0755) the directory holding the last of parts; never follows symlinks."""
    fd = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            child = _open_dir(fd, part)
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _create_entry(root, root_fd, entry):
    if not isinstance(entry, dict):
        raise CaseError("entry must be an object")
    kinds = [kind for kind in ENTRY_KINDS if kind in entry]
    if len(kinds) != 1:
        raise CaseError(f"entry needs exactly one of {', '.join(ENTRY_KINDS)}: {entry!r}")
    kind = kinds[0]
    parts = _entry_parts(entry)
    name = parts[-1]
    try:
        parent = _open_parent(root_fd, parts)
    except OSError as error:
        raise CaseError(f"cannot create the parent directories of entry {entry!r}: {error}") from None
    try:
        if kind == "dir":
            if entry["dir"] is not True:
                raise CaseError("dir must be true")
            try:
                os.mkdir(name, 0o755, dir_fd=parent)
            except FileExistsError:
                os.close(_open_dir(parent, name))  # an existing directory is fine, anything else is not
        elif kind == "fifo":
            if entry["fifo"] is not True:
                raise CaseError("fifo must be true")
            os.mkfifo(name, 0o644, dir_fd=parent)
        elif kind == "symlink":
            target = entry["symlink"]
            if not isinstance(target, str):
                raise CaseError("symlink target must be a string")
            if target == "$T":
                target = root
            elif target.startswith("$T/"):
                target = root + target[2:]
            os.symlink(target, name, dir_fd=parent)
        else:
            if kind == "text":
                if not isinstance(entry["text"], str):
                    raise CaseError("text must be a string")
                try:
                    chunks = [entry["text"].encode("utf-8")]
                except UnicodeEncodeError:
                    raise CaseError("text must be valid UTF-8 text (use hex)") from None
                size = None
            elif kind == "hex":
                try:
                    chunks = [bytes.fromhex(entry["hex"])]
                except (TypeError, ValueError):
                    raise CaseError(f"hex {entry['hex']!r} is not hex") from None
                size = None
            else:
                fill = entry["fill"]
                try:
                    prefix = fill.get("prefix", "").encode("utf-8")
                    byte = fill["byte"].encode("ascii")
                    size = fill["size"]
                except (AttributeError, KeyError, UnicodeEncodeError):
                    raise CaseError(f"bad fill {fill!r}") from None
                if len(byte) != 1 or type(size) is not int or size < len(prefix):
                    raise CaseError(f"bad fill {fill!r}: byte must be one ASCII character, size >= prefix bytes")
                chunks = [prefix]
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=parent)
            try:
                for chunk in chunks:
                    _write_all(fd, chunk)
                if size is not None:
                    left = size - len(prefix)
                    block = byte * 65536
                    while left:
                        step = min(left, len(block))
                        _write_all(fd, block[:step])
                        left -= step
            finally:
                os.close(fd)
    except CaseError:
        raise
    except OSError as error:
        raise CaseError(f"cannot create entry {entry!r}: {error}") from None
    finally:
        os.close(parent)


def build_tree(root, entries):
    if not isinstance(entries, list):
        raise CaseError("entries must be a list")
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for entry in entries:
            _create_entry(root, root_fd, entry)
    finally:
        os.close(root_fd)


# --------------------------------------------------------------------------- running nagents


def _source_arguments(root, source):
    if not isinstance(source, dict) or not isinstance(source.get("roots"), list):
        raise CaseError(f"source must be an object with a roots list: {source!r}")
    roots = []
    for relative in source["roots"]:
        if not isinstance(relative, str):
            raise CaseError("roots must be strings")
        if relative.startswith("$ABS/") or relative.startswith("/"):
            raise CaseError(f"root {relative!r}: only roots relative to T are supported")
        roots.append(root + "/" + relative if relative else root)
    options = {}
    for key in ("max_entries", "max_depth"):
        if key in source:
            options[key] = source[key]
    return roots, options


class _Recording:
    """Forward a source, remembering its last discovered snapshot (for the shadowed list)."""

    def __init__(self, inner):
        self.inner = inner
        self.snapshot = ()

    async def discover(self):
        self.snapshot = ()
        result = await self.inner.discover()
        self.snapshot = tuple(result)
        return result

    async def load(self, skill):
        return await self.inner.load(skill)


def _triple(skill):
    return [skill.name, skill.description, skill.location]


async def evaluate(root, case, strict):
    sources = case.get("sources", [])
    if not isinstance(sources, list):
        raise CaseError("sources must be a list")
    arguments = [_source_arguments(root, source) for source in sources]
    limits = case.get("token_limits", [])
    if not isinstance(limits, list):
        raise CaseError("token_limits must be a list")
    limits = [DEFAULT_SKILL_TOKEN_LIMIT] + list(limits)

    per_source = []
    for roots, options in arguments:
        try:
            discoverer = DirectorySkillDiscoverer(roots, **options)
            skills = await discoverer.discover()
            per_source.append(
                {"skills": [_triple(s) for s in skills], "diagnostics": list(discoverer.diagnostics), "error": None}
            )
        except Exception as error:  # noqa: BLE001 - every failure is data here
            per_source.append({"skills": [], "diagnostics": [], "error": str(error)})

    def composite_failure(text):
        return {
            "sources": per_source,
            "composite": {"skills": [], "shadowed": [], "error": text},
            "manifest": None,
            "loads": [],
        }

    try:
        recorders = [_Recording(DirectorySkillDiscoverer(roots, **options)) for roots, options in arguments]
        composite = CompositeSkillDiscoverer(recorders)
        skills = list(await composite.discover())
    except Exception as error:  # noqa: BLE001
        return composite_failure(str(error))

    try:
        shadowed = []
        owned = set()
        for index, recorder in enumerate(recorders):
            ordered = sorted(recorder.snapshot, key=lambda skill: skill.name)
            shadowed.extend([s.name, s.location, index] for s in ordered if s.name in owned)
            owned.update(s.name for s in ordered)
        manifest = render_skill_manifest(skills)
        loads = []
        for skill in sorted(skills, key=lambda item: item.name):
            for limit in limits:
                content = await composite.load(skill)
                loads.append(
                    {"name": skill.name, "token_limit": limit, "result": dict(budget_skill_content(skill, content, limit))}
                )
    except Exception as error:  # noqa: BLE001
        if strict:
            raise
        return composite_failure(f"unrepresentable: {error}")

    return {
        "sources": per_source,
        "composite": {"skills": [_triple(s) for s in skills], "shadowed": shadowed, "error": None},
        "manifest": manifest,
        "loads": loads,
    }


def clean(value, root):
    """Make every string representable (lone surrogates -> U+FFFD) and write T as $T."""
    if isinstance(value, str):
        text = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        return text.replace(root, "$T")
    if isinstance(value, list):
        return [clean(item, root) for item in value]
    if isinstance(value, tuple):
        return [clean(item, root) for item in value]
    if isinstance(value, dict):
        return {clean(key, root): clean(item, root) for key, item in value.items()}
    return value


def run_case(case, strict):
    if not isinstance(case, dict):
        raise CaseError("a case must be an object")
    base, root = make_root()
    try:
        build_tree(root, case.get("entries", []))
        result = asyncio.run(evaluate(root, case, strict))
        return clean(result, root)
    finally:
        try:
            shutil.rmtree(base)
        except OSError as error:
            print(f"warning: cannot remove {base}: {error}", file=sys.stderr)


# --------------------------------------------------------------------------- modes


def record():
    with open(os.path.join(HERE, "cases.json"), encoding="utf-8") as stream:
        cases = json.load(stream)["cases"]
    results = {}
    for case in cases:
        name = case.get("name")
        if not isinstance(name, str) or not name:
            raise CaseError(f"case without a name: {case!r}")
        if name in results:
            raise CaseError(f"duplicate case name {name!r}")
        if not isinstance(case.get("about"), str) or not case["about"].strip():
            raise CaseError(f"case {name!r} needs an about")
        try:
            results[name] = run_case(case, strict=True)
        except Exception as error:
            raise SystemExit(f"case {name!r}: {type(error).__name__}: {error}") from error
    document = {
        "nagents": importlib.metadata.version("nagents"),
        "python": platform.python_version(),
        "cases": results,
    }
    text = json.dumps(document, indent=1, ensure_ascii=False, sort_keys=False) + "\n"
    with open(os.path.join(HERE, "expected.json"), "wb") as stream:
        stream.write(text.encode("utf-8"))
    print(f"recorded {len(results)} cases into {os.path.join(HERE, 'expected.json')}", file=sys.stderr)


def one_case():
    try:
        case = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    except ValueError as error:  # UnicodeDecodeError and JSONDecodeError
        raise CaseError(f"stdin is not one JSON case object: {error}") from None
    result = run_case(case, strict=False)
    sys.stdout.buffer.write((json.dumps(result, ensure_ascii=False, sort_keys=False) + "\n").encode("utf-8"))
    sys.stdout.buffer.flush()


def many_cases():
    try:
        cases = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    except ValueError as error:
        raise CaseError(f"stdin is not a JSON list of cases: {error}") from None
    if not isinstance(cases, list):
        raise CaseError("stdin must be a JSON list of cases")
    results = [run_case(case, strict=False) for case in cases]
    sys.stdout.buffer.write((json.dumps(results, ensure_ascii=False) + "\n").encode("utf-8"))
    sys.stdout.buffer.flush()


def _outcome(function, *arguments):
    try:
        return {"ok": function(*arguments)}
    except Exception as error:  # noqa: BLE001 - every failure is data here
        return {"error": str(error)}


def pure():
    """Run nagents' pure functions on a batch of inputs.

    stdin: {"parse": [[content, location, default_name], ...],
            "budget": [[content, token_limit], ...],
            "manifest": [[[name, description, location], ...], ...],
            "references": [text, ...]}
    stdout: the same keys, each a list of {"ok": result} or {"error": message}; a parsed skill is
    [name, description, location], a budget is the SkillLoadResult of a skill named "s" at "loc".
    """
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    skill = Skill("s", "d", "loc")
    result = {
        "parse": [
            _outcome(lambda c, l, n: _triple(parse_skill_metadata(c, l, n)), *item) for item in request.get("parse", [])
        ],
        "budget": [_outcome(lambda c, t: dict(budget_skill_content(skill, c, t)), *item) for item in request.get("budget", [])],
        "manifest": [
            _outcome(lambda skills: render_skill_manifest([Skill(*triple) for triple in skills]), item)
            for item in request.get("manifest", [])
        ],
        "references": [_outcome(lambda text: list(explicit_skill_names(text)), item) for item in request.get("references", [])],
    }
    sys.stdout.buffer.write((json.dumps(result, ensure_ascii=False) + "\n").encode("utf-8"))
    sys.stdout.buffer.flush()


def main(argv):
    modes = {"record": record, "case": one_case, "cases": many_cases, "pure": pure}
    if len(argv) != 2 or argv[1] not in modes:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        modes[argv[1]]()
    except CaseError as error:
        print(f"invalid case: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
