#!/usr/bin/python3
"""The lab: a cluster of H hosts emulated on this machine, to predict and measure how a job scales.

Each host is a network namespace (PREFIX-h1..H, address SUBNET.(10+i)) whose link to one bridge (in PREFIX-net) is
shaped with tc: a token bucket (tbf) at --rate each way (on the host's eth0 for what it sends, on the bridge's port
towards it for what it receives), and with --latency or --loss a netem qdisc in front of it. Servers and workers are
placed by `pshard launch --hosts` itself (coordinator on host 1, server s on host s, --workers-per-host on each);
its ssh command (PSHARD_SSH) is scripts/lab_host.py's `netns-ssh` mode, which runs the remote command with
`ip netns exec` in the host's namespace, so no sshd is needed. Each run trains a profile model (profiles/*.json:
real tensors, compute replaced by per-layer waits) for --steps synchronous steps per worker.

For each host count it prints what it measured (samples/s, efficiency per worker against 1 host, step time, the
workers' phases, the servers' work, bytes per host on the link from metrics.jsonl and from the kernel's counters)
beside an analytic model of the step:

  step = max(compute, link) + 2 x latency + server work            (compute and communication fully overlapped)
  step = compute + link + 2 x latency + server work                 (no overlap: the bound printed beside it)

  compute      the profile's forward + backward at the batch
  link         the busiest host's bytes each way per step, with TCP/IP headers (1514 bytes a frame for 1448 of
               payload), over the link's all-to-all TCP goodput. Host h holds server h's share b_h of the model
               (M bytes, each server prints its share): with one push per host it sends M - b_h of gradients and
               receives M - b_h of weights, and serves the other H - 1 hosts b_h each way: M + (H - 2) b_h each way.
               The goodput is measured before each run: every host sends every other host its share of a step's
               bytes at once over TCP (one connection a pair); it is below the shaped rate (on 4 hosts about 75 %),
               and the step at the shaped rate itself is printed too
  latency      one round trip per step: the last layer's gradients go out and its weights come back
  server work  the busiest server's aggregate + update time per step, measured in the same run

The measured step is the mean time from the end of a worker's third step to the end of its last (the first steps
carry the job's start), the mean over the workers.

--scale K divides the model's bytes (every tensor's size) and the link rate by K together, so that the link time is
that of the full model at --rate while the servers' work and the machine's copies shrink K-fold: a small machine
stands in for fast hosts. The hosts' TCP buffer ceilings (net.ipv4.tcp_rmem and tcp_wmem, this machine's divided by
K) shrink with them, so that a connection's window covers the same share of the link's bandwidth-delay product as on
the real link (what cluster.streams_per_server is for). Compute and latency are not scaled.

  sudo scripts/lab.py --hosts 1,2,4 --profile profiles/resnet50.json --rate 10gbit --scale 32 --steps 10
  sudo scripts/lab.py --hosts 1,4 --profile profiles/resnet18_cifar.json --rate 1gbit --scale 16 --json lab.json

Needs root, ip and tc (iproute2); --latency and --loss need the kernel's netem qdisc. Exits 2 when one is missing
or the namespaces or the subnet are already in use; 1 when a run fails. Every namespace, link and process it made is
removed at the end, on failure, and on SIGINT, SIGTERM or SIGHUP.
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST_SCRIPT = os.path.join(REPO, "scripts", "lab_host.py")  # what runs in a host's namespace: its ssh, the all-to-all
BASE_CONFIG = os.path.join(REPO, "configs", "profile_resnet50_sync.toml")
RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
              "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}
# Bytes on the link per byte of payload: a full TCP segment carries 1448 bytes (MSS of a 1500-byte MTU with TCP
# timestamps) in a frame of 1514 (Ethernet 14, IP 20, TCP 20 + 12 of options), which is what tbf counts.
WIRE_PER_PAYLOAD = 1514 / 1448
FIRST_MEASURED_STEP = 2  # 0-based: steps are timed from the end of the third


class LabError(Exception):
    """A fault the user can act on; printed as `lab: MESSAGE` with exit status 2 (setup) or 1 (a run)."""

    def __init__(self, message, status=2):
        super().__init__(message)
        self.status = status


class Interrupted(Exception):
    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# ------------------------------------------------------------------ small helpers

def parse_rate(text):
    """A tc-style rate ("1gbit", "100mbit", "125mbps") in bit/s."""
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)([a-z]+)", text.strip().lower())
    if not m or m.group(2) not in RATE_UNITS:
        raise LabError("--rate '%s': a number with a unit (%s), e.g. 1gbit" % (text, ", ".join(RATE_UNITS)))
    bits = float(m.group(1)) * RATE_UNITS[m.group(2)]
    if bits < 8e3:
        raise LabError("--rate '%s' is below 8 kbit/s" % text)
    return bits


def fmt_rate(bits):
    for unit, div in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits >= div:
            return "%.4g %s" % (bits / div, unit)
    return "%.4g bit/s" % bits


def run_cmd(args, what=None):
    """Runs a command; a LabError with its output when it fails."""
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if p.returncode != 0:
        raise LabError("%s failed (status %d): %s: %s" % (what or args[0], p.returncode, " ".join(args),
                                                          p.stdout.strip()))
    return p.stdout


def quiet(args):
    """Runs a command whose failure is expected at times (cleanup); its status."""
    return subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


def scaled_profile(path, scale, out_dir):
    """The profile with every tensor's size divided by `scale` (rounded up, flattened to one dimension): the same
    tensors, layers and times, 1/scale of the bytes. The path of the file to train (the original at scale 1)."""
    with open(path) as f:
        prof = json.load(f)
    if scale == 1:
        return path, prof
    for layer in prof["layers"]:
        for p in layer["params"]:
            p["shape"] = [max(1, math.ceil(math.prod(p["shape"]) / scale))]
    prof["source"] = "%s (every tensor's size divided by %g by scripts/lab.py --scale)" % (prof["source"], scale)
    out = os.path.join(out_dir, "profile-scale-%g.json" % scale)
    with open(out, "w") as f:
        json.dump(prof, f)
    return out, prof


# ------------------------------------------------------------------ the emulated hosts

class Cluster:
    """H namespaces on a bridge with shaped links; stop() removes all of it and kills every process in it (any
    number of times)."""

    def __init__(self, prefix, subnet, hosts, rate_bits, latency_ms, loss_pct, scale=1.0):
        self.prefix, self.subnet, self.hosts = prefix, subnet, hosts
        self.rate_bits, self.latency_ms, self.loss_pct = rate_bits, latency_ms, loss_pct
        self.scale = scale
        self.namespaces = []  # made by us, in order

    def ns(self, i):
        return "%s-h%d" % (self.prefix, i)

    def ip(self, i):
        return "%s.%d" % (self.subnet, 10 + i)

    @property
    def net(self):
        return self.prefix + "-net"

    def port(self, i):
        return "%sn%d" % (self.prefix, i)

    def require_free(self):
        taken = [line.split()[0] for line in run_cmd(["ip", "netns", "list"]).splitlines()
                 if line.split() and line.split()[0].startswith(self.prefix + "-")]
        if taken:
            raise LabError("namespace %s exists (another lab running, or one that was killed with SIGKILL: "
                           "`ip netns del NAME` removes it)" % taken[0])
        routes = run_cmd(["ip", "-4", "route", "show"])
        addrs = run_cmd(["ip", "-4", "-o", "addr", "show"])
        if re.search(r"(^|\s)%s\.\d+[/\s]" % re.escape(self.subnet), routes + "\n" + addrs):
            raise LabError("%s.0/24 is already in use on this machine (choose another with --subnet)" % self.subnet)

    def _add_ns(self, name):
        run_cmd(["ip", "netns", "add", name], "ip netns add")
        self.namespaces.append(name)
        run_cmd(["ip", "-n", name, "link", "set", "lo", "up"])

    def _shape(self, ns, dev):
        # tbf: a burst of 2 ms at the rate (at least 16 kB): a larger one lets the first bytes after a pause through
        # at no cost, which would hide a step's communication at small scaled sizes; 100 ms of queue
        burst = max(16384, round(self.rate_bits / 8 * 0.002))
        tbf = ["tbf", "rate", "%dbit" % round(self.rate_bits), "burst", str(burst), "latency", "100ms"]
        if self.latency_ms > 0 or self.loss_pct > 0:
            netem = ["netem", "limit", "100000"]
            if self.latency_ms > 0:
                netem += ["delay", "%.3fms" % (self.latency_ms / 2)]  # half on each side of the bridge
            if self.loss_pct > 0:
                netem += ["loss", "%g%%" % (self.loss_pct / 2)]
            p = subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:"] + netem,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
            if p.returncode != 0:
                raise LabError("tc cannot add a netem qdisc (%s): this kernel has no sch_netem, so --latency and "
                               "--loss cannot be emulated here; run with --latency 0 --loss 0" % p.stdout.strip())
            run_cmd(["tc", "-n", ns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:"] + tbf, "tc")
        else:
            run_cmd(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root"] + tbf, "tc")

    def start(self):
        self._add_ns(self.net)
        run_cmd(["ip", "-n", self.net, "link", "add", "br0", "type", "bridge"])
        run_cmd(["ip", "-n", self.net, "link", "set", "br0", "up"])
        for i in range(1, self.hosts + 1):
            ns = self.ns(i)
            self._add_ns(ns)
            run_cmd(["ip", "link", "add", self.port(i), "netns", self.net, "type", "veth", "peer", "name", "eth0",
                     "netns", ns], "ip link add (veth)")
            run_cmd(["ip", "-n", self.net, "link", "set", self.port(i), "master", "br0", "up"])
            run_cmd(["ip", "-n", ns, "addr", "add", "%s/24" % self.ip(i), "dev", "eth0"])
            run_cmd(["ip", "-n", ns, "link", "set", "eth0", "up"])
            self._shape(ns, "eth0")               # what host i sends
            self._shape(self.net, self.port(i))   # what host i receives
            for key, ceiling in self.tcp_buffers().items():
                run_cmd(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", "%s=%s" % (key, ceiling)], "sysctl")

    def tcp_buffers(self):
        """Each host's TCP buffer sizes (min, default, max): this machine's, the default and max divided by the
        scale (at least 4096 bytes)."""
        out = {}
        for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
            lo, default, hi = [int(x) for x in open("/proc/sys/" + key.replace(".", "/")).read().split()]
            out[key] = "%d %d %d" % (lo, max(lo, round(default / self.scale)), max(lo, round(hi / self.scale)))
        return out

    def counters(self, i):
        """(tx bytes, rx bytes) of host i's eth0."""
        stats = json.loads(run_cmd(["ip", "-j", "-s", "-n", self.ns(i), "link", "show", "dev", "eth0"]))[0]
        return stats["stats64"]["tx"]["bytes"], stats["stats64"]["rx"]["bytes"]

    def all_to_all(self, hosts, nbytes, rounds=4):
        """Seconds for hosts 1..`hosts` to send `nbytes` to each other at once over TCP (the median of the rounds
        after the first, each the slowest host's)."""
        procs = [subprocess.Popen(["ip", "netns", "exec", self.ns(i), sys.executable, HOST_SCRIPT,
                                   "netns-a2a", str(i), str(hosts), self.subnet, str(nbytes), str(rounds), "5999"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
                 for i in range(1, hosts + 1)]
        outs = []
        try:
            for p in procs:
                out, _ = p.communicate(timeout=120)
                if p.returncode != 0:
                    raise LabError("the all-to-all TCP transfer on %d hosts failed: %s" % (hosts, out.strip()[-500:]))
                outs.append([float(x) for x in out.split()])
        except subprocess.TimeoutExpired:
            raise LabError("the all-to-all TCP transfer on %d hosts took over 120 s" % hosts)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        return statistics.median(max(o[r] for o in outs) for r in range(1, rounds))

    def pids(self):
        out = []
        for ns in self.namespaces:
            p = subprocess.run(["ip", "netns", "pids", ns], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               universal_newlines=True)
            out += [int(x) for x in p.stdout.split()]
        return out

    def kill_processes(self):
        """SIGKILL to every process in the namespaces, until none is left (at most ~5 s)."""
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)

    def stop(self):
        self.kill_processes()
        for ns in reversed(self.namespaces):  # deleting PREFIX-net takes the veth pairs with it
            quiet(["ip", "netns", "del", ns])
        self.namespaces = [ns for ns in self.namespaces if os.path.exists("/run/netns/" + ns)]


# ------------------------------------------------------------------ one run

class Launch:
    """The `pshard launch --hosts` of a run, in its own process group; stop() ends it (any number of times)."""

    def __init__(self):
        self.proc = None

    def start(self, args, env, log_path):
        with open(log_path, "w") as log:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=env, start_new_session=True)

    def stop(self, grace_s=3.0):
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                return
            try:
                p.wait(wait_s)
                return
            except subprocess.TimeoutExpired:
                pass


def read_events(path):
    events = []
    with open(path) as f:
        for line in f:
            if line.strip():
                events.append(json.loads(line))
    return events


def analyse(h, args, cluster, events, log_text, wire, compute_s, rate_bits, goodput):
    """The measured and predicted figures of one run, as a dict."""
    summary = [e for e in events if e.get("event") == "summary"][-1]
    epoch = [e for e in events if e.get("event") == "epoch"][-1]
    workers = h * args.workers_per_host
    steps = summary["steps"]
    model = summary["model_bytes"]
    # Measured step: the mean time from the end of a worker's third step to the end of its last, the mean over the
    # workers. The first steps carry the start (workers start apart, TCP windows open); a step's own step_s leaves
    # out the wait for the first layer's weights before it, so the ends of steps are used instead.
    walls = {}
    for e in events:
        if e.get("event") == "step" and e["step"] >= FIRST_MEASURED_STEP:
            walls.setdefault(e["rank"], []).append((e["step"], e["wall_s"]))
    per_worker = []
    for marks in walls.values():
        marks.sort()
        if len(marks) >= 2 and marks[-1][0] > marks[0][0]:
            per_worker.append((marks[-1][1] - marks[0][1]) / (marks[-1][0] - marks[0][0]))
    if not per_worker:
        raise LabError("run on %d hosts: no step events to time (train.log_every must stay 1)" % h, 1)
    step_s = statistics.mean(per_worker)
    # Each server's share of the model ("server s: layout of ..., B bytes here").
    shares = {int(s): int(b) for s, b in re.findall(r"\[server (\d+)\] info: server \d+: layout of .*? (\d+) bytes "
                                                    r"here", log_text)}
    if len(shares) != h:
        raise LabError("run on %d hosts: %d servers printed their share of the model, not %d" % (h, len(shares), h), 1)
    pushes = args.workers_per_host if args.host_aggregation == "off" else 1  # pushes per host and step
    host_bytes = []  # predicted bytes each way per step, per host
    for i in range(h):
        b = shares[i]  # server i runs on host i + 1
        host_bytes.append(0 if h == 1 else pushes * (model - b) + pushes * (h - 1) * b)
    rate_link_s = max(host_bytes) * WIRE_PER_PAYLOAD * 8 / rate_bits
    link_s = rate_link_s / goodput  # at the all-to-all TCP goodput measured on these links
    latency_s = 0 if h == 1 else 2 * args.latency / 1000
    server_s = max((p["aggregate_s"] + p["update_s"]) / steps for p in summary.get("server_phases", []))
    predicted = max(compute_s, link_s) + latency_s + server_s
    at_rate = max(compute_s, rate_link_s) + latency_s + server_s
    no_overlap = compute_s + link_s + latency_s + server_s
    per_host = {x["host"]: x for x in epoch["hosts"]}
    metrics_hosts = [{"bytes_sent_per_step": x["bytes_sent"] / epoch["steps"],
                      "bytes_recv_per_step": x["bytes_recv"] / epoch["steps"]}
                     for _, x in sorted(per_host.items())]
    return {
        "hosts": h, "workers": workers, "servers": summary["servers"], "steps": steps, "model_bytes": model,
        "samples_per_s": workers * args.batch / step_s, "run_samples_per_s": summary["samples_per_s"],
        "step_s": step_s,
        "phases_per_step": {k: summary[k + "_s"] / steps for k in ("data", "forward", "backward", "comm_wait",
                                                                    "other")},
        "server_work_s": server_s, "server_shares": [shares[i] for i in range(h)],
        "network_bytes_per_host_step": summary["network_bytes_per_host_step"],
        "metrics_hosts": metrics_hosts,
        "wire_per_step": [{"tx": tx / steps, "rx": rx / steps} for tx, rx in wire],
        "predicted": {"compute_s": compute_s, "link_s": link_s, "latency_s": latency_s, "server_s": server_s,
                      "rate_link_s": rate_link_s, "goodput_fraction": goodput, "at_rate_step_s": at_rate,
                      "host_bytes_each_way": host_bytes, "step_s": predicted, "no_overlap_step_s": no_overlap,
                      "samples_per_s": workers * args.batch / predicted},
        "load_1min": float(open("/proc/loadavg").read().split()[0]),
    }


def mb(x):
    return "%.2f MB" % (x / 1e6)


def print_run(r, base):
    p = r["predicted"]
    r["efficiency"] = r["samples_per_s"] / r["workers"] / (base["samples_per_s"] / base["workers"])
    r["predicted"]["efficiency"] = (p["samples_per_s"] / r["workers"]) / (base["predicted"]["samples_per_s"] /
                                                                         base["workers"])
    ph = r["phases_per_step"]
    bound = "link" if p["link_s"] > p["compute_s"] else "compute"
    print("%d host%s x %d worker%s (%d servers, one per host), %d steps a worker:" % (
        r["hosts"], "" if r["hosts"] == 1 else "s", r["workers"] // r["hosts"],
        "" if r["workers"] == r["hosts"] else "s", r["servers"], r["steps"]))
    print("  samples/s     measured %8.1f   predicted %8.1f   efficiency vs 1 host: measured %.3f, predicted %.3f   "
          "(measured: from the mean step; over the whole run with its start %.1f)"
          % (r["samples_per_s"], p["samples_per_s"], r["efficiency"], p["efficiency"], r["run_samples_per_s"]))
    print("  step          measured %7.1f ms (mean from the end of step 3 to the end of step %d, all workers)   predicted "
          "%7.1f ms (full overlap; no overlap %.1f ms)   measured/predicted %.2f" % (
              r["step_s"] * 1e3, r["steps"], p["step_s"] * 1e3, p["no_overlap_step_s"] * 1e3,
              r["step_s"] / p["step_s"]))
    print("  model         max(compute %.1f, link %.1f) + latency %.1f + server %.1f ms  (%s-bound; link: the busiest "
          "host's bytes each way with TCP/IP headers, %.1f ms at the rate, at the all-to-all TCP goodput of %.0f %% "
          "of it; at the rate the step would be %.1f ms)" % (
              p["compute_s"] * 1e3, p["link_s"] * 1e3, p["latency_s"] * 1e3, p["server_s"] * 1e3, bound,
              p["rate_link_s"] * 1e3, p["goodput_fraction"] * 100, p["at_rate_step_s"] * 1e3))
    print("  phases/step   compute %.1f ms (forward %.1f + backward %.1f), communication wait %.1f ms, data + other "
          "%.1f ms (mean of the workers)" % ((ph["forward"] + ph["backward"]) * 1e3, ph["forward"] * 1e3,
                                             ph["backward"] * 1e3, ph["comm_wait"] * 1e3,
                                             (ph["data"] + ph["other"]) * 1e3))
    print("  servers/step  aggregate + update %.2f ms (busiest server, its threads summed); shares of the model: %s"
          % (r["server_work_s"] * 1e3, ", ".join(mb(b) for b in r["server_shares"])))
    if r["hosts"] > 1:
        print("  link/step     per host, each way: predicted %s (payload; x %.3f on the wire); on the wire, tx/rx "
              "(eth0 counters, the whole run with its start / steps): %s" % (
                  " ".join(mb(b) for b in p["host_bytes_each_way"]), WIRE_PER_PAYLOAD,
                  " ".join("%s/%s" % (mb(w["tx"]), mb(w["rx"])) for w in r["wire_per_step"])))
        print("                metrics.jsonl, the workers of each host (sent/received): %s; busiest host %s" % (
            " ".join("%s/%s" % (mb(x["bytes_sent_per_step"]), mb(x["bytes_recv_per_step"]))
                     for x in r["metrics_hosts"]), mb(r["network_bytes_per_host_step"])))
    print("  load          %.2f (1-minute average after the run)" % r["load_1min"])
    sys.stdout.flush()


# ------------------------------------------------------------------ main

def main(argv):
    ap = argparse.ArgumentParser(prog="lab.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", default="1,2,4", help="host counts to run, comma-separated; 1 is always run first "
                    "(the efficiency's reference) (default 1,2,4)")
    ap.add_argument("--workers-per-host", type=int, default=1, help="workers on each host (default 1)")
    ap.add_argument("--profile", default="profiles/resnet18_cifar.json", help="profile model (default %(default)s)")
    ap.add_argument("--batch", type=int, default=0, help="batch per worker (default: the profile's)")
    ap.add_argument("--steps", type=int, default=10, help="steps per worker and run (default 10)")
    ap.add_argument("--rate", default="1gbit", help="each host's link rate, each way, before --scale (default 1gbit)")
    ap.add_argument("--latency", type=float, default=0.0, help="one-way delay between two hosts in ms (netem)")
    ap.add_argument("--loss", type=float, default=0.0, help="packet loss between two hosts in %% (netem)")
    ap.add_argument("--scale", type=float, default=1.0, help="divide model bytes and link rate by this (default 1)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config key for every run")
    ap.add_argument("--pshard", default=os.path.join(REPO, "build", "bin", "pshard"), help="pshard executable")
    ap.add_argument("--prefix", default="pslab", help="namespace prefix (default pslab)")
    ap.add_argument("--subnet", default="10.251.0", help="three octets: host i is SUBNET.(10+i) (default 10.251.0)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds a run may take (default 300)")
    ap.add_argument("--json", help="write the results to this file as well")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (run directories, logs)")
    args = ap.parse_args(argv)

    try:
        hosts = sorted({1} | {int(x) for x in args.hosts.split(",") if x.strip()})
    except ValueError:
        raise LabError("--hosts '%s': host counts such as 1,2,4" % args.hosts)
    if hosts[0] < 1 or hosts[-1] > 200:
        raise LabError("--hosts: counts from 1 to 200")
    if len(args.prefix) > 8 or not re.fullmatch(r"[a-z][a-z0-9]*", args.prefix):
        raise LabError("--prefix '%s': 1 to 8 lower-case letters and digits" % args.prefix)
    if not re.fullmatch(r"\d{1,3}\.\d{1,3}\.\d{1,3}", args.subnet):
        raise LabError("--subnet '%s': three octets, e.g. 10.251.0" % args.subnet)
    if args.workers_per_host < 1 or args.steps < FIRST_MEASURED_STEP + 2 or args.scale < 1 or args.latency < 0 or not 0 <= args.loss < 100:
        raise LabError("--workers-per-host >= 1, --steps >= 4, --scale >= 1, --latency >= 0, 0 <= --loss < 100")
    rate_bits = parse_rate(args.rate)
    args.host_aggregation = "auto"
    args.slice_bytes = 1048576  # cluster.slice_bytes of the cluster it stands for; the runs cut tensors at 1/scale
    sets = []
    for kv in args.set:
        key, _, value = kv.partition("=")
        if key == "cluster.host_aggregation":
            args.host_aggregation = value.strip('"')
        if key == "cluster.slice_bytes":
            try:
                args.slice_bytes = int(value)
            except ValueError:
                raise LabError("--set %s: a number of bytes" % kv)
        else:
            sets.append(kv)
    args.set = sets + ["cluster.slice_bytes=%d" % max(4, round(args.slice_bytes / args.scale))]
    if os.geteuid() != 0:
        raise LabError("needs root (network namespaces and tc): run it with sudo")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise LabError("%s not found (iproute2)" % tool)
    pshard = os.path.abspath(args.pshard)
    if not os.access(pshard, os.X_OK):
        raise LabError("%s is not an executable (build it: scripts/build.sh, or --pshard PATH)" % pshard)
    script = HOST_SCRIPT
    if " " in script + sys.executable:
        raise LabError("the launcher splits its ssh command at spaces: %s must have none in its path" % script)
    profile_path = os.path.abspath(args.profile)
    if not os.path.exists(profile_path) and not os.path.isabs(args.profile):
        profile_path = os.path.join(REPO, args.profile)  # profiles/... from any working directory
    if not os.path.exists(profile_path):
        raise LabError("profile %s not found" % profile_path)

    work = tempfile.mkdtemp(prefix="pshard-lab.")
    cluster = Cluster(args.prefix, args.subnet, hosts[-1], rate_bits / args.scale, args.latency, args.loss, args.scale)
    launch = Launch()
    results = []
    try:
        cluster.require_free()
        train_profile, prof = scaled_profile(profile_path, args.scale, work)
        batch = args.batch or prof["batch"]
        args.batch = batch
        compute_s = sum(l["forward_ms"] + l["backward_ms"] for l in prof["layers"]) * batch / prof["batch"] / 1e3
        model_bytes = 4 * sum(math.prod(p["shape"]) for l in prof["layers"] for p in l["params"])
        cluster.start()
        print("lab: %d emulated hosts (namespaces %s-h1..%d on a bridge, %s.11-%d), each link %s each way "
              "(tc tbf)%s%s" % (hosts[-1], args.prefix, hosts[-1], args.subnet, 10 + hosts[-1],
                                fmt_rate(cluster.rate_bits),
                                ", one-way latency %g ms (netem)" % args.latency if args.latency else "",
                                ", loss %g %%" % args.loss if args.loss else ""))
        print("lab: profile %s (%s), batch %d, compute %.1f ms a step; scale %g: model bytes and link rate divided "
              "by %g (and cluster.slice_bytes %d to %s, the TCP buffer ceilings to %s), so the link time is that of the "
              "full model at %s; compute and latency not scaled" % (
                  prof["name"], os.path.relpath(profile_path, REPO), batch, compute_s * 1e3, args.scale, args.scale,
                  args.slice_bytes, args.set[-1].split("=")[1],
                  "/".join(v.split()[2] for v in cluster.tcp_buffers().values()), fmt_rate(rate_bits)))
        print("lab: not modelled: the hosts share this machine's %d CPUs (servers, kernel packet work and the "
              "launcher compete); one switch, no cross traffic; per-message costs do not shrink with --scale; "
              "the model assumes a host's bytes spread evenly over the step" % os.cpu_count())
        print("lab: %s, commit %s, load %s" % (time.strftime("%Y-%m-%d %H:%M:%S %Z"), git_commit(),
                                               " ".join(open("/proc/loadavg").read().split()[:3])))
        sys.stdout.flush()
        env = dict(os.environ)
        env["PSHARD_SSH"] = "%s %s netns-ssh %s %s" % (sys.executable, script, args.prefix, args.subnet)
        for h in hosts:
            run_dir = os.path.join(work, "run-%dhosts" % h)
            log_path = run_dir + ".log"
            host_list = ",".join("%s:%d" % (cluster.ip(i), args.workers_per_host) for i in range(1, h + 1))
            cmd = [pshard, "launch", "--hosts", host_list, "--config", BASE_CONFIG, "--run-dir", run_dir,
                   "--grace-ms", "2000", "--timeout", str(args.timeout),
                   "--set", "model.profile=" + train_profile, "--set", "data.classes=%d" % prof["classes"],
                   "--set", "train.batch_size=%d" % batch,
                   "--set", "data.train_size=%d" % (h * args.workers_per_host * batch * args.steps),
                   "--set", "data.test_size=%d" % batch, "--set", "train.epochs=1", "--set", "train.eval=false",
                   "--set", "train.log_every=1"]
            for kv in args.set:
                cmd += ["--set", kv]
            goodput = 1.0
            if h > 1:
                # The links' TCP goodput with every host sending to every other at once, at about a step's bytes
                each_way = model_bytes * (1 + (h - 2) / h)
                t = cluster.all_to_all(h, max(1, round(each_way / (h - 1))))
                goodput = min(1.0, each_way * WIRE_PER_PAYLOAD * 8 / cluster.rate_bits / t)
                print("lab: %d hosts, all to all over TCP: %.2f MB each way a host in %.1f ms, %.0f %% of the rate"
                      % (h, each_way / 1e6, t * 1e3, goodput * 100))
            before = [cluster.counters(i) for i in range(1, h + 1)]
            print("lab: run on %d host%s started (%s)" % (h, "" if h == 1 else "s", log_path))
            sys.stdout.flush()
            launch.start(cmd, env, log_path)
            status = launch.proc.wait()
            launch.proc = None
            after = [cluster.counters(i) for i in range(1, h + 1)]
            log_text = open(log_path, errors="replace").read()
            if status != 0:
                raise LabError("the run on %d hosts failed (status %d); its output ends:\n%s" % (
                    h, status, "\n".join(log_text.splitlines()[-30:])), 1)
            cluster.kill_processes()  # nothing of this run is left for the next
            wire = [(a[0] - b[0], a[1] - b[1]) for a, b in zip(after, before)]
            r = analyse(h, args, cluster, read_events(os.path.join(run_dir, "metrics.jsonl")), log_text, wire,
                        compute_s, cluster.rate_bits, goodput)
            results.append(r)
            print_run(r, results[0])
        print()
        print("%5s %7s %10s %10s %8s %8s %9s %9s %6s %9s %8s %12s" % (
            "hosts", "workers", "samples/s", "predicted", "eff", "eff pred", "step ms", "pred ms", "ratio",
            "@rate ms", "goodput", "link MB/step"))
        for r in results:
            p = r["predicted"]
            print("%5d %7d %10.1f %10.1f %8.3f %8.3f %9.1f %9.1f %6.2f %9.1f %7.0f%% %12.2f" % (
                r["hosts"], r["workers"], r["samples_per_s"], p["samples_per_s"], r["efficiency"],
                p["efficiency"], r["step_s"] * 1e3, p["step_s"] * 1e3, r["step_s"] / p["step_s"],
                p["at_rate_step_s"] * 1e3, p["goodput_fraction"] * 100, max(p["host_bytes_each_way"]) / 1e6))
        print("ratio: measured / predicted step; @rate: the predicted step with the link at the shaped rate instead "
              "of the all-to-all TCP goodput (the goodput column, as a share of the rate); link MB/step: the busiest "
              "host's predicted payload each way")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"profile": prof["name"], "batch": batch, "scale": args.scale, "rate_bits": rate_bits,
                           "shaped_rate_bits": cluster.rate_bits, "latency_ms": args.latency,
                           "loss_pct": args.loss, "workers_per_host": args.workers_per_host, "runs": results},
                          f, indent=1)
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not cut the cleanup short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        launch.stop()
        cluster.stop()
        if args.keep:
            print("lab: work directory kept: %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)


def git_commit():
    p = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, universal_newlines=True)
    return p.stdout.strip() or "unknown"


def on_signal(signum, _frame):
    raise Interrupted(signum)


if __name__ == "__main__":
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    try:
        sys.exit(main(sys.argv[1:]))
    except LabError as e:
        sys.stderr.write("lab: %s\n" % e)
        sys.exit(e.status)
    except Interrupted as e:
        sys.stderr.write("lab: stopped by %s; namespaces, links and processes removed\n" % e)
        sys.exit(128 + e.signum)
