#!/usr/bin/env bash
# The test suite, exactly as CI runs it (.ci/run calls this script):
#   1. installs the Debian dependencies,
#   2. checks formatting,
#   3. builds Release into build/ and runs every test that can run on a
#      2-core machine without a GPU (gpu tests skip themselves without one),
#   4. builds the unit tests with -fsanitize=address,undefined into
#      build-asan/ and runs them,
#   5. builds the libFuzzer targets with clang into build-fuzz/ and fuzzes
#      each for 15 s (docs/FUZZING.md).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

scripts/install-deps.sh
scripts/check-format.sh

scripts/build.sh
# slurm tests need root (network namespaces, daemons); they skip otherwise.
(cd build && ctest --output-on-failure --timeout 1500 -j 1)

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPSHARD_SANITIZE=ON -DPSHARD_CUDA=OFF
cmake --build build-asan -j "$(nproc)"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -L unit -j 2)

scripts/fuzz.sh 15

echo "test.sh: all tests passed in $(( $(date +%s) - start )) s"
