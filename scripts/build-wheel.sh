#!/usr/bin/env bash
# Builds the pshard executable and libpshard_c.so into build/ (Release) and packs them with the Python package and
# the shared libraries they need beyond glibc, libstdc++ and CUDA into
# dist/pshard-VERSION-py3-none-manylinux_2_X_ARCH.whl, X the glibc the packed files need (scripts/build_wheel.py;
# docs/INSTALL.md):
#   scripts/build-wheel.sh && python3 -m venv ~/venv && ~/venv/bin/pip install --no-index dist/pshard-*.whl
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${PSHARD_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$BUILD_DIR" -j "$(nproc)" --target pshard pshard_c
exec /usr/bin/python3 scripts/build_wheel.py --build "$BUILD_DIR" --out dist
