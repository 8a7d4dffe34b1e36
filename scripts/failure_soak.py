#!/usr/bin/env python3
"""Failure soak: SIGKILL, SIGSTOP and SIGTERM workers, servers and launches at random times during sync training
(pshard's own workers, or pshard.torch ones with --python) and check that no job hangs or loses its work.

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
  - stop trials use checkpoint.on_sigterm = checkpoint and SIGTERM the launch at a random time (what a requeue
    does): it must exit 75 with both servers' checkpoints of the stop step (else a lost checkpoint), or 0 when the
    job was done first; `--resume` must then complete with the model of an uninterrupted run, bit for bit.
A trial that neither ends in time nor completes is a hang. Every completed run (exit 0) must have its
model.bin. Prints one line per trial and a summary; exits 1 on any hang or failure.

With --python, every kind runs against `-- python3 failure_soak_worker.py` jobs (pshard.torch workers on
Fashion-MNIST, which resume, rejoin, stop on SIGTERM and leave RUN_DIR/model.pt).

  scripts/failure_soak.py --pshard build/bin/pshard --worker-kills 20 --server-kills 10 \
      --freezes 5 --reuses 5 --disks 3 --stops 5 [--python]
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HEARTBEAT_TIMEOUT_S = 1.5
MODEL = ["model.bin"]  # the final model a completed run leaves: model.pt with --python (rank 0 of the worker writes it)
PYTHON_JOB = """# The job of failure_soak.py --python (its workers: failure_soak_worker.py)
[optimizer]
name = "momentum"
lr = 0.05
momentum = 0.9

[train]
batch_size = %d
epochs = %d

[cluster]
mode = "sync"
"""


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
    if s is None or s.get("epochs") != epochs or not os.path.exists(os.path.join(run_dir, MODEL[0])):
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
    sets = data_sets(args) + [
        "train.epochs=%d" % args.epochs,
        "cluster.heartbeat_interval_ms=200", "cluster.heartbeat_timeout_ms=%d" % int(HEARTBEAT_TIMEOUT_S * 1000),
        "cluster.request_timeout_ms=20000", "checkpoint.every_steps=25",
    ]
    if kind == "worker":
        sets.append("cluster.failure_policy=" + ("abort" if policy == "abort" else "continue"))
        if policy == "rejoin":
            sets.append("cluster.restart_workers=true")
    else:
        sets.append("cluster.server_failure_policy=restart")
    job, log = launch(args, run_dir, sets, log_mode="w")
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


def launch(args, run_dir, sets, extra=(), log_path=None, log_mode="a", resume=False):
    """Starts `pshard launch` of the soak's job in run_dir (or `--resume run_dir`), its output appended to
    run_dir.log; with --python the workers are `python3 failure_soak_worker.py`."""
    cmd = [args.pshard, "launch", "--servers", "2", "--workers", "3", "--timeout", "300", "--grace-ms", "2000"]
    cmd += ["--resume", run_dir] if resume else ["--config", args.config, "--run-dir", run_dir]
    cmd += list(extra)
    for s in [] if resume else sets:
        cmd += ["--set", s]
    if args.python:
        cmd += ["--", args.python, args.worker_script, str(args.train_size), "2000"]
    log = open(log_path or run_dir.rstrip("/") + ".log", log_mode)
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True), log


def data_sets(args):
    """The data settings of pshard's own workers; the Python worker takes them on its command line."""
    return [] if args.python else ["data.train_size=%d" % args.train_size, "data.test_size=2000"]


def base_sets(args, epochs=None):
    return data_sets(args) + [
        "train.epochs=%d" % (epochs or args.epochs),
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
    return (args.train_size // (3 * args.batch)) * epochs  # 3 workers


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
    if ended and job.returncode == 0 and s is not None and not os.path.exists(os.path.join(model_dir, MODEL[0])):
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


def same_model(args, a, b):
    """Whether two runs' final models are equal: model.bin byte for byte, or model.pt's tensors bitwise."""
    pa, pb = os.path.join(a, MODEL[0]), os.path.join(b, MODEL[0])
    if not (os.path.exists(pa) and os.path.exists(pb)):
        return False
    if not args.python:
        with open(pa, "rb") as fa, open(pb, "rb") as fb:
            return fa.read() == fb.read()
    # torch.save's bytes name the file's path; the tensors are compared by the job's Python (it has torch).
    same = "import sys, torch; a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2]); " \
           "sys.exit(0 if a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a) else 1)"
    return subprocess.call([args.python, "-c", same, pa, pb]) == 0


def checkpoint_of(run_dir, step):
    """Whether both servers' checkpoints of `step` are in run_dir (complete: only a rename publishes one)."""
    found = set()
    for _, _, files in os.walk(run_dir):
        for name in files:
            m = re.fullmatch(r"server-(\d+)\.step-(\d+)\.ckpt", name)  # the step is zero-padded
            if m:
                found.add((int(m.group(1)), int(m.group(2))))
    return all((r, step) in found for r in range(2))


def stop_trial(args, rng, workdir, index, counters, reference):
    """SIGTERM to `pshard launch` at a random time under checkpoint.on_sigterm = checkpoint (what a requeue
    does), then `--resume`: the launch exits 75 with both servers' checkpoints of the stop step (or 0 when the
    job was done first), and the resumed run completes with the weights of the uninterrupted `reference` run."""
    run_dir = os.path.join(workdir, "stop-%d" % index)
    sets = base_sets(args) + ["checkpoint.on_sigterm=checkpoint"]
    job, log = launch(args, run_dir, sets)
    start = time.monotonic()
    delay = rng.uniform(0.0, args.stop_max_delay)
    # Timed from the cluster map (a Python worker may still be importing torch) or, in every other trial, from the
    # first periodic checkpoint (training under way), so that both startup and mid-run stops are tried.
    anchor = "checkpoints" if index % 2 else "cluster.json"
    while not os.path.exists(os.path.join(run_dir, anchor)) and job.poll() is None and \
            time.monotonic() - start < 60:
        time.sleep(0.02)
    time.sleep(delay)
    if job.poll() is None:
        job.send_signal(signal.SIGTERM)
    ended = wait_end(job, start, args.run_limit)
    log.close()
    first_rc = job.returncode
    with open(run_dir + ".log", errors="replace") as f:
        said = f.read()
    # The coordinator's line, also when the stop came before the first epoch's summary could be written.
    m = re.search(r"the job stopped: stopped at step (\d+)", said)
    step = int(m.group(1)) if m else None
    kept = step is not None and checkpoint_of(run_dir, step)
    if ended and job.returncode == 75 and not kept:
        counters["lost_checkpoints"] += 1
    # A SIGTERM that reaches a Python worker before DistributedOptimizer took SIGTERM over (while it imports torch)
    # ends it by the signal: the job fails before its first step, with nothing trained and no checkpoint to lose.
    early = ended and job.returncode not in (0, 75) and "was killed by signal 15 (SIGTERM)" in said and \
        not os.path.isdir(os.path.join(run_dir, "checkpoints"))
    if early:
        counters["stops_before_training"] += 1
    # A SIGTERM that reaches a Python worker after it left the job (while the interpreter exits) ends it by the
    # signal too: a finished job then ends with "job failed". Counted and failed: the exit status is wrong.
    if ended and job.returncode not in (0, 75) and "was killed by signal 15 (SIGTERM)" in said and \
            "job finished: 3 of 3 workers left successfully" in said:
        counters["finished_jobs_failed_by_sigterm"] += 1
    ok = ended and (job.returncode == 0 or (job.returncode == 75 and kept) or early)
    resumed_rc = None
    if ok and job.returncode != 0:
        job, log = launch(args, run_dir, sets, extra=["--start-over"]) if early else \
            launch(args, run_dir, sets, resume=True)
        ended = wait_end(job, time.monotonic(), args.run_limit)
        log.close()
        resumed_rc = job.returncode
        ok = ended and job.returncode == 0
    completed = ended and job.returncode == 0 and summary_of(run_dir) is not None
    if completed and not os.path.exists(os.path.join(run_dir, MODEL[0])):
        counters["completed_without_model"] += 1
        ok = False
    same = completed and same_model(args, run_dir, reference)
    ok = ok and same
    hang = not ended
    print("stop   %-2d term_after=%.2fs(%s) rc=%s stop_step=%s checkpoint=%s %s=%s same_model=%s %s" % (
        index, delay, anchor, first_rc, step, kept, "start_over_rc" if early else "resumed_rc", resumed_rc, same, "OK" if ok else ("HANG" if hang else "FAIL")), flush=True)
    if ok and not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
        os.remove(run_dir + ".log")
    return ok, hang


def reference_run(args, workdir):
    """The uninterrupted run the stop trials' resumed runs must equal; exits when it fails."""
    run_dir = os.path.join(workdir, "stop-reference")
    job, log = launch(args, run_dir, base_sets(args) + ["checkpoint.on_sigterm=checkpoint"])
    ended = wait_end(job, time.monotonic(), args.run_limit)
    log.close()
    if not ended or job.returncode != 0 or not os.path.exists(os.path.join(run_dir, MODEL[0])):
        sys.exit("failure_soak: the uninterrupted reference run failed (%s.log)" % run_dir)
    return run_dir


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pshard", default=os.path.join(here, "..", "build", "bin", "pshard"))
    p.add_argument("--config", default=os.path.join(here, "..", "configs", "fmnist_mlp_sync.toml"))
    p.add_argument("--worker-kills", type=int, default=20)
    p.add_argument("--server-kills", type=int, default=10)
    p.add_argument("--train-size", type=int, default=0, help="training samples (default 9600; 4800 with --python)")
    p.add_argument("--epochs", type=int, default=0, help="epochs (default 4; 3 with --python)")
    p.add_argument("--max-delay", type=float, default=3.0, help="kill within this many seconds of the cluster map")
    p.add_argument("--run-limit", type=float, default=120.0, help="a job still running after this is a hang")
    p.add_argument("--min-acc", type=float, default=0.75)
    p.add_argument("--seed", type=int, default=8)
    p.add_argument("--freezes", type=int, default=5, help="trials that SIGSTOP a server (restart policy)")
    p.add_argument("--reuses", type=int, default=5, help="trials that reuse a run directory (--start-over)")
    p.add_argument("--disks", type=int, default=3, help="trials on a nearly full tmpfs (root only)")
    p.add_argument("--disk-kib", type=int, default=8192, help="size of the tmpfs of a disk trial")
    p.add_argument("--disk-free-kib", type=int, default=1536, help="room left on it for the run")
    p.add_argument("--stops", type=int, default=5,
                   help="trials that SIGTERM the launch (checkpoint.on_sigterm = checkpoint) and --resume it")
    p.add_argument("--stop-max-delay", type=float, default=1.0,
                   help="SIGTERM within this many seconds of the cluster map (a C++ job trains ~1 s)")
    p.add_argument("--python", nargs="?", const="/usr/bin/python3", default=None, metavar="PYTHON",
                   help="run the trials against `-- PYTHON failure_soak_worker.py` jobs (pshard.torch workers); "
                        "PSHARD_LIBRARY defaults to the pshard_c library beside --pshard")
    p.add_argument("--keep", action="store_true", help="keep the run directories of passing trials")
    args = p.parse_args()
    args.batch = 32 if args.python else 64  # fmnist_mlp_sync.toml's batch for pshard's own workers
    if args.python:
        # A Python job: 3 x 50 steps of 32 unless told otherwise; its config is written into the work folder.
        args.train_size = args.train_size or 4800
        args.epochs = args.epochs or 3
        args.worker_script = os.path.join(here, "failure_soak_worker.py")
        MODEL[0] = "model.pt"
        lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(args.pshard))), "lib", "libpshard_c.so")
        os.environ.setdefault("PSHARD_LIBRARY", lib)
        os.environ["PYTHONPATH"] = os.path.join(here, "..", "python") + os.pathsep + os.environ.get("PYTHONPATH", "")
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    else:
        args.train_size = args.train_size or 9600
        args.epochs = args.epochs or 4
    if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
        sys.exit("failure_soak: Fashion-MNIST is not installed in /usr/share/datasets/fashion-mnist")
    rng = random.Random(args.seed)
    workdir = tempfile.mkdtemp(prefix="pshard-soak-")
    if args.python:
        args.config = os.path.join(workdir, "python_job.toml")
        with open(args.config, "w") as f:
            f.write(PYTHON_JOB % (args.batch, args.epochs))
    results = {"worker": [], "server": []}
    for i in range(args.worker_kills):
        results["worker"].append(trial(args, "worker", ("abort", "continue", "rejoin")[i % 3], rng, workdir, i))
    for i in range(args.server_kills):
        results["server"].append(trial(args, "server", "restart", rng, workdir, i))
    counters = {"other_weights": 0, "completed_without_model": 0, "lost_checkpoints": 0, "stops_before_training": 0,
                "finished_jobs_failed_by_sigterm": 0}
    special = {"freeze": [], "reuse": [], "disk": [], "stop": []}
    for kind, n in (("freeze", args.freezes), ("reuse", args.reuses), ("disk", args.disks)):
        for i in range(n):
            special[kind].append(special_trial(args, kind, rng, workdir, i, counters))
    reference = reference_run(args, workdir) if args.stops else None
    for i in range(args.stops):
        special["stop"].append(stop_trial(args, rng, workdir, i, counters, reference))
    out = {}
    for kind, rs in results.items():
        times = [t for _, _, t in rs if t is not None]
        out[kind] = {"trials": len(rs), "ok": sum(1 for ok, _, _ in rs if ok), "hangs": sum(1 for _, h, _ in rs if h),
                     "max_end_after_kill_s": round(max(times), 1) if times else None}
    for kind, rs in special.items():
        out[kind] = {"trials": len(rs), "ok": sum(1 for ok, _ in rs if ok), "hangs": sum(1 for _, h in rs if h)}
    out["runs_finished_from_another_runs_weights"] = counters["other_weights"]
    out["completed_runs_without_a_model"] = counters["completed_without_model"]
    out["lost_checkpoints"] = counters["lost_checkpoints"]
    out["stops_before_training"] = counters.pop("stops_before_training")  # passed trials, counted apart
    out["finished_jobs_failed_by_sigterm"] = counters["finished_jobs_failed_by_sigterm"]
    print("summary " + json.dumps(out), flush=True)
    good = all(o["ok"] == o["trials"] for o in out.values() if isinstance(o, dict)) and not any(counters.values())
    if good:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print("failing runs kept in " + workdir)
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
