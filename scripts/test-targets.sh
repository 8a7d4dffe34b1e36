#!/usr/bin/env bash
# The CMake targets that the tests a ctest selection picks need, one per line: each selected test whose name is a
# target (pshard_test executables are named after their test), plus the `pshard` executable and `libpshard_c` that
# tests start or load. Helper executables a test starts (pshard_test_child, pshard_cluster_node) come with it through
# add_dependencies. Needs a configured build directory; the targets need not be built yet.
#
#   scripts/test-targets.sh BUILD_DIR [CTEST_SELECTION...]     e.g. scripts/test-targets.sh build-asan -L unit
#   cmake --build build-asan --target $(scripts/test-targets.sh build-asan -L unit)
set -euo pipefail
build="${1:?usage: scripts/test-targets.sh BUILD_DIR [CTEST_SELECTION...]}"
shift
targets="$(cmake --build "$build" --target help | sed -nE 's/^\.\.\. ([A-Za-z0-9_.+-]+).*$/\1/p; s/^([A-Za-z0-9_.+-]+): phony$/\1/p' | sort -u)"
tests="$(cd "$build" && ctest -N "$@" 2>/dev/null | sed -nE 's/^ *Test +#[0-9]+: ([^ ]+)$/\1/p' | sort -u)"
{ echo pshard; echo pshard_c; comm -12 <(echo "$targets") <(echo "$tests"); } | awk 'NF && !seen[$0]++'
