#!/bin/sh
# Runs tools/bench/floor_relay.c (built on first use into $TMPDIR) on a side-by-side benchmark's config: its listen
# port, then its upstream's server ports. A front for the side-by-side scripts, e.g.
#   python3 ../shared/bench/perf.py --rounds 3 --secs 4 --only nginx "sh tools/bench/floor_relay.sh {conf}"
#   python3 tools/cpu_split.py 3 "sh tools/bench/floor_relay.sh {conf}"
set -e
here=$(dirname "$0")
bin=${TMPDIR:-/tmp}/corelb-floor-relay
[ "$bin" -nt "$here/floor_relay.c" ] || cc -O2 -Wall -o "$bin" "$here/floor_relay.c"
exec "$bin" $(grep -oP 'listen 127.0.0.1:\K\d+' "$1") $(grep -oP 'server 127.0.0.1:\K\d+' "$1")
