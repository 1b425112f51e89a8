#!/usr/bin/env bash
# Memory of a long-running C DAT program: bench/handle_cycles.c makes CYCLES
# connect/accept/disconnect/free cycles through libdat2 and libdaplrs.so (the loopback link:
# no TCP ports used up) and prints its resident set every REPORT cycles; this script builds
# both, runs it and prints the table. Usage: bench/handles.sh [CYCLES] [REPORT]
# (default 100000 10000). Needs gcc and libdapl-dev (scripts/test.sh installs them).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CYCLES=${1:-100000}
REPORT=${2:-10000}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
(cd "$ROOT" && cargo build --release -q -p dapl-cabi)
gcc -O2 -Wall -o "$DIR/handle_cycles" "$ROOT/bench/handle_cycles.c" -ldat2
printf 'daplrs-bench u2.0 nonthreadsafe default %s dapl.2.0 "loopback" ""\n' \
    "$ROOT/target/release/libdaplrs.so" >"$DIR/dat.conf"
DAT_OVERRIDE="$DIR/dat.conf" "$DIR/handle_cycles" daplrs-bench "$CYCLES" "$REPORT"
