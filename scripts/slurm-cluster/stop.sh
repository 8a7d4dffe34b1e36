#!/usr/bin/env bash
# stop.sh - tear down the test SLURM cluster that start.sh built; safe to run any time, also when nothing runs.
#
# Adapted from the verified recipe in the shared workspace (slurm-recipe/stop-cluster.sh):
#   1. cancels all jobs (so slurmstepd cleans up its tasks) and waits up to 15 s for them
#   2. stops slurmd/slurmstepd, kills whatever is left inside the node namespaces (tasks that escaped their
#      job), then stops slurmctld and munged. Daemons are found by PID: only processes whose executable is one
#      of these AND whose environment holds PSHARD_SLURM_CLUSTER=<dir> (start.sh sets it) - never by name alone
#   3. deletes the namespaces and the host-side veth
#   4. with --purge, deletes the directory too (only if start.sh made it); otherwise logs stay for post-mortems
#
#   bash scripts/slurm-cluster/stop.sh --dir /tmp/pshard-slurm [--purge] [--quiet]
set -uo pipefail

DIR=/tmp/pshard-slurm
PREFIX=psh
PURGE=0
QUIET=0
while [ $# -gt 0 ]; do
  case "$1" in
    -d|--dir) DIR=$2; shift 2 ;;
    --prefix) PREFIX=$2; shift 2 ;;
    --purge) PURGE=1; shift ;;
    -q|--quiet) QUIET=1; shift ;;
    -h|--help)
      echo "usage: $0 [--dir DIR] [--prefix P] [--purge] [--quiet]"
      echo "  --dir DIR   cluster directory (default /tmp/pshard-slurm)"
      echo "  --prefix P  namespace/link prefix, used only if DIR/cluster.env is gone (default psh)"
      echo "  --purge     also delete DIR (logs included)"
      exit 0 ;;
    *) echo "stop.sh: unknown option: $1" >&2; exit 2 ;;
  esac
done
say() { [ "$QUIET" = 1 ] || echo "[slurm-cluster stop] $*"; }
[ "$(id -u)" -eq 0 ] || { echo "stop.sh: must run as root" >&2; exit 1; }
case "$DIR" in /?*) ;; *) echo "stop.sh: --dir must be an absolute path other than /" >&2; exit 2 ;; esac

NODES=0
NET_NS="${PREFIX}-net"
HOST_LINK="${PREFIX}-host0"
if [ -r "$DIR/cluster.env" ]; then
  NODES=$(sed -n 's/^NODES=//p' "$DIR/cluster.env")
  PREFIX=$(sed -n 's/^PREFIX=//p' "$DIR/cluster.env")
  NET_NS=$(sed -n 's/^NET_NS=//p' "$DIR/cluster.env")
  HOST_LINK=$(sed -n 's/^HOST_LINK=//p' "$DIR/cluster.env")
fi
export SLURM_CONF="$DIR/etc/slurm.conf"

# PIDs of our processes: comm and executable match the regular expression $1 and the environment holds the
# marker. (comm is read with a builtin first: forks are slow and /proc has many entries.)
our_pids() {
  local d pid comm exe
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    { read -r comm < "$d/comm"; } 2>/dev/null || continue
    [[ "$comm" =~ ^($1)$ ]] || continue
    exe=$(readlink "$d/exe" 2>/dev/null) || continue
    [[ "${exe##*/}" =~ ^($1)$ ]] || continue
    grep -qzxF "PSHARD_SLURM_CLUSTER=$DIR" "$d/environ" 2>/dev/null || continue
    echo "$pid"
  done
}

# SIGTERM the given PIDs, wait up to $1 seconds, then SIGKILL the survivors.
term_wait_kill() {
  local grace=$1; shift
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null
  local t=0 alive
  while :; do
    alive=()
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive+=("$p"); done
    [ ${#alive[@]} -eq 0 ] && return 0
    [ "$t" -ge $((grace * 10)) ] && break
    sleep 0.1; t=$((t + 1))
  done
  say "SIGKILL ${alive[*]}"
  kill -KILL "${alive[@]}" 2>/dev/null
  sleep 0.2
}

# ------------------------------------------------------------ 1. jobs
if [ -n "$(our_pids 'slurmctld(-wlm)?')" ] && [ -r "$SLURM_CONF" ]; then
  jobs=$(timeout 10 squeue -h -o %A 2>/dev/null | tr '\n' ' ')
  if [ -n "${jobs// /}" ]; then
    say "cancelling jobs: $jobs"
    # shellcheck disable=SC2086
    timeout 10 scancel $jobs 2>/dev/null
    for _ in $(seq 1 75); do
      [ -z "$(timeout 5 squeue -h -o %A 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
fi

# ------------------------------------------------------------ 2. daemons and leftovers
mapfile -t pids < <(our_pids 'slurmd(-wlm)?|slurmstepd(-wlm)?')
[ ${#pids[@]} -gt 0 ] && say "stopping slurmd/slurmstepd: ${pids[*]}"
term_wait_kill 10 "${pids[@]}"
mapfile -t nss < <(
  { for i in $(seq 1 "${NODES:-0}"); do echo "${PREFIX}-node$i"; done
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}-node[0-9]+\$"
  } | sort -u)
for ns in "${nss[@]}"; do
  [ -e "/run/netns/$ns" ] || continue
  mapfile -t left < <(ip netns pids "$ns" 2>/dev/null)
  [ ${#left[@]} -gt 0 ] && { say "killing leftovers in $ns: ${left[*]}"; term_wait_kill 3 "${left[@]}"; }
done
mapfile -t pids < <(our_pids 'slurmctld(-wlm)?|munged')
[ ${#pids[@]} -gt 0 ] && say "stopping slurmctld/munged: ${pids[*]}"
term_wait_kill 10 "${pids[@]}"

# ------------------------------------------------------------ 3. network
if ip link show "$HOST_LINK" >/dev/null 2>&1; then ip link del "$HOST_LINK" && say "deleted link $HOST_LINK"; fi
for ns in "${nss[@]}" "$NET_NS"; do
  if [ -e "/run/netns/$ns" ]; then ip netns del "$ns" && say "deleted netns $ns"; fi
done
# Namespace teardown finishes asynchronously; wait until the host link is gone so a restart does not clash.
for _ in $(seq 1 50); do
  ip link show "$HOST_LINK" >/dev/null 2>&1 || break
  sleep 0.1
done

# ------------------------------------------------------------ 4. files
rm -f "$DIR"/run/*.pid "$DIR"/munge/munged.pid "$DIR"/munge/munge.socket.2 "$DIR"/munge/munge.socket.2.lock \
  "$DIR/cluster.env" 2>/dev/null
if [ "$PURGE" = 1 ] && [ -e "$DIR" ]; then
  if [ -e "$DIR/.pshard-slurm-cluster" ]; then
    rm -rf "${DIR:?}" && say "removed $DIR"
  else
    say "not removing $DIR: start.sh did not make it"
  fi
fi

rest=$(our_pids 'slurm.*|munged' | tr '\n' ' ')
if [ -n "${rest// /}" ]; then
  echo "[slurm-cluster stop] WARNING: still running: $rest" >&2
  exit 1
fi
say "stopped"
exit 0
