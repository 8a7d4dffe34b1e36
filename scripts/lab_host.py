#!/usr/bin/python3
"""The lab's side inside an emulated host (scripts/lab.py runs it there; not meant to be run by hand):

  lab_host.py netns-ssh PREFIX SUBNET [ssh options] HOST COMMAND...   the launcher's ssh: `ip netns exec`
  lab_host.py netns-a2a ME HOSTS SUBNET BYTES ROUNDS PORT             the links' TCP goodput, all to all
"""
import os
import re
import sys
import time

# ssh's options that take an argument (the launcher passes -T and -o; a PSHARD_SSH of a user may add others).
SSH_OPTIONS_WITH_ARGUMENT = set("BbcDEeFIiJLlmOoPpQRSWw")


# ------------------------------------------------------------------ the launcher's ssh: `ip netns exec`

def netns_ssh(argv):
    """`lab_host.py netns-ssh PREFIX SUBNET [ssh options] HOST COMMAND...`: runs COMMAND as sshd would (joined by
    spaces, given to /bin/sh -c) in the namespace of HOST = SUBNET.(10+i), with this process's stdin and stdout."""
    if len(argv) < 2:
        sys.stderr.write("lab netns-ssh: PREFIX SUBNET [OPTIONS] HOST COMMAND... expected\n")
        return 255
    prefix, subnet, rest = argv[0], argv[1], argv[2:]
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        flags = rest[i][1:]
        i += 1
        for j, c in enumerate(flags):
            if c in SSH_OPTIONS_WITH_ARGUMENT:
                if j == len(flags) - 1:
                    i += 1  # the argument is the next word
                break
    if i >= len(rest):
        sys.stderr.write("lab netns-ssh: no host given\n")
        return 255
    host = rest[i].rsplit("@", 1)[-1]
    command = " ".join(rest[i + 1:])
    m = re.fullmatch(re.escape(subnet) + r"\.(\d+)", host)
    index = int(m.group(1)) - 10 if m else 0
    if index < 1 or not os.path.exists("/run/netns/%s-h%d" % (prefix, index)):
        sys.stderr.write("lab netns-ssh: %s is not a host of the lab (%s.11, %s.12, ...)\n" % (host, subnet, subnet))
        return 255
    args = ["ip", "netns", "exec", "%s-h%d" % (prefix, index), "/bin/sh"]
    if command:
        args += ["-c", command]
    os.execvp("ip", args)
    return 255


# ------------------------------------------------------------------ the links' TCP goodput, all to all

def netns_all_to_all(argv):
    """`lab_host.py netns-a2a ME HOSTS SUBNET BYTES ROUNDS PORT`, run in host ME's namespace by the lab: every host sends
    BYTES to every other host at once (one TCP connection a pair, as a step's pushes and replies), ROUNDS times with
    a barrier between; prints each round's seconds."""
    import socket
    import threading
    me, hosts, subnet, nbytes, rounds, port = (int(argv[0]), int(argv[1]), argv[2], int(argv[3]), int(argv[4]),
                                               int(argv[5]))
    addr = lambda i: "%s.%d" % (subnet, 10 + i)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.settimeout(30)
    listener.bind((addr(me), port))
    listener.listen(hosts)
    outs = []
    for j in range(1, hosts + 1):
        if j == me:
            continue
        for _ in range(300):  # the others' listeners start at about the same time
            try:
                outs.append(socket.create_connection((addr(j), port), timeout=30))
                break
            except OSError:
                time.sleep(0.01)
        else:
            raise SystemExit("all-to-all: host %d cannot reach %s:%d" % (me, addr(j), port))
    ins = [listener.accept()[0] for _ in range(hosts - 1)]
    for s in ins:
        s.settimeout(30)
    payload = b"\0" * nbytes

    def receive(s, n):
        while n:
            chunk = s.recv(min(n, 1 << 20))
            if not chunk:
                raise SystemExit("all-to-all: a connection closed early")
            n -= len(chunk)

    for _ in range(rounds):
        t0 = time.monotonic()
        threads = [threading.Thread(target=s.sendall, args=(payload,)) for s in outs]
        threads += [threading.Thread(target=receive, args=(s, nbytes)) for s in ins]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in outs:
            s.sendall(b"b")
        for s in ins:
            receive(s, 1)
        print("%.6f" % (time.monotonic() - t0), flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["netns-ssh"]:
        sys.exit(netns_ssh(sys.argv[2:]))
    if sys.argv[1:2] == ["netns-a2a"]:
        sys.exit(netns_all_to_all(sys.argv[2:]))
    sys.exit("lab_host.py: netns-ssh or netns-a2a expected (it is run by scripts/lab.py)")
