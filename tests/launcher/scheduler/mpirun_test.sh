#!/usr/bin/env bash
# `mpirun -np 4 pshard task` runs a whole job like srun does: Open MPI's variables give each task its role
# (task 0: a server and the coordinator, the rest of the node's tasks workers), task 0 tells the others the
# token and the coordinator through the run directory, and the job trains to the end. Needs Debian's
# openmpi-bin (scripts/install-deps.sh); exits 77 (skipped) without mpirun.
set -euo pipefail
PSHARD=${PSHARD_BIN:?PSHARD_BIN is not set}
SRC=${PSHARD_SOURCE_DIR:?PSHARD_SOURCE_DIR is not set}
command -v mpirun >/dev/null 2>&1 || { echo "mpirun not found: skipped"; exit 77; }

WORK=$(mktemp -d /tmp/pshard-mpirun-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
die() { echo "mpirun_test: $*" >&2; echo "--- output:" >&2; cat "$WORK/out.log" >&2 || true; exit 1; }

mpi=(mpirun --oversubscribe -np 4)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)

# 1. The placement each task would take, without starting anything.
"${mpi[@]}" "$PSHARD" task --config "$SRC/configs/linreg_sgd.toml" --run-dir "$WORK/dry" --dry-run \
  > "$WORK/out.log" 2>&1 || die "dry run failed"
[ "$(grep -c '"scheduler": *"openmpi"' "$WORK/out.log")" -eq 4 ] || die "not 4 openmpi tasks"
[ "$(grep -c '"role": *"server"' "$WORK/out.log")" -eq 1 ] || die "not exactly 1 server"
[ "$(grep -c '"role": *"worker"' "$WORK/out.log")" -eq 3 ] || die "not exactly 3 workers"
[ "$(grep -c '"runs_coordinator": *true' "$WORK/out.log")" -eq 1 ] || die "not exactly 1 coordinator"
grep '"proc_id": *0,' "$WORK/out.log" | grep -q '"role": *"server"' || die "task 0 is not the server"

# 2. A real job, bounded in time.
timeout 180 "${mpi[@]}" "$PSHARD" task --config "$SRC/configs/linreg_sgd.toml" --set train.epochs=3 \
  --run-dir "$WORK/run" > "$WORK/out.log" 2>&1 || die "the job failed (status $?)"
summary=$(tail -n 1 "$WORK/run/metrics.jsonl")
echo "$summary" | grep -q '"event": *"summary"' || die "no summary line: $summary"
echo "$summary" | grep -q '"workers": *3' || die "summary does not show 3 workers: $summary"
echo "$summary" | grep -q '"servers": *1' || die "summary does not show 1 server: $summary"
loss=$(echo "$summary" | grep -o '"test_loss": *[0-9.eE+-]*' | sed 's/.*: *//')
awk -v l="$loss" 'BEGIN { exit !(l < 0.01) }' || die "test loss $loss is not below 0.01"
[ -s "$WORK/run/model.bin" ] || die "no model.bin"
ls -a "$WORK/run" | grep -q '^\.pshard-rendezvous' && die "task 0 left its rendezvous file behind"
grep -q "openmpi task 0/4" "$WORK/out.log" || die "task 0 did not say where it runs"
echo "mpirun_test: 4 tasks (1 server + coordinator, 3 workers) trained to test loss $loss"

# 3. `pshard task -- CMD`: the worker tasks run a PyTorch script through pshard.torch (docs/PYTHON.md); skipped
# without Debian's python3-torch.
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  cat > "$WORK/train.py" <<'PY'
import torch, torch.nn.functional as F
import pshard.torch as ps
ps.init()
torch.manual_seed(ps.rank())
net = torch.nn.Linear(4, 3)
opt = ps.DistributedOptimizer(net, steps_per_epoch=20)
x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
for _ in range(20):
    loss = F.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
ps.report(epoch=0, train_loss=float(loss))
import os, sys
open(os.path.join(sys.argv[1], "done-%d-of-%d-local-%d" % (ps.rank(), ps.size(), ps.local_rank())), "w").close()
ps.shutdown()
PY
  mpi3=(mpirun --oversubscribe -np 3)
  [ "$(id -u)" -eq 0 ] && mpi3+=(--allow-run-as-root)
  printf '[train]\nbatch_size = 8\nepochs = 1\n[optimizer]\nname = "sgd"\nlr = 0.1\n' > "$WORK/job.toml"
  PYTHONPATH="$SRC/python" PSHARD_LIBRARY="$(dirname "$(dirname "$PSHARD")")/lib/libpshard_c.so" \
    timeout 180 "${mpi3[@]}" "$PSHARD" task --config "$WORK/job.toml" --run-dir "$WORK/python" \
    -- /usr/bin/python3 "$WORK/train.py" "$WORK" > "$WORK/out.log" 2>&1 || die "the Python job failed (status $?)"
  # Ranks come from the coordinator (registration order), local ranks from the task's index among the node's workers.
  for r in 0 1; do ls "$WORK"/done-$r-of-2-local-* > /dev/null 2>&1 || die "Python worker $r did not finish"; done
  for l in 0 1; do ls "$WORK"/done-*-of-2-local-$l > /dev/null 2>&1 || die "no Python worker with local rank $l"; done
  summary=$(tail -n 1 "$WORK/python/metrics.jsonl")
  echo "$summary" | grep -Eq '"workers_finished": *\[[01], *[01]\]' || die "not both Python workers finished: $summary"
  echo "mpirun_test: pshard task -- python3 train.py: 2 Python workers through 1 server"
fi
