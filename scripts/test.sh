#!/usr/bin/env bash
# The test suite, exactly as CI runs it (.ci/run calls this script):
#   1. installs the Debian dependencies,
#   2. checks formatting,
#   3. builds Release into build/ and runs every test that can run on a
#      2-core machine without a GPU (gpu tests skip themselves without one),
#   4. builds the unit tests with -fsanitize=address,undefined into
#      build-asan/ and runs them, and the C API's test (libpshard_c.so against real processes),
#   5. builds with -fsanitize=thread into build-tsan/ and runs the unit tests,
#      the in-process multi-threaded ones (servers, clients, LocalJob in one
#      process) and the quick multi-process ones; OpenMP runs single-threaded there (OMP_THREAD_LIMIT=1:
#      libgomp is not instrumented) and tests/tsan.supp lists what is not ours,
#   6. builds the libFuzzer targets with clang into build-fuzz/ and fuzzes
#      each for 15 s (docs/FUZZING.md).
# Each configuration is configured and built once: build/ in full (every label runs there), build-asan/ and
# build-tsan/ only the targets their ctest selections need (scripts/test-targets.sh), build-fuzz/ only the fuzz
# targets. Each ctest phase ends with its ten slowest tests (docs/TESTING.md, "Suite time").
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
logs="${PSHARD_TEST_LOGS:-$PWD/build-test-logs}"
mkdir -p "$logs"

# ctest_phase NAME BUILD_DIR CTEST_ARGS...: runs ctest in BUILD_DIR (output to the terminal and to
# $logs/NAME.log), then prints the phase's ten slowest tests; returns ctest's status.
ctest_phase() {
  local name="$1" dir="$2" rc=0
  shift 2
  local t0
  t0=$(date +%s)
  (cd "$dir" && ctest "$@") 2>&1 | tee "$logs/$name.log" || rc=$?
  echo "== $name: $(( $(date +%s) - t0 )) s; the ten slowest tests:"
  sed -nE 's/^.* Test +#[0-9]+: ([^ ]+) .* ([0-9]+\.[0-9]+) sec$/\2 \1/p' "$logs/$name.log" | sort -rn |
    awk 'NR <= 10 { printf "   %8.1f s  %s\n", $1, $2 }'
  return "$rc"
}
# build_for_tests BUILD_DIR CTEST_SELECTION...: builds the targets that the selected tests need.
build_for_tests() {
  local dir="$1"
  shift
  # shellcheck disable=SC2046
  cmake --build "$dir" -j "$(nproc)" --target $(scripts/test-targets.sh "$dir" "$@")
}

scripts/install-deps.sh
scripts/check-format.sh

scripts/build.sh
# The unit tests two at a time (each is one process, none waits on a clock); the others, whose processes and
# heartbeats share the two cores, one at a time. slurm tests need root (network namespaces, daemons); they skip
# otherwise.
ctest_phase release-unit build --output-on-failure --timeout 1500 -L unit -j 2
ctest_phase release build --output-on-failure --timeout 1500 -LE unit -j 1

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPSHARD_SANITIZE=ON -DPSHARD_CUDA=OFF
asan_select=(-R '^pshard_c_test$')
build_for_tests build-asan -L unit
build_for_tests build-asan "${asan_select[@]}"
(export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 &&
  ctest_phase asan-unit build-asan --output-on-failure -L unit -j 2 &&
  ctest_phase asan-c-api build-asan --output-on-failure "${asan_select[@]}")

# The in-process multi-threaded tests, and the quick multi-process ones (their pshard children
# are TSan-built too). The training runs (distributed_equivalence, worker_failure,
# checkpoint_resume: 3.5 min more under TSan on 2 cores) and the accuracy runs stay out, and so
# does cluster_processes_test: under TSan's slowdown `pshard launch` may reap the server's exit
# in the same pass as the failing worker's and name the server as the cause.
tsan_integration="kv_bad_input_test|kv_consistency_test|kv_join_test|local_job_test|cli_bad_input_test"
tsan_integration+="|kv_processes_test|curve_job_test|sweep_integration_test|checkpointer_test|kv_compression_test"
tsan_integration+="|pshard_c_test|kv_client_threads_test|host_group_test|table_rows_test"
# Three short training jobs (about 90 s under TSan): the workers' vote on each step to skip, from the trainer's
# thread through the cluster client's, with the worker's KV client running beside it.
tsan_integration+="|loss_scaling_job_test"
# The five longest model tests run single-threaded under TSan (OMP_THREAD_LIMIT=1): nothing there for TSan to find
# (2.5 min of the phase); the release and ASan builds run them.
tsan_unit_skip="models_resnet50_test|models_model_registry_test|models_model_test|models_layer_gradient_test"
tsan_unit_skip+="|models_resnet18_test"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DPSHARD_SANITIZE=thread -DPSHARD_CUDA=OFF
build_for_tests build-tsan -L unit -E "^($tsan_unit_skip)\$"
build_for_tests build-tsan -R "^($tsan_integration)\$"
(export OMP_THREAD_LIMIT=1 OPENBLAS_NUM_THREADS=1 \
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" &&
  ctest_phase tsan-unit build-tsan --output-on-failure -L unit -E "^($tsan_unit_skip)\$" -j 2 &&
  ctest_phase tsan-integration build-tsan --output-on-failure -j 2 -R "^($tsan_integration)\$")

scripts/fuzz.sh 15

echo "test.sh: all tests passed in $(( $(date +%s) - start )) s"
