# Sourced, not run: "hosts" as network namespaces on one machine, each with its own sshd, for `pshard launch --hosts`.
# shellcheck shell=bash
# The caller sets PREFIX (namespace names: $PREFIX-h1..N, $PREFIX-net holds the bridge), SUBNET (three octets: host i
# is $SUBNET.(10+i), this machine $SUBNET.1), HOSTS (N) and WORK (a fresh temporary directory, removed by the caller),
# then calls netns_hosts_require (exits 77, skipped, when not root or a tool is missing or the subnet or a namespace
# is taken), netns_hosts_start (exports PSHARD_SSH, fills SSHD_PIDS), and netns_hosts_cleanup from its EXIT trap.
# Every sshd has its own host key and config under $WORK; root logs in with a generated key. Each host's link to the
# bridge is eth0 in its namespace, peered with ${PREFIX}n$i in $PREFIX-net (where a caller can shape it with tc).

SSHD=/usr/sbin/sshd
SSHD_PIDS=()
NETNS_MADE_RUN_SSHD=0
host_ns() { echo "$PREFIX-h$1"; }
host_ip() { echo "$SUBNET.$((10 + $1))"; }
# Every process in a namespace: what the sshds started (and nothing else runs there).
ns_pids() { ip netns pids "$1" 2>/dev/null || true; }
# A process's command line, spaces between the arguments ("" once it is gone).
cmdline() { { tr '\0' ' ' < "/proc/$1/cmdline"; } 2>/dev/null || true; }

# Exits 77 (skipped) with the reason when these hosts cannot be built here; extra tools to check are the arguments.
netns_hosts_require() {
  [ "$(id -u)" -eq 0 ] || { echo "not root: skipped"; exit 77; }
  [ -x "$SSHD" ] || { echo "$SSHD not found (openssh-server): skipped"; exit 77; }
  local tool ns
  for tool in ssh ssh-keygen ip nsenter unshare getent "$@"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found: skipped"; exit 77; }
  done
  LOGIN_HOME=$(getent passwd "$(id -un)" | cut -d: -f6)
  [ -d "$LOGIN_HOME" ] || { echo "no home directory for $(id -un): skipped"; exit 77; }
  if ip -4 route show | grep -q "^$SUBNET\.0/24"; then echo "$SUBNET.0/24 is already routed here: skipped"; exit 77; fi
  for ns in $(ip netns list | awk '{print $1}' | grep "^$PREFIX-" || true); do
    echo "namespace $ns exists (another run of this script?): skipped"; exit 77
  done
}

# Kills every process in the namespaces (the sshds first), deletes the namespaces and links. Idempotent.
netns_hosts_cleanup() {
  local pid i
  for pid in "${SSHD_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for i in $(seq 1 "$HOSTS"); do
    for pid in $(ns_pids "$(host_ns "$i")"); do kill -KILL "$pid" 2>/dev/null; done
  done
  for i in $(seq 1 "$HOSTS"); do ip netns del "$(host_ns "$i")" 2>/dev/null; done
  ip netns del "$PREFIX-net" 2>/dev/null  # takes the veth pairs with it
  ip link del "$PREFIX-host0" 2>/dev/null
  [ "$NETNS_MADE_RUN_SSHD" = 1 ] && rmdir /run/sshd 2>/dev/null
  return 0
}

# Builds the bridge, the hosts and their sshds, and waits (at most ~5 s a host) until each accepts the key.
netns_hosts_start() {
  local i ns d ok
  ip netns add "$PREFIX-net"
  ip -n "$PREFIX-net" link set lo up
  ip -n "$PREFIX-net" link add br0 type bridge
  ip -n "$PREFIX-net" link set br0 up
  ip link add "$PREFIX-host0" type veth peer name h0 netns "$PREFIX-net"
  ip -n "$PREFIX-net" link set h0 master br0 up
  ip addr add "$SUBNET.1/24" dev "$PREFIX-host0"
  ip link set "$PREFIX-host0" up
  [ -d /run/sshd ] || { mkdir -p -m 0755 /run/sshd; NETNS_MADE_RUN_SSHD=1; }  # sshd's privilege separation directory
  ssh-keygen -q -t ed25519 -N '' -f "$WORK/user_key"
  cp "$WORK/user_key.pub" "$WORK/authorized_keys"
  for i in $(seq 1 "$HOSTS"); do
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
  for i in $(seq 1 "$HOSTS"); do
    ok=0
    for _ in $(seq 1 50); do
      if timeout 10 $PSHARD_SSH -o BatchMode=yes "$(host_ip "$i")" true 2>/dev/null; then ok=1; break; fi
      sleep 0.1
    done
    if [ "$ok" != 1 ]; then
      cat "$WORK/h$i/sshd.log" >&2
      echo "sshd in $(host_ns "$i") does not accept the key" >&2
      exit 1
    fi
  done
}
