#!/usr/bin/env python3
"""Runs nginx's own test files (github.com/nginx/nginx-tests) against a corelb binary and prints per-file counts.

Each file is run as `prove` runs it (`perl FILE` in the checkout, one file at a time, since the files pick ports),
with TEST_NGINX_BINARY naming the binary; its TAP output is counted: passed, failed, skipped and TODO subtests, a
whole-file skip with its reason, and the first failure (a failed subtest's name, or the error the file died of).

The checkout is never fetched or kept by this script: pass it with --tests DIR or $NGINX_TESTS.

    tools/nginx_tests.py --tests ~/src/nginx-tests upstream.t upstream_hash.t
    NGINX_TESTS=~/src/nginx-tests tools/nginx_tests.py --binary target/release/corelb --list files.txt
    tools/nginx_tests.py --tests DIR --markdown FILES...   # a table for docs/nginx-tests.md

Exit status: 0 when every file ran to its end without a failed subtest, 1 otherwise, 2 on a usage error.
"""

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAP_LINE = re.compile(r"^(not )?ok\b\s*(\d+)?\s*(?:-\s*)?(.*)$")
PLAN = re.compile(r"^1\.\.(\d+)(?:\s*#\s*(?:skip|SKIP)\w*\s*(.*))?")


@dataclass
class Result:
    name: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    todo: int = 0
    planned: int = -1
    skip_all: str = ""
    first_failure: str = ""
    exit_code: int = 0
    timed_out: bool = False
    diagnostics: list = field(default_factory=list)

    def status(self) -> str:
        if self.skip_all:
            return f"skipped: {self.skip_all}"
        if self.timed_out:
            return "timed out"
        ran = self.passed + self.failed + self.skipped + self.todo
        if self.failed:
            return f"first failure: {self.first_failure}"
        if self.planned >= 0 and ran < self.planned:
            died = next((d for d in self.diagnostics if not d.startswith("#")), "")
            return f"stopped after {ran} of {self.planned}" + (f": {died}" if died else "")
        if self.exit_code != 0:
            died = next((d for d in self.diagnostics if not d.startswith("#")), "")
            return f"exit {self.exit_code}" + (f": {died}" if died else "")
        return "ok"


def count(name: str, tap: str, stderr: str, exit_code: int) -> Result:
    """Counts the TAP output `tap` of one file."""
    r = Result(name=name, exit_code=exit_code)
    for line in tap.splitlines():
        plan = PLAN.match(line)
        if plan:
            r.planned = int(plan.group(1))
            if r.planned == 0:
                r.skip_all = (plan.group(2) or "no reason given").strip()
            continue
        m = TAP_LINE.match(line)
        if not m:
            continue
        failed, rest = m.group(1) is not None, m.group(3)
        directive = re.search(r"#\s*(skip|todo)\b", rest, re.IGNORECASE)
        kind = directive.group(1).lower() if directive else ""
        if kind == "skip":
            r.skipped += 1
        elif kind == "todo":
            r.todo += 1
        elif failed:
            r.failed += 1
            if not r.first_failure:
                r.first_failure = rest.strip() or f"subtest {m.group(2)}"
        else:
            r.passed += 1
    r.diagnostics = [l.strip() for l in stderr.splitlines() if l.strip()]
    return r


def run_file(tests: str, binary: str, name: str, timeout: float) -> Result:
    env = dict(os.environ, TEST_NGINX_BINARY=binary)
    path = name if os.path.isabs(name) else os.path.join(tests, name)
    try:
        p = subprocess.run(
            ["perl", path], cwd=tests, env=env, capture_output=True, text=True, errors="replace", timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        r = count(name, out, "", -1)
        r.timed_out = True
        return r
    return count(name, p.stdout, p.stderr, p.returncode)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="test files of the checkout (upstream.t ...)")
    ap.add_argument("--tests", default=os.environ.get("NGINX_TESTS"), help="the nginx-tests checkout ($NGINX_TESTS)")
    ap.add_argument(
        "--binary",
        default=os.environ.get("TEST_NGINX_BINARY", os.path.join(REPO, "target/release/corelb")),
        help="the binary to test ($TEST_NGINX_BINARY, else target/release/corelb)",
    )
    ap.add_argument("--list", help="a file naming test files, one a line (# comments)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds one file may run (default 300)")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--verbose", action="store_true", help="print each file's diagnostics")
    a = ap.parse_args()

    if not a.tests or not os.path.isdir(os.path.join(a.tests, "lib", "Test")):
        print("nginx_tests: give the nginx-tests checkout with --tests DIR or $NGINX_TESTS", file=sys.stderr)
        return 2
    files = list(a.files)
    if a.list:
        with open(a.list) as f:
            files += [l.split("#")[0].strip() for l in f if l.split("#")[0].strip()]
    if not files:
        print("nginx_tests: name at least one test file", file=sys.stderr)
        return 2
    binary = os.path.abspath(a.binary)
    if not os.access(binary, os.X_OK):
        print(f"nginx_tests: no binary at {binary} (cargo build --release -p corelb)", file=sys.stderr)
        return 2

    results = []
    if a.markdown:
        print("| file | passed | failed | skipped | status |")
        print("|---|---|---|---|---|")
    else:
        print(f"{'file':36} {'pass':>5} {'fail':>5} {'skip':>5} {'todo':>5}  status")
    for name in files:
        r = run_file(os.path.abspath(a.tests), binary, name, a.timeout)
        results.append(r)
        if a.markdown:
            print(f"| {r.name} | {r.passed} | {r.failed} | {r.skipped + r.todo} | {r.status()} |")
        else:
            print(f"{r.name:36} {r.passed:5} {r.failed:5} {r.skipped:5} {r.todo:5}  {r.status()}")
        if a.verbose:
            for d in r.diagnostics:
                print(f"    {d}")
        sys.stdout.flush()
    total = sum(r.passed for r in results)
    print(f"\n{len(results)} files, {total} subtests passed, {sum(r.failed for r in results)} failed")
    return 0 if all(r.status() in ("ok",) or r.skip_all for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
