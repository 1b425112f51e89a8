#!/usr/bin/env bash
# Builds the Debian package dapl-rs (cargo-deb, from crates/dapl-cabi: libdaplrs.so and the
# maintainer scripts in crates/dapl-cabi/debian/) and checks it. Without root: its name,
# control fields and contents (one PASS/FAIL line each, and a SKIP line for the rest). As
# root (CI): also installs it with apt-get, checks the IA names it adds to /etc/dat.conf,
# runs Debian's dtest against the installed provider through /etc/dat.conf (daplrs-lo over
# tcp, daplrs-shm over shm), reinstalls, fires its trigger, removes, purges, and installs
# and purges once more with no /etc/dat.conf. /etc/dat.conf is saved first and put back
# byte for byte when the script ends, even on failure or interruption. Last line:
# "deb-check: N passed, M failed"; exits non-zero if any check failed.
#
#   scripts/deb-check.sh               # build, check, and as root install and purge
#   scripts/deb-check.sh --keep DIR    # the .deb and the logs in DIR (default: a temp
#                                      # directory, removed when everything passed)
#
# Needs: Debian, cargo; installs with apt-get when missing (as root): dpkg-dev
# (dpkg-shlibdeps, dpkg-architecture), dapl2-utils and libdapl2 (dtest, libdat2), iproute2
# (ss), binutils (readelf); and cargo-deb 3.8.0 with `cargo install --locked` (about 3
# minutes of compiling, once per machine: no Debian package has it). The release build of
# libdaplrs.so (shared with scripts/dat-programs.sh's) is the rest of the time.
# If dapl-rs is already installed on this machine, the install part is skipped (SKIP line):
# the script never changes an installation it did not make.

set -u
set -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CARGO_DEB_VERSION=3.8.0
CONF=/etc/dat.conf
TIMEOUT=60
TAIL_LINES=20

KEEP_DIR=""
usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
while [ $# -gt 0 ]; do
    case $1 in
        --keep) [ $# -ge 2 ] || { usage >&2; exit 2; }; KEEP_DIR=$2; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "deb-check: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done

log() { printf '[deb-check %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

if [ -n "$KEEP_DIR" ]; then
    mkdir -p "$KEEP_DIR" || exit 2
    WORK=$(cd "$KEEP_DIR" && pwd)
else
    WORK=$(mktemp -d /tmp/deb-check.XXXXXX)
fi

PASSED=0
FAILED=0
T_START=$SECONDS
record() { # NAME OK(0|1) [DETAIL]
    if [ "$2" = 0 ]; then
        PASSED=$((PASSED + 1))
        echo "PASS deb: $1${3:+ ($3)}"
    else
        FAILED=$((FAILED + 1))
        echo "FAIL deb: $1: ${3:-failed}"
    fi
}
show_tail() { # LABEL FILE
    echo "    --- $1 (last $TAIL_LINES lines of $2):"
    tail -n "$TAIL_LINES" "$2" 2>/dev/null | cut -c1-300 | sed 's/^/    | /'
}

IS_ROOT=0
[ "$(id -u)" = 0 ] && IS_ROOT=1

# ------------------------------------------------------------------------------------------
# Tools.
install_packages() {
    local need=() p
    command -v dpkg-shlibdeps >/dev/null && command -v dpkg-architecture >/dev/null || need+=(dpkg-dev)
    command -v readelf >/dev/null || need+=(binutils)
    command -v dtest >/dev/null || need+=(dapl2-utils)
    compgen -G '/usr/lib/*/libdat2.so.2' >/dev/null || need+=(libdapl2)
    command -v ss >/dev/null || need+=(iproute2)
    [ ${#need[@]} -eq 0 ] && return 0
    if [ "$IS_ROOT" != 1 ]; then
        log "missing packages ${need[*]} (not root: not installing them)"
        return 0
    fi
    log "installing ${need[*]} (apt-get)"
    for p in 1 2; do
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >"$WORK/apt.log" 2>&1 && return 0
        [ "$p" = 1 ] && apt-get update -q >>"$WORK/apt.log" 2>&1
    done
    show_tail "apt-get install ${need[*]}" "$WORK/apt.log"
}

# cargo-deb: the version this script was written against (it builds with the stable
# toolchain; its own rust-version is 1.85).
install_cargo_deb() {
    local v
    v=$(cargo deb --version 2>/dev/null)
    [[ $v == *" $CARGO_DEB_VERSION"* ]] && return 0
    log "installing cargo-deb $CARGO_DEB_VERSION (cargo install --locked: compiles it, a few minutes, once per machine)"
    cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked >"$WORK/cargo-install.log" 2>&1 ||
        { show_tail "cargo install cargo-deb" "$WORK/cargo-install.log"; return 1; }
}

# ------------------------------------------------------------------------------------------
# Build and inspect.
ARCH=$(dpkg --print-architecture)
DEB=""
TUPLE=""
LIB=""

build_deb() {
    local out=$WORK/cargo-deb.log t0=$SECONDS debs
    # The library first, with scripts/dat-programs.sh's command (the same artifact: no second
    # build when both run), then the package from it: cargo deb's own build would be of
    # every library of the workspace (it does not see libdaplrs.so as dapl-cabi's).
    log "cargo build --release -p dapl-cabi && cargo deb -p dapl-cabi --no-build --multiarch=same --strip"
    rm -f "$WORK"/dapl-rs_*.deb
    if ! (cd "$ROOT" && cargo build --release -p dapl-cabi &&
        cargo deb -p dapl-cabi --no-build --multiarch=same --strip -o "$WORK/") >"$out" 2>&1; then
        record "cargo deb builds the package" 1 "cargo build or cargo deb failed"
        show_tail "cargo build --release -p dapl-cabi && cargo deb" "$out"
        return 1
    fi
    debs=("$WORK"/dapl-rs_*_"$ARCH".deb)
    if [ ! -f "${debs[0]}" ] || [ ${#debs[@]} -ne 1 ]; then
        record "cargo deb builds the package" 1 "no single dapl-rs_*_$ARCH.deb in $WORK: $(ls "$WORK")"
        return 1
    fi
    DEB=${debs[0]}
    record "cargo deb builds the package" 0 "${DEB##*/}, $(($(stat -c %s "$DEB") / 1024)) KiB, $((SECONDS - t0)) s"
}

# check_control: the package's name, version, architecture, dependencies and scripts
check_control() {
    local why=() ver pkgid
    f() { dpkg-deb -f "$DEB" "$1" 2>/dev/null; } # f FIELD: the control field's value
    pkgid=$(cd "$ROOT" && cargo pkgid -p dapl-cabi 2>/dev/null)
    ver=${pkgid##*[#@]}
    [ "$(f Package)" = dapl-rs ] || why+=("Package is '$(f Package)', not dapl-rs")
    [[ $(f Version) == "$ver"-* ]] || why+=("Version '$(f Version)' is not the crate's $ver-<revision>")
    [ "$(f Architecture)" = "$ARCH" ] || why+=("Architecture '$(f Architecture)', not $ARCH")
    [ "$(f Multi-Arch)" = same ] || why+=("Multi-Arch '$(f Multi-Arch)', not same")
    [ "${DEB##*/}" = "dapl-rs_$(f Version)_$ARCH.deb" ] || why+=("file name ${DEB##*/}")
    grep -Eq '(^|, )libdapl2( |,|$)' <<<"$(f Depends)" || why+=("Depends '$(f Depends)' lacks libdapl2 (libdat2.so.2, /etc/dat.conf)")
    grep -Eq '(^|, )libc6( |,|$)' <<<"$(f Depends)" || why+=("Depends '$(f Depends)' lacks libc6")
    local ctl
    ctl=$(dpkg-deb --ctrl-tarfile "$DEB" | tar -tvf - 2>/dev/null)
    grep -Eq '^-rwxr-xr-x .* \./postinst$' <<<"$ctl" || why+=("no executable postinst in the control archive")
    grep -Eq '^-rwxr-xr-x .* \./postrm$' <<<"$ctl" || why+=("no executable postrm in the control archive")
    mkdir -p "$WORK/control"
    dpkg-deb -e "$DEB" "$WORK/control"
    grep -qx 'interest-noawait /etc/dat.conf' "$WORK/control/triggers" 2>/dev/null ||
        why+=("no 'interest-noawait /etc/dat.conf' in triggers")
    for s in postinst postrm; do
        sh -n "$WORK/control/$s" 2>/dev/null || why+=("$s: not valid sh")
    done
    if [ ${#why[@]} -eq 0 ]; then
        record "control fields and maintainer scripts" 0 "$(f Package) $(f Version) $(f Architecture), Depends: $(f Depends)"
    else
        record "control fields and maintainer scripts" 1 "$(printf '%s; ' "${why[@]}")"
        dpkg-deb -I "$DEB" | sed 's/^/    | /'
    fi
}

# check_contents: libdaplrs.so in the multiarch library directory, stripped, exporting the
# provider's entry points and needing libdat2; nothing else but docs
check_contents() {
    local why=() list other so
    TUPLE=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null)
    LIB=/usr/lib/$TUPLE/libdaplrs.so
    list=$(dpkg-deb -c "$DEB")
    [ -n "$TUPLE" ] || why+=("multiarch tuple unknown (dpkg-architecture, gcc -print-multiarch)")
    grep -Eq "^-rw-r--r-- .* \.$LIB\$" <<<"$list" || why+=("no .$LIB (mode 644)")
    other=$(awk '$1 !~ /^d/ { print $NF }' <<<"$list" | grep -v -e "^\.$LIB\$" -e '^\./usr/share/doc/dapl-rs/')
    [ -z "$other" ] || why+=("unexpected files: $(tr '\n' ' ' <<<"$other")")
    rm -rf "$WORK/data"
    mkdir -p "$WORK/data"
    dpkg-deb -x "$DEB" "$WORK/data"
    so=$WORK/data$LIB
    if [ -f "$so" ]; then
        readelf -h "$so" 2>/dev/null | grep -q 'Type: *DYN' || why+=("libdaplrs.so is not an ELF shared object")
        readelf -S "$so" 2>/dev/null | grep -q '\.debug_info' && why+=("libdaplrs.so is not stripped (.debug_info)")
        for sym in dat_provider_init dat_provider_fini; do
            readelf -W --dyn-syms "$so" 2>/dev/null | awk '$7 != "UND" { print $8 }' | grep -qx "$sym" ||
                why+=("libdaplrs.so does not export $sym")
        done
        readelf -d "$so" 2>/dev/null | grep -q 'NEEDED.*\[libdat2\.so\.2\]' || why+=("libdaplrs.so does not need libdat2.so.2")
    fi
    if [ ${#why[@]} -eq 0 ]; then
        record "contents: $LIB" 0 "$(($(stat -c %s "$so") / 1024)) KiB, stripped"
    else
        record "contents: $LIB" 1 "$(printf '%s; ' "${why[@]}")"
        local lines=()
        mapfile -t lines <<<"$list"
        printf '    | %s\n' "${lines[@]}"
    fi
}

# ------------------------------------------------------------------------------------------
# Install, run, remove, purge (root).
SAVED=$WORK/dat.conf.before
HAD_CONF=0
TOUCHED=0   # set once this script may have changed the package state or /etc/dat.conf
PIDS=()

pkg_state() { dpkg-query -W -f='${db:Status-Status}' dapl-rs 2>/dev/null; }

# restore: purge what we installed, put /etc/dat.conf back as it was (from the saved copy)
restore() {
    local p
    # (`timeout` passes the TERM on to its dtest)
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    PIDS=()
    [ "$TOUCHED" = 1 ] || return 0
    case $(pkg_state) in
        "" | not-installed) ;;
        *) dpkg --purge dapl-rs >>"$WORK/dpkg.log" 2>&1 || log "dpkg --purge dapl-rs failed (see $WORK/dpkg.log)" ;;
    esac
    if [ "$HAD_CONF" = 1 ]; then
        if ! cmp -s "$SAVED" "$CONF"; then
            log "putting $CONF back as it was"
            cat "$SAVED" >"$CONF"
        fi
    elif [ -e "$CONF" ]; then
        log "removing $CONF (there was none)"
        rm -f "$CONF"
    fi
    TOUCHED=0
}
# shellcheck disable=SC2317 # called from the traps below
on_signal() { log "interrupted; cleaning up"; restore; exit 130; }
trap restore EXIT
trap on_signal INT TERM HUP

# block_ok FILE PREFIX_FILE: FILE is PREFIX_FILE (may be /dev/null) followed by exactly one
# dapl-rs block naming $LIB for daplrs-lo (tcp) and daplrs-shm (shm); sets BLOCK_WHY
BLOCK_WHY=""
block_ok() {
    local f=$1 prefix=$2 n rest
    BLOCK_WHY=""
    [ -f "$f" ] || { BLOCK_WHY="$f does not exist"; return 1; }
    n=$(stat -c %s "$prefix")
    if ! head -c "$n" "$f" | cmp -s - "$prefix"; then
        BLOCK_WHY="the lines that were there before changed"
        return 1
    fi
    rest=$(tail -c +$((n + 1)) "$f")
    local first last begin="# BEGIN dapl-rs $ARCH"
    # A last line without its newline (libdapl2's file has none) gets one, and the BEGIN
    # line says so (postrm takes the newline away again).
    if [ "$n" -gt 0 ] && [ "$(tail -c 1 "$prefix" | wc -l)" = 0 ]; then
        begin+=" (dapl-rs ended the line above with a newline)"
        if [ "${rest:0:1}" = $'\n' ]; then
            rest=${rest:1}
        else
            BLOCK_WHY+="no newline added after the last line; "
        fi
    fi
    first=$(head -n 1 <<<"$rest")
    last=$(tail -n 1 <<<"$rest")
    [ "$first" = "$begin" ] || BLOCK_WHY+="added text does not start with '$begin' ('$first'); "
    [ "$last" = "# END dapl-rs $ARCH" ] || BLOCK_WHY+="added text does not end with '# END dapl-rs $ARCH' ('$last'); "
    [ "$(grep -c '^# BEGIN dapl-rs' "$f")" = 1 ] || BLOCK_WHY+="$(grep -c '^# BEGIN dapl-rs' "$f") BEGIN lines; "
    grep -qxF "daplrs-lo u2.0 nonthreadsafe default $LIB dapl.2.0 \"tcp 127.0.0.1\" \"\"" <<<"$rest" ||
        BLOCK_WHY+="no daplrs-lo line for $LIB over tcp 127.0.0.1; "
    grep -qxF "daplrs-shm u2.0 nonthreadsafe default $LIB dapl.2.0 \"shm 127.0.0.1\" \"\"" <<<"$rest" ||
        BLOCK_WHY+="no daplrs-shm line for $LIB over shm 127.0.0.1; "
    n=$(grep -Evc '^[[:space:]]*(#|$)' <<<"$rest")
    [ "$n" = 2 ] || BLOCK_WHY+="$n entries added, not 2; "
    [ -z "$BLOCK_WHY" ]
}

# listening PORT: some socket listens on TCP PORT
listening() { [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }

# dtest_pair IA: `dtest -P IA -s` and `dtest -P IA -h 127.0.0.1`, default options, through
# /etc/dat.conf (DAT_OVERRIDE unset); both must end with exit 0, print
# "DAPL Test Complete. PASSED" and no error line (as scripts/dat-programs.sh judges them)
dtest_pair() {
    local ia=$1 name="dtest -P $1 -s / -h 127.0.0.1 (installed provider, $CONF)"
    local slog=$WORK/dtest-$1.server.log clog=$WORK/dtest-$1.client.log spid cpid src=0 crc=0 n p why=()
    for p in 15828 45248; do
        for ((n = 0; n < 100; n++)); do listening "$p" || break; sleep 0.1; done
        listening "$p" && { record "$name" 1 "not run: TCP port $p is in use"; return; }
    done
    : >"$slog"
    env -u DAT_OVERRIDE timeout -k 5 "$TIMEOUT" stdbuf -oL -eL dtest -P "$ia" -s >"$slog" 2>&1 </dev/null &
    spid=$!
    PIDS+=("$spid")
    # Ready: its ready line, then the side channel's listen on 15828.
    for ((n = 0; n < 300; n++)); do
        grep -aq 'Server is waiting for client connection' "$slog" && listening 15828 && break
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.1
    done
    # In the background too: a signal then interrupts `wait` at once.
    env -u DAT_OVERRIDE timeout -k 5 "$TIMEOUT" stdbuf -oL -eL dtest -P "$ia" -h 127.0.0.1 >"$clog" 2>&1 </dev/null &
    cpid=$!
    PIDS+=("$cpid")
    wait "$cpid" || crc=$?
    wait "$spid" || src=$?
    PIDS=()
    for side in server client; do
        local f=$slog rc=$src
        [ $side = client ] && f=$clog rc=$crc
        [ "$rc" = 0 ] || why+=("$side: exit $rc")
        [ "$(grep -ac 'DAPL Test Complete. PASSED' "$f")" = 1 ] || why+=("$side: no 'DAPL Test Complete. PASSED'")
        grep -aqE 'ERR|Err' "$f" && why+=("$side: '$(grep -aE 'ERR|Err' "$f" | head -1 | cut -c1-200)'")
    done
    if [ ${#why[@]} -eq 0 ]; then
        record "$name" 0
    else
        record "$name" 1 "$(printf '%s; ' "${why[@]}")"
        show_tail "server: dtest -P $ia -s" "$slog"
        show_tail "client: dtest -P $ia -h 127.0.0.1" "$clog"
    fi
}

dpkg_step() { # DESCRIPTION COMMAND...: run it, logged; 1 and the log's tail if it failed
    local what=$1
    shift
    echo "== $what: $*" >>"$WORK/dpkg.log"
    if ! DEBIAN_FRONTEND=noninteractive "$@" >>"$WORK/dpkg.log" 2>&1; then
        show_tail "$what: $*" "$WORK/dpkg.log"
        return 1
    fi
}

install_checks() {
    local after=$WORK/dat.conf.installed
    if [ -e "$CONF" ]; then
        HAD_CONF=1
        cp -p "$CONF" "$SAVED"
    else
        : >"$SAVED"
    fi
    TOUCHED=1
    # 1. apt-get install ./dapl-rs_*.deb (as the README says)
    if ! dpkg_step "install" apt-get install -y -q "$DEB"; then
        record "apt-get install ./${DEB##*/}" 1 "apt-get failed"
        return
    fi
    record "apt-get install ./${DEB##*/}" 0
    if [ -f "$LIB" ] && block_ok "$CONF" "$SAVED"; then
        record "$CONF: the lines before, then one dapl-rs block (daplrs-lo, daplrs-shm) naming $LIB" 0
    else
        record "$CONF: the lines before, then one dapl-rs block naming $LIB" 1 "${BLOCK_WHY:-$LIB is not installed}"
        sed 's/^/    | /' "$CONF"
    fi
    cp -p "$CONF" "$after"
    # 2. Debian's dtest against the installed provider, over tcp and over shm.
    dtest_pair daplrs-lo
    dtest_pair daplrs-shm
    # 3. Reinstalling and the trigger: one block, however often postinst runs.
    if dpkg_step "reinstall" apt-get install -y -q --reinstall "$DEB" && cmp -s "$after" "$CONF"; then
        record "reinstall leaves $CONF as it was after the install" 0
    else
        record "reinstall leaves $CONF as it was after the install" 1 "$(diff "$after" "$CONF" | head -5 | tr '\n' ' ')"
    fi
    # The trigger on /etc/dat.conf (libdapl2 installing the file anew): a file without the
    # block gets it back, once.
    cat "$SAVED" >"$CONF"
    if dpkg_step "trigger" dpkg-trigger --by-package=libdapl2 --no-await "$CONF" &&
        dpkg_step "trigger" dpkg --triggers-only dapl-rs && cmp -s "$after" "$CONF"; then
        record "trigger on $CONF (libdapl2 replaced it) adds the block back" 0
    else
        record "trigger on $CONF (libdapl2 replaced it) adds the block back" 1 "$(diff "$after" "$CONF" | head -5 | tr '\n' ' ')"
    fi
    # 4. Remove: the library goes, the names stay (as configuration does until a purge).
    if dpkg_step "remove" dpkg --remove dapl-rs && [ ! -e "$LIB" ] && cmp -s "$after" "$CONF" &&
        [ "$(pkg_state)" = config-files ]; then
        record "dpkg --remove: library gone, $CONF unchanged" 0
    else
        record "dpkg --remove: library gone, $CONF unchanged" 1 "state '$(pkg_state)', $LIB $([ -e "$LIB" ] && echo present || echo gone), $CONF $(cmp -s "$after" "$CONF" && echo unchanged || echo changed)"
    fi
    # 5. Purge: /etc/dat.conf byte for byte as before the install.
    if dpkg_step "purge" dpkg --purge dapl-rs && [ "$(pkg_state)" != config-files ] &&
        { { [ "$HAD_CONF" = 1 ] && cmp -s "$SAVED" "$CONF"; } || { [ "$HAD_CONF" = 0 ] && [ ! -e "$CONF" ]; }; } &&
        [ ! -e /var/lib/dapl-rs ]; then
        record "dpkg --purge: $CONF byte for byte as before the install" 0
    else
        record "dpkg --purge: $CONF byte for byte as before the install" 1 "state '$(pkg_state)'; $(diff "$SAVED" "$CONF" 2>&1 | head -5 | tr '\n' ' ')"
    fi
    # 6. No /etc/dat.conf at all: the install creates it with the block only, the purge
    # deletes it again.
    rm -f "$CONF"
    local problem=""
    if dpkg_step "install without $CONF" dpkg -i "$DEB"; then
        block_ok "$CONF" /dev/null || problem="after install: $BLOCK_WHY"
        if dpkg_step "purge without $CONF" dpkg --purge dapl-rs; then
            [ ! -e "$CONF" ] || problem+="after purge: $CONF still exists"
        else
            problem+="dpkg --purge failed"
        fi
    else
        problem="dpkg -i failed"
    fi
    record "with no $CONF: install creates it, purge deletes it" "$([ -z "$problem" ] && echo 0 || echo 1)" "$problem"
    # 7. A file that ends with a newline, and a line the admin added after the block: the
    # purge takes the block away, nothing else.
    local base=$WORK/dat.conf.newline extra
    extra='daplrs-eth0 u2.0 nonthreadsafe default /usr/lib/x/libdaplrs.so dapl.2.0 "tcp 10.0.0.1" ""'
    { cat "$SAVED"; [ -s "$SAVED" ] && [ "$(tail -c 1 "$SAVED" | wc -l)" = 0 ] && echo; } >"$base"
    cat "$base" >"$CONF"
    problem=""
    if dpkg_step "install, $CONF ending in a newline" dpkg -i "$DEB"; then
        block_ok "$CONF" "$base" || problem="after install: $BLOCK_WHY"
        echo "$extra" >>"$CONF"
        if dpkg_step "purge, a line after the block" dpkg --purge dapl-rs; then
            { cat "$base"; echo "$extra"; } | cmp -s - "$CONF" ||
                problem+="after purge: $(diff <(cat "$base"; echo "$extra") "$CONF" | head -5 | tr '\n' ' ')"
        else
            problem+="dpkg --purge failed"
        fi
    else
        problem="dpkg -i failed"
    fi
    record "$CONF ending in a newline, a line added after the block: purge removes the block only" "$([ -z "$problem" ] && echo 0 || echo 1)" "$problem"
    restore
}

# ------------------------------------------------------------------------------------------
main() {
    log "work directory $WORK"
    install_packages
    local missing=""
    for t in cargo dpkg-deb dpkg-shlibdeps dpkg-architecture readelf; do
        command -v "$t" >/dev/null || missing+=" $t"
    done
    if [ -n "$missing" ]; then
        record "cargo deb builds the package" 1 "not run: missing$missing"
    elif install_cargo_deb; then
        if build_deb; then
            check_control
            check_contents
        fi
    else
        record "cargo deb builds the package" 1 "not run: cargo install cargo-deb $CARGO_DEB_VERSION failed"
    fi
    if [ -z "$DEB" ]; then
        :
    elif [ "$IS_ROOT" != 1 ]; then
        echo "SKIP deb: install, dtest, remove and purge: needs root (CI runs as root)"
    elif [ -n "$(pkg_state)" ] && [ "$(pkg_state)" != not-installed ]; then
        echo "SKIP deb: install, dtest, remove and purge: dapl-rs is already on this machine ($(pkg_state)); dpkg --purge dapl-rs to run them"
    elif ! command -v dtest >/dev/null || ! command -v ss >/dev/null; then
        record "install checks" 1 "not run: dtest (dapl2-utils) or ss (iproute2) missing"
    else
        install_checks
    fi
    restore
    if [ "$FAILED" -gt 0 ] || [ -n "$KEEP_DIR" ]; then
        log "logs kept in $WORK"
    else
        rm -rf "$WORK"
    fi
    echo "deb-check: $PASSED passed, $FAILED failed in $((SECONDS - T_START)) s"
    [ "$FAILED" = 0 ] && [ "$PASSED" -gt 0 ]
}

main; exit $?
