#!/usr/bin/env bash
# Runs every test binary of the workspace at once, ROUNDS times (default 5), while two CPU hogs run: the check that
# the tests hold on a busy 2-core machine. One log per binary and round in OUT (default target/test-under-load);
# prints each round's failing binaries, and exits non-zero if any round had one.
#   tools/test_under_load.sh [ROUNDS] [OUT]
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
out=${2:-target/test-under-load}
mkdir -p "$out"
bins="$out/binaries.txt"
cargo test --workspace --locked --no-run --message-format=json 2>/dev/null | python3 -c '
import json, os, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m.get("profile", {}).get("test"):
        print(os.path.dirname(m["manifest_path"]), m["executable"])
' > "$bins"
echo "$(wc -l < "$bins") test binaries"
timeout 3600 sh -c 'while :; do :; done' & hog1=$!
timeout 3600 sh -c 'while :; do :; done' & hog2=$!
trap 'kill $hog1 $hog2 2>/dev/null' EXIT
bad=0
for r in $(seq 1 "$rounds"); do
    started=$(date +%s)
    pids=()
    while read -r dir exe; do
        log="$out/r$r-$(basename "$exe").log"
        ( cd "$dir" && timeout 1200 "$exe" --test-threads 8 > "$log" 2>&1; echo "rc=$?" >> "$log" ) &
        pids+=($!)
    done < "$bins"
    wait "${pids[@]}"
    failed=$(grep -l 'rc=[1-9]' "$out"/r"$r"-*.log 2>/dev/null)
    passed=$(cat "$out"/r"$r"-*.log | grep -aE '^test result' | awk '{s += $4} END {print s + 0}')
    if [ -z "$failed" ]; then
        echo "round $r: green, $passed tests passed, $(( $(date +%s) - started )) s"
    else
        bad=1
        echo "round $r: FAILED in $(echo "$failed" | xargs -n1 basename | tr '\n' ' ')($passed tests passed)"
    fi
done
exit "$bad"
