#!/usr/bin/env python3
"""Write seed inputs for the fuzz targets from the repository's real skills and conformance texts.

    python3 fuzz/seeds.py OUT_DIR        # writes OUT_DIR/<target>/seed-*

The checked-in corpus (fuzz/corpus/) is these seeds plus what fuzzing found, minimized with
`cargo fuzz cmin`; regenerate and re-minimize when the targets' input layouts change. The layouts
are described at the top of each fuzz_targets/*.rs file.
"""

import json
import re
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def real_skills() -> list[bytes]:
    return [path.read_bytes() for path in sorted((ROOT / "skills").glob("*/SKILL.md"))]


def texts() -> list[bytes]:
    """Every SKILL.md in skills/ and every file text of tests/conformance/cases.json, once each."""
    found = real_skills()
    cases = json.loads((ROOT / "tests/conformance/cases.json").read_text())["cases"]
    for case in cases:
        for entry in case["entries"]:
            if "text" in entry:
                found.append(entry["text"].encode())
            elif "hex" in entry:
                found.append(bytes.fromhex(entry["hex"]))
            elif "fill" in entry:
                fill = entry["fill"]
                found.append(fill["prefix"].encode() + fill["byte"].encode() * 2000)
    return list(dict.fromkeys(found))


def skill_records() -> list[list[tuple[str, str, str]]]:
    """(name, description, location) of SKILL.md files: one catalog of the real skills, one per case.

    The fields are read roughly (a seed only has to look like a catalog, not be nagents' reading).
    """
    real = [
        (path.parent.name, path.read_text(), f"/srv/skills/{path.parent.name}/SKILL.md")
        for path in sorted((ROOT / "skills").glob("*/SKILL.md"))
    ]
    groups = [real]
    for case in json.loads((ROOT / "tests/conformance/cases.json").read_text())["cases"]:
        files = [e for e in case["entries"] if "text" in e and e.get("path", "").endswith("SKILL.md")]
        groups.append([(Path(e["path"]).parent.name, e["text"], "/T/" + e["path"]) for e in files])
    catalogs = []
    for group in groups:
        records = []
        for folder, text, location in group:
            name = re.search(r"^name:\s*['\"]?([^'\"\n]*)", text, re.M)
            description = re.search(r"^description:\s*(.*)$", text, re.M)
            name = name.group(1) if name else folder
            description = description.group(1) if description else text[:200]
            records.append((name, description, location))
        if records:
            catalogs.append(records)
    return catalogs


def record(name: str, description: str, location: str, repeat: int = 1, copies: int = 0) -> bytes:
    """One manifest record with a name taken as UTF-8 (flags bit 0 set)."""
    name_b, location_b = name.encode()[:255], location.encode()[:255]
    description_b = description.encode()[:65535]
    return b"".join([
        bytes([1, len(name_b)]), name_b,
        struct.pack("<H", len(description_b)), description_b,
        bytes([repeat, len(location_b)]), location_b,
        bytes([copies]),
    ])


def main() -> None:
    out = Path(sys.argv[1])
    corpus = {target: [] for target in ("parse_skill_metadata", "budget", "manifest", "explicit_skill_names")}
    all_texts = texts()
    real = real_skills()

    # parse_skill_metadata: selector byte (default name, location), then the file.
    corpus["parse_skill_metadata"] += [b"\0" + text for text in all_texts]
    corpus["parse_skill_metadata"] += [bytes([s]) + text for text in real for s in range(1, 64, 9)]

    # budget: mode, limit bytes, content.
    for text in all_texts:
        # A limit of about an eighth of the text, so the cut falls inside it.
        corpus["budget"].append(bytes([0, min(max(len(text) // 32, 1) - 1, 255)]) + text)
    for text in real:
        corpus["budget"] += [bytes([3, index]) + text for index in range(8)]
        corpus["budget"].append(bytes([1]) + struct.pack("<H", 100) + text)
        corpus["budget"].append(bytes([2]) + struct.pack("<Q", 2**32 + 1) + text)
    corpus["budget"].append(bytes([0, 0]) + "abé😀中".encode() * 3)

    # manifest: catalogs of records.
    for records in skill_records():
        corpus["manifest"].append(b"".join(record(*r) for r in records))
    corpus["manifest"].append(record("many", "d" * 900, "/r/many/SKILL.md", copies=60))
    corpus["manifest"].append(record("rep", "<&>\"' é😀", "/r/<a&b>/\"q'/SKILL.md", repeat=125, copies=40))
    corpus["manifest"].append(b"")

    # explicit_skill_names: text.
    corpus["explicit_skill_names"] += list(all_texts)
    corpus["explicit_skill_names"] += [
        s.encode()
        for s in [
            "use $b then $a, and $b again.",
            r"\$a a$b $$c é$d $e-f_9 $",
            "$" + "a" * 64 + ".",
            "$" + "a" * 65,
            "$abcé $x中 $y😀 ($z) $w_",
        ]
    ]

    for target, inputs in corpus.items():
        directory = out / target
        directory.mkdir(parents=True, exist_ok=True)
        for index, data in enumerate(dict.fromkeys(inputs)):
            (directory / f"seed-{index:04}").write_bytes(data)
        print(f"{target}: {len(inputs)} seeds")


if __name__ == "__main__":
    main()
