#!/usr/bin/env bash
# README's main job: installs the dependencies, builds pshard, and trains the
# Fashion-MNIST MLP with 2 parameter servers and 2 workers (synchronous) on
# this machine. Prints the final test accuracy and where the metrics are: a new run directory each time
# (runs/main, then runs/main.1, ...; a used one is never overwritten).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
PSHARD_BUILD_TARGET=pshard scripts/build.sh  # only what it runs; scripts/test.sh builds the rest
exec build/bin/pshard launch --servers 2 --workers 2 --config configs/fmnist_mlp_sync.toml --set run.name=main "$@"
