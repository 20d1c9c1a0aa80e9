#!/bin/sh
# Runs tools/bench/floor_relay.c (epoll) or, with --uring, tools/bench/uring_relay.c (io_uring; needs
# liburing-dev), built on first use into $TMPDIR, on a side-by-side benchmark's config: its listen port, then its
# upstream's server ports. A front for the side-by-side scripts, e.g.
#   python3 tools/cpu_split.py 3 "sh tools/bench/floor_relay.sh {conf}"
#   python3 tools/cpu_split.py 3 "sh tools/bench/floor_relay.sh --uring {conf}"
#   python3 tools/bench/side_by_side.py --stream --only nginx "sh tools/bench/floor_relay.sh {conf}"
set -e
here=$(dirname "$0")
name=floor_relay
libs=
if [ "$1" = --uring ]; then
    name=uring_relay
    libs=-luring
    shift
fi
bin=${TMPDIR:-/tmp}/corelb-$name
[ "$bin" -nt "$here/$name.c" ] || cc -O2 -Wall -o "$bin" "$here/$name.c" $libs
exec "$bin" $(grep -oP 'listen 127.0.0.1:\K\d+' "$1") $(grep -oP 'server 127.0.0.1:\K\d+' "$1")
