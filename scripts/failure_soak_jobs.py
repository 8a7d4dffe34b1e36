"""The jobs of scripts/failure_soak.py: starting and timing them, reading their run directories, and the faults a
trial injects (Fault) with how each trial's outcome is judged (Outcome). The trials and the soak itself are in
failure_soak.py."""
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HEARTBEAT_TIMEOUT_S = 1.5
# Stuck trials: a read that has waited the request timeout less two tenths (3.2 s) names the workers it waits for as
# stuck. The heartbeat timeout is far longer, so a stopped worker's silent heartbeats cannot be what finds it.
STUCK_REQUEST_TIMEOUT_S = 4.0
STUCK_HEARTBEAT_TIMEOUT_S = 60.0
MODEL = ["model.bin"]  # the final model a completed run leaves: model.pt with --python (every rank writes it)
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


# ---------------------------------------------------------------------------------------------------------------
# Reading a run directory


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


def log_of(run_dir):
    with open(run_dir + ".log", errors="replace") as f:
        return f.read()


def headline(log, prefix):
    """The first line of the launch's output that starts with prefix ("" when none does)."""
    return next((l for l in log.splitlines() if l.startswith(prefix)), "")


def pid_of(run_dir, role, rank):
    m = read_json(os.path.join(run_dir, "cluster.json"))
    if not m:
        return None
    for n in m.get("nodes", []):
        if n["role"] == role and n["rank"] == rank:
            return n["pid"]
    return None


def restart_step(log_path):
    """The step the last restart resumed from, or None."""
    step = None
    with open(log_path, errors="replace") as f:
        for line in f:
            if "restarting the job" in line and "from the checkpoint of step " in line:
                step = int(line.rsplit("from the checkpoint of step ", 1)[1].split()[0].strip(".,"))
    return step


def has_checkpoint(run_dir):
    """Whether a server has published a checkpoint in run_dir (the first is step 25's: the workers train)."""
    try:
        return any(name.endswith(".ckpt") for name in os.listdir(os.path.join(run_dir, "checkpoints")))
    except OSError:
        return False


def checkpoint_of(run_dir, step):
    """Whether both servers' checkpoints of `step` are in run_dir (complete: only a rename publishes one)."""
    found = set()
    for _, _, files in os.walk(run_dir):
        for name in files:
            m = re.fullmatch(r"server-(\d+)\.step-(\d+)\.ckpt", name)  # the step is zero-padded
            if m:
                found.add((int(m.group(1)), int(m.group(2))))
    return all((r, step) in found for r in range(2))


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


def steps_of(args, epochs):
    return (args.train_size // (3 * args.batch)) * epochs  # 3 workers


# ---------------------------------------------------------------------------------------------------------------
# Starting and ending jobs


def data_sets(args):
    """The data settings of pshard's own workers; the Python worker takes them on its command line."""
    return [] if args.python else ["data.train_size=%d" % args.train_size, "data.test_size=2000"]


def base_sets(args, epochs=None, heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S, request_timeout_s=20.0):
    return data_sets(args) + [
        "train.epochs=%d" % (epochs or args.epochs),
        "cluster.heartbeat_interval_ms=200", "cluster.heartbeat_timeout_ms=%d" % int(heartbeat_timeout_s * 1000),
        "cluster.request_timeout_ms=%d" % int(request_timeout_s * 1000), "checkpoint.every_steps=25",
    ]


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


@contextlib.contextmanager
def launched(args, run_dir, sets, **kw):
    """`launch` whose job is killed (its whole process group) and whose log is closed when the block is left, also
    on an exception or Ctrl-C: no trial leaves a job running."""
    job, log = launch(args, run_dir, sets, **kw)
    try:
        yield job
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
        log.close()


def wait_end(job, start, limit):
    """Waits for the job until `limit` s after `start`; kills it when it is still running then. Whether it ended."""
    while job.poll() is None and time.monotonic() - start < limit:
        time.sleep(0.05)
    ended = job.poll() is not None
    if not ended:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    return ended


def wait_for_map(job, run_dir, started_at, limit=60.0):
    """Waits for this launch's cluster map (until --start-over has moved it, an earlier run's is still there) and
    returns the time it was seen (time.monotonic), or None when the job ended first or it never came."""
    cluster_json = os.path.join(run_dir, "cluster.json")
    start = time.monotonic()
    while job.poll() is None and time.monotonic() - start < limit:
        try:
            if os.path.getmtime(cluster_json) >= started_at - 1.0:
                return time.monotonic()
        except OSError:
            pass
        time.sleep(0.02)
    return None


# ---------------------------------------------------------------------------------------------------------------
# Timing and injecting a fault


class JobTimes:
    """When the undisturbed job trains, in seconds after its cluster map was seen: from its first periodic
    checkpoint (step 25: the workers train) to its summary (training and evaluation over). Faults are drawn
    within this window, so that they land while the job trains whatever the job's size and the machine's speed."""

    def __init__(self, map_after_launch, train_from, train_to, ended):
        self.map_after_launch = map_after_launch
        self.train_from = train_from
        self.train_to = train_to
        self.ended = ended

    def mid_training(self, rng, args):
        """A fault time drawn uniformly within --fault-from .. --fault-to of the training window."""
        return self.train_from + rng.uniform(args.fault_from, args.fault_to) * (self.train_to - self.train_from)

    def during_startup(self, rng):
        """A fault time between the cluster map and the first checkpoint (workers loading, initialising)."""
        return rng.uniform(0.0, self.train_from)

    def describe(self, args):
        lo = self.train_from + args.fault_from * (self.train_to - self.train_from)
        hi = self.train_from + args.fault_to * (self.train_to - self.train_from)
        return ("cluster map %.1f s after the launch; training from %.2f s to %.2f s after the map (%.2f s); job "
                "ended %.2f s after the map; faults land %.2f-%.2f s after the map" % (
                    self.map_after_launch, self.train_from, self.train_to, self.train_to - self.train_from,
                    self.ended, lo, hi))


def time_job(args, run_dir):
    """Runs the soak's job once undisturbed in run_dir and returns its JobTimes; exits when it fails or when its
    training window cannot be told."""
    start = time.monotonic()
    seen = {}  # what appeared, when: "map", "checkpoint", "summary"
    with launched(args, run_dir, base_sets(args) + ["checkpoint.on_sigterm=checkpoint"]) as job:
        while job.poll() is None and time.monotonic() - start < args.run_limit:
            now = time.monotonic()
            if "map" not in seen and os.path.exists(os.path.join(run_dir, "cluster.json")):
                seen["map"] = now
            if "checkpoint" not in seen and has_checkpoint(run_dir):
                seen["checkpoint"] = now
            if "summary" not in seen and summary_of(run_dir) is not None:
                seen["summary"] = now
            time.sleep(0.02)
        end = time.monotonic()
        ok = job.poll() == 0 and os.path.exists(os.path.join(run_dir, MODEL[0]))
    if not ok or len(seen) < 3:
        sys.exit("failure_soak: the undisturbed run failed or its training could not be timed (saw %s; %s.log)" % (
            ", ".join(sorted(seen)) or "nothing", run_dir))
    m = seen["map"]
    return JobTimes(m - start, seen["checkpoint"] - m, seen["summary"] - m, end - m)


def measure_job(args, workdir):
    """Times the undisturbed job --measure-runs times and keeps the shortest training window: on a loaded machine
    a job's length varies up to twofold from one run to the next (4.4 and 8.1 s back to back), and a fault drawn
    from the shortest still lands in a job that runs faster than the others.
    Returns those JobTimes and the first run's directory, the stop trials' reference (the same settings)."""
    runs = [time_job(args, os.path.join(workdir, "reference-%d" % i)) for i in range(args.measure_runs)]
    for i, t in enumerate(runs):
        print("undisturbed run %d: training %.2f s" % (i, t.train_to - t.train_from), flush=True)
    return min(runs, key=lambda t: t.train_to - t.train_from), os.path.join(workdir, "reference-0")


def process_start(pid):
    """The start time of process pid (/proc/PID/stat field 22), which tells it from a later process with its pid;
    None when it is gone or a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


class Fault:
    """One signal sent to one process of a running job, and what came of it."""

    def __init__(self, delay):
        self.delay = delay  # seconds after the cluster map it was due
        self.sent_at = None  # time.monotonic() when it was sent; None: the job or the process had ended first
        self.injected = False  # sent while the job still trained (no summary yet)
        self.pid = None
        self.started = None  # the process's start time, to find it again (process_start)

    def inject(self, job, run_dir, map_at, pid, sig):
        """Waits until the fault is due and sends `sig` to pid if the job still runs."""
        due = map_at + self.delay
        while job.poll() is None and time.monotonic() < due:
            time.sleep(min(0.02, max(0.0, due - time.monotonic())))
        if job.poll() is not None or pid is None:
            return self
        training = summary_of(run_dir) is None
        started = process_start(pid)
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return self
        self.pid, self.started, self.sent_at = pid, started, time.monotonic()
        self.injected = training and started is not None  # a zombie takes a signal and nothing happens
        return self

    def release(self):
        """Ends the process if it is still there (a SIGSTOPped one the launch did not end): SIGKILL ends a stopped
        process too, SIGCONT lets it go at once. Returns whether it was still there."""
        if self.started is None or process_start(self.pid) != self.started:
            return False
        for sig in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass
        return True

    def describe(self, what):
        """For the trial's line: when the fault was due (`what`=...s) and whether it was injected."""
        return "%s=%.2fs injected=%s" % (what, self.delay, "yes" if self.injected else "no")


@contextlib.contextmanager
def released(fault, counters):
    """Ends the process the trial SIGSTOPped when the block is left, also on an exception or Ctrl-C, so that nothing
    stays behind. Entered before `launched`, it checks after the launch has ended, which should have ended the
    process with its job: one still there is counted."""
    try:
        yield
        if fault.release():
            counters["stopped_processes_left_behind"] += 1
    finally:
        fault.release()


class Outcome:
    """A trial's result: whether it ended, whether it did what it must, whether its fault was injected."""

    def __init__(self, ended, ok, injected, after_fault=None):
        self.ended, self.ok, self.injected, self.after_fault = ended, ok, injected, after_fault

    def verdict(self):
        if not self.ended:
            return "HANG"
        if not self.ok:
            return "FAIL"
        return "OK" if self.injected else "NOT INJECTED"


def finish(args, run_dir, outcome, line):
    """Prints the trial's line and removes the run directory of a passed trial (unless --keep)."""
    print("%s %s" % (line, outcome.verdict()), flush=True)
    if outcome.verdict() == "OK" and not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
        if os.path.exists(run_dir + ".log"):
            os.remove(run_dir + ".log")
    return outcome


def completed_without_model(model_dir, ended, rc, counters):
    """Counts a completed run (exit 0, a summary) that left no model; returns whether it did."""
    if ended and rc == 0 and summary_of(model_dir) is not None and \
            not os.path.exists(os.path.join(model_dir, MODEL[0])):
        counters["completed_without_model"] += 1
        return True
    return False
