#!/usr/bin/env bash
# The PBS template (launcher/scheduler/templates/pshard.pbs) on this machine, as PBS would run it: a
# hand-made $PBS_NODEFILE naming this host 3 times and a fake pbsdsh that runs the command locally. Every
# task reads the node file and its slot (PBS_VNODENUM), the job trains to the end with 1 server and 2
# workers, and the run directory holds the summary.
set -euo pipefail
PSHARD=${PSHARD_BIN:?PSHARD_BIN is not set}
SRC=${PSHARD_SOURCE_DIR:?PSHARD_SOURCE_DIR is not set}

WORK=$(mktemp -d /tmp/pshard-pbs-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
die() { echo "pbs_template_test: $*" >&2; echo "--- output:" >&2; cat "$WORK/out.log" >&2 || true; exit 1; }

host=$(hostname)
printf '%s\n%s\n%s\n' "$host" "$host" "$host" > "$WORK/nodefile"
mkdir -p "$WORK/bin"
# pbsdsh -n INDEX -- CMD...: run CMD here (a real pbsdsh runs it on the INDEX-th vnode).
cat > "$WORK/bin/pbsdsh" <<'FAKE'
#!/usr/bin/env bash
[ "$1" = "-n" ] || { echo "fake pbsdsh: expected -n INDEX" >&2; exit 2; }
shift 2
[ "$1" = "--" ] && shift
exec "$@"
FAKE
chmod +x "$WORK/bin/pbsdsh"

cd "$WORK"
PATH="$WORK/bin:$PATH" PBS_NODEFILE="$WORK/nodefile" PBS_JOBID="4242.pbs-test" PBS_O_WORKDIR="$WORK" \
  PSHARD="$PSHARD" CONFIG="$SRC/configs/linreg_sgd.toml" RUN_DIR="$WORK/run" EXTRA="--set train.epochs=3" \
  timeout 180 bash "$SRC/launcher/scheduler/templates/pshard.pbs" > "$WORK/out.log" 2>&1 || die "the job failed"
summary=$(tail -n 1 "$WORK/run/metrics.jsonl")
echo "$summary" | grep -q '"event": *"summary"' || die "no summary line: $summary"
echo "$summary" | grep -q '"workers": *2' || die "summary does not show 2 workers: $summary"
echo "$summary" | grep -q '"servers": *1' || die "summary does not show 1 server: $summary"
for t in 0 1 2; do grep -q "pbs task $t/3 on $host" "$WORK/out.log" || die "task $t did not start"; done
grep -q "pbs task 0/3 on $host: server 0" "$WORK/out.log" || die "slot 0 is not server 0"
grep -q "pbs task 2/3 on $host: worker 1" "$WORK/out.log" || die "slot 2 is not worker 1"
echo "pbs_template_test: 3 PBS slots (server 0 + coordinator, workers 0 and 1) trained to the end"
