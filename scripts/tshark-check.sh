#!/usr/bin/env bash
# Captures dapl-rs tcp-link sessions (crates/dapl/examples/wire_session.rs) on loopback and
# decodes them with tshark's iWARP dissectors (issue 3). Prints one "PASS <mode>: <check>" /
# "FAIL <mode>: <check>" line per check, "SKIP" lines for modes that cannot run here, and a
# last line "tshark-check: N passed, M failed"; exits non-zero if any check failed.
# Run by scripts/test.sh (hence .ci/run). See docs/interop-tshark.md.
#
#   scripts/tshark-check.sh                  # every mode
#   scripts/tshark-check.sh crc-off crc-on   # only these modes
#
# Modes:
#   crc-off        IAs "tcp": MPA CRC off (the CRC field must be present and zero)
#   crc-on         IAs "tcp:127.0.0.1,crc": every FPDU's CRC32c checked by tshark
#   crc-on-mtu1500 crc-on inside a private network namespace whose lo has MTU 1500 (MSS 1448
#                  as on Ethernet: every message of more than ~1.4 KB is many FPDUs); needs
#                  root and iproute2, SKIP otherwise
#
# Checks per mode: the session itself (every byte verified by the example); MPA Request and
# Reply decoded once each, CRC flag as configured, our private data inside; every TCP segment
# with data decoded as MPA, every FPDU as DDP/RDMAP; per direction, the messages per RDMAP
# opcode (segments with L=1) and their payload bytes equal what the example says it sent,
# besides one zero-length RTR; no Terminate; DDP sequencing (MSN, MO, STag/TO continuity:
# tshark does not check these, this script does, from the decoded fields); no FPDU larger
# than the receiver's MSS; no malformed frame, no expert error, no iWARP expert warning other
# than the two that tshark 4.0 gives every MPA rev 2 Request (Res, Rev); CRC: with CRC on
# "Good CRC32" on every FPDU, and a negative control (one payload byte flipped in a copy of
# the capture must give exactly one "Bad CRC32"); with CRC off no CRC check and all CRC fields
# zero; graceful close (a FIN each way, no RST); nothing missing from the capture.
#
# Needs: root (capturing on lo; CI runs as root), Debian's apt-get to install tshark if it is
# missing, cargo. Environment:
#   TSHARK_CHECK_PORT_CRC_OFF   server port, crc-off (default 19471)
#   TSHARK_CHECK_PORT_CRC_ON    server port, crc-on (default 19472)
#   TSHARK_CHECK_PORT_MTU       server port, crc-on-mtu1500 (default 19473)
#   TSHARK_CHECK_DIR            where captures and logs go (default: a new mktemp -d directory,
#                               removed after a clean run, kept and printed after a failure)

set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PORT_CRC_OFF=${TSHARK_CHECK_PORT_CRC_OFF:-19471}
PORT_CRC_ON=${TSHARK_CHECK_PORT_CRC_ON:-19472}
PORT_MTU=${TSHARK_CHECK_PORT_MTU:-19473}
# The only heuristic dissectors that matter: MPA on TCP on; RPC-over-RDMA and SMB Direct off
# (they would claim arbitrary Send payloads and report them malformed).
HEUR=(--enable-heuristic iwarp_mpa_tcp --disable-heuristic rpcrdma_iwarp
    --disable-heuristic smb_direct_iwarp)
# Private data texts of wire_session.rs (after 4 bytes of MPA rev 2 IRD/ORD and 12 of RMR).
REQ_TEXT="wire_session: MPA request private data"
REP_TEXT="wire_session: MPA reply private data"
# A payload string sent exactly once (client -> server), for the CRC negative control.
FLIP_TEXT="gathered from two segments"
# TCP retransmissions: a loaded machine sees tail-loss probes even on lo. tshark hands their
# data to no dissector (it has it already), so they are left out where frames are counted.
RETX='(tcp.analysis.retransmission || tcp.analysis.fast_retransmission || tcp.analysis.spurious_retransmission)'

PASSED=0
FAILED=0
SKIPPED=0
PIDS=()
NETNS=""
KEEP_DIR=0
if [ -n "${TSHARK_CHECK_DIR:-}" ]; then
    WORK=$TSHARK_CHECK_DIR
    mkdir -p "$WORK"
    KEEP_DIR=1
else
    WORK=$(mktemp -d /tmp/tshark-check.XXXXXX)
fi

log() { printf '[tshark-check %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# record MODE CHECK OK DETAIL: one PASS/FAIL line
record() {
    local mode=$1 check=$2 ok=$3 detail=${4:-}
    if [ "$ok" = 0 ]; then
        PASSED=$((PASSED + 1))
        echo "PASS $mode: $check${detail:+ ($detail)}"
    else
        FAILED=$((FAILED + 1))
        echo "FAIL $mode: $check${detail:+ ($detail)}"
    fi
}

cleanup() {
    local p
    for p in "${PIDS[@]}"; do
        kill -INT "$p" 2>/dev/null
    done
    [ -n "$NETNS" ] && ip netns del "$NETNS" 2>/dev/null
    NETNS=""
}
trap cleanup EXIT

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_tshark() {
    command -v tshark >/dev/null && return 0
    log "installing tshark (apt-get)"
    local out=$WORK/apt.log
    echo 'wireshark-common wireshark-common/install-setuid boolean false' |
        as_root debconf-set-selections || return 1
    as_root apt-get update -qq >"$out" 2>&1 || { cat "$out" >&2; return 1; }
    # dpkg can fail once in containers whose apt hook deletes .debs between dpkg runs; the
    # second run finishes the job.
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tshark >>"$out" 2>&1 ||
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tshark >>"$out" 2>&1 ||
        { tail -20 "$out" >&2; return 1; }
    command -v tshark >/dev/null
}

build_example() {
    local json
    json=$(cd "$ROOT" && cargo build -p dapl --example wire_session \
        --message-format=json-render-diagnostics 2>"$WORK/build.log") || {
        cat "$WORK/build.log" >&2
        return 1
    }
    EXE=$(printf '%s\n' "$json" | grep -o '"executable":"[^"]*/wire_session"' | tail -1 |
        cut -d'"' -f4)
    [ -n "$EXE" ] && [ -x "$EXE" ]
}

# hex STRING: lowercase hex of its bytes
hex() { printf '%s' "$1" | od -An -v -tx1 | tr -d ' \n'; }

# tsr FILE ARGS...: tshark -r FILE with the heuristics, stderr dropped (the root warning)
tsr() {
    local f=$1
    shift
    tshark -r "$f" "${HEUR[@]}" "$@" 2>/dev/null
}

# capture MODE PORT CRC [NS]: capture one wire_session run into $WORK/MODE/capture.pcapng
capture() {
    local mode=$1 port=$2 crc=$3 ns=${4:-}
    local dir=$WORK/$mode pre=()
    [ -n "$ns" ] && pre=(ip netns exec "$ns")
    mkdir -p "$dir"
    rm -f "$dir/capture.pcapng"
    "${pre[@]}" tshark -i lo -f "tcp port $port" -B 64 -w "$dir/capture.pcapng" \
        >"$dir/capture.log" 2>&1 &
    local pid=$!
    PIDS+=("$pid")
    local tries=0
    while [ $((tries += 1)) -le 100 ]; do # up to 10 s
        grep -q "Capturing on" "$dir/capture.log" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if ! grep -q "Capturing on" "$dir/capture.log"; then
        kill -INT "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        record "$mode" capture 1 "tshark did not start capturing: $(tr '\n' ' ' <"$dir/capture.log")"
        return 1
    fi
    sleep 0.3
    local args=(--port "$port")
    [ "$crc" = 1 ] && args+=(--crc)
    "${pre[@]}" "$EXE" "${args[@]}" >"$dir/session.log" 2>&1
    local rc=$?
    sleep 0.5 # let the last packets reach the capture
    kill -INT "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    PIDS=()
    sed 's/^/    session: /' "$dir/session.log"
    if [ "$rc" = 0 ] && grep -q '^wire_session: OK' "$dir/session.log"; then
        record "$mode" "session (wire_session ${args[*]}: every byte verified)" 0
    else
        record "$mode" "session (wire_session ${args[*]})" 1 "exit $rc: $(tail -1 "$dir/session.log")"
    fi
    if [ ! -s "$dir/capture.pcapng" ]; then
        record "$mode" capture 1 "no capture file"
        return 1
    fi
    local dropped
    dropped=$(grep -o '[0-9]* packets\? dropped' "$dir/capture.log" | head -1)
    local lost
    lost=$(tsr "$dir/capture.pcapng" -Y 'tcp.analysis.lost_segment || tcp.analysis.ack_lost_segment' | wc -l)
    local npk retx
    npk=$(tsr "$dir/capture.pcapng" | wc -l)
    retx=$(tsr "$dir/capture.pcapng" -Y "$RETX" | wc -l)
    if [ "$lost" = 0 ] && { [ -z "$dropped" ] || [ "${dropped%% *}" = 0 ]; }; then
        record "$mode" "capture complete" 0 "$npk packets on port $port, none lost, $retx TCP retransmissions"
    else
        record "$mode" "capture complete" 1 "$lost lost-segment marks, ${dropped:-0 dropped}"
    fi
    return 0
}

# decode MODE PORT CRC: the checks on $WORK/MODE/capture.pcapng
decode() {
    local mode=$1 port=$2 crc=$3
    local dir=$WORK/$mode
    local cap=$dir/capture.pcapng

    # --- MPA Request / Reply
    local flag_want=0
    [ "$crc" = 1 ] && flag_want=1
    local which key text n flags pd
    for which in request reply; do
        if [ "$which" = request ]; then key=iwarp_mpa.key.req text=$REQ_TEXT; else
            key=iwarp_mpa.key.rep text=$REP_TEXT
        fi
        tsr "$cap" -Y "$key" -T fields -e frame.number -e iwarp_mpa.crc_flag \
            -e iwarp_mpa.rej_flag -e iwarp_mpa.rev -e iwarp_mpa.pdlength \
            -e iwarp_mpa.privatedata >"$dir/mpa-$which.txt"
        n=$(wc -l <"$dir/mpa-$which.txt")
        IFS=$'\t' read -r _ flags rej rev pdlen pd <"$dir/mpa-$which.txt"
        pd=${pd//:/}
        # Booleans: 1/0 in tshark 4.0 field output (True/False in some versions).
        flags=${flags/True/1} flags=${flags/False/0} rej=${rej/True/1} rej=${rej/False/0}
        if [ "$n" = 1 ] && [ "$flags" = "$flag_want" ] && [ "$rej" = 0 ] &&
            [ "$rev" = 2 ] && [ "${pd%"$(hex "$text")"}" != "$pd" ]; then
            record "$mode" "MPA $which decoded" 0 \
                "rev $rev, C=$flags, R=$rej, $pdlen bytes of private data: IRD/ORD block ${pd:0:8}, our ${#text}-byte text at the end"
        else
            record "$mode" "MPA $which decoded" 1 \
                "$n frames; C=${flags:-?} (want $flag_want), R=${rej:-?}, rev ${rev:-?}, private data ${pd:-none}"
        fi
    done

    # --- FPDUs: per FPDU ULPDU length, L flag, opcode, direction; Read Request sizes
    tsr "$cap" -Y iwarp_mpa.ulpdulength -T fields -E occurrence=a -E aggregator=, \
        -e frame.number -e tcp.srcport -e iwarp_mpa.ulpdulength -e iwarp_ddp.last_flag \
        -e iwarp_rdma.opcode -e iwarp_rdma.rdmardsz -e iwarp_mpa.crc -e iwarp_mpa.crc_check \
        -e iwarp_ddp.qn -e iwarp_ddp.msn -e iwarp_ddp.mo -e iwarp_ddp.stag \
        -e iwarp_ddp.tagged_offset >"$dir/fpdus.txt"
    # The MSS each side announced in its SYN: the other side's FPDUs must fit in it.
    local mss_c mss_s
    mss_c=$(tsr "$cap" -Y "tcp.flags.syn == 1 && tcp.dstport == $port" -T fields -e tcp.options.mss_val | head -1)
    mss_s=$(tsr "$cap" -Y "tcp.flags.syn == 1 && tcp.srcport == $port" -T fields -e tcp.options.mss_val | head -1)
    awk -F'\t' -v port="$port" '
        function add(k, v) { c[k] += v }
        function num(h,    i, v) {
            if (h !~ /^0x/) return h + 0
            v = 0
            for (i = 3; i <= length(h); i++) v = v * 16 + index("0123456789abcdef", tolower(substr(h, i, 1))) - 1
            return v
        }
        function seqerr(what) { add("seq_errors", 1); if (!c["first_seq_error"]) c["first_seq_error"] = "frame " $1 ": " what }
        {
            dir = ($2 == port) ? "s2c" : "c2s"
            nl = split($3, len, ","); split($4, last, ","); no = split($5, op, ",")
            nr = split($6, rsz, ","); ri = 0
            split($9, qn, ","); split($10, msn, ","); split($11, mo, ","); ui = 0
            split($12, stag, ","); split($13, to, ","); ti = 0
            if ($7 != "") { ncrc = split($7, crc, ","); for (i = 1; i <= ncrc; i++) { add("crc_fields", 1); if (crc[i] !~ /^0x0+$/) add("crc_nonzero", 1) } }
            if ($8 != "") add("crc_checks", split($8, x, ","))
            if (nl != no) add("unaligned", 1)
            for (i = 1; i <= nl; i++) {
                l = len[i] + 0; o = op[i] + 0; L = (last[i] == "1" || last[i] == "True")
                pad = (4 - (2 + l) % 4) % 4; size = 2 + l + pad + 4
                add("fpdus", 1); add(dir ",fpdus", 1)
                if (size > c[dir ",maxfpdu"]) c[dir ",maxfpdu"] = size
                if (o == 0 || o == 2) pay = l - 14
                else if (o == 3 || o == 4 || o == 5 || o == 6) pay = l - 18
                else pay = 0
                if (o == 1) { ri++; pay = rsz[ri] + 0 }
                # DDP sequencing (RFC 5041), which tshark does not check: per direction and
                # queue, MSN 1, 2, ... per message and MO = bytes before the segment; a tagged
                # message keeps its STag and continues its TO.
                if (o == 0 || o == 2) {
                    ti++; s = num(stag[ti]); t = num(to[ti])
                    if (open[dir]) {
                        if (s != tstag[dir] || t != tnext[dir]) seqerr(dir " tagged STag/TO " stag[ti] "/" to[ti] " does not continue the message")
                    }
                    open[dir] = !L; tstag[dir] = s; tnext[dir] = t + (l - 14)
                } else {
                    ui++; q = qn[ui] + 0; k = dir "," q
                    if (!(k in emsn)) emsn[k] = 1
                    if (msn[ui] + 0 != emsn[k] || mo[ui] + 0 != emo[k]) seqerr(dir " QN " q " MSN " msn[ui] " MO " mo[ui] ", want " emsn[k] "/" emo[k] + 0)
                    emo[k] += (o == 1) ? 0 : l - 18
                    if (L) { emsn[k]++; emo[k] = 0 }
                }
                add("seq_segments", 1)
                # A zero-length tagged message or Read Request: the RFC 6581 RTR (the session
                # itself moves no zero-length RDMA).
                rtr = ((o == 0 || o == 2) && l == 14 && L) || (o == 1 && pay == 0)
                if (rtr) { add(dir ",rtr," o, 1); continue }
                add(dir ",seg," o, 1)
                if (L) add(dir ",msg," o, 1)
                add(dir ",bytes," o, pay)
            }
        }
        END { for (k in c) print k "=" c[k]; for (k in open) if (open[k]) print "seq_open=" k }' \
        "$dir/fpdus.txt" >"$dir/counts.txt"
    cnt() { local v; v=$(grep -m1 "^$1=" "$dir/counts.txt" | cut -d= -f2-); echo "${v:-0}"; }

    local fpdus undecoded
    fpdus=$(cnt fpdus)
    # TCP segments with data that are neither MPA nor part of a PDU reassembled elsewhere. Two
    # passes (-2): in one, a segment that holds only the middle of an FPDU (TCP cut it there,
    # e.g. at a full window) does not yet know the frame its PDU is reassembled in.
    undecoded=$(tsr "$cap" -2 -Y "tcp.len > 0 && !iwarp_mpa && !tcp.reassembled_in && !$RETX" | wc -l)
    if [ "$fpdus" -gt 0 ] && [ "$(cnt unaligned)" = 0 ] && [ "$undecoded" = 0 ]; then
        record "$mode" "FPDUs decoded as DDP/RDMAP" 0 \
            "$fpdus FPDUs: c2s $(cnt c2s,fpdus), s2c $(cnt s2c,fpdus); every one has an RDMAP opcode, every TCP segment with data is MPA"
    else
        record "$mode" "FPDUs decoded as DDP/RDMAP" 1 \
            "$fpdus FPDUs, $(cnt unaligned) frames whose FPDUs lack an opcode, $undecoded data segments not decoded as MPA"
    fi

    # --- opcodes: messages and payload bytes per direction against the example's expect lines
    local d line want got ok detail name o key
    local -A OPC=([write]=0 [read_request]=1 [read_response]=2 [send]=3 [send_se]=5)
    local -A BYTES=([write_bytes]=0 [read_response_bytes]=2 [send_bytes]=3)
    for d in c2s s2c; do
        line=$(grep "^expect $d:" "$dir/session.log")
        if [ -z "$line" ]; then
            record "$mode" "$d opcodes" 1 "no 'expect $d:' line from wire_session"
            continue
        fi
        ok=0 detail=""
        for kv in ${line#*:}; do
            name=${kv%%=*} want=${kv#*=}
            if [ -n "${OPC[$name]:-}" ]; then
                o=${OPC[$name]}
                got=$(cnt "$d,msg,$o")
                detail+="$name $got msgs/$(cnt "$d,seg,$o") FPDUs, "
            else
                o=${BYTES[$name]}
                got=$(cnt "$d,bytes,$o")
                [ "$o" = 3 ] && got=$((got + $(cnt "$d,bytes,5")))
                detail+="$name $got, "
            fi
            if [ "$got" != "$want" ]; then
                ok=1
                detail+="(want $want!) "
            fi
        done
        for o in 4 6 7 8 9 10 11 12 13 14 15; do
            if [ "$(cnt "$d,seg,$o")" != 0 ]; then
                ok=1
                detail+="unexpected opcode $o: $(cnt "$d,seg,$o") FPDUs, "
            fi
        done
        record "$mode" "$d opcodes and payload bytes as sent" "$ok" "${detail%, }"
    done
    local rtr_w rtr_r
    rtr_w=$(cnt c2s,rtr,0)
    rtr_r=$(cnt c2s,rtr,1)
    if [ $((rtr_w + rtr_r)) = 1 ] && [ "$(cnt s2c,rtr,0)$(cnt s2c,rtr,1)" = 00 ] &&
        [ "$(cnt s2c,rtr,2)" = "$rtr_r" ]; then
        record "$mode" "one RTR (RFC 6581), from the initiator" 0 \
            "$([ "$rtr_w" = 1 ] && echo "zero-length RDMA Write" || echo "zero-length RDMA Read")"
    else
        record "$mode" "one RTR (RFC 6581), from the initiator" 1 \
            "c2s zero-length writes $rtr_w, reads $rtr_r; s2c $(cnt s2c,rtr,0)/$(cnt s2c,rtr,1)/$(cnt s2c,rtr,2)"
    fi

    # --- DDP sequencing, computed here from the decoded fields
    if [ "$(cnt seq_errors)" = 0 ] && ! grep -q '^seq_open=' "$dir/counts.txt"; then
        record "$mode" "DDP sequencing (MSN, MO, STag/TO; checked by this script)" 0 \
            "$(cnt seq_segments) segments in order"
    else
        record "$mode" "DDP sequencing (MSN, MO, STag/TO; checked by this script)" 1 \
            "$(cnt seq_errors) errors, first: $(cnt first_seq_error); $(grep '^seq_open=' "$dir/counts.txt" | tr '\n' ' ')"
    fi

    # --- FPDU size against the receiver's MSS
    local mc ms
    mc=$(cnt c2s,maxfpdu)
    ms=$(cnt s2c,maxfpdu)
    if [ -n "$mss_c" ] && [ -n "$mss_s" ] && [ "$mc" -le "$mss_s" ] && [ "$ms" -le "$mss_c" ]; then
        record "$mode" "FPDUs within the receiver's MSS" 0 \
            "largest FPDU c2s $mc bytes (server MSS $mss_s), s2c $ms bytes (client MSS $mss_c)"
    else
        record "$mode" "FPDUs within the receiver's MSS" 1 \
            "largest FPDU c2s $mc (server MSS ${mss_s:-?}), s2c $ms (client MSS ${mss_c:-?})"
    fi

    # --- malformed frames, expert errors, iWARP expert warnings
    local bad
    bad=$(tsr "$cap" -Y '_ws.malformed || _ws.expert.severity == error' | wc -l)
    tsr "$cap" -q -z expert >"$dir/expert.txt"
    local errs iw_other iw_rev2
    errs=$(grep -c '^Errors (' "$dir/expert.txt")
    # Warnings tshark 4.0 gives MPA rev 2 (it knows rev 1 only): expected, counted.
    iw_rev2=$(awk '/^Warns/ { w = 1; next } /^[A-Z][a-z]+ \(/ { w = 0 }
        w && $3 ~ /^IWARP/ && /(Res|Rev) field is NOT set/ { n += $1 } END { print n + 0 }' "$dir/expert.txt")
    iw_other=$(awk '/^Warns/ { w = 1; next } /^[A-Z][a-z]+ \(/ { w = 0 }
        w && $3 ~ /^IWARP/ && !/(Res|Rev) field is NOT set/' "$dir/expert.txt")
    if [ "$bad" = 0 ] && [ "$errs" = 0 ]; then
        record "$mode" "no malformed frames, no expert errors" 0
    else
        record "$mode" "no malformed frames, no expert errors" 1 \
            "$bad frames match _ws.malformed || _ws.expert.severity == error; $(grep -A6 '^Errors (' "$dir/expert.txt" | tr -s ' \n' ' ')"
    fi
    if [ -z "$iw_other" ]; then
        record "$mode" "no iWARP expert warnings beyond MPA rev 2's" 0 \
            "$iw_rev2 'Res/Rev field is NOT set to ...' warnings for MPA rev 2"
    else
        record "$mode" "no iWARP expert warnings beyond MPA rev 2's" 1 "$(echo "$iw_other" | tr -s ' \n' ' ')"
    fi

    # --- CRC
    if [ "$crc" = 1 ]; then
        tsr "$cap" -V -O iwarp_mpa >"$dir/verbose.txt"
        local good badc
        good=$(grep -c '(Good CRC32)' "$dir/verbose.txt")
        badc=$(grep -c 'Bad CRC32' "$dir/verbose.txt")
        if [ "$good" = "$fpdus" ] && [ "$badc" = 0 ] && [ "$(cnt crc_checks)" = "$fpdus" ] &&
            [ "$(cnt crc_fields)" = 0 ]; then
            record "$mode" "CRC32c checked by tshark on every FPDU" 0 "$good of $fpdus Good CRC32, 0 Bad"
        else
            record "$mode" "CRC32c checked by tshark on every FPDU" 1 \
                "$good Good, $badc Bad CRC32 of $fpdus FPDUs; $(cnt crc_fields) unchecked CRC fields"
        fi
        # Negative control: flip one payload byte (in every copy of it: a retransmission may
        # repeat it); tshark must now call exactly one CRC bad.
        local off o flipped=$dir/flipped.pcapng
        off=$(grep -obUa "$FLIP_TEXT" "$cap" | cut -d: -f1)
        if [ -n "$off" ]; then
            cp "$cap" "$flipped"
            for o in $off; do
                printf 'X' | dd of="$flipped" bs=1 seek="$o" conv=notrunc status=none
            done
            tsr "$flipped" -V -O iwarp_mpa >"$dir/flipped.txt"
            local g2 b2
            g2=$(grep -c '(Good CRC32)' "$dir/flipped.txt")
            b2=$(grep -c 'Bad CRC32' "$dir/flipped.txt")
            if [ "$b2" = 1 ] && [ "$g2" = $((fpdus - 1)) ]; then
                record "$mode" "CRC negative control" 0 \
                    "one payload byte flipped in a copy: tshark reports $b2 Bad, $g2 Good CRC32"
            else
                record "$mode" "CRC negative control" 1 "after flipping one byte: $b2 Bad, $g2 Good CRC32 (want 1, $((fpdus - 1)))"
            fi
        else
            record "$mode" "CRC negative control" 1 "'$FLIP_TEXT' not found in the capture"
        fi
    else
        if [ "$(cnt crc_checks)" = 0 ] && [ "$(cnt crc_fields)" = "$fpdus" ] &&
            [ "$(cnt crc_nonzero)" = 0 ]; then
            record "$mode" "CRC off: not checked, every CRC field zero" 0 "$fpdus FPDUs"
        else
            record "$mode" "CRC off: not checked, every CRC field zero" 1 \
                "$(cnt crc_checks) CRC checks, $(cnt crc_fields) CRC fields of $fpdus FPDUs, $(cnt crc_nonzero) non-zero"
        fi
    fi

    # --- graceful close: a FIN each way, no RST
    local fins rsts
    fins=$(tsr "$cap" -Y "tcp.flags.fin == 1 && !$RETX" | wc -l)
    rsts=$(tsr "$cap" -Y 'tcp.flags.reset == 1' | wc -l)
    if [ "$fins" = 2 ] && [ "$rsts" = 0 ]; then
        record "$mode" "graceful close" 0 "a FIN each way, no RST"
    else
        record "$mode" "graceful close" 1 "$fins FINs, $rsts RSTs"
    fi
}

run_mode() {
    local mode=$1
    case $mode in
    crc-off)
        capture "$mode" "$PORT_CRC_OFF" 0 && decode "$mode" "$PORT_CRC_OFF" 0
        ;;
    crc-on)
        capture "$mode" "$PORT_CRC_ON" 1 && decode "$mode" "$PORT_CRC_ON" 1
        ;;
    crc-on-mtu1500)
        NETNS=tshark-check-$$
        if ! { [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null &&
            ip netns add "$NETNS" 2>/dev/null &&
            ip -n "$NETNS" link set lo mtu 1500 up 2>/dev/null; }; then
            echo "SKIP $mode: needs root and iproute2 (a network namespace with lo at MTU 1500)"
            SKIPPED=$((SKIPPED + 1))
            [ -n "$NETNS" ] && ip netns del "$NETNS" 2>/dev/null
            NETNS=""
            return
        fi
        capture "$mode" "$PORT_MTU" 1 "$NETNS" && decode "$mode" "$PORT_MTU" 1
        ip netns del "$NETNS" 2>/dev/null
        NETNS=""
        ;;
    *)
        record "$mode" "known mode" 1 "modes: crc-off crc-on crc-on-mtu1500"
        ;;
    esac
}

main() {
    local modes=("$@")
    [ ${#modes[@]} -gt 0 ] || modes=(crc-off crc-on crc-on-mtu1500)
    if ! install_tshark; then
        record setup "tshark installed" 1 "apt-get install tshark failed"
    elif ! build_example; then
        record setup "build wire_session" 1 "cargo build -p dapl --example wire_session failed"
    else
        log "$(tshark --version 2>/dev/null | head -1)"
        log "captures and logs in $WORK"
        local m
        for m in "${modes[@]}"; do
            log "mode $m"
            run_mode "$m"
        done
    fi
    if [ "$FAILED" -gt 0 ] || [ "$KEEP_DIR" = 1 ]; then
        log "captures and logs kept in $WORK"
    else
        rm -rf "$WORK"
    fi
    local skipped=""
    [ "$SKIPPED" -gt 0 ] && skipped=", $SKIPPED modes skipped"
    echo "tshark-check: $PASSED passed, $FAILED failed$skipped ($(tshark --version 2>/dev/null | head -1 | awk '{print $1, $2, $3}'))"
    [ "$FAILED" = 0 ] && [ "$PASSED" -gt 0 ]
}

main "$@"
