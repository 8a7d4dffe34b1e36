#!/usr/bin/env bash
# One push per host on a limited link, report only: two "hosts" (network namespaces with an sshd each, from
# tests/launcher/remote/netns_hosts.sh) joined by a bridge whose links are shaped with tc (tbf at --rate on each
# host's eth0 and on the bridge's port towards it: the rate each way), run the ResNet-50 profile model
# (configs/profile_resnet50_sync.toml: 102 MB of parameters, per-layer simulated compute) with `pshard launch --hosts`
# on 2 hosts x 1 worker and 2 hosts x 2 workers, one server per host, cluster.host_aggregation auto and off.
# Prints per job: samples/s (the summary's), efficiency per worker against the 2 x 1 auto job, the busiest host's
# network and shared-memory bytes per step in models, and the load average after it.
#
#   sudo tests/bench/host_aggregation_netns.sh --pshard build/bin/pshard [--rate 1gbit] [--steps 8]
#        [--timeout 300] [--json FILE]
#
# --steps: steps per worker (data.train_size = workers x 64 x steps). --json FILE: the results as JSON as well.
# Exits 77 (skipped) when not root or when sshd, ssh, ip, tc, nsenter or /usr/bin/python3 is missing.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PSHARD=${PSHARD_BIN:-}
RATE=1gbit
STEPS=8
TIMEOUT=300
JSON_OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --pshard) PSHARD=${2:?--pshard needs a path}; shift 2 ;;
    --rate) RATE=${2:?--rate needs a tc rate such as 1gbit}; shift 2 ;;
    --steps) STEPS=${2:?--steps needs a number}; shift 2 ;;
    --timeout) TIMEOUT=${2:?--timeout needs seconds}; shift 2 ;;
    --json) JSON_OUT=${2:?--json needs a file}; shift 2 ;;
    *) echo "host_aggregation_netns: unknown argument '$1' (--pshard, --rate, --steps, --timeout, --json)" >&2; exit 2 ;;
  esac
done
[ -n "$PSHARD" ] || { echo "host_aggregation_netns: --pshard PATH (or PSHARD_BIN) is needed" >&2; exit 2; }
PSHARD=$(realpath "$PSHARD")
[ -x "$PSHARD" ] || { echo "host_aggregation_netns: $PSHARD is not an executable" >&2; exit 2; }
[[ $STEPS =~ ^[1-9][0-9]*$ ]] || { echo "host_aggregation_netns: --steps '$STEPS' is not a positive number" >&2; exit 2; }
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || { echo "host_aggregation_netns: --timeout '$TIMEOUT' is not seconds" >&2; exit 2; }
[ -x /usr/bin/python3 ] || { echo "/usr/bin/python3 not found: skipped"; exit 77; }

PREFIX=psb
SUBNET=10.250.81
HOSTS=2
# shellcheck source=tests/launcher/remote/netns_hosts.sh
. "$SRC/tests/launcher/remote/netns_hosts.sh"
netns_hosts_require tc
WORK=$(mktemp -d /tmp/pshard-host-aggregation-netns.XXXXXX)
LAUNCH_PID=
cleanup() {
  set +e
  [ -n "$LAUNCH_PID" ] && kill -KILL "$LAUNCH_PID" 2>/dev/null
  netns_hosts_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

netns_hosts_start
for i in $(seq 1 $HOSTS); do
  # Each host's eth0 limits what it sends, the bridge's port towards it what it receives.
  tc -n "$(host_ns "$i")" qdisc add dev eth0 root tbf rate "$RATE" burst 256kb latency 50ms \
    || { echo "host_aggregation_netns: tc cannot shape eth0 at rate '$RATE' (tbf)" >&2; exit 1; }
  tc -n "$PREFIX-net" qdisc add dev "${PREFIX}n$i" root tbf rate "$RATE" burst 256kb latency 50ms
done
H1=$(host_ip 1) H2=$(host_ip 2)
echo "host_aggregation_netns: 2 hosts ($H1, $H2), link $RATE each way (tc tbf), ResNet-50 profile, $STEPS steps a worker"
echo "load before: $(uptime)"

: > "$WORK/results.jsonl"
for job in 1:auto 1:off 2:auto 2:off; do
  per_host=${job%%:*} agg=${job#*:}
  workers=$((HOSTS * per_host))
  name="${HOSTS}x${per_host}-$agg"
  timeout "$TIMEOUT" "$PSHARD" launch --hosts "$H1:$per_host,$H2:$per_host" \
    --config "$SRC/configs/profile_resnet50_sync.toml" --set "model.profile=$SRC/profiles/resnet50.json" \
    --set "data.train_size=$((workers * 64 * STEPS))" --set train.batch_size=64 \
    --set "cluster.host_aggregation=$agg" --run-dir "$WORK/$name" > "$WORK/$name.log" 2>&1 &
  LAUNCH_PID=$!
  status=0
  wait "$LAUNCH_PID" || status=$?
  LAUNCH_PID=
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$WORK/$name.log" >&2
    echo "host_aggregation_netns: the $name job failed (status $status; 124: over --timeout $TIMEOUT s)" >&2
    exit 1
  fi
  grep -q "^\[launch\] host $H2 ($H2): server 1, worker" "$WORK/$name.log" \
    || { echo "host_aggregation_netns: $name: server 1 is not on $H2" >&2; exit 1; }
  /usr/bin/python3 - "$WORK/$name/metrics.jsonl" "$name" "$workers" "$agg" "$(cut -d' ' -f1 /proc/loadavg)" \
    >> "$WORK/results.jsonl" <<'PY'
import json, sys
path, name, workers, agg, load = sys.argv[1:]
events = [json.loads(line) for line in open(path) if line.strip()]
summary = [e for e in events if e.get("event") == "summary"][-1]
epoch = [e for e in events if e.get("event") == "epoch"][-1]
model = summary["model_bytes"]
print(json.dumps({"job": name, "hosts": summary["num_hosts"], "workers": int(workers), "host_aggregation": agg,
                  "samples_per_s": summary["samples_per_s"], "steps": summary["steps"], "model_bytes": model,
                  "network_models_per_host_step": summary["network_bytes_per_host_step"] / model,
                  "shm_models_per_host_step": summary["shm_bytes_per_host_step"] / model, "load_1min": float(load),
                  "epoch_hosts": epoch.get("hosts"), "epoch_steps": epoch.get("steps")}))
PY
done

/usr/bin/python3 - "$WORK/results.jsonl" "$RATE" "${JSON_OUT:-}" "$(uptime)" <<'PY'
import json, sys
path, rate, json_out, uptime = sys.argv[1:]
rows = [json.loads(l) for l in open(path)]
anchor = next(r for r in rows if r["workers"] == 2 and r["host_aggregation"] == "auto")
per_worker = anchor["samples_per_s"] / anchor["workers"]
print("%-10s %5s %8s %10s %10s %15s %11s %8s" % ("job", "hosts", "workers", "samples/s", "efficiency",
                                                  "net/host/step", "shm/host/step", "load"))
for r in rows:
    r["efficiency"] = r["samples_per_s"] / r["workers"] / per_worker
    print("%-10s %5d %8d %10.1f %10.3f %13.3f m %11.3f m %8.2f" % (
        r["job"], r["hosts"], r["workers"], r["samples_per_s"], r["efficiency"], r["network_models_per_host_step"],
        r["shm_models_per_host_step"], r["load_1min"]))
print("m = model_bytes (%d); efficiency: samples/s per worker over the 2x1-auto job's; load: 1-minute average after "
      "the job" % anchor["model_bytes"])
print("load after: " + uptime)
if json_out:
    with open(json_out, "w") as f:
        json.dump({"rate": rate, "anchor": anchor["job"], "jobs": rows, "uptime_after": uptime}, f, indent=1)
PY
