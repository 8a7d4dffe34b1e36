#!/usr/bin/env bash
# The lab (scripts/lab.py): 4 emulated hosts (network namespaces pslt-h1..4 on a bridge, 10.251.77.11-14, links shaped
# with tc) run the CIFAR ResNet-18 profile at --scale 16 on a link of 1 Gbit/s (62.5 Mbit/s shaped), where the link
# is clearly the bottleneck. Checks: (a) the output has the measured and predicted figures for 1 and 4 hosts, the
# scale and what is not modelled; (b) on 4 hosts the measured step is within 25 % of the predicted one (the link time
# at the all-to-all TCP goodput the lab measures first), and not faster than the shaped rate allows; (c) SIGINT in
# the middle of a run leaves no namespace, veth link or process of the lab (and the lab exits 130); the lab refuses
# to run without root (status 2, saying so), and --latency on a kernel without netem is refused naming it. Exits 77
# (skipped) when not root or when ip, tc or /usr/bin/python3 is missing.
set -euo pipefail
PSHARD=${PSHARD_BIN:?PSHARD_BIN is not set}
SRC=${PSHARD_SOURCE_DIR:?PSHARD_SOURCE_DIR is not set}
LAB="$SRC/scripts/lab.py"
PREFIX=pslt
SUBNET=10.251.77
TOLERANCE=0.25
[ "$(id -u)" -eq 0 ] || { echo "not root: skipped"; exit 77; }
for tool in ip tc /usr/bin/python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found: skipped"; exit 77; }
done
if ip netns list | grep -q "^$PREFIX-"; then echo "a namespace $PREFIX-* exists (another run of this test?): skipped"; exit 77; fi
WORK=$(mktemp -d /tmp/pshard-lab-test.XXXXXX)
LAB_PID=
cleanup() {
  set +e
  [ -n "$LAB_PID" ] && kill -KILL "$LAB_PID" 2>/dev/null
  for ns in $(ip netns list | awk '{print $1}' | grep "^$PREFIX-"); do
    for pid in $(ip netns pids "$ns"); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$ns"
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
die() { echo "lab_test: $*" >&2; echo "--- output:" >&2; tail -n 40 "$WORK/out.log" >&2 || true; exit 1; }
SECONDS=0

# Nothing of the lab is left: no namespace, no veth link, no process in a namespace it made (their inodes are in
# $WORK/netns.inodes) or naming its ssh mode.
expect_nothing_left() {
  local what=$1 left= pid ino
  if ip netns list | grep -q "^$PREFIX-"; then left+=" namespaces: $(ip netns list | grep "^$PREFIX-" | tr '\n' ' ')"; fi
  if ip -o link show | grep -q "$PREFIX"; then left+=" links: $(ip -o link show | grep "$PREFIX")"; fi
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    ino=$(stat -L -c %i "$p/ns/net" 2>/dev/null) || continue
    if [ -s "$WORK/netns.inodes" ] && grep -qx "$ino" "$WORK/netns.inodes"; then
      left+=" pid $pid ($(tr '\0' ' ' < "$p/cmdline" 2>/dev/null | cut -c1-80)) in a lab namespace"
    fi
    if tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q "netns-ssh $PREFIX "; then
      left+=" pid $pid ($(tr '\0' ' ' < "$p/cmdline" | cut -c1-80)) of the lab's ssh mode"
    fi
  done
  [ -z "$left" ] || die "$what left:$left"
}

# ------------------------------------------------------------------ refusals
if command -v setpriv >/dev/null 2>&1; then
  status=0
  setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 "$LAB" --pshard "$PSHARD" > "$WORK/out.log" \
    2>&1 || status=$?
  [ "$status" -eq 2 ] || die "without root the lab exited $status, not 2"
  grep -q "needs root" "$WORK/out.log" || die "without root the lab does not say that it needs root"
  echo "lab_test: without root: status 2, 'needs root'"
fi
status=0
timeout 120 /usr/bin/python3 "$LAB" --pshard "$PSHARD" --prefix "$PREFIX" --subnet "$SUBNET" --hosts 2 --steps 4 \
  --latency 1 --scale 16 > "$WORK/out.log" 2>&1 || status=$?
if [ "$status" -eq 2 ]; then
  grep -q "no sch_netem, so --latency and --loss cannot be emulated" "$WORK/out.log" \
    || die "--latency refused without naming netem"
  echo "lab_test: --latency on this kernel (no netem): refused, named"
else
  [ "$status" -eq 0 ] || die "a lab with --latency 1 failed (status $status)"
  grep -q "latency 2.0 " "$WORK/out.log" || die "a lab with --latency 1 ms does not add 2 ms a step"
  echo "lab_test: --latency 1: ran with netem"
fi
expect_nothing_left "the --latency lab"

# ------------------------------------------------------------------ (a), (b): 4 hosts on a slow link
timeout 150 /usr/bin/python3 "$LAB" --pshard "$PSHARD" --prefix "$PREFIX" --subnet "$SUBNET" --hosts 4 --steps 8 \
  --profile "$SRC/profiles/resnet18_cifar.json" --rate 1gbit --scale 16 --json "$WORK/lab.json" > "$WORK/out.log" 2>&1 \
  || die "the lab on 4 hosts failed (status $?)"
for pattern in "scale 16: model bytes and link rate divided by 16" "not modelled: the hosts share this machine" \
  "^1 host x 1 worker" "^4 hosts x 1 worker" "samples/s  *measured .* predicted " "step  *measured .* predicted " \
  "model  *max(compute .*, link .*) + latency .* + server " "phases/step  *compute .* communication wait " \
  "link/step  *per host, each way: predicted " "metrics.jsonl, the workers of each host"; do
  grep -q "$pattern" "$WORK/out.log" || die "no line matching '$pattern' in the lab's output"
done
/usr/bin/python3 - "$WORK/lab.json" "$TOLERANCE" > "$WORK/check.log" 2>&1 <<'PY' || { cat "$WORK/check.log"; die "figures"; }
import json, sys
lab = json.load(open(sys.argv[1]))
tol = float(sys.argv[2])
runs = {r["hosts"]: r for r in lab["runs"]}
failed = []
def check(ok, what):
    print(("ok:     " if ok else "FAILED: ") + what)
    if not ok: failed.append(what)
check(sorted(runs) == [1, 4], "runs on 1 and 4 hosts: %s" % sorted(runs))
r = runs[4]
p = r["predicted"]
check(p["link_s"] > 3 * p["compute_s"], "4 hosts: the link (%.0f ms) is clearly the bottleneck (compute %.0f ms)"
      % (p["link_s"] * 1e3, p["compute_s"] * 1e3))
ratio = r["step_s"] / p["step_s"]
check(abs(ratio - 1) <= tol, "4 hosts: measured step %.1f ms within %.0f %% of the predicted %.1f ms (%.2f)"
      % (r["step_s"] * 1e3, tol * 100, p["step_s"] * 1e3, ratio))
check(0.3 <= p["goodput_fraction"] <= 1, "4 hosts: the all-to-all TCP goodput is %.0f %% of the shaped rate "
      "(30-100 %%)" % (p["goodput_fraction"] * 100))
check(r["step_s"] >= p["at_rate_step_s"] * 0.9, "4 hosts: the measured step %.1f ms is not below the step at the "
      "shaped rate, %.1f ms (less 10 %%)" % (r["step_s"] * 1e3, p["at_rate_step_s"] * 1e3))
wire = max(w["tx"] for w in r["wire_per_step"])
check(wire >= max(p["host_bytes_each_way"]), "4 hosts: a host sent %.0f bytes a step on its link, at least the "
      "predicted payload %.0f" % (wire, max(p["host_bytes_each_way"])))
check(r["efficiency"] < 0.5, "4 hosts: efficiency %.3f against 1 host is low on this link" % r["efficiency"])
check(runs[1]["predicted"]["link_s"] == 0, "1 host: no link time predicted")
sys.exit(1 if failed else 0)
PY
sed 's/^/lab_test: /' "$WORK/check.log"
grep -A3 "^hosts " "$WORK/out.log" | sed 's/^/lab_test: /'
expect_nothing_left "a finished lab"
echo "lab_test: (a), (b) done at ${SECONDS} s"

# ------------------------------------------------------------------ (c): SIGINT in the middle of a run
/usr/bin/python3 "$LAB" --pshard "$PSHARD" --prefix "$PREFIX" --subnet "$SUBNET" --hosts 4 --steps 60 \
  --profile "$SRC/profiles/resnet18_cifar.json" --rate 1gbit --scale 16 > "$WORK/out.log" 2>&1 &
LAB_PID=$!
: > "$WORK/netns.inodes"
started=0
for _ in $(seq 1 600); do
  if grep -q "run on 4 hosts started" "$WORK/out.log" && ip netns pids "$PREFIX-h4" 2>/dev/null | grep -q .; then
    started=1
    break
  fi
  kill -0 "$LAB_PID" 2>/dev/null || die "the lab ended before its run on 4 hosts"
  sleep 0.1
done
[ "$started" = 1 ] || die "the run on 4 hosts did not start within 60 s"
sleep 2  # the job is training
for ns in $(ip netns list | awk '{print $1}' | grep "^$PREFIX-"); do stat -L -c %i "/run/netns/$ns" >> "$WORK/netns.inodes"; done
[ "$(wc -l < "$WORK/netns.inodes")" -eq 5 ] || die "not 5 namespaces (4 hosts and the bridge's) while running"
kill -INT "$LAB_PID"
status=0
for _ in $(seq 1 300); do kill -0 "$LAB_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$LAB_PID" 2>/dev/null && die "the lab did not end within 30 s of SIGINT"
wait "$LAB_PID" || status=$?
LAB_PID=
[ "$status" -eq 130 ] || die "after SIGINT the lab exited $status, not 130"
grep -q "stopped by SIGINT" "$WORK/out.log" || die "the lab does not say that SIGINT stopped it"
expect_nothing_left "SIGINT in the middle of a run"
echo "lab_test: (c) SIGINT during the run on 4 hosts: status 130, no namespace, link or process left (${SECONDS} s)"
