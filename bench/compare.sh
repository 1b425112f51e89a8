#!/usr/bin/env bash
# Compare dapl-rs (datperf) with raw kernel TCP, UCX over TCP and libfabric's tcp provider,
# all on 127.0.0.1 in one run, one tool at a time. Writes a markdown table to stdout and to
# the file given by -o (default bench/compare-result.md). Raw tool outputs go to
# $COMPARE_LOGDIR (default: a new mktemp directory, printed at the end).
#
# Usage: bench/compare.sh [-o FILE] [--no-install]
set -u -o pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
OUT="$SCRIPT_DIR/compare-result.md"
INSTALL=1

usage() {
    sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case "$1" in
        -o) [ $# -ge 2 ] || { usage >&2; exit 2; }; OUT=$2; shift 2 ;;
        -o*) OUT=${1#-o}; shift ;;
        --no-install) INSTALL=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "compare.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
done

LOGDIR=${COMPARE_LOGDIR:-}
if [ -z "$LOGDIR" ]; then
    LOGDIR=$(mktemp -d /tmp/dapl-compare.XXXXXX)
fi
mkdir -p "$LOGDIR"

# Ports: one per tool.
UCX_PORT=13437        # ucx_perftest's TCP port for its data exchange
FI_PORT=47637         # fi_pingpong control port
DATPERF_QUAL=18637    # datperf connection qualifier (raw TCP baseline uses +1)

# Iterations (bandwidth runs move 512 MiB, as datperf does).
LAT_ITERS=10000
LAT_WARMUP=500
RATE_ITERS=300000

DATPERF="$ROOT/target/release/datperf"

log() { echo "compare.sh: $*" >&2; }

# ---------------------------------------------------------------- cleanup of servers
SERVER_PIDS=()
cleanup() {
    local pid
    for pid in "${SERVER_PIDS[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null
        fi
    done
    for pid in "${SERVER_PIDS[@]}"; do
        wait "$pid" 2>/dev/null
    done
    SERVER_PIDS=()
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

# Waits (up to ~5 s) until something listens on TCP port $1; returns 1 if nothing does.
wait_listen() {
    local port=$1 i
    for i in $(seq 1 50); do
        if command -v ss >/dev/null 2>&1; then
            if ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
                return 0
            fi
        elif [ "$i" -ge 10 ]; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# Stops a server started in the background (pid $1), after giving it a moment to exit.
stop_server() {
    local pid=$1 i
    for i in $(seq 1 20); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}

# ---------------------------------------------------------------- installation
install_if_missing() {
    local pkgs=()
    command -v ucx_perftest >/dev/null 2>&1 || pkgs+=(ucx-utils)
    command -v fi_pingpong >/dev/null 2>&1 || pkgs+=(libfabric-bin)
    if [ ${#pkgs[@]} -eq 0 ]; then
        return 0
    fi
    if [ "$INSTALL" -eq 0 ]; then
        log "missing ${pkgs[*]} (not installing: --no-install)"
        return 0
    fi
    log "installing ${pkgs[*]}"
    {
        timeout 300 apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq "${pkgs[@]}"
    } >"$LOGDIR/apt.log" 2>&1 || log "apt-get failed (see $LOGDIR/apt.log)"
}
install_if_missing

# ---------------------------------------------------------------- results
# VAL[tool:row] = number, or FAIL; missing = no comparable test.
declare -A VAL
ROWS=(send_lat_8B write_lat_8B read_lat_8B
      send_bw_4KiB send_bw_64KiB send_bw_1MiB
      write_bw_4KiB write_bw_64KiB write_bw_1MiB
      read_bw_4KiB read_bw_64KiB read_bw_1MiB
      msg_rate_8B)

is_number() { [[ $1 =~ ^[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$ ]]; }

# ---------------------------------------------------------------- datperf (dapl-rs + raw TCP)
run_datperf() {
    local json="$LOGDIR/datperf.json" err="$LOGDIR/datperf.log" row v b
    if [ ! -x "$DATPERF" ]; then
        log "building datperf"
        (cd "$ROOT" && timeout 900 cargo build --release -p datperf) >"$LOGDIR/datperf-build.log" 2>&1 ||
            log "cargo build failed (see $LOGDIR/datperf-build.log)"
    fi
    log "datperf --json --link tcp"
    if ! timeout 600 "$DATPERF" --json --link tcp -p "$DATPERF_QUAL" >"$json" 2>"$err"; then
        log "datperf failed (see $err)"
    fi
    for row in "${ROWS[@]}"; do
        # One object per line: {"name": "...", "unit": "...", "value": X, "baseline": Y, ...}
        v=$(awk -v n="\"$row\"" '
            index($0, "\"name\": " n) {
                if (match($0, /"value": *[-+0-9.eE]+/)) { s = substr($0, RSTART, RLENGTH); sub(/.*: */, "", s); print s }
            }' "$json" 2>/dev/null | head -n1)
        b=$(awk -v n="\"$row\"" '
            index($0, "\"name\": " n) {
                if (match($0, /"baseline": *[-+0-9.eE]+/)) { s = substr($0, RSTART, RLENGTH); sub(/.*: */, "", s); print s }
            }' "$json" 2>/dev/null | head -n1)
        if is_number "${v:-x}"; then VAL[dapl:$row]=$v; else VAL[dapl:$row]=FAIL; fi
        if is_number "${b:-x}"; then VAL[raw:$row]=$b; else VAL[raw:$row]=FAIL; fi
    done
}

# ---------------------------------------------------------------- UCX (ucx_perftest)
# ucx_run NAME TEST SIZE ITERS [extra client args...]: sets UCX_LINE to the final line's fields
# (iterations lat50 lat_avg lat_overall bw_avg bw_overall mr_avg mr_overall), or to nothing.
# (Not run in a command substitution, so that the EXIT trap sees the server's pid.)
UCX_LINE=
ucx_run() {
    local name=$1 test=$2 size=$3 iters=$4 spid
    shift 4
    local slog="$LOGDIR/ucx-$name.server.log" clog="$LOGDIR/ucx-$name.client.log"
    UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 120 ucx_perftest -p "$UCX_PORT" >"$slog" 2>&1 &
    spid=$!
    SERVER_PIDS+=("$spid")
    if ! wait_listen "$UCX_PORT"; then
        echo "server did not listen on $UCX_PORT" >>"$clog"
    fi
    UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 90 ucx_perftest 127.0.0.1 -p "$UCX_PORT" -f \
        -t "$test" -s "$size" -n "$iters" "$@" >"$clog" 2>&1
    echo "exit status: $?" >>"$clog"
    stop_server "$spid"
    # With -f the result is one line of 8 numbers.
    UCX_LINE=$(awk 'NF == 8 { ok = 1; for (i = 1; i <= 8; i++) if ($i !~ /^[0-9.]+$/) ok = 0; if (ok) line = $0 }
         END { if (line != "") print line }' "$clog")
}

# Sets VAL[ucx:ROW] from field FIELD (1-based) of ucx_run's line, scaled by SCALE.
ucx_row() {
    local row=$1 field=$2 scale=$3 line=$4 v
    v=$(echo "$line" | awk -v f="$field" -v s="$scale" 'NF == 8 { printf "%.6g", $f * s }')
    if is_number "${v:-x}"; then VAL[ucx:$row]=$v; else VAL[ucx:$row]=FAIL; fi
}

run_ucx() {
    if ! command -v ucx_perftest >/dev/null 2>&1; then
        log "ucx_perftest not found"
        VAL[ucx:send_lat_8B]=FAIL; VAL[ucx:write_lat_8B]=FAIL
        local r; for r in send_bw_4KiB send_bw_64KiB send_bw_1MiB msg_rate_8B; do VAL[ucx:$r]=FAIL; done
        return
    fi
    local mib_to_gb
    mib_to_gb=$(awk 'BEGIN { printf "%.10f", 1048576 / 1e9 }')   # ucx_perftest's MB/s is MiB/s
    log "ucx_perftest tag_lat 8"
    ucx_run tag_lat tag_lat 8 "$LAT_ITERS" -w "$LAT_WARMUP"
    ucx_row send_lat_8B 2 1 "$UCX_LINE"                  # 50th percentile, half round trip
    log "ucx_perftest ucp_put_lat 8"
    ucx_run ucp_put_lat ucp_put_lat 8 "$LAT_ITERS" -w "$LAT_WARMUP"
    ucx_row write_lat_8B 2 1 "$UCX_LINE"
    log "ucx_perftest tag_bw 4KiB"
    ucx_run tag_bw_4KiB tag_bw 4096 131072
    ucx_row send_bw_4KiB 6 "$mib_to_gb" "$UCX_LINE"      # overall bandwidth
    log "ucx_perftest tag_bw 64KiB"
    ucx_run tag_bw_64KiB tag_bw 65536 8192
    ucx_row send_bw_64KiB 6 "$mib_to_gb" "$UCX_LINE"
    log "ucx_perftest tag_bw 1MiB"
    ucx_run tag_bw_1MiB tag_bw 1048576 512
    ucx_row send_bw_1MiB 6 "$mib_to_gb" "$UCX_LINE"
    log "ucx_perftest tag_bw 8 (message rate)"
    ucx_run tag_bw_8B tag_bw 8 "$RATE_ITERS"
    ucx_row msg_rate_8B 8 0.000001 "$UCX_LINE"           # overall msg/s -> Mmsg/s
}

# ---------------------------------------------------------------- libfabric (fi_pingpong)
run_libfabric() {
    if ! command -v fi_pingpong >/dev/null 2>&1; then
        log "fi_pingpong not found"
        VAL[lf:send_lat_8B]=FAIL
        return
    fi
    local slog="$LOGDIR/fi_pingpong.server.log" clog="$LOGDIR/fi_pingpong.client.log" spid v
    log "fi_pingpong -p tcp -e msg 8"
    timeout 120 fi_pingpong -p tcp -e msg -S 8 -I "$LAT_ITERS" -B "$FI_PORT" >"$slog" 2>&1 &
    spid=$!
    SERVER_PIDS+=("$spid")
    if ! wait_listen "$FI_PORT"; then
        echo "server did not listen on $FI_PORT" >>"$clog"
    fi
    timeout 90 fi_pingpong -p tcp -e msg -S 8 -I "$LAT_ITERS" -P "$FI_PORT" 127.0.0.1 >"$clog" 2>&1
    echo "exit status: $?" >>"$clog"
    stop_server "$spid"
    # Columns: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
    v=$(awk '$1 == "8" && NF >= 8 { v = $7 } END { if (v != "") print v }' "$clog")
    if is_number "${v:-x}"; then VAL[lf:send_lat_8B]=$v; else VAL[lf:send_lat_8B]=FAIL; fi
}

# ---------------------------------------------------------------- run, one tool at a time
run_datperf
run_ucx
run_libfabric
cleanup

# ---------------------------------------------------------------- table
label() {
    case "$1" in
        send_lat_8B) echo "send/recv latency, 8 B (us, half round trip)" ;;
        write_lat_8B) echo "RDMA write / put latency, 8 B (us, half round trip)" ;;
        read_lat_8B) echo "RDMA read / get latency, 8 B (us, full round trip)" ;;
        send_bw_4KiB) echo "send bandwidth, 4 KiB (GB/s)" ;;
        send_bw_64KiB) echo "send bandwidth, 64 KiB (GB/s)" ;;
        send_bw_1MiB) echo "send bandwidth, 1 MiB (GB/s)" ;;
        write_bw_4KiB) echo "RDMA write bandwidth, 4 KiB (GB/s)" ;;
        write_bw_64KiB) echo "RDMA write bandwidth, 64 KiB (GB/s)" ;;
        write_bw_1MiB) echo "RDMA write bandwidth, 1 MiB (GB/s)" ;;
        read_bw_4KiB) echo "RDMA read bandwidth, 4 KiB (GB/s)" ;;
        read_bw_64KiB) echo "RDMA read bandwidth, 64 KiB (GB/s)" ;;
        read_bw_1MiB) echo "RDMA read bandwidth, 1 MiB (GB/s)" ;;
        msg_rate_8B) echo "message rate, 8 B sends (Mmsg/s)" ;;
        *) echo "$1" ;;
    esac
}

cell() {
    local key=$1 row=$2 v
    v=${VAL[$key:$row]:-}
    if [ -z "$v" ]; then
        printf '—'
    elif [ "$v" = FAIL ]; then
        printf 'failed (see log)'
    else
        case "$row" in
            *_lat_*) awk -v x="$v" 'BEGIN { printf "%.2f", x }' ;;
            *) awk -v x="$v" 'BEGIN { printf "%.3f", x }' ;;
        esac
    fi
}

first_line() { "$@" 2>/dev/null | grep -v '^[[:space:]]*$' | head -n1; }

CPU=$(lscpu 2>/dev/null | awk -F: '/^Model name/ { sub(/^[ \t]+/, "", $2); print $2; exit }')
UCX_V=$(first_line ucx_info -v | sed 's/^# *//')
FI_V=$(fi_info --version 2>/dev/null | awk -F': *' '/^libfabric:/ { print $2; exit }')
DP_V=$(first_line "$DATPERF" --version)

{
    echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') on 127.0.0.1; kernel $(uname -r); CPU ${CPU:-unknown} ($(nproc) cores);"
    echo "${DP_V:-datperf ?}; UCX ${UCX_V:-not installed} (UCX_TLS=tcp, UCX_NET_DEVICES=lo); libfabric ${FI_V:-not installed} (tcp provider)."
    echo
    echo "| measurement | dapl-rs (datperf) | raw TCP (datperf baseline) | UCX tcp | libfabric tcp |"
    echo "|---|---|---|---|---|"
    for row in "${ROWS[@]}"; do
        echo "| $(label "$row") | $(cell dapl "$row") | $(cell raw "$row") | $(cell ucx "$row") | $(cell lf "$row") |"
    done
    echo
    echo "Notes:"
    echo "- Latencies are half a round trip of an 8-byte ping-pong for every tool (datperf: median;"
    echo "  ucx_perftest: 50th percentile of its ping-pong, which it already reports as half the round"
    echo "  trip; fi_pingpong: average usec/xfer, i.e. total time / (2 x iterations), so also half a"
    echo "  round trip). The read/get row is the exception: a full round trip (post to completion) for"
    echo "  datperf and an 8-byte request/response round trip for its raw TCP baseline."
    echo "- dapl-rs latency busy-polls its EVD; bandwidth and message rate use evd_wait. The raw TCP"
    echo "  column is datperf's own baseline (std TcpStream, TCP_NODELAY) waiting the same way."
    echo "- UCX: only latency-style tests (tag_lat, ucp_put_lat) plus tag_bw (two-sided, 'send' rows"
    echo "  and the message rate; overall figures, MiB/s converted to GB/s = 10^9 B/s). ucp_get and"
    echo "  ucp_put_bw over TCP stall in ucx_perftest's own barrier loop (hundreds of us to ~1 ms per"
    echo "  operation), so the RDMA read rows and the RDMA write bandwidth rows are not reported for UCX."
    echo "- libfabric: the Debian libfabric-bin package ships only fi_pingpong (no fi_rma_bw etc.), so"
    echo "  only the 8-byte send latency (msg endpoint) is reported; fi_pingpong with larger sizes is a"
    echo "  ping-pong, not a streaming bandwidth test."
    echo "- Bandwidth runs move 512 MiB per size (ucx: 131072 x 4 KiB, 8192 x 64 KiB, 512 x 1 MiB);"
    echo "  latency runs $LAT_ITERS iterations. One run on a shared machine: expect run-to-run noise."
    echo "- '—': the tool has no comparable test here; 'failed (see log)': see the raw outputs."
} >"$LOGDIR/table.md"

mkdir -p "$(dirname "$OUT")"
cp "$LOGDIR/table.md" "$OUT"
cat "$LOGDIR/table.md"
echo
echo "Table written to $OUT; raw outputs in $LOGDIR" >&2
