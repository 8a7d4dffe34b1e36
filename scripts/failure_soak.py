#!/usr/bin/env python3
"""Failure soak (issue 8): SIGKILL workers and servers at random times during sync training and check
that no job hangs.

Each trial starts `pshard launch` (2 servers x 3 workers, Fashion-MNIST MLP, sync), waits a random time
after the cluster map was written, SIGKILLs one process and measures when the job ends:
  - worker kills cycle through cluster.failure_policy = abort / continue / continue with
    cluster.restart_workers (the killed worker is restarted and rejoins); a trial passes when the job ends
    within heartbeat timeout + 10 s of the kill (abort), completes every epoch (continue), or completes
    with exit 0 and every worker finished (rejoin);
  - server kills use cluster.server_failure_policy = restart; a trial passes when the job completes
    (exit 0, every epoch, test accuracy above --min-acc).
A trial that neither ends in time nor completes is a hang. Prints one line per trial and a summary; exits 1
on any hang or failure.

  scripts/failure_soak.py --pshard build/bin/pshard --worker-kills 20 --server-kills 10
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HEARTBEAT_TIMEOUT_S = 1.5


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def summary_of(run_dir):
    try:
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            lines = [json.loads(l) for l in f if l.strip()]
    except (OSError, ValueError):
        return None
    for e in reversed(lines):
        if e.get("event") == "summary":
            return e
    return None


def pid_of(run_dir, role, rank):
    m = read_json(os.path.join(run_dir, "cluster.json"))
    if not m:
        return None
    for n in m.get("nodes", []):
        if n["role"] == role and n["rank"] == rank:
            return n["pid"]
    return None


def trial(args, kind, policy, rng, workdir, index):
    run_dir = os.path.join(workdir, "%s-%d" % (kind, index))
    sets = [
        "data.train_size=%d" % args.train_size, "data.test_size=2000", "train.epochs=%d" % args.epochs,
        "cluster.heartbeat_interval_ms=200", "cluster.heartbeat_timeout_ms=%d" % int(HEARTBEAT_TIMEOUT_S * 1000),
        "cluster.request_timeout_ms=20000", "checkpoint.every_steps=25",
    ]
    if kind == "worker":
        sets.append("cluster.failure_policy=" + ("abort" if policy == "abort" else "continue"))
        if policy == "rejoin":
            sets.append("cluster.restart_workers=true")
    else:
        sets.append("cluster.server_failure_policy=restart")
    cmd = [args.pshard, "launch", "--servers", "2", "--workers", "3", "--timeout", "300", "--config", args.config,
           "--run-dir", run_dir, "--grace-ms", "2000"]
    for s in sets:
        cmd += ["--set", s]
    log = open(run_dir + ".log", "w")
    job = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    start = time.monotonic()
    victim_rank = rng.randrange(3 if kind == "worker" else 2)
    delay = rng.uniform(0.0, args.max_delay)
    killed_at = None
    pid = None
    try:
        while pid is None and job.poll() is None and time.monotonic() - start < 60:
            pid = pid_of(run_dir, kind, victim_rank)
            time.sleep(0.02)
        if pid is not None:
            time.sleep(delay)
            if job.poll() is None:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed_at = time.monotonic()
                except ProcessLookupError:
                    pass
        limit = args.run_limit
        while job.poll() is None and time.monotonic() - start < limit:
            time.sleep(0.05)
        ended = job.poll() is not None
        end = time.monotonic()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
        log.close()
    s = summary_of(run_dir)
    completed = s is not None and s.get("epochs") is not None
    acc = s.get("test_acc") if s else None
    after_kill = (end - killed_at) if killed_at else None
    if kind == "worker" and policy == "abort":
        ok = ended and (killed_at is None or after_kill <= HEARTBEAT_TIMEOUT_S + 10)
    elif kind == "worker" and policy == "rejoin":
        ok = ended and job.returncode == 0 and completed and len(s.get("workers_finished", [])) == 3
    elif kind == "worker":
        ok = ended and (killed_at is None or completed or after_kill <= HEARTBEAT_TIMEOUT_S + 10)
    else:
        ok = ended and job.returncode == 0 and acc is not None and acc >= args.min_acc
    hang = not ended
    print("%-6s %-2d policy=%-8s victim=%d kill_after=%.2fs killed=%s rc=%s ended_after_kill=%s acc=%s %s" % (
        kind, index, policy, victim_rank, delay, killed_at is not None, job.returncode,
        "%.1fs" % after_kill if after_kill is not None else "-", "%.3f" % acc if acc is not None else "-",
        "OK" if ok else ("HANG" if hang else "FAIL")), flush=True)
    if ok and not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
        os.remove(run_dir + ".log")
    return ok, hang, after_kill


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pshard", default=os.path.join(here, "..", "build", "bin", "pshard"))
    p.add_argument("--config", default=os.path.join(here, "..", "configs", "fmnist_mlp_sync.toml"))
    p.add_argument("--worker-kills", type=int, default=20)
    p.add_argument("--server-kills", type=int, default=10)
    p.add_argument("--train-size", type=int, default=9600)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--max-delay", type=float, default=3.0, help="kill within this many seconds of the cluster map")
    p.add_argument("--run-limit", type=float, default=120.0, help="a job still running after this is a hang")
    p.add_argument("--min-acc", type=float, default=0.75)
    p.add_argument("--seed", type=int, default=8)
    p.add_argument("--keep", action="store_true", help="keep the run directories of passing trials")
    args = p.parse_args()
    if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
        sys.exit("failure_soak: Fashion-MNIST is not installed in /usr/share/datasets/fashion-mnist")
    rng = random.Random(args.seed)
    workdir = tempfile.mkdtemp(prefix="pshard-soak-")
    results = {"worker": [], "server": []}
    for i in range(args.worker_kills):
        results["worker"].append(trial(args, "worker", ("abort", "continue", "rejoin")[i % 3], rng, workdir, i))
    for i in range(args.server_kills):
        results["server"].append(trial(args, "server", "restart", rng, workdir, i))
    out = {}
    for kind, rs in results.items():
        times = [t for _, _, t in rs if t is not None]
        out[kind] = {"trials": len(rs), "ok": sum(1 for ok, _, _ in rs if ok), "hangs": sum(1 for _, h, _ in rs if h),
                     "max_end_after_kill_s": round(max(times), 1) if times else None}
    print("summary " + json.dumps(out), flush=True)
    if all(o["ok"] == o["trials"] for o in out.values()):
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print("failing runs kept in " + workdir)
    sys.exit(0 if all(o["ok"] == o["trials"] for o in out.values()) else 1)


if __name__ == "__main__":
    main()
