#!/usr/bin/env python3
"""Failure soak: SIGKILL, SIGSTOP and SIGTERM workers, servers and launches in the middle of sync training
(pshard's own workers, or pshard.torch ones with --python) and check that no job hangs or loses its work.

Every trial starts `pshard launch` (2 servers x 3 workers, Fashion-MNIST MLP, sync, checkpoints every 25 steps;
19200 samples x 12 epochs, or 9600 x 10 with --python: seconds of training on a 2-core machine) and injects one
fault, timed from the job's cluster map. The time comes from a measured training window: before the trials the soak
runs the job undisturbed (--measure-runs, 2), notes when it trains (from its first periodic checkpoint to the summary
in metrics.jsonl, in seconds after the cluster map), keeps the shortest window and prints it; each trial then draws
its fault time uniformly within --fault-from .. --fault-to (15 %-70 %) of that window. The first of those runs is
the uninterrupted reference that the stop trials' resumed models must equal.

A fault is **injected** when its signal reached a live process of a running job before training was over (no
summary yet; a stop trial's SIGTERM, when the launch then did not exit 0 with the job done first); a disk trial's
fault (the full disk) when the job ran out of room (exit 74). A trial that injected nothing passes nothing: it is
counted apart ("not injected").
  - worker kills cycle through cluster.failure_policy = abort / continue / continue with
    cluster.restart_workers (the killed worker is restarted and rejoins); a trial passes when the job ends
    within heartbeat timeout + 10 s of the kill (abort), completes every epoch with the two survivors finished, the
    model saved and launch's exit 1 naming the lost worker (continue: an early abort fails it), or completes with
    exit 0 and every worker finished (rejoin);
  - server kills use cluster.server_failure_policy = restart; a trial passes when the job completes
    (exit 0, every epoch, test accuracy above --min-acc);
  - freeze trials SIGSTOP a server under cluster.server_failure_policy = restart: the coordinator declares
    it dead, launch kills it and restarts the job, which must complete (exit 0);
  - stuck trials SIGSTOP a worker under failure_policy abort / continue, with a heartbeat timeout (60 s) far
    longer than the request timeout (4 s), so that only the servers' stall watch can find it: the coordinator
    must name it stuck ("worker N (host ...) is stuck: server ..."), and the job must end as documented: abort
    within request timeout + 10 s of the stop with "job failed:" naming the worker; continue completes every epoch
    with the two others, saves the model and exits 1 naming it. No other worker may be declared dead or stuck;
  - reuse trials run A (longer, other lr and seed) to the end in a run directory, check that launching B into
    it is refused, then run B there with --start-over and SIGKILL one of its servers: B must complete from its
    own checkpoints (a restart from a step past B's length would be A's weights);
  - disk trials (root only) use a few-MB tmpfs, mostly filled, as the run directory: the job must end (exit 0,
    or 74 when its records or checkpoints could not be written), never hang. The tmpfs is always unmounted.
  - stop trials use checkpoint.on_sigterm = checkpoint and SIGTERM the launch (what a requeue does), in even
    trials during the startup (between the cluster map and the first checkpoint, measured), in odd ones within the
    training window: it must exit 75 with both servers' checkpoints of the stop step (else a lost checkpoint), or 0
    when the job was done first (not injected); `--resume` must then complete with the model of the uninterrupted
    run, bit for bit.
A trial that neither ends in time nor completes is a hang. Every completed run (exit 0) must have its model. A
process a trial stopped (SIGSTOP) is killed at the end of the trial if it is still there, and counted: the launch
should have ended it. Prints one line per trial and a summary (passed / failed / hung / not injected per kind);
exits 1 on any hang or failure, or when fewer than --min-injected (90 %) of the trials injected their fault.

With --python, every kind runs against `-- python3 failure_soak_worker.py` jobs (pshard.torch workers on
Fashion-MNIST, which resume, rejoin, stop on SIGTERM and leave RUN_DIR/model.pt).

  scripts/failure_soak.py --pshard build/bin/pshard --worker-kills 20 --server-kills 10 \\
      --freezes 5 --stucks 6 --reuses 5 --disks 3 --stops 5 [--python]
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

from failure_soak_jobs import (Fault, HEARTBEAT_TIMEOUT_S, MODEL, Outcome, PYTHON_JOB, STUCK_HEARTBEAT_TIMEOUT_S,
                               STUCK_REQUEST_TIMEOUT_S, base_sets, checkpoint_of, completed_without_model, finish,
                               headline, launched, log_of, measure_job, pid_of, released, restart_step, same_model,
                               steps_of, summary_of, wait_end, wait_for_map)


# ---------------------------------------------------------------------------------------------------------------
# Trials


def continued_without(run_dir, s, victim, victim_hit, rc, epochs):
    """What cluster.failure_policy = continue promises: the job trains every epoch with the survivors and saves the
    model; when the victim was lost before the end, launch says so and exits 1 (never "every process exited
    successfully"). An abort that ends the job early fails this check."""
    if s is None or s.get("epochs") != epochs or not os.path.exists(os.path.join(run_dir, MODEL[0])):
        return False
    finished = set(s.get("workers_finished", []))
    survivors = {0, 1, 2} - {victim}
    if not survivors <= finished:
        return False
    if not victim_hit or victim in finished:  # the victim was gone or done before the fault landed
        return rc == 0
    return rc == 1 and "not every worker did" in log_of(run_dir)


def kill_trial(args, times, kind, policy, rng, workdir, index, counters):
    """SIGKILLs a worker (under `policy`: abort, continue, rejoin) or a server (restart) mid-training."""
    run_dir = os.path.join(workdir, "%s-%d" % (kind, index))
    sets = base_sets(args)
    if kind == "worker":
        sets.append("cluster.failure_policy=" + ("abort" if policy == "abort" else "continue"))
        if policy == "rejoin":
            sets.append("cluster.restart_workers=true")
    else:
        sets.append("cluster.server_failure_policy=restart")
    victim = rng.randrange(3 if kind == "worker" else 2)
    fault = Fault(times.mid_training(rng, args))
    start = time.monotonic()
    with launched(args, run_dir, sets, log_mode="w") as job:
        map_at = wait_for_map(job, run_dir, time.time())
        if map_at is not None:
            fault.inject(job, run_dir, map_at, pid_of(run_dir, kind, victim), signal.SIGKILL)
        ended = wait_end(job, start, args.run_limit)
        end = time.monotonic()
    s = summary_of(run_dir)
    acc = s.get("test_acc") if s else None
    after = end - fault.sent_at if fault.sent_at else None
    rc = job.returncode
    if kind == "worker" and policy == "abort":
        ok = after is None or after <= HEARTBEAT_TIMEOUT_S + 10
    elif kind == "worker" and policy == "rejoin":
        ok = rc == 0 and s is not None and s.get("epochs") is not None and len(s.get("workers_finished", [])) == 3
    elif kind == "worker":
        ok = continued_without(run_dir, s, victim, fault.sent_at is not None, rc, args.epochs)
    else:
        ok = rc == 0 and acc is not None and acc >= args.min_acc
    ok = ended and ok and not completed_without_model(run_dir, ended, rc, counters)
    line = "%-6s %-2d policy=%-8s victim=%d %s rc=%s ended_after_kill=%s acc=%s" % (
        kind, index, policy, victim, fault.describe("kill_after"), rc, "%.1fs" % after if after is not None else "-",
        "%.3f" % acc if acc is not None else "-")
    return finish(args, run_dir, Outcome(ended, ok, fault.injected, after), line)


def stuck_trial(args, times, policy, rng, workdir, index, counters):
    """SIGSTOPs a worker mid-training (alive, silent, pushing nothing) under failure_policy abort or continue: the
    servers' stall watch must report it stuck, the coordinator name it, and the job end as the policy says."""
    run_dir = os.path.join(workdir, "stuck-%d" % index)
    sets = base_sets(args, heartbeat_timeout_s=STUCK_HEARTBEAT_TIMEOUT_S, request_timeout_s=STUCK_REQUEST_TIMEOUT_S)
    sets += ["cluster.stall_warn_ms=1000", "cluster.failure_policy=" + policy]
    victim = rng.randrange(3)
    fault = Fault(times.mid_training(rng, args))
    start = time.monotonic()
    with released(fault, counters), launched(args, run_dir, sets, log_mode="w") as job:
        map_at = wait_for_map(job, run_dir, time.time())
        if map_at is not None:
            fault.inject(job, run_dir, map_at, pid_of(run_dir, "worker", victim), signal.SIGSTOP)
        ended = wait_end(job, start, args.run_limit)
        end = time.monotonic()
    log = log_of(run_dir)
    s = summary_of(run_dir)
    rc = job.returncode
    after = end - fault.sent_at if fault.sent_at else None
    # The coordinator's verdict, quoting the server that waited: "worker 1 (host vm, pid 7) is stuck: server 0 ...".
    stuck = re.compile(r"worker %d \(host [^)]*\) is stuck: server \d+ \(host " % victim)
    named = stuck.search(log) is not None
    # Only the stopped worker may be judged: a healthy worker declared dead or stuck, or a server blamed, is wrong.
    others_blamed = re.search(r"worker (?!%d\b)\d+ \(host [^)]*\) is (dead|stuck)" % victim, log) is not None or \
        "did not answer" in log
    if fault.sent_at is None:
        ok = rc == 0  # the job ended before the stop: nothing happened to it
    elif not fault.injected:
        ok = True  # stopped after training was over: the job must only end, which `ended` checks
    elif policy == "abort":
        failed = headline(log, "[launch] job failed:")
        ok = rc not in (0, None) and after <= STUCK_REQUEST_TIMEOUT_S + 10 and named and \
            stuck.search(failed) is not None
    else:
        lost = headline(log, "[launch] job finished, but not every worker did:")
        ok = named and ("worker %d:" % victim) in lost and continued_without(run_dir, s, victim, True, rc, args.epochs)
    ok = ended and ok and not others_blamed and not completed_without_model(run_dir, ended, rc, counters)
    line = "stuck  %-2d policy=%-8s victim=%d %s rc=%s ended_after_stop=%s named_stuck=%s others_blamed=%s" % (
        index, policy, victim, fault.describe("stop_after"), rc, "%.1fs" % after if after is not None else "-",
        named, others_blamed)
    return finish(args, run_dir, Outcome(ended, ok, fault.injected, after), line)


def freeze_trial(args, times, rng, workdir, index, counters):
    """SIGSTOPs a server mid-training under server_failure_policy = restart: declared dead, killed by the launch, the
    job restarted; it must complete (exit 0)."""
    run_dir = os.path.join(workdir, "freeze-%d" % index)
    fault = Fault(times.mid_training(rng, args))
    start = time.monotonic()
    sets = base_sets(args) + ["cluster.server_failure_policy=restart"]
    with released(fault, counters), launched(args, run_dir, sets) as job:
        map_at = wait_for_map(job, run_dir, time.time())
        if map_at is not None:
            fault.inject(job, run_dir, map_at, pid_of(run_dir, "server", rng.randrange(2)), signal.SIGSTOP)
        ended = wait_end(job, start, args.run_limit)
    rc = job.returncode
    ok = ended and rc == 0 and summary_of(run_dir) is not None and \
        not completed_without_model(run_dir, ended, rc, counters)
    line = "freeze %-2d %s rc=%s" % (index, fault.describe("froze_after"), rc)
    return finish(args, run_dir, Outcome(ended, ok, fault.injected), line)


def reuse_trial(args, times, rng, workdir, index, counters):
    """Runs A (longer, other lr and seed) in a directory, checks that B is refused there, then runs B with
    --start-over and SIGKILLs one of its servers mid-training: B must complete from its own checkpoints."""
    run_dir = os.path.join(workdir, "reuse-%d" % index)
    sets = base_sets(args) + ["cluster.server_failure_policy=restart"]
    start = time.monotonic()
    with launched(args, run_dir, base_sets(args, args.epochs + 2) + ["optimizer.lr=0.02", "run.seed=7",
                                                                    "cluster.server_failure_policy=restart"]) as a:
        ended_a = wait_end(a, start, args.run_limit)
    with launched(args, run_dir, sets) as refused:
        ended_r = wait_end(refused, time.monotonic(), 60)
    refused_ok = ended_r and refused.returncode != 0 and "--start-over" in log_of(run_dir)
    fault = Fault(times.mid_training(rng, args))
    with launched(args, run_dir, sets, extra=["--start-over"]) as job:
        map_at = wait_for_map(job, run_dir, time.time())
        if map_at is not None:
            fault.inject(job, run_dir, map_at, pid_of(run_dir, "server", rng.randrange(2)), signal.SIGKILL)
        ended = wait_end(job, time.monotonic(), args.run_limit)
    step = restart_step(run_dir + ".log")
    foreign = step is not None and step > steps_of(args, args.epochs)
    counters["other_weights"] += 1 if foreign else 0
    rc = job.returncode
    ok = ended_a and refused_ok and ended and rc == 0 and summary_of(run_dir) is not None and not foreign and \
        not completed_without_model(run_dir, ended, rc, counters)
    line = "reuse  %-2d %s rc=%s refused=%s restart_step=%s" % (index, fault.describe("kill_after"), rc, refused_ok,
                                                               step)
    return finish(args, run_dir, Outcome(ended, ok, fault.injected), line)


def unmount(path):
    """Unmounts the tmpfs; lazily when something still holds it, so that no mount is left behind."""
    if subprocess.call(["umount", path]) != 0:
        subprocess.call(["umount", "-l", path])


def disk_trial(args, workdir, index, counters):
    """Runs the job on a nearly full tmpfs: it must end with exit 0, or 74 when it could not write its records,
    checkpoints or model. Returns None when no tmpfs can be mounted (not root)."""
    mount = os.path.join(workdir, "disk-%d" % index)
    os.makedirs(mount)
    if subprocess.call(["mount", "-t", "tmpfs", "-o", "size=%dk" % args.disk_kib, "tmpfs", mount]) != 0:
        print("disk   %-2d skipped: cannot mount a tmpfs (needs root)" % index, flush=True)
        return None
    try:
        # Leave a little room: config, metrics and a checkpoint or two fit, the rest does not.
        with open(os.path.join(mount, "filler"), "wb") as f:
            f.write(b"\0" * max(0, args.disk_kib - args.disk_free_kib) * 1024)
        run_dir = os.path.join(mount, "run")
        with launched(args, run_dir, base_sets(args) + ["cluster.server_failure_policy=restart"],
                      log_path=mount + ".log") as job:
            ended = wait_end(job, time.monotonic(), args.run_limit)
        rc = job.returncode
        ok = ended and rc in (0, 74) and not completed_without_model(run_dir, ended, rc, counters)
    finally:
        unmount(mount)
    line = "disk   %-2d rc=%s records=%s injected=%s" % (
        index, rc, "complete" if rc == 0 else "incomplete" if rc == 74 else "-", "yes" if rc == 74 else "no")
    return finish(args, mount, Outcome(ended, ok, rc == 74), line)


def stop_trial(args, times, rng, workdir, index, counters, reference):
    """SIGTERM to `pshard launch` under checkpoint.on_sigterm = checkpoint (what a requeue does), then `--resume`:
    the launch exits 75 with both servers' checkpoints of the stop step (or 0 when the job was done first), and the
    resumed run completes with the weights of the uninterrupted `reference` run."""
    run_dir = os.path.join(workdir, "stop-%d" % index)
    sets = base_sets(args) + ["checkpoint.on_sigterm=checkpoint"]
    # Even trials stop the job while it starts (the workers load and initialise), odd ones while it trains.
    phase = "startup" if index % 2 == 0 else "training"
    fault = Fault(times.during_startup(rng) if phase == "startup" else times.mid_training(rng, args))
    start = time.monotonic()
    with launched(args, run_dir, sets) as job:
        map_at = wait_for_map(job, run_dir, time.time())
        if map_at is not None:
            fault.inject(job, run_dir, map_at, job.pid, signal.SIGTERM)
        ended = wait_end(job, start, args.run_limit)
    first_rc = job.returncode
    said = log_of(run_dir)
    # The coordinator's line, also when the stop came before the first epoch's summary could be written.
    m = re.search(r"the job stopped: stopped at step (\d+)", said)
    step = int(m.group(1)) if m else None
    kept = step is not None and checkpoint_of(run_dir, step)
    if ended and first_rc == 75 and not kept:
        counters["lost_checkpoints"] += 1
    # A SIGTERM that reaches a Python worker before it could take SIGTERM over ends it by the signal: the job fails
    # before its first step, with nothing trained and no checkpoint to lose.
    early = ended and first_rc not in (0, 75) and "was killed by signal 15 (SIGTERM)" in said and \
        not os.path.isdir(os.path.join(run_dir, "checkpoints"))
    if early:
        counters["stops_before_training"] += 1
    # A SIGTERM that reaches a Python worker after it left the job (while the interpreter exits) ends it by the
    # signal too: a finished job then ends with "job failed". Counted and failed: the exit status is wrong.
    if ended and first_rc not in (0, 75) and "was killed by signal 15 (SIGTERM)" in said and \
            "job finished: 3 of 3 workers left successfully" in said:
        counters["finished_jobs_failed_by_sigterm"] += 1
    ok = ended and (first_rc == 0 or (first_rc == 75 and kept) or early)
    resumed_rc = None
    if ok and first_rc != 0:
        # A job stopped before training starts over; one stopped at a checkpoint resumes from it.
        again = {"extra": ["--start-over"]} if early else {"resume": True}
        with launched(args, run_dir, sets, **again) as job:
            ended = wait_end(job, time.monotonic(), args.run_limit)
        resumed_rc = job.returncode
        ok = ended and resumed_rc == 0
    completed = ended and job.returncode == 0 and summary_of(run_dir) is not None
    ok = ok and not completed_without_model(run_dir, ended, job.returncode, counters)
    same = completed and same_model(args, run_dir, reference)
    ok = ok and same
    # A launch that exits 0 after the SIGTERM had finished the job before the stop could take effect: nothing was
    # stopped, so nothing was tested.
    fault.injected = fault.injected and first_rc != 0
    line = "stop   %-2d %s(%s) rc=%s stop_step=%s checkpoint=%s %s=%s same_model=%s" % (
        index, fault.describe("term_after"), phase, first_rc, step, kept,
        "start_over_rc" if early else "resumed_rc", resumed_rc, same)
    return finish(args, run_dir, Outcome(ended, ok, fault.injected), line)


# ---------------------------------------------------------------------------------------------------------------
# The soak


def parse_args(here):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pshard", default=os.path.join(here, "..", "build", "bin", "pshard"))
    p.add_argument("--config", default=os.path.join(here, "..", "configs", "fmnist_mlp_sync.toml"))
    p.add_argument("--worker-kills", type=int, default=20)
    p.add_argument("--server-kills", type=int, default=10)
    p.add_argument("--train-size", type=int, default=0, help="training samples (default 19200; 9600 with --python)")
    p.add_argument("--epochs", type=int, default=0, help="epochs (default 12; 10 with --python)")
    p.add_argument("--fault-from", type=float, default=0.15,
                   help="a fault lands at this fraction of the measured training window at the earliest")
    p.add_argument("--fault-to", type=float, default=0.70, help="... and at this fraction at the latest")
    p.add_argument("--min-injected", type=float, default=0.90,
                   help="the soak fails when a smaller fraction of its trials injected their fault")
    p.add_argument("--measure-runs", type=int, default=2,
                   help="undisturbed runs timed before the trials (the shortest training window is used)")
    p.add_argument("--run-limit", type=float, default=120.0, help="a job still running after this is a hang")
    p.add_argument("--min-acc", type=float, default=0.75)
    p.add_argument("--seed", type=int, default=8)
    p.add_argument("--freezes", type=int, default=5, help="trials that SIGSTOP a server (restart policy)")
    p.add_argument("--stucks", type=int, default=6,
                   help="trials that SIGSTOP a worker (failure_policy abort / continue: the stall watch finds it)")
    p.add_argument("--reuses", type=int, default=5, help="trials that reuse a run directory (--start-over)")
    p.add_argument("--disks", type=int, default=3, help="trials on a nearly full tmpfs (root only)")
    p.add_argument("--disk-kib", type=int, default=8192, help="size of the tmpfs of a disk trial")
    p.add_argument("--disk-free-kib", type=int, default=1536, help="room left on it for the run")
    p.add_argument("--stops", type=int, default=5,
                   help="trials that SIGTERM the launch (checkpoint.on_sigterm = checkpoint) and --resume it")
    p.add_argument("--python", nargs="?", const="/usr/bin/python3", default=None, metavar="PYTHON",
                   help="run the trials against `-- PYTHON failure_soak_worker.py` jobs (pshard.torch workers); "
                        "PSHARD_LIBRARY defaults to the pshard_c library beside --pshard")
    p.add_argument("--keep", action="store_true", help="keep the run directories of passing trials")
    args = p.parse_args()
    if not 0.0 <= args.fault_from < args.fault_to <= 1.0:
        p.error("--fault-from and --fault-to must be fractions, from < to")
    if args.measure_runs < 1:
        p.error("--measure-runs must be at least 1")
    args.worker_script = os.path.join(here, "failure_soak_worker.py")
    return args


def prepare_job(args, here, workdir):
    """Sizes the job (long enough that a fault has seconds to land in on a 2-core machine) and, with --python,
    writes its config and the workers' environment."""
    if args.python:
        # 9600 samples: 100 steps of 32 per worker an epoch.
        args.batch = 32
        args.train_size = args.train_size or 9600
        args.epochs = args.epochs or 10
        MODEL[0] = "model.pt"
        lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(args.pshard))), "lib", "libpshard_c.so")
        os.environ.setdefault("PSHARD_LIBRARY", lib)
        os.environ["PYTHONPATH"] = os.path.join(here, "..", "python") + os.pathsep + os.environ.get("PYTHONPATH", "")
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        args.config = os.path.join(workdir, "python_job.toml")
        with open(args.config, "w") as f:
            f.write(PYTHON_JOB % (args.batch, args.epochs))
    else:
        args.batch = 64  # fmnist_mlp_sync.toml's batch for pshard's own workers
        # 19200 samples: 100 steps of 64 per worker an epoch.
        args.train_size = args.train_size or 19200
        args.epochs = args.epochs or 12


def run_trials(args, times, reference, rng, workdir, counters):
    """Every trial, kind by kind; returns {kind: [Outcome]}."""
    results = {k: [] for k in ("worker", "server", "freeze", "stuck", "reuse", "disk", "stop")}
    for i in range(args.worker_kills):
        policy = ("abort", "continue", "rejoin")[i % 3]
        results["worker"].append(kill_trial(args, times, "worker", policy, rng, workdir, i, counters))
    for i in range(args.server_kills):
        results["server"].append(kill_trial(args, times, "server", "restart", rng, workdir, i, counters))
    for i in range(args.freezes):
        results["freeze"].append(freeze_trial(args, times, rng, workdir, i, counters))
    for i in range(args.stucks):
        results["stuck"].append(stuck_trial(args, times, ("abort", "continue")[i % 2], rng, workdir, i, counters))
    for i in range(args.reuses):
        results["reuse"].append(reuse_trial(args, times, rng, workdir, i, counters))
    for i in range(args.disks):
        outcome = disk_trial(args, workdir, i, counters)
        if outcome is not None:  # skipped without root
            results["disk"].append(outcome)
    for i in range(args.stops):
        results["stop"].append(stop_trial(args, times, rng, workdir, i, counters, reference))
    return results


def summarize(results, counters):
    """The summary's counts per kind and over all trials."""
    out = {}
    for kind, rs in results.items():
        verdicts = [r.verdict() for r in rs]
        out[kind] = {"trials": len(rs), "passed": verdicts.count("OK"), "failed": verdicts.count("FAIL"),
                     "hung": verdicts.count("HANG"), "not_injected": verdicts.count("NOT INJECTED")}
        times = [r.after_fault for r in rs if r.after_fault is not None]
        if times:
            out[kind]["max_end_after_fault_s"] = round(max(times), 1)
    every = [r for rs in results.values() for r in rs]
    injected = sum(1 for r in every if r.injected)
    out["all"] = {"trials": len(every), "passed": sum(o["passed"] for o in out.values()),
                  "failed": sum(o["failed"] for o in out.values()), "hung": sum(o["hung"] for o in out.values()),
                  "not_injected": len(every) - injected,
                  "injected_pct": round(100.0 * injected / len(every), 1) if every else None}
    out["runs_finished_from_another_runs_weights"] = counters["other_weights"]
    out["completed_runs_without_a_model"] = counters["completed_without_model"]
    out["lost_checkpoints"] = counters["lost_checkpoints"]
    out["stops_before_training"] = counters["stops_before_training"]  # passed trials, counted apart
    out["finished_jobs_failed_by_sigterm"] = counters["finished_jobs_failed_by_sigterm"]
    out["stopped_processes_left_behind"] = counters["stopped_processes_left_behind"]
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    args = parse_args(here)
    if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
        sys.exit("failure_soak: Fashion-MNIST is not installed in /usr/share/datasets/fashion-mnist")
    rng = random.Random(args.seed)
    workdir = tempfile.mkdtemp(prefix="pshard-soak-")
    prepare_job(args, here, workdir)
    began = time.monotonic()
    times, reference = measure_job(args, workdir)
    print("measured job (%s workers, %d samples x %d epochs, undisturbed): %s" % (
        "pshard.torch" if args.python else "pshard", args.train_size, args.epochs, times.describe(args)), flush=True)
    counters = {"other_weights": 0, "completed_without_model": 0, "lost_checkpoints": 0, "stops_before_training": 0,
                "finished_jobs_failed_by_sigterm": 0, "stopped_processes_left_behind": 0}
    results = run_trials(args, times, reference, rng, workdir, counters)
    out = summarize(results, counters)
    out["wall_s"] = round(time.monotonic() - began, 1)
    print("summary " + json.dumps(out), flush=True)
    total = out["all"]
    enough = total["trials"] == 0 or total["injected_pct"] >= 100.0 * args.min_injected
    if not enough:
        print("failure_soak: only %.1f %% of the trials injected their fault (at least %.0f %% needed)" % (
            total["injected_pct"], 100.0 * args.min_injected))
    # stops_before_training counts passed trials; every other counter is a defect.
    defects = any(v for k, v in counters.items() if k != "stops_before_training")
    good = total["failed"] == 0 and total["hung"] == 0 and enough and not defects
    if good and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print("%s runs kept in %s" % ("the" if good else "failing", workdir))
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
