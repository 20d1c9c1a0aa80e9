#!/usr/bin/env bash
# The project's test command (README "Test"): lints are part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all --check
# The engine's modules import only downwards (one accepted cycle: shard <-> proxy); see docs/ARCHITECTURE.md.
python3 tools/check_layers.py
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
