#!/usr/bin/env bash
# Miri over the registered-memory and shm ring unit tests, ThreadSanitizer over the threaded
# region tests, the polling conformance tests and the handle-drop tests, AddressSanitizer over
# the revocation tests (docs/architecture.md, "Memory safety"). Needs a nightly toolchain with
# miri and rust-src; installs them with rustup when it can. One PASS/FAIL line per check
# (counted by scripts/test.sh), SKIP if no nightly toolchain can be had.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v rustup >/dev/null; then
  echo "SKIP sanitizers: no rustup to install a nightly toolchain"
  exit 0
fi
if ! rustup +nightly component list --installed 2>/dev/null | grep -q '^miri'; then
  rustup toolchain install nightly --profile minimal -c miri -c rust-src >/dev/null 2>&1 ||
    { echo "SKIP sanitizers: nightly with miri could not be installed"; exit 0; }
fi
target=$(rustc +nightly -vV | sed -n 's/^host: //p')
out=$(mktemp)
# scripts/test.sh sets DAPLRS_KEEP_TARGETS=0 to remove each tool's build once its checks ran
# (about 0.9 GB in all with scripts/test.sh's line-tables-only builds); run alone, this script
# keeps them for the next run.
prune() { [ "${DAPLRS_KEEP_TARGETS:-1}" = 1 ] || { echo "removing $(du -sch "$@" 2>/dev/null | tail -1 | cut -f1) ($*)"; rm -rf "$@"; }; }

check() { # name, command...
  local name=$1
  shift
  if "$@" >"$out" 2>&1 && grep -q '^test result: ok' "$out"; then
    echo "PASS $name ($(awk '/^test result:/ { p += $4; i += $8 } END { printf "%d passed, %d ignored", p, i }' "$out"))"
  else
    tail -40 "$out"
    echo "FAIL $name"
  fi
}

# Miri: copies at every alignment build overlapping registrations with different ends (one
# byte reached as part of a word and alone), which Miri's weak-memory emulation cannot model:
# those run without it; the concurrent tests run with it.
check "miri mem (weak memory)" \
  cargo +nightly miri test -q -p dapl --lib mem:: -- --skip at_every_alignment
check "miri mem (alignment)" env MIRIFLAGS=-Zmiri-disable-weak-memory-emulation \
  cargo +nightly miri test -q -p dapl --lib at_every_alignment
# The shm link's ring: records between two threads over one mapping, garbage refused; and the
# wake-up decisions it takes (link/shm/wake.rs; their loom models run in scripts/test.sh).
check "miri shm ring" cargo +nightly miri test -q -p dapl --lib -- link::shm::ring link::shm::wake
prune target/miri

# ThreadSanitizer needs the standard library built with it (rust-src, -Zbuild-std).
tsan() {
  RUSTFLAGS="-Zsanitizer=thread --cfg dapl_atomic_loops" RUSTDOCFLAGS="-Zsanitizer=thread" \
    TSAN_OPTIONS="halt_on_error=1" CARGO_TARGET_DIR=target/tsan \
    cargo +nightly test -q -Zbuild-std --target "$target" -p dapl "$@"
}
check "tsan mem" tsan --lib mem::
check "tsan conformance_polling" tsan --test conformance_polling
# Counted handles: last drops racing in several threads (an EVD and the endpoint using it).
check "tsan raii" tsan --test raii
# Many threads posting and taking completions from shared EVDs and a CNO, every link.
check "tsan threads" tsan --test threads
prune target/tsan

# AddressSanitizer: the memory a test lends (heap buffers) is freed right after the LMR's free;
# any access by the provider after it is a use after free. (tcp_revocation.rs also unmaps.)
asan() {
  RUSTFLAGS="-Zsanitizer=address --cfg dapl_atomic_loops" RUSTDOCFLAGS="-Zsanitizer=address" \
    ASAN_OPTIONS="detect_leaks=0" CARGO_TARGET_DIR=target/asan \
    cargo +nightly test -q -Zbuild-std --target "$target" -p dapl "$@"
}
check "asan revocation" asan --test conformance_lmr_free --test tcp_revocation \
  --test owned_registration
prune target/asan
