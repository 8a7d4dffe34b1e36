#!/usr/bin/env bash
# start.sh - bring up a throw-away, real SLURM cluster (Debian's slurmctld/slurmd/munge) on this one machine, as root.
#
# Adapted from the verified recipe in the shared workspace (slurm-recipe/start-cluster.sh, tested on
# Debian 12 / Slurm 22.05.8 without systemd); only its netns mode is kept. What it does:
#   * installs slurmctld slurmd slurm-client munge (+ util-linux, iproute2) with apt-get if missing
#   * makes a private munge key and runs munged on a private socket (its directory must be 0755)
#   * builds the network: a bridge in its own namespace (PREFIX-net), the host joins it as SUBNET.1
#     (PREFIX-host0), node i is namespace PREFIX-node<i> with eth0 = SUBNET.(10+i); no route leaves the /24
#   * writes slurm.conf / cgroup.conf / a hosts file for node1..N, starts slurmctld in the host namespace and
#     one slurmd per node with `nsenter --net` + `unshare --uts --mount` (NOT `ip netns exec`: it remounts
#     /sys, which hides /sys/fs/cgroup, and slurmd 22.05 then refuses to start); inside each node the hosts
#     file is bind-mounted over /etc/hosts so node names resolve to the node addresses
#   * waits until every node is idle, runs a short srun smoke test across all nodes
# Everything lives under --dir (nothing in /etc changes). Every daemon carries PSHARD_SLURM_CLUSTER=<dir> in its
# environment, which is how stop.sh finds exactly these processes. On any failure the half-built cluster is
# torn down (stop.sh) unless --keep-on-failure.
#
#   bash scripts/slurm-cluster/start.sh --dir /tmp/pshard-slurm    # then: export SLURM_CONF=/tmp/pshard-slurm/etc/slurm.conf
#   bash scripts/slurm-cluster/stop.sh --dir /tmp/pshard-slurm --purge
set -euo pipefail

DIR=/tmp/pshard-slurm
NODES=2
CPUS=4
MEM_MB=4096
SUBNET=10.250.78   # first three octets of a private /24 (the shared recipe uses 10.250.77: no clash)
PREFIX=psh         # netns and link names: psh-net, psh-host0, psh-node1..N
CTL_PORT=6917
SLURMD_PORT=6918
TIMEOUT=60
MIN_JOB_AGE=5
INSTALL=1
SMOKE=1
KEEP_ON_FAILURE=0

usage() {
  cat <<USAGE
usage: $0 [options]
  -d, --dir DIR         where everything lives (default $DIR; must be absent, empty or made by this script)
  -n, --nodes N         compute nodes node1..nodeN (default $NODES)
  -c, --cpus C          CPUs each node advertises (default $CPUS; the real core count does not matter)
  -m, --mem-mb MB       RealMemory of each node (default $MEM_MB)
      --subnet A.B.C    private /24 for the nodes (default $SUBNET)
      --prefix P        prefix of namespace/link names, at most 8 characters (default $PREFIX)
      --ctl-port P      slurmctld port on the host (default $CTL_PORT)
      --slurmd-port P   slurmd port inside each node (default $SLURMD_PORT)
      --timeout S       seconds to wait for the nodes to become idle (default $TIMEOUT)
      --min-job-age S   MinJobAge (default $MIN_JOB_AGE; <= 5 keeps "sbatch --wait" polling every 2 s)
      --no-install      never run apt-get; fail if packages are missing
      --no-smoke        skip the srun smoke test
      --keep-on-failure leave a half-built cluster up for debugging
USAGE
}
while [ $# -gt 0 ]; do
  case "$1" in
    -d|--dir) DIR=$2; shift 2 ;;
    -n|--nodes) NODES=$2; shift 2 ;;
    -c|--cpus) CPUS=$2; shift 2 ;;
    -m|--mem-mb) MEM_MB=$2; shift 2 ;;
    --subnet) SUBNET=$2; shift 2 ;;
    --prefix) PREFIX=$2; shift 2 ;;
    --ctl-port) CTL_PORT=$2; shift 2 ;;
    --slurmd-port) SLURMD_PORT=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --min-job-age) MIN_JOB_AGE=$2; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    --no-smoke) SMOKE=0; shift ;;
    --keep-on-failure) KEEP_ON_FAILURE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "start.sh: unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
done

T0=$(date +%s%N)
elapsed() { awk -v a="$T0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'; }
log() { printf '[slurm-cluster %5.1fs] %s\n' "$(elapsed)" "$*"; }
die() { echo "[slurm-cluster] ERROR: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root"
[[ "$NODES" =~ ^[0-9]+$ ]] && [ "$NODES" -ge 1 ] && [ "$NODES" -le 200 ] || die "--nodes must be 1..200"
[[ "$CPUS" =~ ^[0-9]+$ ]] && [ "$CPUS" -ge 1 ] || die "--cpus must be >= 1"
[[ "$SUBNET" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "--subnet must look like 10.250.78"
case "$DIR" in /?*) ;; *) die "--dir must be an absolute path other than /" ;; esac
[ ${#PREFIX} -le 8 ] || die "--prefix must be at most 8 characters (link names are limited to 15)"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CTL_HOST=$(hostname -s)
CTL_ADDR="$SUBNET.1"
HOST_LINK="${PREFIX}-host0"
NET_NS="${PREFIX}-net"
node_ns() { echo "${PREFIX}-node$1"; }

# ------------------------------------------------------------ 1. packages
PKGS=(slurmctld slurmd slurm-client munge util-linux iproute2)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$INSTALL" = 1 ] || die "missing packages: ${missing[*]} (and --no-install given)"
  log "installing ${missing[*]}"
  # No systemd: the packages' scripts must not try to start services. A policy-rc.d answering 101 forbids
  # that; add a temporary one if the machine has none.
  temp_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    temp_policy=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  export DEBIAN_FRONTEND=noninteractive
  # DPkg::Lock::Timeout: wait for (do not fail on) another apt/dpkg run.
  apt-get update -q -o DPkg::Lock::Timeout=600 >/dev/null
  apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
  if [ "$temp_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; trap - EXIT; fi
  log "installed"
fi

# ----------------------------------------------- 2. fresh directory, marker
if [ -e "$DIR/cluster.env" ]; then
  log "tearing down the previous cluster in $DIR"
  bash "$HERE/stop.sh" --dir "$DIR" --quiet || true
fi
if [ -e "$DIR" ]; then
  [ -e "$DIR/.pshard-slurm-cluster" ] || [ -z "$(ls -A "$DIR")" ] \
    || die "$DIR exists and was not made by this script; remove it or pick another --dir"
  find "$DIR" -mindepth 1 -delete
fi
mkdir -p "$DIR"/{etc,state,spool,log,run,munge}
touch "$DIR/.pshard-slurm-cluster"
chmod 755 "$DIR" "$DIR/munge"   # munged refuses a socket directory that is not world-searchable
for i in $(seq 1 "$NODES"); do mkdir -p "$DIR/spool/node$i"; done
export PSHARD_SLURM_CLUSTER="$DIR"   # marker in every daemon's environment (stop.sh finds them by it)
export SLURM_CONF="$DIR/etc/slurm.conf"
printf 'NODES=%s\nPREFIX=%s\nNET_NS=%s\nHOST_LINK=%s\nSUBNET=%s\n' "$NODES" "$PREFIX" "$NET_NS" "$HOST_LINK" \
  "$SUBNET" > "$DIR/cluster.env"

fail() {
  echo "[slurm-cluster] ERROR: $*" >&2
  for f in "$DIR"/log/slurmctld.log "$DIR"/log/slurmd-node1.log "$DIR"/munge/munged.log; do
    [ -e "$f" ] && { echo "---- tail $f" >&2; tail -n 15 "$f" >&2; }
  done
  if [ "$KEEP_ON_FAILURE" = 0 ]; then
    echo "[slurm-cluster] tearing down" >&2
    bash "$HERE/stop.sh" --dir "$DIR" --quiet || true
  fi
  exit 1
}
trap 'fail "line $LINENO: command failed (exit $?)"' ERR

# ---------------------------------------------------------------- 3. munge
if command -v mungekey >/dev/null 2>&1; then
  mungekey --create --keyfile="$DIR/munge/munge.key"
else
  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
fi
chmod 600 "$DIR/munge/munge.key"
MUNGE_SOCK="$DIR/munge/munge.socket.2"
munged --key-file="$DIR/munge/munge.key" --socket="$MUNGE_SOCK" --pid-file="$DIR/munge/munged.pid" \
       --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed" || fail "munged did not start"
munge -S "$MUNGE_SOCK" -n | unmunge -S "$MUNGE_SOCK" >/dev/null || fail "munge round trip failed"
log "munged up"

# -------------------------------------------------------------- 4. network
if ip -4 route show | grep -q "^$SUBNET\.0/24"; then fail "$SUBNET.0/24 is already routed here; pick another --subnet"; fi
# The bridge sits in its own namespace, so node-to-node traffic never crosses the host's FORWARD chain.
ip netns add "$NET_NS"
ip -n "$NET_NS" link set lo up
ip -n "$NET_NS" link add br0 type bridge
ip -n "$NET_NS" link set br0 up
ip link add "$HOST_LINK" type veth peer name h0 netns "$NET_NS"
ip -n "$NET_NS" link set h0 master br0 up
ip addr add "$CTL_ADDR/24" dev "$HOST_LINK"
ip link set "$HOST_LINK" up
for i in $(seq 1 "$NODES"); do
  ns=$(node_ns "$i")
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip link add "n$i" netns "$NET_NS" type veth peer name eth0 netns "$ns"
  ip -n "$NET_NS" link set "n$i" master br0 up
  ip -n "$ns" addr add "$SUBNET.$((10 + i))/24" dev eth0
  ip -n "$ns" link set eth0 up
done
{
  echo "127.0.0.1 localhost"
  echo "::1 localhost ip6-localhost ip6-loopback"
  echo "$CTL_ADDR $CTL_HOST slurmctl"
  for i in $(seq 1 "$NODES"); do echo "$SUBNET.$((10 + i)) node$i"; done
} > "$DIR/etc/hosts"
log "network: host $CTL_ADDR, nodes $SUBNET.11..$SUBNET.$((10 + NODES))"

# ----------------------------------------------------------- 5. slurm.conf
{
  cat <<CONF
# Written by pshard scripts/slurm-cluster/start.sh: a throw-away test cluster.
ClusterName=pshard
SlurmctldHost=$CTL_HOST($CTL_ADDR)
SlurmctldPort=$CTL_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
# No systemd and several slurmd on one kernel: no cgroup plugins (they would fight over one hierarchy).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.log
MpiDefault=none
SwitchType=switch/none
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
InactiveLimit=0
KillWait=5
# sbatch --wait polls every 2 s only while MinJobAge is small (else 2, 8, 32 s).
MinJobAge=$MIN_JOB_AGE
SlurmctldTimeout=60
SlurmdTimeout=120
Waittime=0
CONF
  for i in $(seq 1 "$NODES"); do
    echo "NodeName=node$i NodeHostname=node$i NodeAddr=$SUBNET.$((10 + i)) CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN"
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
} > "$SLURM_CONF"
if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then
  printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n' > "$DIR/etc/cgroup.conf"
else
  printf 'CgroupPlugin=autodetect\n' > "$DIR/etc/cgroup.conf"
fi
echo "export SLURM_CONF=$SLURM_CONF" > "$DIR/env.sh"

# ------------------------------------------------------------ 6. daemons
slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start"
for _ in $(seq 1 100); do
  scontrol ping 2>/dev/null | grep -q 'is UP' && break
  sleep 0.1
done
scontrol ping 2>/dev/null | grep -q 'is UP' || fail "slurmctld does not answer"
log "slurmctld up on $CTL_ADDR:$CTL_PORT"
for i in $(seq 1 "$NODES"); do
  nsenter --net="/run/netns/$(node_ns "$i")" unshare --uts --mount --propagation private -- \
    /bin/sh -c "hostname node$i && mount --bind '$DIR/etc/hosts' /etc/hosts && exec slurmd -f '$SLURM_CONF' -N node$i" \
    || fail "slurmd node$i did not start"
done
deadline=$((SECONDS + TIMEOUT))
while :; do
  idle=$( (sinfo -h -N -o '%N %T' 2>/dev/null || true) | awk '$2 == "idle"' | sort -u | wc -l)
  [ "$idle" -eq "$NODES" ] && break
  if [ $SECONDS -ge $deadline ]; then sinfo -N -l >&2 || true; fail "nodes not idle after ${TIMEOUT}s"; fi
  sleep 0.2
done
log "all $NODES nodes idle"

# -------------------------------------------------------------- 7. smoke
if [ "$SMOKE" = 1 ]; then
  out=$(cd "$DIR" && timeout 60 srun -N "$NODES" --ntasks-per-node=1 -t 1 \
          bash -c 'echo "$SLURMD_NODENAME $(hostname -I 2>/dev/null | cut -d" " -f1)"' 2>&1) \
    || fail "smoke test srun failed: $out"
  seen=$(echo "$out" | awk '{print $1}' | sort -u | wc -l)
  [ "$seen" -eq "$NODES" ] || fail "smoke test saw $seen distinct nodes, wanted $NODES: $out"
  echo "$out" | sort | sed 's/^/    /'
fi
trap - ERR
log "cluster up ($NODES nodes x $CPUS CPUs); use it with: export SLURM_CONF=$SLURM_CONF"
