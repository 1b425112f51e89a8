#!/usr/bin/env bash
# Runs every cargo-fuzz target of crates/iwarp, crates/dapl and crates/dapl-cabi for a fixed
# time, one after the other.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [-- LIBFUZZER_ARGS...]     (default 60 seconds)
#
# Installs cargo-fuzz if it is missing. On a stable toolchain it sets RUSTC_BOOTSTRAP=1 for the
# cargo-fuzz build (cargo-fuzz needs -Z flags). Prints one line per target (executions, corpus
# size, result) and exits non-zero if any target crashed (or ran out of memory or time) or failed
# to build. For a target of crates/<crate>, corpora go to crates/<crate>/fuzz/corpus/<target>,
# crashes to crates/<crate>/fuzz/artifacts/<target>, full libFuzzer logs to
# crates/<crate>/fuzz/target/fuzz-logs (all git-ignored). A dictionary
# crates/<crate>/fuzz/dicts/<target>.dict is used when present.
#
# Environment: FUZZ_NICE (nice level, default 10), FUZZ_SANITIZER (address|none|..., default
# cargo-fuzz's: address), FUZZ_TARGETS (space-separated subset of target names, default all
# targets of all crates).
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-60}
if ! [[ "$duration" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 [SECONDS_PER_TARGET] [-- LIBFUZZER_ARGS...]" >&2
  exit 2
fi
shift $(($# > 0 ? 1 : 0))
[ "${1:-}" = "--" ] && shift
extra_args=("$@")

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz"
  cargo install --locked cargo-fuzz
fi
if ! rustc --version | grep -q nightly; then
  # cargo-fuzz passes -Zsanitizer / -Cpasses flags that only nightly accepts.
  export RUSTC_BOOTSTRAP=1
fi

crate_dirs=(crates/iwarp crates/dapl crates/dapl-cabi)
nice_level=${FUZZ_NICE:-10}
build_args=()
[ -n "${FUZZ_SANITIZER:-}" ] && build_args+=(--sanitizer "$FUZZ_SANITIZER")

# Every target, with the crate that owns it.
declare -A crate_of=()
all_targets=()
for c in "${crate_dirs[@]}"; do
  for t in $(cd "$c" && cargo fuzz list); do
    crate_of[$t]=$c
    all_targets+=("$t")
  done
done
read -r -a targets <<<"${FUZZ_TARGETS:-${all_targets[*]}}"
if [ ${#targets[@]} -eq 0 ]; then
  echo "no fuzz targets found in ${crate_dirs[*]}" >&2
  exit 1
fi
for t in "${targets[@]}"; do
  if [ -z "${crate_of[$t]:-}" ]; then
    echo "unknown fuzz target $t (known: ${all_targets[*]})" >&2
    exit 2
  fi
  mkdir -p "${crate_of[$t]}/fuzz/target/fuzz-logs"
done

echo "== building ${targets[*]}"
for t in "${targets[@]}"; do
  crate_dir=${crate_of[$t]}
  log_dir=$crate_dir/fuzz/target/fuzz-logs
  (cd "$crate_dir" && nice -n "$nice_level" cargo fuzz build "${build_args[@]}" "$t") \
    >"$log_dir/$t.build.log" 2>&1 || {
    tail -n 30 "$log_dir/$t.build.log" >&2
    echo "$t: build FAILED (log: $log_dir/$t.build.log)"
    exit 1
  }
done

echo "== fuzzing each target for ${duration}s"
failed=0
for t in "${targets[@]}"; do
  crate_dir=${crate_of[$t]}
  fuzz_dir=$crate_dir/fuzz
  log=$fuzz_dir/target/fuzz-logs/$t.log
  fuzz_args=(-max_total_time="$duration" -print_final_stats=1)
  [ -f "$fuzz_dir/dicts/$t.dict" ] && fuzz_args+=(-dict="fuzz/dicts/$t.dict")
  rc=0
  (cd "$crate_dir" && nice -n "$nice_level" cargo fuzz run "${build_args[@]}" "$t" -- \
    "${fuzz_args[@]}" ${extra_args[@]+"${extra_args[@]}"}) >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
  [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
  corpus=$(find "$fuzz_dir/corpus/$t" -type f 2>/dev/null | wc -l)
  if [ "$rc" -eq 0 ]; then
    result=ok
  else
    failed=1
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    case "$(basename "${artifact:-none}")" in
      crash-*) kind=CRASH ;;
      oom-*) kind=OUT-OF-MEMORY ;;
      timeout-*) kind=TIMEOUT ;;
      leak-*) kind=LEAK ;;
      *) kind=FAILED ;;
    esac
    result="$kind (exit $rc; ${artifact:-no artifact}; log: $log)"
    grep -m 3 -E "panicked at|==ERROR|SUMMARY" "$log" >&2 || true
    if [ -n "$artifact" ]; then
      echo "  reproduce: (cd $crate_dir && cargo fuzz run $t $artifact)" >&2
    fi
  fi
  printf '%-18s %4ss  execs %-10s corpus %-6s %s\n' "$t" "$duration" "${execs:-?}" "$corpus" "$result"
done
exit "$failed"
