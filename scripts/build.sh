#!/usr/bin/env bash
# Configures and builds pshard into build/ (Release). Extra arguments go to
# cmake, e.g. scripts/build.sh -DPSHARD_CUDA=OFF. PSHARD_BUILD_TARGET=pshard builds
# only that target (the main job's executable) instead of everything, tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${PSHARD_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$BUILD_DIR" -j "$(nproc)" ${PSHARD_BUILD_TARGET:+--target "$PSHARD_BUILD_TARGET"}
