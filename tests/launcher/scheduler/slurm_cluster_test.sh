#!/usr/bin/env bash
# The real SLURM test: a 2-node SLURM cluster (scripts/slurm-cluster), an sbatch job running `srun pshard slurm`
# (Fashion-MNIST MLP sync, servers and workers on both nodes), then checks of the accuracy and the placement; then a
# job stopped by SIGTERM at a checkpoint, requeued, and resumed to the weights of an uninterrupted run; then a job whose
# server is killed, restarted by the tasks from its checkpoint within the allocation; then a job whose worker is killed
# under restart_workers, started again by its task, which rejoins; then an elastic job that a worker joins from a
# second step of its allocation.
#
# Needs root and network namespaces; exits 77 (ctest: skipped) with a message when either is missing.
# Env: PSHARD_BIN (the pshard executable, set by ctest), PSHARD_SOURCE_DIR (the checkout, set by ctest),
#      PSHARD_SLURM_EPOCHS (default 2), PSHARD_SLURM_MIN_ACC (default 0.84).
# Every wait is bounded (bring-up 240 s, job 240 s, teardown 90 s: below the ctest TIMEOUT of 600 s, so the
# trap always runs); the cluster is always torn down, also on failure, Ctrl-C or SIGTERM.
set -uo pipefail

T0=$SECONDS
say() { echo "[slurm-test $((SECONDS - T0))s] $*"; }
skip() { echo "SKIPPED: $*"; exit 77; }
# A failure says why first, then what SLURM and the job showed (the job in hand: JOB_ID, JOB_OUT), so that a
# log cut in the middle still keeps the reason.
JOB_ID=""
JOB_OUT=""
die() {
  echo "[slurm-test] FAILED: $*" >&2
  if [ -n "$JOB_ID" ]; then
    echo "======== scontrol show job $JOB_ID ========" >&2
    timeout 10 scontrol show job "$JOB_ID" 2>&1 | grep -E "JobState|Restarts|StartTime|RunTime|Reason" >&2
    echo "======== slurmctld on job $JOB_ID ========" >&2
    grep -E "JobId=$JOB_ID\b" "$DIR/log/slurmctld.log" 2>/dev/null | tail -n 15 >&2
  fi
  if [ -n "$JOB_OUT" ]; then
    echo "======== job output ($JOB_OUT) ========" >&2
    cat "$JOB_OUT" >&2 2>/dev/null || echo "(no job output)" >&2
    echo "======== end of job output ========" >&2
  fi
  exit 1
}

SRC=${PSHARD_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BIN=${PSHARD_BIN:-}
EPOCHS=${PSHARD_SLURM_EPOCHS:-2}
MIN_ACC=${PSHARD_SLURM_MIN_ACC:-0.84}
DATA=/usr/share/datasets/fashion-mnist

[ "$(id -u)" -eq 0 ] || skip "the slurm test needs root (it starts slurmctld/slurmd and network namespaces)"
apt_install() {  # packages... (the package lists may be stale on a fresh machine: update once on failure)
  local opts=(-y -q --no-install-recommends -o DPkg::Lock::Timeout=120)
  DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install "${opts[@]}" "$@" >/dev/null 2>&1 && return 0
  timeout 120 apt-get update -q -o DPkg::Lock::Timeout=120 >/dev/null 2>&1
  DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install "${opts[@]}" "$@" >/dev/null
}
command -v ip >/dev/null 2>&1 || { say "installing iproute2"; apt_install iproute2 || die "cannot install iproute2"; }
probe="pshard-probe-$$"
ip netns add "$probe" >/dev/null 2>&1 || skip "network namespaces are unavailable here (ip netns add failed)"
ip netns del "$probe" >/dev/null 2>&1
[ -n "$BIN" ] && [ -x "$BIN" ] || die "PSHARD_BIN='$BIN' is not an executable (run through ctest)"
if [ ! -e "$DATA/train-images-idx3-ubyte.gz" ]; then
  say "installing dataset-fashion-mnist"
  apt_install dataset-fashion-mnist || die "Fashion-MNIST is missing at $DATA (apt-get install dataset-fashion-mnist failed)"
fi

DIR=$(mktemp -d /tmp/pshard-slurm.XXXXXX) || die "mktemp failed"
cleanup() {
  say "tearing down the cluster"
  timeout 90 bash "$SRC/scripts/slurm-cluster/stop.sh" --dir "$DIR" --purge --quiet \
    || echo "[slurm-test] WARNING: teardown reported a problem" >&2
  say "total time $((SECONDS - T0)) s"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "bringing up a 2-node SLURM cluster in $DIR"
timeout 240 bash "$SRC/scripts/slurm-cluster/start.sh" --dir "$DIR" --nodes 2 --cpus 4 || die "cluster bring-up failed"
T_UP=$((SECONDS - T0))
export SLURM_CONF="$DIR/etc/slurm.conf"

# The job: the project's CPU template, 2 nodes x 2 tasks = server + worker on each node. The nodes share this
# machine's filesystem, so the binary, the config, the data and the run directory are visible on both.
RUN="$DIR/run"
OUT="$DIR/job.out"
JOB_OUT=$OUT
say "submitting the job (sbatch --wait, ${EPOCHS} epochs)"
t_job=$SECONDS
PSHARD="$BIN" CONFIG="$SRC/configs/fmnist_mlp_sync.toml" RUN_DIR="$RUN" \
  timeout 240 sbatch --wait --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --time=4 --chdir="$DIR" \
  --output="$OUT" "$SRC/launcher/scheduler/templates/pshard-cpu.sbatch" \
  --set "train.epochs=$EPOCHS" --set train.threads=1 --set train.log_every=0
rc=$?
T_JOB=$((SECONDS - t_job))
[ "$rc" -eq 0 ] || die "sbatch --wait returned $rc (the job failed or timed out)"

# 1. accuracy from the summary line (the last line of metrics.jsonl)
[ -s "$RUN/metrics.jsonl" ] || die "no $RUN/metrics.jsonl"
summary=$(tail -n 1 "$RUN/metrics.jsonl")
echo "summary: $summary"
echo "$summary" | grep -q '"event": *"summary"' || die "the last line of metrics.jsonl is not the summary"
acc=$(echo "$summary" | grep -o '"test_acc": *[0-9.eE+-]*' | sed 's/.*: *//')
[ -n "$acc" ] || die "no test_acc in the summary"
awk -v a="$acc" -v m="$MIN_ACC" 'BEGIN { exit !(a >= m) }' || die "test accuracy $acc < $MIN_ACC"
say "test accuracy $acc >= $MIN_ACC"
echo "$summary" | grep -q '"workers": *2' || die "summary does not show 2 workers"
echo "$summary" | grep -q '"servers": *2' || die "summary does not show 2 servers"

# 2. placement from cluster.json: a server and a worker on each node, servers advertising their node's address
[ -s "$RUN/cluster.json" ] || die "no $RUN/cluster.json"
echo "cluster.json: $(cat "$RUN/cluster.json")"
nodes=$(sed 's/}, {/}\n{/g' "$RUN/cluster.json" | grep -o '"role": "[a-z]*".*"host": "[^"]*".*"endpoint": "[^"]*"' \
  | sed -E 's/"role": "([a-z]*)".*"host": "([^"]*)".*"endpoint": "([^"]*)"/\1 \2 \3/')
echo "$nodes" | sed 's/^/    /'
for want in "server node1 tcp://10.250.78.11:" "server node2 tcp://10.250.78.12:" "worker node1" "worker node2"; do
  echo "$nodes" | grep -q "^$want" || die "cluster.json has no '$want...'"
done

# 3. cross-node traffic: both servers applied updates (each holds part of the model, and BSP needs every
#    worker's push for every slice), so the worker on node1 pushed to node2's server and vice versa.
for s in 0 1; do
  line=$(grep -E "\[server $s\].*stopping \([^)]*\): [0-9]+ requests from [0-9]+ connections, [0-9]+ updates" "$OUT" |
    head -n 1)
  [ -n "$line" ] || die "no shutdown line of server $s in the job output"
  updates=$(echo "$line" | sed -E 's/.* ([0-9]+) updates.*/\1/')
  [ "$updates" -gt 0 ] || die "server $s applied no updates: $line"
  say "server $s: $(echo "$line" | sed -E 's/.*stopping \([^)]*\): //')"
done
grep -q "task 1/4 on node1: worker 0" "$OUT" && grep -q "task 3/4 on node2: worker 1" "$OUT" \
  || die "the job output does not show worker 0 on node1 and worker 1 on node2"

# 4. requeue: a SIGTERM to the job's steps mid-run (as a preemption or --signal=TERM@... sends) stops it at a
#    checkpoint (exit status 75, checkpoint.on_sigterm = checkpoint by the template), the template requeues it, and the
#    requeued job (SLURM_RESTART_COUNT=1) resumes there and ends with the weights of an uninterrupted run (pshard
#    launch of the same config here: the same slices, the same sums), bit for bit.
RUN2="$DIR/run-requeue"
OUT2="$DIR/job-requeue.out"
JOB_OUT=$OUT2
ARGS=(--set train.epochs=4 --set train.threads=1 --set train.log_every=10 --set data.train_size=25600)
t_job=$SECONDS
jid=$(PSHARD="$BIN" CONFIG="$SRC/configs/fmnist_mlp_sync.toml" RUN_DIR="$RUN2" \
  timeout 30 sbatch --parsable --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --time=4 --chdir="$DIR" \
  --output="$OUT2" "$SRC/launcher/scheduler/templates/pshard-cpu.sbatch" "${ARGS[@]}") || die "sbatch of the requeue job failed"
JOB_ID=$jid
say "requeue job $jid submitted; SIGTERM once step 100 of 800 was logged"
for _ in $(seq 1 600); do grep -q '"step":100,' "$RUN2/metrics.jsonl" 2>/dev/null && break; sleep 0.2; done
grep -q '"step":100,' "$RUN2/metrics.jsonl" 2>/dev/null || die "the requeue job never logged step 100"
scancel --signal=TERM "$jid" || die "scancel --signal=TERM $jid failed"
# SLURM holds a requeued job for about 2 minutes (its EligibleTime); release it at once.
for _ in $(seq 1 120); do
  scontrol show job "$jid" 2>/dev/null | grep -q "Restarts=1" && squeue -h -j "$jid" -o %T 2>/dev/null | grep -q PENDING && break
  sleep 0.5
done
scontrol show job "$jid" 2>/dev/null | grep -q "Restarts=1" || die "the job was not requeued"
# The nodes revoke the first run's credentials at the requeue, with a time in whole seconds: a run allocated within
# that second is refused ("Killing non-startable batch JobId=3: Job credential revoked") and the job ends without
# running again. Release it in a later second.
sleep 2
scontrol update JobId="$jid" StartTime=now || die "cannot release the requeued job"
# The job's own state, not squeue's listing: an squeue that fails (a busy slurmctld) prints nothing either.
job_state() { scontrol show job "$jid" 2>/dev/null | grep -o "JobState=[A-Z_]*" | cut -d= -f2; }
# Right after the release, scontrol may still show the first run's end (CANCELLED by the requeue, or FAILED: its
# steps exited 75): an ended state counts only once the second run has written its last line to the output (the
# template's "finished (status N)"), or when the wait runs out.
for _ in $(seq 1 360); do
  case $(job_state) in
    COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY)
      grep -q "pshard job $jid finished (status" "$OUT2" 2>/dev/null && break ;;
  esac
  sleep 0.5
done
case $(job_state) in
  COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) ;;
  *) die "the requeued job did not finish (state $(job_state))" ;;
esac
T_REQUEUE=$((SECONDS - t_job))
grep -q "stopped at a checkpoint; requeueing it" "$OUT2" || die "the job did not stop at a checkpoint and requeue itself"
at=$(grep -o "resuming run $RUN2 at step [0-9]*" "$OUT2" | head -n 1 | sed 's/.* //')
[ -n "$at" ] || die "the requeued job did not resume (state $(job_state))"
[ -s "$RUN2/checkpoints/server-0.step-$(printf %08d "$at").ckpt" ] || die "no checkpoint of step $at"
summary=$(tail -n 1 "$RUN2/metrics.jsonl")
echo "$summary" | grep -q "\"start_step\": *$at" || die "the requeued job's summary does not start at step $at: $summary"
REF="$DIR/run-reference"
timeout 200 "$BIN" launch --servers 2 --workers 2 --config "$SRC/configs/fmnist_mlp_sync.toml" "${ARGS[@]}" \
  --set checkpoint.on_sigterm=checkpoint --run-dir "$REF" >"$DIR/reference.log" 2>&1 \
  || { cat "$DIR/reference.log"; die "the uninterrupted reference run failed"; }
cmp -s "$REF/model.bin" "$RUN2/model.bin" || die "the requeued run's model differs from the uninterrupted run's"
say "requeue: stopped at step $at on SIGTERM, requeued, resumed, same weights as an uninterrupted run (${T_REQUEUE} s)"

# 5. a server SIGKILLed under cluster.server_failure_policy = restart: the tasks start the job again within the
#    allocation, from the newest checkpoint every server has, and it finishes (same weights as the uninterrupted run).
RUN3="$DIR/run-restart"
OUT3="$DIR/job-restart.out"
JOB_ID=""
JOB_OUT=$OUT3
t_job=$SECONDS
( PSHARD="$BIN" CONFIG="$SRC/configs/fmnist_mlp_sync.toml" RUN_DIR="$RUN3" \
  timeout 240 sbatch --wait --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --time=4 --chdir="$DIR" \
  --output="$OUT3" "$SRC/launcher/scheduler/templates/pshard-cpu.sbatch" "${ARGS[@]}" \
  --set cluster.server_failure_policy=restart --set checkpoint.every_steps=50 \
  --set cluster.heartbeat_interval_ms=200 --set cluster.heartbeat_timeout_ms=1500; echo $? >"$DIR/restart.rc" ) &
for _ in $(seq 1 600); do [ -s "$RUN3/checkpoints/server-1.step-00000100.ckpt" ] && [ -s "$RUN3/cluster.json" ] && break; sleep 0.2; done
[ -s "$RUN3/checkpoints/server-1.step-00000100.ckpt" ] || { wait; die "no checkpoint of step 100 in the restart job"; }
victim=$(sed 's/}, {/}\n{/g' "$RUN3/cluster.json" | grep '"role": "server"' | grep '"rank": 1' | grep -o '"pid": [0-9]*' | grep -o '[0-9]*')
[ -n "$victim" ] || die "no pid of server 1 in $RUN3/cluster.json"
kill -9 "$victim" || die "cannot kill server 1 (pid $victim)"
say "restart: killed server 1 (pid $victim) after the checkpoint of step 100"
wait
T_RESTART=$((SECONDS - t_job))
[ "$(cat "$DIR/restart.rc" 2>/dev/null)" = 0 ] || die "the job whose server was killed failed (sbatch --wait: $(cat "$DIR/restart.rc" 2>/dev/null))"
grep -q "a server died: restarting the job (restart 1 of 3) from the checkpoint of step" "$OUT3" \
  || die "the tasks did not restart the job from a checkpoint"
cmp -s "$REF/model.bin" "$RUN3/model.bin" || die "the restarted job's model differs from the uninterrupted run's"
say "restart: the job started again from its checkpoint within the allocation, same weights (${T_RESTART} s)"

# 6. a worker SIGKILLed under cluster.restart_workers (and failure_policy = continue): its task starts it again on
#    its node, the coordinator having heard of the death from the task at once; it rejoins the running job, which ends
#    with both workers.
RUN4="$DIR/run-rejoin"
OUT4="$DIR/job-rejoin.out"
JOB_OUT=$OUT4
t_job=$SECONDS
( PSHARD="$BIN" CONFIG="$SRC/configs/fmnist_mlp_sync.toml" RUN_DIR="$RUN4" \
  timeout 240 sbatch --wait --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --time=4 --chdir="$DIR" \
  --output="$OUT4" "$SRC/launcher/scheduler/templates/pshard-cpu.sbatch" "${ARGS[@]}" \
  --set cluster.failure_policy=continue --set cluster.restart_workers=true; echo $? >"$DIR/rejoin.rc" ) &
for _ in $(seq 1 600); do grep -q '"step":100,' "$RUN4/metrics.jsonl" 2>/dev/null && [ -s "$RUN4/cluster.json" ] && break; sleep 0.2; done
grep -q '"step":100,' "$RUN4/metrics.jsonl" 2>/dev/null || { wait; die "the rejoin job never logged step 100"; }
victim=$(sed 's/}, {/}\n{/g' "$RUN4/cluster.json" | grep '"role": "worker"' | grep '"rank": 1' | grep -o '"pid": [0-9]*' | grep -o '[0-9]*')
[ -n "$victim" ] || die "no pid of worker 1 in $RUN4/cluster.json"
kill -9 "$victim" || die "cannot kill worker 1 (pid $victim)"
say "rejoin: killed worker 1 (pid $victim) after step 100"
wait
T_REJOIN=$((SECONDS - t_job))
[ "$(cat "$DIR/rejoin.rc" 2>/dev/null)" = 0 ] || die "the job whose worker was killed failed (sbatch --wait: $(cat "$DIR/rejoin.rc" 2>/dev/null))"
grep -q "rejoining the job at step" "$OUT4" || die "worker 1 was not started again to rejoin the job"
grep -q "(pshard launch saw it end)" "$OUT4" || die "the coordinator was not told of worker 1's death by its task"
tail -n 1 "$RUN4/metrics.jsonl" | grep -Eq '"workers_finished": *\[(0, *1|1, *0)\]' ||
  die "the rejoin job did not end with both workers: $(tail -n 1 "$RUN4/metrics.jsonl")"
say "rejoin: worker 1 started again by its task, rejoined, the job ended with both workers (${T_REJOIN} s)"

# 7. an elastic job: `pshard task --max-workers 3` on the 2 worker tasks (its fewest workers); `pshard join RUN_DIR`
#    in a second step of the allocation, on node2, adds a worker at the next epoch's start, and the job ends 0 with
#    its last epoch trained by workers 0, 1 and 2. (on_sigterm = exit: an elastic job cannot resume from a checkpoint.)
RUN5="$DIR/run-elastic"
OUT5="$DIR/job-elastic.out"
JOB_OUT=$OUT5
t_job=$SECONDS
jid=$(PSHARD="$BIN" CONFIG="$SRC/configs/fmnist_mlp_sync.toml" RUN_DIR="$RUN5" ON_SIGTERM=exit \
  timeout 30 sbatch --parsable --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --time=4 --chdir="$DIR" \
  --output="$OUT5" "$SRC/launcher/scheduler/templates/pshard-cpu.sbatch" --max-workers 3 \
  --set train.epochs=6 --set train.threads=1 --set train.log_every=10 --set data.train_size=12800 \
  --set lr_schedule.name=constant) ||
  die "sbatch of the elastic job failed"
JOB_ID=$jid
for _ in $(seq 1 600); do
  epochs=$(grep -c '"event":"epoch"' "$RUN5/metrics.jsonl" 2>/dev/null || true)
  [ -f "$RUN5/join.json" ] && [ "${epochs:-0}" -ge 1 ] && break
  grep -q "pshard job $jid finished" "$OUT5" 2>/dev/null && break  # ended before it could be joined
  sleep 0.2
done
[ -f "$RUN5/join.json" ] || die "the elastic job's task 0 wrote no join.json"
timeout 120 srun --jobid="$jid" --overlap --nodes=1 --ntasks=1 --nodelist=node2 "$BIN" join "$RUN5" \
  > "$DIR/join.out" 2>&1 || die "pshard join in the elastic job's allocation failed: $(tail -n 5 "$DIR/join.out")"
for _ in $(seq 1 600); do
  state=$(timeout 10 squeue -h -j "$jid" -o %T 2>/dev/null)
  [ -z "$state" ] && break
  sleep 0.2
done
T_ELASTIC=$((SECONDS - t_job))
grep -q "pshard job $jid finished (status 0)" "$OUT5" || die "the elastic job did not finish with status 0"
grep -q "(elastic, up to 3)" "$OUT5" || die "the tasks did not say the job is elastic"
grep '"event":"members"' "$RUN5/metrics.jsonl" | tail -n 1 | grep -q '"workers":\[0,1,2\]' ||
  die "the elastic job's last epoch was not trained by workers 0, 1 and 2: $(grep '"event":"members"' "$RUN5/metrics.jsonl" | tail -n 1)"
[ ! -e "$RUN5/join.json" ] || die "task 0 left $RUN5/join.json behind"
say "elastic: a worker joined from a second step on node2, the last epoch trained by 3 workers (${T_ELASTIC} s)"
JOB_ID=""

say "PASSED: bring-up (incl. install) ${T_UP} s, job ${T_JOB} s, requeue ${T_REQUEUE} s, server restart ${T_RESTART} s," \
  "worker restart ${T_REJOIN} s, elastic ${T_ELASTIC} s"
exit 0
