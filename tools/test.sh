#!/usr/bin/env bash
# The project's test command (README "Test"): lints are part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all --check
# The engine's modules import only downwards (one accepted cycle: shard <-> proxy); see docs/ARCHITECTURE.md.
python3 tools/check_layers.py
cargo clippy --workspace --all-targets --locked -- -D warnings
# The tests' `SKIP` lines (parts that could not run here, engine/tests/support/skip.rs), summed up at the end.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
cargo test --workspace --locked 2>&1 | tee "$out" || status=$?
{ grep -ao 'SKIP [^ ]*: .*' "$out" || true; } | sort | awk '{ print } END { print NR " test part(s) skipped" }'
exit "$status"
