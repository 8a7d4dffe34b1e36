#!/usr/bin/env bash
# `pshard launch --hosts` over real ssh: three "hosts" are network namespaces (pss-h1..3 on a bridge, 10.250.79.11-13)
# each running its own sshd (own host key and config under a temp dir, root logs in with a generated key). Checks:
# a 2-host job with CurveZMQ trains to the end with every line prefixed by its host; killing a remote worker ends the
# job with that worker's name; SIGINT (Ctrl-C) and SIGTERM to the launcher, and SIGKILL of it, leave no process in
# any namespace; the job token is in the processes' environment and on no command line; an unreachable host and a
# missing --remote-pshard are named; `-- CMD` workers get their PSHARD_* variables. Exits 77 (skipped) when not
# root or when sshd, ssh, ssh-keygen, ip or nsenter is missing (openssh-server: scripts/install-deps.sh).
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
[ "$(id -u)" -eq 0 ] || { echo "not root: skipped"; exit 77; }
SSHD=/usr/sbin/sshd
[ -x "$SSHD" ] || { echo "$SSHD not found (openssh-server): skipped"; exit 77; }
for tool in ssh ssh-keygen ip nsenter unshare getent; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found: skipped"; exit 77; }
done

PREFIX=pss
LOGIN_HOME=$(getent passwd "$(id -un)" | cut -d: -f6)
[ -d "$LOGIN_HOME" ] || { echo "no home directory for $(id -un): skipped"; exit 77; }
SUBNET=10.250.79
HOSTS=3
WORK=$(mktemp -d /tmp/pshard-ssh-hosts-test.XXXXXX)
LAUNCH_PID=
SSHD_PIDS=()
MADE_RUN_SSHD=0
host_ns() { echo "$PREFIX-h$1"; }
host_ip() { echo "$SUBNET.$((10 + $1))"; }

# Every process in a namespace: what this test's sshds started (and nothing else runs there).
ns_pids() { ip netns pids "$1" 2>/dev/null || true; }
# A process's command line, spaces between the arguments ("" once it is gone).
cmdline() { { tr '\0' ' ' < "/proc/$1/cmdline"; } 2>/dev/null || true; }
cleanup() {
  set +e
  [ -n "$LAUNCH_PID" ] && kill -KILL "$LAUNCH_PID" 2>/dev/null
  for pid in "${SSHD_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for i in $(seq 1 $HOSTS); do
    for pid in $(ns_pids "$(host_ns "$i")"); do kill -KILL "$pid" 2>/dev/null; done
  done
  for i in $(seq 1 $HOSTS); do ip netns del "$(host_ns "$i")" 2>/dev/null; done
  ip netns del "$PREFIX-net" 2>/dev/null  # takes the veth pairs with it
  ip link del "$PREFIX-host0" 2>/dev/null
  [ "$MADE_RUN_SSHD" = 1 ] && rmdir /run/sshd 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
die() { echo "ssh_hosts_test: $*" >&2; echo "--- output:" >&2; tail -n 60 "$WORK/out.log" >&2 || true; exit 1; }

# ------------------------------------------------------------------ network and sshds
if ip -4 route show | grep -q "^$SUBNET\.0/24"; then echo "$SUBNET.0/24 is already routed here: skipped"; exit 77; fi
for ns in $(ip netns list | awk '{print $1}' | grep "^$PREFIX-" || true); do
  echo "ssh_hosts_test: namespace $ns exists (another run of this test?): skipped"; exit 77
done
ip netns add "$PREFIX-net"
ip -n "$PREFIX-net" link set lo up
ip -n "$PREFIX-net" link add br0 type bridge
ip -n "$PREFIX-net" link set br0 up
ip link add "$PREFIX-host0" type veth peer name h0 netns "$PREFIX-net"
ip -n "$PREFIX-net" link set h0 master br0 up
ip addr add "$SUBNET.1/24" dev "$PREFIX-host0"
ip link set "$PREFIX-host0" up
[ -d /run/sshd ] || { mkdir -p -m 0755 /run/sshd; MADE_RUN_SSHD=1; }  # sshd's privilege separation directory
ssh-keygen -q -t ed25519 -N '' -f "$WORK/user_key"
cp "$WORK/user_key.pub" "$WORK/authorized_keys"
for i in $(seq 1 $HOSTS); do
  ns=$(host_ns "$i")
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip link add "${PREFIX}n$i" netns "$PREFIX-net" type veth peer name eth0 netns "$ns"
  ip -n "$PREFIX-net" link set "${PREFIX}n$i" master br0 up
  ip -n "$ns" addr add "$(host_ip "$i")/24" dev eth0
  ip -n "$ns" link set eth0 up
  d="$WORK/h$i"
  mkdir -p "$d"
  ssh-keygen -q -t ed25519 -N '' -f "$d/host_key"
  cat > "$d/sshd_config" <<CONF
ListenAddress $(host_ip "$i")
Port 22
HostKey $d/host_key
PidFile $d/sshd.pid
AuthorizedKeysFile $WORK/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
MaxStartups 100
LogLevel ERROR
CONF
  # A private mount namespace hides the login user's home behind an empty directory: the remote commands run
  # without ~/.bashrc and the like (a shell start-up file that waits on a lock would stall every ssh; one killed
  # mid-way by the cleanup would leave its lock behind), and nothing in the real home is touched.
  mkdir -p "$d/home"
  nsenter --net="/run/netns/$ns" unshare --mount --propagation private -- \
    sh -c 'mount --bind "$1" "$2" && exec "$3" -D -f "$4" -E "$5"' sh "$d/home" "$LOGIN_HOME" "$SSHD" \
    "$d/sshd_config" "$d/sshd.log" &
  SSHD_PIDS+=($!)
done
export PSHARD_SSH="ssh -i $WORK/user_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=5"
for i in $(seq 1 $HOSTS); do
  ok=0
  for _ in $(seq 1 50); do
    if timeout 10 $PSHARD_SSH -o BatchMode=yes "$(host_ip "$i")" true 2>/dev/null; then ok=1; break; fi
    sleep 0.1
  done
  [ "$ok" = 1 ] || { cat "$WORK/h$i/sshd.log" >&2; die "sshd in $(host_ns "$i") does not accept the key"; }
done
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
# The pid of a `pshard worker` in host i's namespace (waits at most 20 s).
worker_pid_in() {
  for _ in $(seq 1 200); do
    for pid in $(job_pids "$1"); do
      if cmdline "$pid" | grep -q "^$PSHARD worker "; then echo "$pid"; return 0; fi
    done
    sleep 0.1
  done
  return 1
}

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
grep "^\[launch\] job failed: " "$WORK/out.log" | grep -q "worker 2 (pid $worker) was killed by signal 9 (SIGKILL)" \
  || die "the failure does not name worker 2 killed by SIGKILL"
expect_no_remote_process "a job whose worker was killed"
echo "ssh_hosts_test: killing worker 2 on $H3 ended the job (status $status) naming it"

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
# Each worker writes its PSHARD_* variables (its argv reaches it unchanged: no remote shell re-reads it), then fails on
# purpose, which ends the job naming it.
timeout 60 "$PSHARD" launch --hosts "$H1:1,$H2:2" --config "$CONFIG" --run-dir "$WORK/run-cmd" -- \
  /bin/sh -c 'env | grep "^PSHARD_" | sort > "$1/env-$PSHARD_RANK"; [ "$PSHARD_RANK" = 2 ] && exit 3; sleep 30' \
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
