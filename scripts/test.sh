#!/usr/bin/env bash
# The project's test command: installs what the tests need, then checks formatting, lints and
# runs every test. Used as is by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
[ -f /usr/include/dat2/dat_error.h ] || need_pkgs+=(libdapl-dev)
command -v cc >/dev/null || need_pkgs+=(gcc)
command -v ip >/dev/null || need_pkgs+=(iproute2) # tcp_hosts: network namespaces as hosts
command -v dapltest >/dev/null || need_pkgs+=(dapl2-utils) # Debian's DAT test programs
command -v dpkg-shlibdeps >/dev/null || need_pkgs+=(dpkg-dev) # cargo deb (scripts/deb-check.sh)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing: ${need_pkgs[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi
if command -v rustup >/dev/null; then
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi

# Disk: a CI machine may have only a few GB free (a run on 2026-11-27 ran out in the sanitizer
# stage). A clean clone gains nothing from incremental compilation (3.7 GB of a 4.3 GB
# target/debug), and test binaries need line tables for backtraces, not full debug info (1.8 ->
# 1.1 GB for the workspace's tests). Stages whose build is not used later remove it
# (DAPLRS_KEEP_TARGETS=1 keeps them), and each stage prints what is free.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
keep_targets=${DAPLRS_KEEP_TARGETS:-0}
export DAPLRS_KEEP_TARGETS=$keep_targets
disk() { echo "[$(date +%T), ${SECONDS}s] disk: $(df -Ph . | awk 'NR == 2 { print $4 }') free, target $(du -sh target 2>/dev/null | cut -f1)"; }
prune() { [ "$keep_targets" = 1 ] || { echo "removing $(du -sch "$@" 2>/dev/null | tail -1 | cut -f1) ($*)"; rm -rf "$@"; }; }
disk

echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
# dapl's optional feature "tokio" (dapl::async_evd, tests/async_evd.rs, examples/async_echo.rs).
cargo clippy -p dapl --features tokio --all-targets -- -D warnings
echo "== cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
RUSTDOCFLAGS="-D warnings" cargo doc -p dapl --features tokio --no-deps
echo "== cargo test"
log=$(mktemp)
# A failing test does not end the run: every test binary runs (--no-fail-fast) and the later
# stages too, so one CI run shows every failure; a FAIL line (counted below) says the step
# failed, in case it failed before any test could report (a build error).
tests() { # name, command...
  local name=$1 rc=0
  shift
  "$@" 2>&1 | tee -a "$log" || rc=$?
  [ "$rc" = 0 ] || echo "FAIL $name (exit $rc)" | tee -a "$log"
}
tests "cargo test --workspace" env DAPLRS_REQUIRE_HEADERS=1 cargo test --workspace --no-fail-fast
# The feature "tokio" of dapl: its tests (required-features, so not in the run above) and the
# doctest of dapl::async_evd.
echo "== cargo test -p dapl --features tokio"
tests "async_evd" cargo test -p dapl --features tokio --test async_evd
tests "async_evd doctest" cargo test -p dapl --features tokio --doc
# The loom models of the shm link's wake-up protocol (crates/dapl/src/link/shm/wake.rs): the
# interleavings of the threads that race on a ring's control words and the IA's polling window,
# up to 3 preemptions each (unbounded, the three-thread model takes a minute: LOOM_MAX_PREEMPTIONS
# unset); and of the QP's turns at transmitting (crates/dapl/src/engine/turn.rs: no request to
# drain lost, never two drains at once). In target/loom: the flag would otherwise rebuild the
# normal target's dependencies.
echo "== loom (shm wake-up protocol, transmit turns)"
tests "loom" env RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR=target/loom \
  cargo test -p dapl --release --lib loom
prune target/loom
# The examples of crates/dapl, run: each checks what it moved and exits non-zero otherwise.
# One PASS/FAIL line each, counted below.
disk
echo "== examples (crates/dapl/examples)"
cargo build -q -p dapl --features tokio --examples
run_example() {
  if timeout 120 cargo run -q -p dapl --features tokio --example "$@" >/dev/null; then
    echo "PASS example $*"
  else
    echo "FAIL example $*"
  fi
}
for ex in send_recv rdma_write_read srq write_immediate; do
  for link in loopback tcp shm; do run_example "$ex" -- "$link" | tee -a "$log"; done
done
for ex in two_process_tcp async_echo loopback_tour; do run_example "$ex" | tee -a "$log"; done
for link in loopback tcp shm; do run_example per_message -- "$link" 2000 | tee -a "$log"; done
# Package contents and manifests of the two library crates (built from the packaged sources).
disk
echo "== cargo package -p iwarp -p dapl"
# `cargo package` verifies dapl against the iwarp it just packaged, through a registry in
# target/package that cargo extracts under $CARGO_HOME/registry/src/-<hash of its path>/. The
# version stays 0.1.0, so an extraction left by an earlier run at the same path (a CARGO_HOME
# kept between CI runs) is taken as it is, and dapl is built against an old iwarp. Drop them.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/iwarp-* "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/dapl-*
cargo package -q -p iwarp -p dapl --allow-dirty
# Wire decode: dapl-rs tcp-link sessions captured on loopback and decoded by tshark (CRC off,
# on, on at MTU 1500; docs/interop-tshark.md). One PASS/FAIL line per check, counted below.
disk
echo "== tshark decode (scripts/tshark-check.sh)"
tshark_rc=0
./scripts/tshark-check.sh | tee -a "$log" || tshark_rc=$?
[ "$tshark_rc" = 0 ] || echo "FAIL tshark-check (exit $tshark_rc)" | tee -a "$log"
# The real DAT programs (dtest, dtestcm, dtestsrq, dtestx, dapltest from dapl2-utils) through
# libdat2 and a dat.conf pointing at libdaplrs.so; docs/dat-programs.md. One PASS/FAIL line each.
disk
echo "== DAT programs (scripts/dat-programs.sh)"
dat_rc=0
./scripts/dat-programs.sh | tee -a "$log" || dat_rc=$?
[ "$dat_rc" = 0 ] || echo "FAIL dat-programs (exit $dat_rc)" | tee -a "$log"
# The same programs over the shm link: every check but the two-namespace one (shm is for
# processes of one host, and a network namespace is another host to it).
disk
echo "== DAT programs over shm (scripts/dat-programs.sh, ia_params \"shm <ipv4>\")"
dat_rc=0
DATPROG_LABEL="shm: " DATPROG_IA_PARAMS="shm %s" ./scripts/dat-programs.sh --skip 'netns' |
  tee -a "$log" || dat_rc=$?
[ "$dat_rc" = 0 ] || echo "FAIL dat-programs over shm (exit $dat_rc)" | tee -a "$log"
# The Debian package (cargo-deb; README, "DAT programs in C"): built from the release library
# above and its contents checked; as root also installed with apt-get, dtest run against it
# through /etc/dat.conf, removed and purged (/etc/dat.conf put back byte for byte). One
# PASS/FAIL line per check, counted below.
disk
echo "== Debian package (scripts/deb-check.sh)"
deb_rc=0
./scripts/deb-check.sh | tee -a "$log" || deb_rc=$?
[ "$deb_rc" = 0 ] || echo "FAIL deb-check (exit $deb_rc)" | tee -a "$log"
# Miri over the registered-memory unit tests, ThreadSanitizer over the threaded and polling
# tests, AddressSanitizer over the revocation tests (nightly toolchain, installed by rustup;
# docs/architecture.md, "Memory safety"). One PASS/FAIL line per check, counted below.
disk
echo "== sanitizers (scripts/sanitizers.sh)"
san_rc=0
./scripts/sanitizers.sh | tee -a "$log" || san_rc=$?
[ "$san_rc" = 0 ] || echo "FAIL sanitizers (exit $san_rc)" | tee -a "$log"
# Interop with the Linux kernel's siw (QEMU guest from ../shared/siw-vm): the codec probe and
# the dapl-rs rping, both directions, CRC off and on. One PASS/FAIL line per check, counted below.
disk
echo "== siw interop (scripts/siw-interop.sh)"
siw_err=$(mktemp)
siw_rc=0
./scripts/siw-interop.sh 2>"$siw_err" | tee -a "$log" || siw_rc=$?
if [ "$siw_rc" != 0 ]; then
  tail -30 "$siw_err"
  echo "FAIL siw-interop (exit $siw_rc; stderr above)" | tee -a "$log"
fi
disk
# One closing line over every test binary (cargo's own last line is the last binary's only).
# (and every PASS/FAIL line of the interop checks).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     /^PASS / { p++ } /^FAIL / { f++ }
     END { printf "tests: %d passed, %d failed\n", p, f; exit (f > 0 || p == 0) }' "$log"
