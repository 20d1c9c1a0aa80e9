#!/usr/bin/env python3
"""User and kernel CPU per request of a front against nginx: tools/bench/side_by_side.py's setup (the same configs,
backends and wrk -c64 on CPU 0, the front on the last CPU), corelb and nginx alternated, medians with the user and
system columns.

  python3 tools/cpu_split.py ROUNDS "target/release/corelb -c {conf}"
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench"))
import side_by_side  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) != 3 or not sys.argv[1].isdigit():
        sys.exit(__doc__)
    sys.argv = [sys.argv[0], "--rounds", sys.argv[1], "--only", "nginx", sys.argv[2]]
    side_by_side.main()
