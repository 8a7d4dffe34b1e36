#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, build-fuzz/) and fuzzes each one for a bounded time.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]      # default 20; docs/FUZZING.md
#
# Each target runs on a copy of its seed corpus (tests/fuzz/corpus/<target>/) with a 5 s limit
# per input (a hang is a failure), -rss_limit_mb / -malloc_limit_mb 2048 and leak detection.
# Prints the executions per target; exits 1 on any crash, leak, timeout or out-of-memory and
# prints the reproducer (re-run it with: build-fuzz/bin/<target> <reproducer>).
# Environment: PSHARD_FUZZ_BUILD (build dir, default build-fuzz), PSHARD_FUZZ_TARGETS (names to
# run, default all), PSHARD_FUZZ_OUT (where corpora, logs and reproducers go, default
# <build>/fuzz-out), PSHARD_FUZZ_NICE (nice level for the fuzzers, default 0),
# PSHARD_FUZZ_TIMEOUT (seconds per input before it counts as a hang, default 5), PSHARD_FUZZ_JOBS (targets fuzzed at
# once, default 2).
set -euo pipefail

seconds="${1:-20}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (a whole number >= 1, got '$seconds')" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${PSHARD_FUZZ_BUILD:-$root/build-fuzz}"
out="${PSHARD_FUZZ_OUT:-$build/fuzz-out}"
nice_level="${PSHARD_FUZZ_NICE:-0}"

for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "fuzz: $tool not found (scripts/install-deps.sh installs clang and libclang-rt-14-dev)" >&2; exit 1; }
done

echo "== fuzz: building the targets in $build (clang, ASan + UBSan + libFuzzer)"
mkdir -p "$build"
start=$(date +%s)
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPSHARD_FUZZ=ON \
  -DPSHARD_CUDA=OFF >"$build/fuzz-configure.log" 2>&1 || { cat "$build/fuzz-configure.log"; exit 1; }
cmake --build "$build" -j2 --target pshard_fuzz >"$build/fuzz-build.log" 2>&1 || { tail -50 "$build/fuzz-build.log"; exit 1; }
echo "   built in $(( $(date +%s) - start )) s"

targets="${PSHARD_FUZZ_TARGETS:-$(cd "$root/tests/fuzz" && ls fuzz_*.cc | sed 's/\.cc$//' | tr '\n' ' ')}"
rm -rf "$out"
mkdir -p "$out"
jobs_max="${PSHARD_FUZZ_JOBS:-2}"
[[ "$jobs_max" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: PSHARD_FUZZ_JOBS '$jobs_max' is not a positive number" >&2; exit 2; }

# fuzz_one TARGET: runs it and writes its table line (and, on failure, what to look at) to $out/TARGET/result.
fuzz_one() {
  local t="$1" bin="$build/bin/$1" t0 rc secs execs rate
  mkdir -p "$out/$t/corpus" "$out/$t/artifacts"
  cp "$root/tests/fuzz/corpus/$t/"* "$out/$t/corpus/"
  t0=$(date +%s)
  set +e
  # -fork/-jobs are not used: one process per target, so a crash ends its run with its reproducer saved.
  nice -n "$nice_level" "$bin" "$out/$t/corpus" -max_total_time="$seconds" -timeout="${PSHARD_FUZZ_TIMEOUT:-5}" -rss_limit_mb=2048 \
    -malloc_limit_mb=2048 -detect_leaks=1 -print_final_stats=1 -artifact_prefix="$out/$t/artifacts/" \
    >"$out/$t/log" 2>&1
  rc=$?
  set -e
  secs=$(( $(date +%s) - t0 ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t/log" | tail -1)
  execs="${execs:-?}"
  rate="?"
  [[ "$execs" =~ ^[0-9]+$ && "$secs" -gt 0 ]] && rate=$(( execs / secs ))
  {
    if [[ $rc -eq 0 ]]; then
      printf '%-22s %10s %8s %10s  %s\n' "$t" "$execs" "$secs" "$rate" ok
    else
      printf '%-22s %10s %8s %10s  %s\n' "$t" "$execs" "$secs" "$rate" "FAILED (exit $rc)"
      grep -E "ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)|runtime error:|fuzz invariant failed|==ERROR" \
        "$out/$t/log" | sed -n '1,5s/^/    /p'
      for r in "$out/$t/artifacts/"*; do
        [[ -e "$r" ]] && echo "    reproducer: $r   (re-run: $bin $r)"
      done
      echo "    log: $out/$t/log"
    fi
  } >"$out/$t/result"
  return "$rc"
}

for t in $targets; do
  [[ -x "$build/bin/$t" ]] || { echo "fuzz: $build/bin/$t was not built" >&2; exit 1; }
done
# PSHARD_FUZZ_JOBS targets at a time (default 2: one per core of the 2-core machines CI runs on).
failed=0
for t in $targets; do
  while (( $(jobs -rp | wc -l) >= jobs_max )); do wait -n || failed=1; done
  fuzz_one "$t" &
done
while (( $(jobs -rp | wc -l) > 0 )); do wait -n || failed=1; done
printf '%-22s %10s %8s %10s  %s\n' target executions seconds exec/s result
for t in $targets; do
  cat "$out/$t/result"
  grep -q "  ok$" "$out/$t/result" || failed=1
done
if [[ $failed -ne 0 ]]; then
  echo "== fuzz: FAILED (logs and reproducers under $out)"
  exit 1
fi
echo "== fuzz: no crash, leak or timeout (logs under $out)"
