#!/usr/bin/env bash
# The headline benchmarks of docs/PERFORMANCE.md that fit a CPU machine, in about 10 minutes on 2 cores:
# `pshard bench kv` over TCP and shared memory (3 runs each) and with CurveZMQ, pshard's CPU compute against
# PyTorch (ResNet-20 at 1 and 2 threads, LeNet and the MLP at 1 thread, batch 64), the Python front-end and the C++
# workers against PyTorch DDP, the pshard.torch step cost, the PS overhead and MLP scaling with bf16, the timeline's
# cost, the ResNet-50 profile against DDP at 1 and 2 workers, and (as root) one push per host between two
# network-namespace hosts on a 1 Gbit/s link (tools/bench_report.py has the settings).
#
#   scripts/bench-report.sh            # writes docs/results/bench-report-YYYY-MM-DD.json, prints the table
#   scripts/bench-report.sh --update   # also regenerates docs/PERFORMANCE.md's table from it
#   PSHARD_BENCH_REPORT_ARGS="--only kv" scripts/bench-report.sh   # a subset; the other rows are carried over
#
# Needs build/bin/pshard and build/lib/libpshard_c.so (scripts/build.sh, or
# `cmake --build build --target pshard pshard_c`) and /usr/bin/python3 with torch. Rows that cannot be measured
# here (GPU, CUDA build, the long sweeps) are carried over from the previous report with their own date. Run it on an
# idle machine: every row records the 1-minute load average before its benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
update=0
[[ "${1:-}" == "--update" ]] && update=1
out="docs/results/bench-report-$(date -u +%Y-%m-%d).json"
n=2
while [[ -e "$out" ]]; do
  out="docs/results/bench-report-$(date -u +%Y-%m-%d)-$n.json"
  n=$((n + 1))
done
echo "bench-report: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
status=0
# shellcheck disable=SC2086
/usr/bin/python3 tools/bench_report.py --pshard build/bin/pshard --out "$out" ${PSHARD_BENCH_REPORT_ARGS:-} || status=$?
[[ -e "$out" ]] || exit 1
if [[ $update == 1 ]]; then
  /usr/bin/python3 tools/bench_table.py --json "$out" --update docs/PERFORMANCE.md
else
  /usr/bin/python3 tools/bench_table.py --json "$out"
fi
exit $status
