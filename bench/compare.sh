#!/usr/bin/env bash
# Compare dapl-rs (datperf) with other stacks on one host, one tool at a time. --link tcp:
# the tcp link next to raw kernel TCP, iperf3, UCX over TCP and libfabric's tcp provider
# (127.0.0.1);
# --link shm: the shm link next to datperf's same-host floors, UCX shared memory (UCX_TLS=sm)
# and libfabric's shm provider; --link both (default): both tables. Writes markdown to stdout
# and to -o FILE (default bench/compare-result.md); raw outputs go to $COMPARE_LOGDIR.
#
# Usage: bench/compare.sh [--link tcp|shm|both] [-o FILE] [--no-install]
set -u -o pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
OUT="$SCRIPT_DIR/compare-result.md"
INSTALL=1
LINKS=(tcp shm)

usage() {
    sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case "$1" in
        -o) [ $# -ge 2 ] || { usage >&2; exit 2; }; OUT=$2; shift 2 ;;
        -o*) OUT=${1#-o}; shift ;;
        --no-install) INSTALL=0; shift ;;
        --link|--link=*)
            if [ "$1" = --link ]; then
                [ $# -ge 2 ] || { usage >&2; exit 2; }; l=$2; shift 2
            else
                l=${1#--link=}; shift
            fi
            case "$l" in
                tcp|shm) LINKS=("$l") ;;
                both) LINKS=(tcp shm) ;;
                *) echo "compare.sh: --link must be tcp, shm or both" >&2; exit 2 ;;
            esac ;;
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
IPERF_PORT=15237      # iperf3 server port
DATPERF_QUAL=18637    # datperf connection qualifier (raw TCP baseline uses +1)

# Iterations (bandwidth runs move 512 MiB, as datperf does).
LAT_ITERS=10000
LAT_WARMUP=500
RATE_ITERS=300000
FI_SHM_ITERS=100000  # fi_pingpong over shm: its average needs many iterations
IPERF_SECS=3         # iperf3 -t: seconds per size and direction

DATPERF=${DATPERF:-"$ROOT/target/release/datperf"}

# CPU placement, as datperf places its own two sides (crates/datperf/README.md, "CPU
# placement"): every tool's client on the first CPU this script may use, its server on the
# second (ucx_perftest -c, iperf3 -A, taskset for fi_pingpong). COMPARE_PIN=0: the scheduler's.
CLIENT_CPU= SERVER_CPU=
if [ "${COMPARE_PIN:-1}" != 0 ]; then
    read -r CLIENT_CPU SERVER_CPU < <(python3 -c 'import os
c = sorted(os.sched_getaffinity(0))
print(*c[:2]) if len(c) > 1 else print()')
fi
# pin_args SIDE TOOL: sets PIN to the arguments or prefix that pin TOOL's SIDE (client or
# server), or to nothing.
placement_note() {
    if [ -n "$SERVER_CPU" ]; then
        echo "- CPU placement: every tool's client on CPU $CLIENT_CPU, its server on CPU $SERVER_CPU (datperf:"
        echo "  its timed loops; ucx_perftest -c; iperf3 -A; fi_pingpong under taskset)."
    else
        echo "- CPU placement: the scheduler's (COMPARE_PIN=0 or one CPU)."
    fi
}
PIN=()
pin_args() {
    local cpu
    PIN=()
    [ -n "$SERVER_CPU" ] || return 0
    if [ "$1" = client ]; then cpu=$CLIENT_CPU; else cpu=$SERVER_CPU; fi
    case "$2" in
        ucx) PIN=(-c "$cpu") ;;
        iperf3) [ "$1" = client ] && PIN=(-A "$CLIENT_CPU,$SERVER_CPU") ;;
        *) PIN=(taskset -c "$cpu") ;;
    esac
}

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
    command -v iperf3 >/dev/null 2>&1 || pkgs+=(iperf3)
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
# VAL[link:tool:row] = number, or FAIL; missing = no comparable test (n/a).
declare -A VAL
# VAR[link:row] = the way of writing that won datperf's raw TCP bandwidth baseline.
declare -A VAR
ROWS=(send_lat_8B write_lat_8B read_lat_8B
      send_bw_4KiB send_bw_64KiB send_bw_1MiB
      write_bw_4KiB write_bw_64KiB write_bw_1MiB
      read_bw_4KiB read_bw_64KiB read_bw_1MiB
      msg_rate_8B)

is_number() { [[ $1 =~ ^[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$ ]]; }

# set_val LINK:TOOL ROW VALUE: stores VALUE if it is a number, FAIL otherwise.
set_val() {
    if is_number "${3:-x}"; then VAL[$1:$2]=$3; else VAL[$1:$2]=FAIL; fi
}

# ---------------------------------------------------------------- datperf (dapl-rs + its baseline)
# run_datperf LINK: the dapl-rs column and the baseline column (tcp: raw TCP; shm: the same-host
# floors) of one `datperf --json --link LINK` run.
run_datperf() {
    local link=$1 json="$LOGDIR/datperf-$1.json" err="$LOGDIR/datperf-$1.log" row v b k
    if [ ! -x "$DATPERF" ]; then
        log "building datperf"
        (cd "$ROOT" && timeout 900 cargo build --release -p datperf) >"$LOGDIR/datperf-build.log" 2>&1 ||
            log "cargo build failed (see $LOGDIR/datperf-build.log)"
    fi
    log "datperf --json --link $link"
    if ! timeout 600 "$DATPERF" --json --link "$link" -p "$DATPERF_QUAL" >"$json" 2>"$err"; then
        log "datperf failed (see $err)"
    fi
    for row in "${ROWS[@]}"; do
        # One object per line: {"link": "...", "name": "...", "unit": "...", "value": X, "baseline": Y, ...}
        v=$(awk -v n="\"$row\"" '
            index($0, "\"name\": " n) {
                if (match($0, /"value": *[-+0-9.eE]+/)) { s = substr($0, RSTART, RLENGTH); sub(/.*: */, "", s); print s }
            }' "$json" 2>/dev/null | head -n1)
        b=$(awk -v n="\"$row\"" '
            index($0, "\"name\": " n) {
                if (match($0, /"baseline": *[-+0-9.eE]+/)) { s = substr($0, RSTART, RLENGTH); sub(/.*: */, "", s); print s }
            }' "$json" 2>/dev/null | head -n1)
        set_val "$link:dapl" "$row" "$v"
        set_val "$link:base" "$row" "$b"
        # The CPU time of both (us per operation, ns per byte for bandwidth) and which way of
        # writing the raw TCP bandwidth baseline won.
        case "$row" in *_bw_*) k=ns_per_byte ;; *) k=us_per_op ;; esac
        set_val "$link:dapl_cpu" "$row" "$(json_num "$json" "$row" "cpu_$k")"
        set_val "$link:base_cpu" "$row" "$(json_num "$json" "$row" "baseline_cpu_$k")"
        VAR[$link:$row]=$(awk -v n="\"$row\"" '
            index($0, "\"name\": " n) {
                if (match($0, /"baseline_variant": *"[^"]*"/)) { s = substr($0, RSTART, RLENGTH); sub(/^[^:]*: *"/, "", s); sub(/"$/, "", s); print s }
            }' "$json" 2>/dev/null | head -n1)
    done
}

# json_num FILE ROW KEY: the number KEY of ROW's line in datperf's JSON.
json_num() {
    awk -v n="\"$2\"" -v k="\"$3\": *[-+0-9.eE]+" '
        index($0, "\"name\": " n) {
            if (match($0, k)) { s = substr($0, RSTART, RLENGTH); sub(/.*: */, "", s); print s }
        }' "$1" 2>/dev/null | head -n1
}

# ---------------------------------------------------------------- UCX (ucx_perftest)
# Environment of both ucx_perftest processes, per link.
ucx_env() {
    case "$1" in
        tcp) UCX_ENV=(UCX_TLS=tcp UCX_NET_DEVICES=lo) ;;
        shm) UCX_ENV=(UCX_TLS=sm) ;;
    esac
}
UCX_ENV=()

# ucx_run LINK NAME TEST SIZE ITERS [extra client args...]: sets UCX_LINE to the final line's
# fields (iterations lat50 lat_avg lat_overall bw_avg bw_overall mr_avg mr_overall), or to
# nothing. (Not run in a command substitution, so that the EXIT trap sees the server's pid.)
UCX_LINE=
ucx_run() {
    local link=$1 name=$2 test=$3 size=$4 iters=$5 spid
    shift 5
    local slog="$LOGDIR/ucx-$link-$name.server.log" clog="$LOGDIR/ucx-$link-$name.client.log"
    ucx_env "$link"
    : >"$clog"
    pin_args server ucx
    env "${UCX_ENV[@]}" timeout 120 ucx_perftest -p "$UCX_PORT" "${PIN[@]}" >"$slog" 2>&1 &
    spid=$!
    SERVER_PIDS+=("$spid")
    if ! wait_listen "$UCX_PORT"; then
        echo "server did not listen on $UCX_PORT" >>"$clog"
    fi
    pin_args client ucx
    env "${UCX_ENV[@]}" timeout 90 ucx_perftest 127.0.0.1 -p "$UCX_PORT" -f "${PIN[@]}" \
        -t "$test" -s "$size" -n "$iters" "$@" >>"$clog" 2>&1
    echo "exit status: $?" >>"$clog"
    stop_server "$spid"
    # With -f the result is one line of 8 numbers.
    UCX_LINE=$(awk 'NF == 8 { ok = 1; for (i = 1; i <= 8; i++) if ($i !~ /^[0-9.]+$/) ok = 0; if (ok) line = $0 }
         END { if (line != "") print line }' "$clog")
}

# ucx_row LINK ROW FIELD SCALE LINE: sets VAL[LINK:ucx:ROW] from field FIELD (1-based) of
# ucx_run's line, scaled by SCALE.
ucx_row() {
    local link=$1 row=$2 field=$3 scale=$4 line=$5 v
    v=$(echo "$line" | awk -v f="$field" -v s="$scale" 'NF == 8 { printf "%.6g", $f * s }')
    set_val "$link:ucx" "$row" "$v"
}

run_ucx() {
    local link=$1 r size sz
    local bw_rows=(send_bw_4KiB send_bw_64KiB send_bw_1MiB)
    [ "$link" = shm ] && bw_rows+=(write_bw_4KiB write_bw_64KiB write_bw_1MiB read_bw_4KiB read_bw_64KiB read_bw_1MiB)
    if ! command -v ucx_perftest >/dev/null 2>&1; then
        log "ucx_perftest not found"
        for r in send_lat_8B write_lat_8B msg_rate_8B "${bw_rows[@]}"; do VAL[$link:ucx:$r]=FAIL; done
        [ "$link" = shm ] && VAL[$link:ucx:read_lat_8B]=FAIL
        return
    fi
    local mib_to_gb
    mib_to_gb=$(awk 'BEGIN { printf "%.10f", 1048576 / 1e9 }')   # ucx_perftest's MB/s is MiB/s
    log "ucx_perftest ($link) tag_lat 8"
    ucx_run "$link" tag_lat tag_lat 8 "$LAT_ITERS" -w "$LAT_WARMUP"
    ucx_row "$link" send_lat_8B 2 1 "$UCX_LINE"              # 50th percentile, half round trip
    log "ucx_perftest ($link) ucp_put_lat 8"
    ucx_run "$link" ucp_put_lat ucp_put_lat 8 "$LAT_ITERS" -w "$LAT_WARMUP"
    ucx_row "$link" write_lat_8B 2 1 "$UCX_LINE"
    if [ "$link" = shm ]; then
        # One get in flight at a time (-O 1): the overall time per get, post to completion.
        # (Over TCP ucp_get stalls in ucx_perftest's barrier loop; see bench/README.md.)
        log "ucx_perftest ($link) ucp_get 8, one at a time"
        ucx_run "$link" ucp_get_lat ucp_get 8 "$LAT_ITERS" -w "$LAT_WARMUP" -O 1
        ucx_row "$link" read_lat_8B 4 1 "$UCX_LINE"
    fi
    # 512 MiB per size, as datperf.
    for size in 4KiB 64KiB 1MiB; do
        case "$size" in
            4KiB) sz=4096 ;;
            64KiB) sz=65536 ;;
            1MiB) sz=1048576 ;;
        esac
        log "ucx_perftest ($link) tag_bw $size"
        ucx_run "$link" "tag_bw_$size" tag_bw "$sz" $((536870912 / sz))
        ucx_row "$link" "send_bw_$size" 6 "$mib_to_gb" "$UCX_LINE"   # overall bandwidth
        if [ "$link" = shm ]; then
            log "ucx_perftest ($link) ucp_put_bw $size"
            ucx_run "$link" "ucp_put_bw_$size" ucp_put_bw "$sz" $((536870912 / sz))
            ucx_row "$link" "write_bw_$size" 6 "$mib_to_gb" "$UCX_LINE"
            log "ucx_perftest ($link) ucp_get $size"
            ucx_run "$link" "ucp_get_$size" ucp_get "$sz" $((536870912 / sz))
            ucx_row "$link" "read_bw_$size" 6 "$mib_to_gb" "$UCX_LINE"
        fi
    done
    log "ucx_perftest ($link) tag_bw 8 (message rate)"
    ucx_run "$link" tag_bw_8B tag_bw 8 "$RATE_ITERS"
    ucx_row "$link" msg_rate_8B 8 0.000001 "$UCX_LINE"       # overall msg/s -> Mmsg/s
}

# ---------------------------------------------------------------- libfabric (fi_pingpong)
# run_libfabric LINK: fi_pingpong's 8-byte send latency with the tcp provider (msg endpoint)
# or the shm provider (rdm endpoint, the only type it has).
run_libfabric() {
    local link=$1 prov ep iters
    case "$link" in
        tcp) prov=tcp; ep=msg; iters=$LAT_ITERS ;;
        shm) prov=shm; ep=rdm; iters=$FI_SHM_ITERS ;;
    esac
    if ! command -v fi_pingpong >/dev/null 2>&1; then
        log "fi_pingpong not found"
        VAL[$link:lf:send_lat_8B]=FAIL
        return
    fi
    local slog="$LOGDIR/fi_pingpong-$link.server.log" clog="$LOGDIR/fi_pingpong-$link.client.log" spid v
    : >"$clog"
    log "fi_pingpong -p $prov -e $ep 8"
    pin_args server fi
    timeout 120 "${PIN[@]}" fi_pingpong -p "$prov" -e "$ep" -S 8 -I "$iters" -B "$FI_PORT" >"$slog" 2>&1 &
    spid=$!
    SERVER_PIDS+=("$spid")
    if ! wait_listen "$FI_PORT"; then
        echo "server did not listen on $FI_PORT" >>"$clog"
    fi
    pin_args client fi
    timeout 90 "${PIN[@]}" fi_pingpong -p "$prov" -e "$ep" -S 8 -I "$iters" -P "$FI_PORT" 127.0.0.1 >>"$clog" 2>&1
    echo "exit status: $?" >>"$clog"
    stop_server "$spid"
    # Columns: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
    v=$(awk '$1 == "8" && NF >= 8 { v = $7 } END { if (v != "") print v }' "$clog")
    set_val "$link:lf" send_lat_8B "$v"
}

# ---------------------------------------------------------------- iperf3
# run_iperf3: one TCP stream over 127.0.0.1 with writes (and reads) of -l 4 KiB, 64 KiB and
# 1 MiB, $IPERF_SECS s each, client to server for the send and write rows and server to client
# (-R) for the read rows. From -J: end.sum_received's bits_per_second (GB/s) and the CPU time of
# both processes (cpu_utilization_percent host_total + remote_total, as a share of the
# seconds) per byte received.
run_iperf3() {
    local size sz dir rows row spid slog clog json v cpu
    if ! command -v iperf3 >/dev/null 2>&1; then
        log "iperf3 not found"
        for size in 4KiB 64KiB 1MiB; do
            for row in send_bw write_bw read_bw; do VAL[tcp:iperf:${row}_$size]=FAIL; done
        done
        return
    fi
    for size in 4KiB 64KiB 1MiB; do
        case "$size" in
            4KiB) sz=4K ;;
            64KiB) sz=64K ;;
            1MiB) sz=1M ;;
        esac
        for dir in forward reverse; do
            slog="$LOGDIR/iperf3-$size-$dir.server.log"
            clog="$LOGDIR/iperf3-$size-$dir.client.log"
            json="$LOGDIR/iperf3-$size-$dir.json"
            : >"$clog"
            log "iperf3 -l $sz ($dir)"
            timeout 60 iperf3 -s -1 -p "$IPERF_PORT" >"$slog" 2>&1 &
            spid=$!
            SERVER_PIDS+=("$spid")
            if ! wait_listen "$IPERF_PORT"; then
                echo "server did not listen on $IPERF_PORT" >>"$clog"
            fi
            local rev=()
            [ "$dir" = reverse ] && rev=(-R)
            pin_args client iperf3
            timeout 60 iperf3 -c 127.0.0.1 -p "$IPERF_PORT" -l "$sz" -t "$IPERF_SECS" "${rev[@]}" "${PIN[@]}" -J \
                >"$json" 2>>"$clog"
            echo "exit status: $?" >>"$clog"
            stop_server "$spid"
            # -J prints one key per line; sum_received is the bytes the receiver got.
            read -r v cpu < <(awk '
                /"sum_received"/ { f = 1 }
                f && /"seconds"/ && secs == "" { secs = $2 }
                f && /"bytes"/ && bytes == "" { bytes = $2 }
                f && /"bits_per_second"/ && bps == "" { bps = $2 }
                /"cpu_utilization_percent"/ { c = 1 }
                c && /"host_total"/ { host = $2 }
                c && /"remote_total"/ { remote = $2 }
                END {
                    gsub(/,/, "", secs); gsub(/,/, "", bytes); gsub(/,/, "", bps)
                    gsub(/,/, "", host); gsub(/,/, "", remote)
                    if (bps != "" && bytes > 0 && host != "" && remote != "")
                        printf "%.6g %.6g\n", bps / 8e9, (host + remote) / 100 * secs * 1e9 / bytes
                    else if (bps != "") printf "%.6g x\n", bps / 8e9
                }' "$json" 2>/dev/null)
            if [ "$dir" = forward ]; then rows=(send_bw write_bw); else rows=(read_bw); fi
            for row in "${rows[@]}"; do
                set_val tcp:iperf "${row}_$size" "${v:-}"
                set_val tcp:iperf_cpu "${row}_$size" "${cpu:-}"
            done
        done
    done
}

# ---------------------------------------------------------------- table
label() {
    case "$1" in
        send_lat_8B) echo "send/recv latency, 8 B (us, half round trip)" ;;
        write_lat_8B) echo "RDMA write / put latency, 8 B (us, half round trip)" ;;
        read_lat_8B) echo "RDMA read / get latency, 8 B (us, post to completion)" ;;
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
        printf 'n/a'
    elif [ "$v" = FAIL ]; then
        printf 'FAIL (see log)'
    else
        awk -v x="$v" 'BEGIN { printf "%.3g", x }'
    fi
}

first_line() { "$@" 2>/dev/null | grep -v '^[[:space:]]*$' | head -n1; }

CPU=$(lscpu 2>/dev/null | awk -F: '/^Model name/ { sub(/^[ \t]+/, "", $2); print $2; exit }')
UCX_V=$(first_line ucx_info -v | sed 's/^# *//')
FI_V=$(fi_info --version 2>/dev/null | awk -F': *' '/^libfabric:/ { print $2; exit }')
IPERF_V=$(first_line iperf3 --version | awk '{ print $2 }')
# UCX's shared-memory transports on this machine (what UCX_TLS=sm can pick from).
UCX_SM=$(ucx_info -d 2>/dev/null | awk '/Transport:/ { t = $3 } /Device: *memory/ && t != "self" { print t }' | sort -u | paste -sd' ' -)

# variant_tag ROW: which way of writing won datperf's raw TCP bandwidth baseline, as a tag.
variant_tag() {
    case "${VAR[tcp:$1]:-}" in
        "message writes") printf ' [message]' ;;
        "128KiB writes") printf ' [128KiB]' ;;
    esac
}

table_tcp() {
    local row
    echo "| measurement | dapl-rs tcp link (datperf) | raw TCP (datperf baseline) | iperf3 | UCX tcp | libfabric tcp |"
    echo "|---|---|---|---|---|---|"
    for row in "${ROWS[@]}"; do
        local ip=
        case "$row" in *_bw_*) ip=$(cell tcp:iperf "$row") ;; *) ip=n/a ;; esac
        echo "| $(label "$row") | $(cell tcp:dapl "$row") | $(cell tcp:base "$row")$(variant_tag "$row") | $ip | $(cell tcp:ucx "$row") | $(cell tcp:lf "$row") |"
    done
    echo
    echo "CPU time (user + system of both sides; latency and rate: us per operation, one latency"
    echo "operation being a request and its reply; bandwidth: ns per byte = CPU seconds per GB):"
    echo
    echo "| measurement | dapl-rs tcp link | raw TCP | iperf3 |"
    echo "|---|---|---|---|"
    for row in "${ROWS[@]}"; do
        local ip= unit=us/op
        case "$row" in *_bw_*) ip=$(cell tcp:iperf_cpu "$row"); unit=ns/B ;; *) ip=n/a ;; esac
        echo "| $row ($unit) | $(cell tcp:dapl_cpu "$row") | $(cell tcp:base_cpu "$row") | $ip |"
    done
    echo
    echo "Notes (tcp):"
    placement_note
    echo "- Latencies are half a round trip of an 8-byte ping-pong for every tool (datperf: median;"
    echo "  ucx_perftest: 50th percentile of its ping-pong, which it already reports as half the round"
    echo "  trip; fi_pingpong: average usec/xfer, i.e. total time / (2 x iterations), so also half a"
    echo "  round trip). The read row is a full round trip: post to completion for datperf, an 8-byte"
    echo "  request/response for its raw TCP baseline."
    echo "- dapl-rs latency busy-polls its EVD; bandwidth and message rate use evd_wait. The raw TCP"
    echo "  column is datperf's own baseline (std TcpStream, TCP_NODELAY) waiting the same way. Its"
    echo "  bandwidth above 128 KiB is the faster of one write per message and each message in"
    echo "  128 KiB writes, measured in the same rounds; [message] / [128KiB] says which won."
    echo "- iperf3 $IPERF_V: one stream, -l 4K / 64K / 1M (the size of its writes and reads), -t $IPERF_SECS,"
    echo "  -J's sum_received; send and write rows client to server, read rows -R (server to"
    echo "  client). Its CPU figure is cpu_utilization_percent host_total + remote_total over the"
    echo "  bytes received. Not a message benchmark: it has no per-message completion."
    echo "- UCX: only latency-style tests (tag_lat, ucp_put_lat) plus tag_bw (two-sided, 'send' rows"
    echo "  and the message rate; overall figures, MiB/s converted to GB/s = 10^9 B/s). ucp_get and"
    echo "  ucp_put_bw over TCP stall in ucx_perftest's own barrier loop (hundreds of us to ~1 ms per"
    echo "  operation), so the RDMA read rows and the RDMA write bandwidth rows are n/a for UCX."
    echo "- libfabric: Debian's libfabric-bin ships only fi_pingpong (no fabtests fi_rma_bw etc.), so"
    echo "  only the 8-byte send latency (msg endpoint) is reported; fi_pingpong with larger sizes is a"
    echo "  ping-pong, not a streaming bandwidth test."
}

table_shm() {
    local row
    echo "| measurement | dapl-rs shm link (datperf) | same-host floor (datperf baseline) | UCX sm | libfabric shm |"
    echo "|---|---|---|---|---|"
    for row in "${ROWS[@]}"; do
        echo "| $(label "$row") | $(cell shm:dapl "$row") | $(cell shm:base "$row") | $(cell shm:ucx "$row") | $(cell shm:lf "$row") |"
    done
    echo
    echo "Notes (shm):"
    echo "- datperf runs both ends in one process (two threads) over the shm link; UCX and libfabric run"
    echo "  a server and a client process. The floor column is datperf's own: two threads ping-ponging"
    echo "  on one cache line (latency), memcpy of the same size for the RDMA rows (datperf's shm RDMA"
    echo "  runs on library memory, which the peer maps), process_vm_readv of the same size for the"
    echo "  send rows, a single-producer ring of 8-byte messages between two threads (rate)."
    placement_note
    echo "- Latencies: datperf median; ucx_perftest 50th percentile (half round trip); fi_pingpong"
    echo "  average usec/xfer over $FI_SHM_ITERS iterations (half round trip; an average, so every"
    echo "  preemption on this shared machine counts in it)."
    echo "- UCX_TLS=sm (shared-memory transports here: ${UCX_SM:-unknown}). tag_lat / tag_bw: send rows and"
    echo "  message rate (overall figures). ucp_put_lat: write latency. ucp_put_bw and ucp_get: write and"
    echo "  read bandwidth, 512 MiB per size. Read latency: ucp_get of 8 bytes with one get in flight"
    echo "  (-O 1), overall time per get; it is post to completion, but not a round trip: UCX's rma lanes"
    echo "  here are sysv/posix, which map the peer's registered memory, so a get or a put is a copy"
    echo "  from or into that mapping by the initiator alone (checked by hand: ucx_perftest -o, responder"
    echo "  not progressing, gave the same figures). dapl-rs's RDMA rows are alike: on library memory,"
    echo "  which the peer maps, a read or a write is a copy by the initiator after it checks the"
    echo "  target's published memory table."
    echo "- UCX sends from its rendezvous threshold on (64 KiB and 1 MiB here, cma) took 180-250 us per"
    echo "  message on this machine (2026-11-26) whatever the size; UCX_RNDV_THRESH=inf (eager only) gave"
    echo "  2.5 GB/s at 64 KiB in a hand check. The table keeps UCX's defaults. The 4 KiB send and 8-byte"
    echo "  rate figures are overall ones and swing with stalls (compare the 50th percentile in the log)."
    echo "- libfabric: Debian 12 packages no fabtests (no fi_rma_bw / fi_msg_bw), so the shm provider"
    echo "  has only fi_pingpong's 8-byte send latency (rdm endpoint)."
}

# ---------------------------------------------------------------- run, one tool at a time
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
DP_V=$(first_line "$DATPERF" --version)
: >"$LOGDIR/table.md"
for link in "${LINKS[@]}"; do
    run_datperf "$link"
    [ "$link" = tcp ] && run_iperf3
    run_ucx "$link"
    run_libfabric "$link"
    cleanup
    {
        echo "### $link: run $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) (before the run: ${LOAD_BEFORE:-?})"
        case "$link" in
            tcp) echo "127.0.0.1; kernel $(uname -r); CPU ${CPU:-unknown} ($(nproc) cores); ${DP_V:-datperf ?};"
                 echo "iperf3 ${IPERF_V:-not installed}; UCX ${UCX_V:-not installed} (UCX_TLS=tcp, UCX_NET_DEVICES=lo); libfabric ${FI_V:-not installed} (tcp provider)." ;;
            shm) echo "One host; kernel $(uname -r); CPU ${CPU:-unknown} ($(nproc) cores); ${DP_V:-datperf ?};"
                 echo "UCX ${UCX_V:-not installed} (UCX_TLS=sm); libfabric ${FI_V:-not installed} (shm provider)." ;;
        esac
        echo
        "table_$link"
        echo
    } >>"$LOGDIR/table.md"
    LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
done
{
    echo "Common notes:"
    echo "- Bandwidth is GB/s = 10^9 B/s (ucx_perftest prints MiB/s; converted). Bandwidth runs move"
    echo "  512 MiB per size, latency runs $LAT_ITERS iterations, message rate $RATE_ITERS messages."
    echo "- 'n/a': the tool has no comparable test; 'FAIL (see log)': the tool failed or timed out."
    echo "- One run on a shared 2-core machine: expect run-to-run noise."
} >>"$LOGDIR/table.md"

mkdir -p "$(dirname "$OUT")"
cp "$LOGDIR/table.md" "$OUT"
cat "$LOGDIR/table.md"
echo
echo "Table written to $OUT; raw outputs in $LOGDIR" >&2
