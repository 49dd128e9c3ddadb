#!/usr/bin/env python3
"""Allocations of a program run under valgrind's DHAT, summed by where they are made: the first
frame of each allocation's stack in skillcat's own code (skipping the allocator's and the
standard collections' frames).

    valgrind --tool=dhat --dhat-out-file=/tmp/dhat.out skillcat check --config C --json > /dev/null
    python3 bench/dhat_sites.py /tmp/dhat.out [--most 14]

Standard library only.
"""

from __future__ import annotations

import argparse
import collections
import json

SKIPPED = ("alloc::", "raw_vec", "<alloc", "core::ptr")


def site(frames: list[str]) -> str:
    for frame in frames:
        if "skillcat" in frame and not any(part in frame for part in SKIPPED):
            # "0x1234: function (file:line)" -> "function"
            return frame.split(" (")[0].split(": ", 1)[-1]
    return "(outside skillcat's code)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", help="a DHAT output file (--dhat-out-file)")
    parser.add_argument("--most", type=int, default=14, help="sites to print (default 14)")
    args = parser.parse_args()
    with open(args.profile, encoding="utf-8") as file:
        profile = json.load(file)
    frames = profile["ftbl"]
    blocks: collections.Counter[str] = collections.Counter()
    sizes: collections.Counter[str] = collections.Counter()
    for point in profile["pps"]:
        where = site([frames[index] for index in point["fs"]])
        blocks[where] += point["tbk"]
        sizes[where] += point["tb"]
    print(f"{sum(blocks.values()):,} allocations, {sum(sizes.values()):,} bytes")
    for where, count in blocks.most_common(args.most):
        print(f"{count:9,} {sizes[where]:12,} B  {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
