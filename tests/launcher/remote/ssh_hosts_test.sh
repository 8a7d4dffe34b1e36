#!/usr/bin/env bash
# `pshard launch --hosts` over real ssh: three "hosts" are network namespaces (pss-h1..3 on a bridge, 10.250.79.11-13)
# each running its own sshd (own host key and config under a temp dir, root logs in with a generated key). Checks:
# a 2-host job with CurveZMQ trains to the end with every line prefixed by its host; killing a remote worker ends the
# job with that worker's name, killing a host agent with the agent's death named; under failure_policy = continue the
# others train to the end without the killed worker (its host tells the coordinator at once), and under
# restart_workers its host starts it again and it rejoins; a server killed under server_failure_policy = restart
# restarts the job on every host from its checkpoint, and a SIGTERM to the launcher under on_sigterm = checkpoint
# stops it at a checkpoint that --resume continues: both end with an uninterrupted run's model, bit for bit; an
# elastic job (--workers 2:3) on two hosts takes a worker that `pshard join` starts on the third; SIGINT (Ctrl-C) and SIGTERM to the launcher, and SIGKILL of it, leave no process in
# any namespace; the job token is in the processes' environment and on no command line; an unreachable host and a
# missing --remote-pshard are named; `-- CMD` workers get their PSHARD_* variables; a sync job on 2 hosts x 2 workers
# pushes once per host (cluster.host_aggregation = auto): half the network bytes of `off`, the same bits on a rerun,
# `pshard train`'s weights at the global batch. The namespaces and sshds come from netns_hosts.sh. Exits 77 (skipped)
# when not root or when sshd, ssh, ssh-keygen, ip or nsenter is missing (openssh-server: scripts/install-deps.sh).
#
# With `--measure ROUNDS` it checks nothing and instead times, ROUNDS times alternately, a 3-server 3-worker job of
# linreg_sgd.toml (1 epoch) started by `pshard launch` on this host and by `pshard launch --hosts` on the three
# namespaces: seconds from the launcher's start to the coordinator's "rendezvous complete" and to the launcher's
# exit, and the medians' differences (docs/PERFORMANCE.md, "Start-up and memory").
set -euo pipefail
MEASURE=0
if [ "${1:-}" = --measure ]; then MEASURE=${2:?--measure needs a number of rounds}; fi
PSHARD=${PSHARD_BIN:?PSHARD_BIN is not set}
SRC=${PSHARD_SOURCE_DIR:?PSHARD_SOURCE_DIR is not set}
PREFIX=pss
SUBNET=10.250.79
HOSTS=3
# shellcheck source=tests/launcher/remote/netns_hosts.sh
. "$(dirname "$0")/netns_hosts.sh"
netns_hosts_require
WORK=$(mktemp -d /tmp/pshard-ssh-hosts-test.XXXXXX)
LAUNCH_PID=
cleanup() {
  set +e
  [ -n "$LAUNCH_PID" ] && kill -KILL "$LAUNCH_PID" 2>/dev/null
  netns_hosts_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
die() { echo "ssh_hosts_test: $*" >&2; echo "--- output:" >&2; tail -n 60 "$WORK/out.log" >&2 || true; exit 1; }

# ------------------------------------------------------------------ network and sshds
netns_hosts_start
: > "$WORK/out.log"

# Processes other than the sshd listener in a host's namespace (pids, one a line).
job_pids() {
  local i=$1 listener=${SSHD_PIDS[$(($1 - 1))]}
  ns_pids "$(host_ns "$i")" | grep -vx "$listener" || true
}
# Waits (at most 15 s) until no host namespace holds a process of the job.
expect_no_remote_process() {
  local what=$1 left=
  for _ in $(seq 1 150); do
    left=
    for i in $(seq 1 $HOSTS); do
      for pid in $(job_pids "$i"); do left+=" $(host_ns "$i"):$pid($(cmdline "$pid" | cut -c1-60))"; done
    done
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  die "$what left processes behind:$left"
}
# The pid of a process in host i's namespace whose command line starts with PREFIX (waits at most 20 s: the
# launcher's ssh sessions start concurrently, so one host's processes can be up before another's).
pid_in() {
  local i=$1 prefix=$2
  for _ in $(seq 1 200); do
    for pid in $(job_pids "$i"); do
      case $(cmdline "$pid") in "$prefix"*) echo "$pid"; return 0 ;; esac
    done
    sleep 0.1
  done
  return 1
}
worker_pid_in() { pid_in "$1" "$PSHARD worker "; }

H1=$(host_ip 1) H2=$(host_ip 2) H3=$(host_ip 3)
CONFIG="$SRC/configs/linreg_sgd.toml"

# Runs a launch (its arguments), printing "SECONDS_TO_RENDEZVOUS SECONDS_TO_EXIT".
time_launch() {
  local t0 rdv=0 line
  t0=$(date +%s%N)
  while IFS= read -r line; do
    case $line in *"rendezvous complete"*) rdv=$(date +%s%N) ;; esac
  done < <(timeout 120 "$PSHARD" launch "$@" --config "$CONFIG" --set train.epochs=1 2>&1)
  awk -v a="$t0" -v r="$rdv" -v e="$(date +%s%N)" 'BEGIN { printf "%.3f %.3f\n", (r - a) / 1e9, (e - a) / 1e9 }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
if [ "$MEASURE" -gt 0 ]; then
  echo "load: $(uptime)"
  : > "$WORK/local.txt"
  : > "$WORK/hosts.txt"
  for r in $(seq 1 "$MEASURE"); do
    time_launch --servers 3 --workers 3 --run-dir "$WORK/m-local-$r" | tee -a "$WORK/local.txt" | sed 's/^/local:   /'
    time_launch --hosts "$H1:1,$H2:1,$H3:1" --run-dir "$WORK/m-hosts-$r" | tee -a "$WORK/hosts.txt" | sed 's/^/--hosts: /'
  done
  lr=$(cut -d' ' -f1 "$WORK/local.txt" | median) le=$(cut -d' ' -f2 "$WORK/local.txt" | median)
  hr=$(cut -d' ' -f1 "$WORK/hosts.txt" | median) he=$(cut -d' ' -f2 "$WORK/hosts.txt" | median)
  awk -v lr="$lr" -v le="$le" -v hr="$hr" -v he="$he" 'BEGIN {
    printf "median to rendezvous: local %.3f s, --hosts %.3f s, difference %.3f s\n", lr, hr, hr - lr
    printf "median to exit:       local %.3f s, --hosts %.3f s, difference %.3f s\n", le, he, he - le }'
  exit 0
fi

# ------------------------------------------------------------------ 1. a 2-host job trains (CurveZMQ on)
timeout 120 "$PSHARD" launch --hosts "$H1:1,$H2:2" --config "$CONFIG" --set train.epochs=3 --set security.curve=true \
  --run-dir "$WORK/run2" > "$WORK/out.log" 2>&1 || die "the 2-host job failed (status $?)"
summary=$(tail -n 1 "$WORK/run2/metrics.jsonl")
echo "$summary" | grep -q '"event": *"summary"' || die "no summary line: $summary"
echo "$summary" | grep -q '"workers": *3' || die "summary does not show 3 workers: $summary"
echo "$summary" | grep -q '"servers": *2' || die "summary does not show 2 servers: $summary"
loss=$(echo "$summary" | grep -o '"test_loss": *[0-9.eE+-]*' | sed 's/.*: *//')
awk -v l="$loss" 'BEGIN { exit !(l < 0.01) }' || die "test loss $loss is not below 0.01"
grep -q "^\[launch\] host $H1 ($H1): coordinator, server 0, worker 0$" "$WORK/out.log" || die "placement of $H1 not shown"
grep -q "^\[launch\] host $H2 ($H2): server 1, workers 1-2$" "$WORK/out.log" || die "placement of $H2 not shown"
grep -q "^\[host $H2\] \[server 1\] " "$WORK/out.log" || die "no line of server 1 prefixed with its host"
grep -q "^\[host $H1\] \[coordinator\] " "$WORK/out.log" || die "no line of the coordinator prefixed with its host"
grep -q "security: CurveZMQ" "$WORK/out.log" || die "the job did not run with CurveZMQ"
expect_no_remote_process "a finished job"
echo "ssh_hosts_test: 2-host job (3 workers, 2 servers, CurveZMQ) trained to test loss $loss"

# A job long enough to be interrupted: 3 hosts, one worker each, ~forever.
start_long_job() {
  "$PSHARD" launch --hosts "$H1:1,$H2:1,$H3:1" --config "$CONFIG" --set train.epochs=100000 --grace-ms 2000 \
    --run-dir "$WORK/$1" > "$WORK/out.log" 2>&1 &
  LAUNCH_PID=$!
  worker_pid_in 3 > "$WORK/worker3.pid" || die "no worker started on $H3"
}
wait_launcher() {  # sets `status` to the launcher's, which must end within 20 s
  status=0
  for _ in $(seq 1 200); do kill -0 "$LAUNCH_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$LAUNCH_PID" 2>/dev/null && die "the launcher did not end within 20 s"
  wait "$LAUNCH_PID" || status=$?
  LAUNCH_PID=
}

# ------------------------------------------------------------------ 2. a remote worker killed: the job names it
start_long_job run-kill
# The token travels in the environment (through ssh's stdin), never on a command line.
worker=$(cat "$WORK/worker3.pid")
token=$(tr '\0' '\n' < "/proc/$worker/environ" | sed -n 's/^PSHARD_JOB_TOKEN=//p')
[ ${#token} -eq 32 ] || die "worker on $H3 has no 32-character PSHARD_JOB_TOKEN"
for p in /proc/[0-9]*; do
  if cmdline "${p#/proc/}" | grep -qF "$token"; then die "the job token is on the command line of ${p#/proc/}"; fi
done
kill -KILL "$worker"
wait_launcher
[ "$status" -ne 0 ] || die "the job exited 0 after its worker was killed"
# Named by its host (its agent saw it die) or by the coordinator, which its host told at once.
grep "^\[launch\] job failed: " "$WORK/out.log" |
  grep -Eq "worker 2 \((host [^,]*, )?pid $worker\)( is dead: its process)? was killed by signal 9 \(SIGKILL\)" ||
  die "the failure does not name worker 2 killed by SIGKILL"
expect_no_remote_process "a job whose worker was killed"
echo "ssh_hosts_test: killing worker 2 on $H3 ended the job (status $status) naming it"

# ------------------------------------------------------------------ 2b. a host agent killed: the job names its death
# (ssh alone reports a remote command killed by a signal as its own status 255)
start_long_job run-agent-kill
agent=$(pid_in 2 "$PSHARD host --name $H2") || die "no host agent (pshard host) on $H2 within 20 s"
kill -KILL "$agent"
wait_launcher
[ "$status" -ne 0 ] || die "the job exited 0 after the host agent on $H2 was killed"
grep "^\[launch\] job failed: " "$WORK/out.log" |
  grep -q "host $H2 (pid [0-9]*) exited with status 137: the host agent (pshard host) was killed by signal 9 (SIGKILL)" ||
  die "the failure does not name the host agent on $H2 killed by SIGKILL"
expect_no_remote_process "a job whose host agent was killed"
echo "ssh_hosts_test: killing the host agent on $H2 ended the job (status $status) naming its death"

# ------------------------------------------------------------------ 2c. failure_policy = continue and restart_workers
# 3 hosts, one worker each, one server (on the first host): the third host runs worker 2 alone. Worker 2 is SIGKILLed
# after the job's fifth epoch line (150 epochs, about 6 s on the 2-core VM).
# - continue: the host agent tells the coordinator at once, workers 0 and 1 train to the end, the launcher exits
#   non-zero naming the lost worker (as on one host);
# - restart_workers: the agent on the third host starts worker 2 again there, it rejoins, and the job ends 0 with
#   all three workers.
kill_worker_after_epoch_5() {
  for _ in $(seq 1 300); do
    epochs=$(grep -c '"event":"epoch"' "$WORK/$1/metrics.jsonl" 2>/dev/null || true)
    [ "${epochs:-0}" -ge 5 ] && break
    sleep 0.1
  done
  worker=$(worker_pid_in 3) || die "$1: no worker on $H3"
  kill -KILL "$worker"
}
for policy in continue restart; do
  sets=(--set cluster.failure_policy=continue)
  [ "$policy" = restart ] && sets+=(--set cluster.restart_workers=true)
  "$PSHARD" launch --hosts "$H1:1,$H2:1,$H3:1" --servers 1 --config "$CONFIG" --set train.epochs=150 "${sets[@]}" \
    --grace-ms 2000 --timeout 120 --run-dir "$WORK/run-$policy" > "$WORK/out.log" 2>&1 &
  LAUNCH_PID=$!
  kill_worker_after_epoch_5 "run-$policy"
  for _ in $(seq 1 1200); do kill -0 "$LAUNCH_PID" 2>/dev/null || break; sleep 0.1; done
  status=0
  wait "$LAUNCH_PID" || status=$?
  LAUNCH_PID=
  summary=$(tail -n 1 "$WORK/run-$policy/metrics.jsonl")
  echo "$summary" | grep -q '"epochs": *150' || die "$policy: the job did not train its 150 epochs: $summary"
  finished=$(echo "$summary" | grep -o '"workers_finished": *\[[0-9, ]*\]' | sed 's/.*\[//; s/\]//; s/ //g' |
    tr ',' '\n' | sort -n | paste -sd, -)
  if [ "$policy" = continue ]; then
    [ "$status" -ne 0 ] || die "continue: the launcher exited 0 although worker 2 was lost"
    [ "$finished" = "0,1" ] || die "continue: workers $finished finished, not 0 and 1: $summary"
    grep -q "worker 2 (host [^,]*, pid [0-9]*) is dead: its process was killed by signal 9" "$WORK/out.log" ||
      die "continue: the coordinator was not told of worker 2's death by its host"
  else
    [ "$status" -eq 0 ] || die "restart_workers: the job exited $status"
    [ "$finished" = "0,1,2" ] || die "restart_workers: workers $finished finished, not 0, 1 and 2: $summary"
    grep -q "^\[host $H3\] .*\[worker 2\].*rejoining the job at step" "$WORK/out.log" ||
      die "restart_workers: worker 2 was not started again on $H3 to rejoin"
  fi
  expect_no_remote_process "a $policy job whose worker was killed"
  echo "ssh_hosts_test: $policy: worker 2 killed on $H3, workers $finished finished all 150 epochs (status $status)"
done

# ------------------------------------------------------------------ 2d. server_failure_policy = restart
# 3 hosts, a server and a worker on each, a checkpoint every 500 steps (150 epochs of 85 steps). Server 1 is SIGKILLed
# on the second host after the 40th epoch line: its host agent says a server died, the launcher restarts the job on
# every host from the newest checkpoint all three servers completed (the run directory is on the filesystem the
# namespaces share), and it ends with an uninterrupted run's model, bit for bit.
restart_sets=(--set train.epochs=150 --set checkpoint.every_steps=500 --set cluster.server_failure_policy=restart)
timeout 120 "$PSHARD" launch --hosts "$H1:1,$H2:1,$H3:1" --config "$CONFIG" "${restart_sets[@]}" \
  --run-dir "$WORK/run-server-restart-ref" > "$WORK/out.log" 2>&1 || die "the uninterrupted 3-host job failed (status $?)"
"$PSHARD" launch --hosts "$H1:1,$H2:1,$H3:1" --config "$CONFIG" "${restart_sets[@]}" --grace-ms 2000 --timeout 120 \
  --run-dir "$WORK/run-server-restart" > "$WORK/out.log" 2>&1 &
LAUNCH_PID=$!
for _ in $(seq 1 300); do
  epochs=$(grep -c '"event":"epoch"' "$WORK/run-server-restart/metrics.jsonl" 2>/dev/null || true)
  [ "${epochs:-0}" -ge 40 ] && break
  sleep 0.1
done
server=$(pid_in 2 "$PSHARD server ") || die "no server on $H2 within 20 s"
kill -KILL "$server"
for _ in $(seq 1 1200); do kill -0 "$LAUNCH_PID" 2>/dev/null || break; sleep 0.1; done
status=0
wait "$LAUNCH_PID" || status=$?
LAUNCH_PID=
[ "$status" -eq 0 ] || die "server restart: the restarted job exited $status"
# The launcher names a host whose agent said a server died (status 3), or, when another host's exit (its processes
# following the abort) came first, the coordinator's record of server 1's death.
grep -Eq "^\[launch\] (host $SUBNET\.[0-9]+ \(pid [0-9]+\) exited with status 3|server 1 \(host [^,]*, pid [0-9]+\) is dead).*: restarting the job \(restart 1 of 3\) from the checkpoint of step [0-9]+" \
  "$WORK/out.log" || die "server restart: the launcher did not restart the job from a checkpoint after server 1 died"
cmp -s "$WORK/run-server-restart-ref/model.bin" "$WORK/run-server-restart/model.bin" ||
  die "server restart: the restarted job's model differs from the uninterrupted run's"
expect_no_remote_process "a job restarted after its server was killed"
echo "ssh_hosts_test: server 1 killed on $H2, the job restarted from its checkpoint on every host: the uninterrupted" \
  "model, bit for bit"

# ------------------------------------------------------------------ 2e. checkpoint.on_sigterm = checkpoint
# The same job, the launcher sent SIGTERM after the 40th epoch line: it writes a line to each host, whose agent
# passes SIGTERM on; the job stops at a checkpoint (status 75), and --resume on the same hosts ends with the
# uninterrupted run's model, bit for bit.
"$PSHARD" launch --hosts "$H1:1,$H2:1,$H3:1" --config "$CONFIG" "${restart_sets[@]}" \
  --set checkpoint.on_sigterm=checkpoint --grace-ms 2000 --timeout 120 --run-dir "$WORK/run-sigterm" \
  > "$WORK/out.log" 2>&1 &
LAUNCH_PID=$!
for _ in $(seq 1 300); do
  epochs=$(grep -c '"event":"epoch"' "$WORK/run-sigterm/metrics.jsonl" 2>/dev/null || true)
  [ "${epochs:-0}" -ge 40 ] && break
  sleep 0.1
done
kill -TERM "$LAUNCH_PID"
for _ in $(seq 1 600); do kill -0 "$LAUNCH_PID" 2>/dev/null || break; sleep 0.1; done
status=0
wait "$LAUNCH_PID" || status=$?
LAUNCH_PID=
[ "$status" -eq 75 ] || die "SIGTERM under on_sigterm = checkpoint: the launcher exited $status, not 75"
grep -q "SIGTERM from the launcher: passed on to this host's processes" "$WORK/out.log" ||
  die "SIGTERM under on_sigterm = checkpoint: no host passed it on"
expect_no_remote_process "a job stopped at a checkpoint"
timeout 120 "$PSHARD" launch --hosts "$H1:1,$H2:1,$H3:1" --resume "$WORK/run-sigterm" > "$WORK/out.log" 2>&1 ||
  die "the resumed 3-host job failed (status $?)"
at=$(grep -o '"start_step": *[0-9]*' "$WORK/run-sigterm/metrics.jsonl" | tail -n 1 | sed 's/.*: *//')
[ "${at:-0}" -gt 0 ] || die "the resumed job did not start at a checkpoint's step"
cmp -s "$WORK/run-server-restart-ref/model.bin" "$WORK/run-sigterm/model.bin" ||
  die "SIGTERM and --resume: the model differs from the uninterrupted run's"
expect_no_remote_process "a resumed job"
echo "ssh_hosts_test: SIGTERM stopped the 3-host job at a checkpoint (status 75), --resume from step $at: the" \
  "uninterrupted model, bit for bit"

# ------------------------------------------------------------------ 2f. an elastic job over hosts
# --workers 2:3 on the first two hosts; `pshard join RUN_DIR` on the third (the run directory on the filesystem the
# namespaces share) adds a worker at the next epoch's start, and the job ends 0 with epochs trained by all three.
"$PSHARD" launch --hosts "$H1:1,$H2:1" --workers 2:3 --config "$CONFIG" --set train.epochs=120 --timeout 120 \
  --run-dir "$WORK/run-elastic" > "$WORK/out.log" 2>&1 &
LAUNCH_PID=$!
for _ in $(seq 1 300); do
  epochs=$(grep -c '"event":"epoch"' "$WORK/run-elastic/metrics.jsonl" 2>/dev/null || true)
  [ -f "$WORK/run-elastic/join.json" ] && [ "${epochs:-0}" -ge 3 ] && break
  sleep 0.1
done
[ -f "$WORK/run-elastic/join.json" ] || die "the elastic job wrote no join.json"
timeout 120 nsenter --net="/run/netns/$(host_ns 3)" "$PSHARD" join "$WORK/run-elastic" > "$WORK/join.log" 2>&1 ||
  die "pshard join on $H3 failed (status $?): $(tail -n 5 "$WORK/join.log")"
for _ in $(seq 1 1200); do kill -0 "$LAUNCH_PID" 2>/dev/null || break; sleep 0.1; done
status=0
wait "$LAUNCH_PID" || status=$?
LAUNCH_PID=
[ "$status" -eq 0 ] || die "the elastic job exited $status"
grep '"event":"members"' "$WORK/run-elastic/metrics.jsonl" | tail -n 1 | grep -q '"workers":\[0,1,2\]' ||
  die "the elastic job's last epoch was not trained by workers 0, 1 and 2: $(grep '"event":"members"' "$WORK/run-elastic/metrics.jsonl" | tail -n 1)"
expect_no_remote_process "an elastic job"
echo "ssh_hosts_test: elastic job on 2 hosts (--workers 2:3), a worker joined from $H3: its last epoch trained by 3"

# ------------------------------------------------------------------ 3. Ctrl-C, SIGTERM and SIGKILL of the launcher
for sig in INT TERM KILL; do
  start_long_job "run-$sig"
  kill "-$sig" "$LAUNCH_PID"
  wait_launcher
  case $sig in
    INT) [ "$status" -eq 130 ] || die "SIGINT: the launcher exited $status, not 130" ;;
    TERM) [ "$status" -eq 143 ] || die "SIGTERM: the launcher exited $status, not 143" ;;
  esac
  expect_no_remote_process "SIG$sig to the launcher"
  echo "ssh_hosts_test: SIG$sig to the launcher (status $status): no process left in any of the $HOSTS namespaces"
done

# ------------------------------------------------------------------ 4. an unreachable host is named
timeout 60 "$PSHARD" launch --hosts "$H1:1,$SUBNET.99:1" --config "$CONFIG" --run-dir "$WORK/run-unreachable" \
  > "$WORK/out.log" 2>&1 && die "a job with an unreachable host succeeded"
grep "^\[launch\] job failed: " "$WORK/out.log" | grep -q "host $SUBNET.99 (pid [0-9]*) exited with status 255" \
  || die "the failure does not name the unreachable host"
expect_no_remote_process "a job with an unreachable host"
echo "ssh_hosts_test: an unreachable host ends the job, named"
timeout 60 "$PSHARD" launch --hosts "$H1:1,$H2:1" --remote-pshard /nonexistent/pshard --config "$CONFIG" \
  --run-dir "$WORK/run-no-pshard" > "$WORK/out.log" 2>&1 && die "a job without pshard on its hosts succeeded"
grep "^\[launch\] job failed: " "$WORK/out.log" | grep -Eq "host ($H1|$H2) \(pid [0-9]+\) exited with status 127" \
  || die "the failure does not name a host without pshard (status 127)"
grep -Eq "^\[host ($H1|$H2)\] .*/nonexistent/pshard" "$WORK/out.log" || die "the shell's message about the missing pshard is not shown"
expect_no_remote_process "a job without pshard on its hosts"
echo "ssh_hosts_test: a missing --remote-pshard ends the job, named"

# ------------------------------------------------------------------ 5. `-- CMD` workers get the PSHARD_* contract
# Each worker writes its PSHARD_* variables (its argv reaches it unchanged: no remote shell re-reads it), then worker 2
# fails on purpose, which ends the job naming it. It waits (at most 10 s) for the others' files first: the job's end
# stops every process, and on a loaded machine a worker started beside it may not have written its file yet.
timeout 60 "$PSHARD" launch --hosts "$H1:1,$H2:2" --config "$CONFIG" --run-dir "$WORK/run-cmd" -- \
  /bin/sh -c 'env | grep "^PSHARD_" | sort > "$1/env-$PSHARD_RANK"
    if [ "$PSHARD_RANK" = 2 ]; then
      for i in $(seq 100); do [ -s "$1/env-0" ] && [ -s "$1/env-1" ] && break; sleep 0.1; done
      exit 3
    fi
    sleep 30' \
  "it's a name" "$WORK" > "$WORK/out.log" 2>&1 && die "a job whose worker exits 3 succeeded"
grep "^\[launch\] job failed: " "$WORK/out.log" | grep -q "worker 2 (pid [0-9]*) exited with status 3" \
  || die "the failure does not name worker 2 (status 3)"
for r in 0 1 2; do [ -s "$WORK/env-$r" ] || die "worker $r did not run the command with \$1 = $WORK"; done
grep -qx "PSHARD_COORDINATOR=tcp://$H1:[0-9]*" "$WORK/env-2" || die "worker 2: no PSHARD_COORDINATOR on $H1: $(cat "$WORK/env-2")"
grep -qx "PSHARD_LOCAL_RANK=1" "$WORK/env-2" || die "worker 2 is not local rank 1 on $H2"
grep -qx "PSHARD_WORKERS_ON_HOST=2" "$WORK/env-2" || die "worker 2 does not know its host has 2 workers"
grep -qx "PSHARD_NUM_WORKERS=3" "$WORK/env-0" || die "worker 0: PSHARD_NUM_WORKERS is not 3"
grep -q "^PSHARD_JOB_TOKEN=[0-9a-f]\{32\}$" "$WORK/env-1" || die "worker 1 has no job token"
expect_no_remote_process "a -- CMD job"
echo "ssh_hosts_test: -- CMD workers got the PSHARD_* variables on their hosts"

# ------------------------------------------------------------------ 6. one push per host across two hosts
# A sync job, 2 hosts x 2 workers, one server on each host (batch 32 a worker, 20 steps). With host_aggregation auto
# a host's workers reach their own host's server through shared memory and the other host's through their leader,
# which pushes and pulls that server's share of the model once for both: at most twice the model's bytes per host
# and step on the network (1.66 x here: the busiest host's remote server holds most of the first layer). With `off`
# each worker pushes and pulls that share itself: twice that. The weights equal `pshard train` at batch 4 x 32 up to
# float rounding (the sum is grouped by host), and a second auto run gives the same bits.
AGG_CONFIG="$SRC/configs/fmnist_mlp_sync.toml"
AGG_SET=(--set data.train_size=2560 --set data.test_size=256 --set train.epochs=1 --set train.eval=false
  --set model.dropout=0 --set lr_schedule.name=constant --set lr_schedule.scaling=none --set train.threads=1)
for run in auto auto-again off; do
  timeout 120 "$PSHARD" launch --hosts "$H1:2,$H2:2" --config "$AGG_CONFIG" "${AGG_SET[@]}" --set train.batch_size=32 \
    --set "cluster.host_aggregation=${run%-again}" --run-dir "$WORK/agg-$run" > "$WORK/out.log" 2>&1 \
    || die "the 2-host job with host_aggregation=${run%-again} failed (status $?)"
  grep -q "^\[launch\] host $H1 ($H1): coordinator, server 0, workers 0-1$" "$WORK/out.log" \
    || die "$run: workers 0-1 and server 0 are not placed on $H1"
  grep -q "^\[launch\] host $H2 ($H2): server 1, workers 2-3$" "$WORK/out.log" \
    || die "$run: workers 2-3 and server 1 are not placed on $H2"
  expect_no_remote_process "the $run job"
done
timeout 120 "$PSHARD" train --config "$AGG_CONFIG" "${AGG_SET[@]}" --set train.batch_size=128 \
  --run-dir "$WORK/agg-local" > "$WORK/out.log" 2>&1 || die "pshard train at batch 128 failed (status $?)"
cmp -s "$WORK/agg-auto/model.bin" "$WORK/agg-auto-again/model.bin" \
  || die "two runs with host_aggregation=auto gave different weights"
/usr/bin/python3 - "$SRC/scripts" "$WORK" > "$WORK/out.log" 2>&1 <<'PY' || die "host aggregation across 2 hosts"
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from torch_to_pshard import read_model_file
work = sys.argv[2]
def events(run):
    with open("%s/agg-%s/metrics.jsonl" % (work, run)) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    return [e for e in lines if e.get("event") == "epoch"], [e for e in lines if e.get("event") == "summary"][-1]
failed = []
def check(ok, what):
    print(("ok:     " if ok else "FAILED: ") + what)
    if not ok: failed.append(what)
figures = {}
for run in ("auto", "off"):
    epochs, s = events(run)
    model = s["model_bytes"]
    net, shm = s["network_bytes_per_host_step"], s["shm_bytes_per_host_step"]
    figures[run] = net
    print("%s: model %d bytes, network %.3f x model, shm %.3f x model per host and step, %s hosts, steps %s"
          % (run, model, net / model, shm / model, s["num_hosts"], s["steps"]))
    check(s["num_hosts"] == 2, "%s: num_hosts %s == 2" % (run, s["num_hosts"]))
    hosts = sorted((h["host"], h["workers"]) for h in epochs[-1]["hosts"])
    check(hosts == [(0, 2), (2, 2)], "%s: the epoch's hosts %s are (0, 2 workers) and (2, 2 workers)" % (run, hosts))
    if run == "auto":
        check(net <= 2.2 * model, "auto: network bytes per host and step %.0f <= 2.2 x model %d" % (net, model))
        check(shm > 0, "auto: shared-memory bytes per host and step %.0f > 0" % shm)
# Each worker of a host moves what its leader moved for both: twice the bytes (the first requests too, by TCP).
ratio = figures["off"] / figures["auto"]
check(1.8 <= ratio <= 2.2, "off: network bytes per host and step %.0f are 1.8-2.2 x auto's %.0f (%.3f)"
      % (figures["off"], figures["auto"], ratio))
local = read_model_file(work + "/agg-local/model.bin")
for run in ("auto", "off"):
    dist = read_model_file("%s/agg-%s/model.bin" % (work, run))
    check([n for n, _ in local] == [n for n, _ in dist], "%s: the same tensors as pshard train" % run)
    for (name, a), (_, b) in zip(local, dist):
        a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
        d = np.linalg.norm(a64 - b64) / max(np.linalg.norm(a64), 1e-30)
        check(d <= 1e-5, "%s: %s relative distance %.3g to pshard train <= 1e-5" % (run, name, d))
sys.exit(1 if failed else 0)
PY
grep "^auto: \|^off: " "$WORK/out.log" | sed 's/^/ssh_hosts_test: /'
echo "ssh_hosts_test: one push per host across 2 hosts x 2 workers: the network bytes per host and step halved," \
  "the same bits twice, pshard train's weights within 1e-5"
