#!/usr/bin/env python3
"""Failure soak: SIGKILL workers and servers at random times during sync training and check
that no job hangs.

Each trial starts `pshard launch` (2 servers x 3 workers, Fashion-MNIST MLP, sync), waits a random time
after the cluster map was written, SIGKILLs one process and measures when the job ends:
  - worker kills cycle through cluster.failure_policy = abort / continue / continue with
    cluster.restart_workers (the killed worker is restarted and rejoins); a trial passes when the job ends
    within heartbeat timeout + 10 s of the kill (abort), completes every epoch with the two survivors finished, the
    model saved and launch's exit 1 naming the lost worker (continue: an early abort fails it), or completes with
    exit 0 and every worker finished (rejoin);
  - server kills use cluster.server_failure_policy = restart; a trial passes when the job completes
    (exit 0, every epoch, test accuracy above --min-acc).
  - freeze trials SIGSTOP a server under cluster.server_failure_policy = restart: the coordinator declares
    it dead, launch kills it and restarts the job, which must complete (exit 0);
  - reuse trials run A (longer, other lr and seed) to the end in a run directory, check that launching B into
    it is refused, then run B there with --start-over and SIGKILL one of its servers: B must complete from its
    own checkpoints (a restart from a step past B's length would be A's weights);
  - disk trials (root only) use a few-MB tmpfs, mostly filled, as the run directory: the job must end (exit 0,
    or 74 when its records or checkpoints could not be written), never hang.
A trial that neither ends in time nor completes is a hang. Every completed run (exit 0) must have its
model.bin. Prints one line per trial and a summary; exits 1 on any hang or failure.

  scripts/failure_soak.py --pshard build/bin/pshard --worker-kills 20 --server-kills 10 \
      --freezes 5 --reuses 5 --disks 3
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


def continued_without(run_dir, s, victim, killed, rc, epochs):
    """What cluster.failure_policy = continue promises: the job trains every epoch with the survivors and saves the
    model; when the victim died before the end, launch says so and exits 1 (never "every process exited
    successfully"). An abort that ends the job early fails this check."""
    if s is None or s.get("epochs") != epochs or not os.path.exists(os.path.join(run_dir, "model.bin")):
        return False
    finished = set(s.get("workers_finished", []))
    survivors = {0, 1, 2} - {victim}
    if not survivors <= finished:
        return False
    if not killed or victim in finished:  # the victim was gone or done before the kill landed
        return rc == 0
    with open(run_dir + ".log", errors="replace") as f:
        said = "not every worker did" in f.read()
    return rc == 1 and said


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
        ok = ended and continued_without(run_dir, s, victim_rank, killed_at is not None, job.returncode, args.epochs)
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


def launch(args, run_dir, sets, extra=(), log_path=None):
    cmd = [args.pshard, "launch", "--servers", "2", "--workers", "3", "--timeout", "300", "--config", args.config,
           "--run-dir", run_dir, "--grace-ms", "2000"] + list(extra)
    for s in sets:
        cmd += ["--set", s]
    log = open(log_path or run_dir.rstrip("/") + ".log", "a")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True), log


def base_sets(args, epochs=None):
    return [
        "data.train_size=%d" % args.train_size, "data.test_size=2000", "train.epochs=%d" % (epochs or args.epochs),
        "cluster.heartbeat_interval_ms=200", "cluster.heartbeat_timeout_ms=%d" % int(HEARTBEAT_TIMEOUT_S * 1000),
        "cluster.request_timeout_ms=20000", "checkpoint.every_steps=25", "cluster.server_failure_policy=restart",
    ]


def wait_end(job, start, limit):
    while job.poll() is None and time.monotonic() - start < limit:
        time.sleep(0.05)
    ended = job.poll() is not None
    if not ended:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    return ended


def signal_server(job, run_dir, rng, args, sig):
    """Sends `sig` to a random server a random time after the cluster map; returns the delay or None."""
    start = time.monotonic()
    started_at = time.time()
    pid = None
    rank = rng.randrange(2)
    cluster_json = os.path.join(run_dir, "cluster.json")
    while pid is None and job.poll() is None and time.monotonic() - start < 60:
        # Only this launch's map: until --start-over has moved it, the old run's is still there.
        fresh = os.path.exists(cluster_json) and os.path.getmtime(cluster_json) >= started_at - 1.0
        pid = pid_of(run_dir, "server", rank) if fresh else None
        time.sleep(0.02)
    delay = rng.uniform(0.0, args.max_delay)
    if pid is None:
        return None
    time.sleep(delay)
    if job.poll() is not None:
        return None
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return None
    return delay


def restart_step(log_path):
    """The step the last restart resumed from, or None."""
    step = None
    with open(log_path, errors="replace") as f:
        for line in f:
            if "restarting the job" in line and "from the checkpoint of step " in line:
                step = int(line.rsplit("from the checkpoint of step ", 1)[1].split()[0].strip(".,"))
    return step


def steps_of(args, epochs):
    return (args.train_size // (3 * 64)) * epochs  # 3 workers x batch 64 (fmnist_mlp_sync.toml)


def special_trial(args, kind, rng, workdir, index, counters):
    run_dir = os.path.join(workdir, "%s-%d" % (kind, index))
    start = time.monotonic()
    note = ""
    mounted = False
    if kind == "freeze":
        job, log = launch(args, run_dir, base_sets(args))
        delay = signal_server(job, run_dir, rng, args, signal.SIGSTOP)
        ended = wait_end(job, start, args.run_limit)
        log.close()
        s = summary_of(run_dir)
        ok = ended and job.returncode == 0 and s is not None
        note = "froze_after=%s" % ("%.2fs" % delay if delay is not None else "-")
    elif kind == "reuse":
        # A: longer, other lr and seed; B must never end from A's weights.
        job, log = launch(args, run_dir, base_sets(args, args.epochs + 2) + ["optimizer.lr=0.02", "run.seed=7"])
        ended_a = wait_end(job, start, args.run_limit)
        log.close()
        refused, log = launch(args, run_dir, base_sets(args))
        ended_r = wait_end(refused, time.monotonic(), 60)
        log.close()
        with open(run_dir + ".log", errors="replace") as f:
            said = "--start-over" in f.read()
        refused_ok = ended_r and refused.returncode != 0 and said
        job, log = launch(args, run_dir, base_sets(args), extra=["--start-over"])
        delay = signal_server(job, run_dir, rng, args, signal.SIGKILL)
        ended = wait_end(job, time.monotonic(), args.run_limit)
        log.close()
        step = restart_step(run_dir + ".log")
        foreign = step is not None and step > steps_of(args, args.epochs)
        counters["other_weights"] += 1 if foreign else 0
        s = summary_of(run_dir)
        ok = ended_a and refused_ok and ended and job.returncode == 0 and s is not None and not foreign
        note = "refused=%s restart_step=%s kill_after=%s" % (refused_ok, step, "%.2fs" % delay if delay else "-")
    else:  # disk
        os.makedirs(run_dir)
        mounted = subprocess.call(["mount", "-t", "tmpfs", "-o", "size=%dk" % args.disk_kib, "tmpfs", run_dir]) == 0
        if not mounted:
            print("disk   %-2d skipped: cannot mount a tmpfs (needs root)" % index, flush=True)
            return True, False
        # Leave a little room: config, metrics and a checkpoint or two fit, the rest does not.
        with open(os.path.join(run_dir, "filler"), "wb") as f:
            f.write(b"\0" * max(0, args.disk_kib - args.disk_free_kib) * 1024)
        job, log = launch(args, os.path.join(run_dir, "run"), base_sets(args), log_path=run_dir + ".log")
        ended = wait_end(job, start, args.run_limit)
        log.close()
        s = summary_of(os.path.join(run_dir, "run"))
        ok = ended and job.returncode in (0, 74)
        note = "records=%s" % ("complete" if job.returncode == 0 else "incomplete" if job.returncode == 74 else "-")
    model_dir = os.path.join(run_dir, "run") if kind == "disk" else run_dir
    if ended and job.returncode == 0 and s is not None and not os.path.exists(os.path.join(model_dir, "model.bin")):
        counters["completed_without_model"] += 1
        ok = False
    if mounted:
        subprocess.call(["umount", run_dir])
    hang = not ended
    print("%-6s %-2d rc=%s %s %s" % (kind, index, job.returncode, note, "OK" if ok else ("HANG" if hang else "FAIL")),
          flush=True)
    if ok and not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
        if os.path.exists(run_dir + ".log"):
            os.remove(run_dir + ".log")
    return ok, hang


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
    p.add_argument("--freezes", type=int, default=5, help="trials that SIGSTOP a server (restart policy)")
    p.add_argument("--reuses", type=int, default=5, help="trials that reuse a run directory (--start-over)")
    p.add_argument("--disks", type=int, default=3, help="trials on a nearly full tmpfs (root only)")
    p.add_argument("--disk-kib", type=int, default=8192, help="size of the tmpfs of a disk trial")
    p.add_argument("--disk-free-kib", type=int, default=1536, help="room left on it for the run")
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
    counters = {"other_weights": 0, "completed_without_model": 0}
    special = {"freeze": [], "reuse": [], "disk": []}
    for kind, n in (("freeze", args.freezes), ("reuse", args.reuses), ("disk", args.disks)):
        for i in range(n):
            special[kind].append(special_trial(args, kind, rng, workdir, i, counters))
    out = {}
    for kind, rs in results.items():
        times = [t for _, _, t in rs if t is not None]
        out[kind] = {"trials": len(rs), "ok": sum(1 for ok, _, _ in rs if ok), "hangs": sum(1 for _, h, _ in rs if h),
                     "max_end_after_kill_s": round(max(times), 1) if times else None}
    for kind, rs in special.items():
        out[kind] = {"trials": len(rs), "ok": sum(1 for ok, _ in rs if ok), "hangs": sum(1 for _, h in rs if h)}
    out["runs_finished_from_another_runs_weights"] = counters["other_weights"]
    out["completed_runs_without_a_model"] = counters["completed_without_model"]
    print("summary " + json.dumps(out), flush=True)
    good = all(o["ok"] == o["trials"] for o in out.values() if isinstance(o, dict)) and not any(counters.values())
    if good:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print("failing runs kept in " + workdir)
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
