#!/usr/bin/env bash
# Runs each cargo-fuzz target in fuzz/ for a bounded time (default 60 s each) from its seed corpus, on nightly.
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]   (needs `cargo install cargo-fuzz` and a nightly toolchain)
# New inputs go to a scratch corpus under target/, not into fuzz/corpus/ (keep that small, hand-picked);
# a crash is written to fuzz/artifacts/<target>/ and stops the run with a non-zero exit.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(config_parse request_head chunked response_head proxy_header)
if ! rustup toolchain list | grep -q '^nightly'; then
    echo "tools/fuzz.sh: no nightly toolchain; run 'cargo test -p corelb-engine --test fuzz_smoke' instead" >&2
    exit 2
fi
command -v cargo-fuzz >/dev/null || { echo "tools/fuzz.sh: cargo install cargo-fuzz" >&2; exit 2; }
for t in "${targets[@]}"; do
    work="target/fuzz-corpus/$t"
    mkdir -p "$work"
    echo "== $t (${secs}s)"
    log="target/fuzz-$t.log"
    status=0
    (cd fuzz && cargo +nightly fuzz run "$t" "../$work" "corpus/$t" -- \
        -max_total_time="$secs" -max_len=20000 -rss_limit_mb=1024 -print_final_stats=1) >"$log" 2>&1 || status=$?
    grep -E '^(stat::number_of_executed_units|stat::new_units_added|SUMMARY)|panicked|^==[0-9]+== ERROR' "$log" || true
    [ "$status" -eq 0 ] || { echo "tools/fuzz.sh: $t failed (log $log, input in fuzz/artifacts/$t/)" >&2; exit 1; }
done
