"""A pshard run seen from Python: its directory, its records, and (when this process started it) its `pshard launch`.

    run = pshard.launch(servers=1, workers=2, config="configs/linreg_sgd.toml")   # pshard/launch.py
    run.wait(timeout=600)          # the launch's exit status; PshardError(PSHARD_ERR_TIMEOUT) if it runs on
    run.metrics()[-1]["test_loss"] # the last epoch line of RUN_DIR/metrics.jsonl
    run.summary()["samples_per_s"] # the end-of-job summary, None until it is written
    run = pshard.load_run("runs/linreg_sgd")                                      # any run, finished or running

A Run that owns its launch stops it when it is garbage-collected or the interpreter exits while the job still
runs: keep the Run while the job should go on. Nothing here imports torch.
"""
import atexit
import json
import os
import signal
import subprocess
import threading
import time
import weakref

from ._lib import PshardError

# RUN_DIR/launch.log: what `pshard launch` printed (stdout and stderr), written by pshard.launch().
OUTPUT_FILE = "launch.log"

# The runs this process started whose launch may still run: stopped at exit (_stop_at_exit).
_live = weakref.WeakSet()
_live_lock = threading.Lock()
_atexit_registered = False


class _MetricsReader:
    """Reads RUN_DIR/metrics.jsonl as it grows: each call parses the complete lines added since the last one. A last
    line without its newline is left for a later call (its writer is mid-line); a complete line that is not JSON is
    an error naming it, as for `pshard report`."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.lines = 0
        self.records = []
        self.lock = threading.Lock()

    def read(self):
        with self.lock:
            try:
                with open(self.path, "rb") as f:
                    f.seek(self.offset)
                    data = f.read()
            except FileNotFoundError:
                return list(self.records)
            end = data.rfind(b"\n")
            if end < 0:
                return list(self.records)
            for raw in data[:end].split(b"\n"):
                self.lines += 1
                text = raw.decode("utf-8", "replace").strip()
                if not text:
                    continue
                try:
                    self.records.append(json.loads(text))
                except ValueError as e:
                    raise PshardError("pshard: %s:%d is not a JSON line (%s): the run's records are damaged"
                                      % (self.path, self.lines, e), "PSHARD_ERR_INTERNAL")
            self.offset += end + 1
            return list(self.records)


class Run:
    """One run directory, and the `pshard launch` process that writes it when this process started the job.

    Made by pshard.launch() (owns the process) or pshard.load_run() (read-only: no process)."""

    def __init__(self, run_dir, process=None, argv=None, grace_s=5.0):
        self.dir = os.path.abspath(run_dir)
        self.argv = list(argv) if argv else None  # the launch's command line, when this process started it
        self._process = process
        self._grace_s = grace_s  # the launch's --grace-ms, in seconds: how long its children get after SIGTERM
        self._owner_pid = os.getpid()
        self._metrics = _MetricsReader(os.path.join(self.dir, "metrics.jsonl"))
        if process is not None:
            _track(self)

    def __repr__(self):
        if self._process is None:
            state = "loaded"
        else:
            code = self.poll()
            state = "running (pid %d)" % self._process.pid if code is None else "exited %d" % code
        return "<pshard.Run %s %s>" % (self.dir, state)

    # ---- The process ---------------------------------------------------------------------------------------

    @property
    def pid(self):
        """The `pshard launch` process's id (also its process group's), or None for a loaded run."""
        return None if self._process is None else self._process.pid

    @property
    def returncode(self):
        """The launch's exit status once it ended, else None (always None for a loaded run)."""
        return None if self._process is None else self._process.poll()

    def poll(self):
        """The launch's exit status if it has ended, else None (a loaded run: None)."""
        return self.returncode

    def wait(self, timeout=None, check=False):
        """Blocks until the launch ends, at most `timeout` seconds (None: as long as the job runs, which
        launch(timeout_s=) bounds); returns its exit status. PshardError with status PSHARD_ERR_TIMEOUT when the
        time is up (the job goes on); with check=True, a PshardError naming the status and the output's last lines
        when it is not 0. A loaded run has no process to wait for: PshardError."""
        process = self._need_process("wait")
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise PshardError("pshard: the job in %s still runs after %s s (pid %d): wait longer, or run.stop()"
                              % (self.dir, timeout, process.pid), "PSHARD_ERR_TIMEOUT")
        if check and code != 0:
            raise self.failure()
        return code

    def failure(self):
        """A PshardError describing how the launch ended (status, the output's last lines); `.exit_code` holds the
        status. For a launch that exited 0 too, so call it after checking."""
        code = self.returncode
        how = "was killed by signal %d" % -code if code is not None and code < 0 else "exited with status %s" % code
        tail = self.output_tail(20)
        err = PshardError("pshard: the job in %s %s; the last lines of %s:\n%s"
                          % (self.dir, how, os.path.join(self.dir, OUTPUT_FILE), tail), "PSHARD_ERR_ABORTED")
        err.exit_code = code
        err.run = self
        return err

    def stop(self, grace_s=None):
        """Stops the job: SIGTERM to `pshard launch`, which passes it on (every process stops, or with
        checkpoint.on_sigterm = checkpoint the job stops at the next step boundary and exits 75); SIGKILL to the
        launch's process group after `grace_s` seconds (default: the launch's grace plus 10 s), and its processes
        die with it. Returns the launch's exit status (143 after a plain SIGTERM). A loaded run: PshardError."""
        process = self._need_process("stop")
        if process.poll() is not None:
            return process.returncode
        grace = self._grace_s + 10.0 if grace_s is None else grace_s
        _signal_group(process, signal.SIGTERM, group=False)
        try:
            return process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            return _kill(process)

    def kill(self):
        """SIGKILL to the launch's process group at once; the job's processes die with the launch
        (PR_SET_PDEATHSIG). Returns the launch's exit status (-9), waiting at most 10 s for it."""
        return _kill(self._need_process("kill"))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._process is not None and self._process.poll() is None:
            self.stop()

    def __del__(self):
        # The Run is collected while its job runs: nobody can wait for it any more.
        try:
            process = self._process
            if process is not None and os.getpid() == self._owner_pid and process.poll() is None:
                _kill(process)
        except Exception:
            pass

    def _need_process(self, what):
        if self._process is None:
            raise PshardError("pshard: run.%s(): the run in %s was loaded from its directory (pshard.load_run); only "
                              "the Run that pshard.launch() returned has a process" % (what, self.dir),
                              "PSHARD_ERR_STATE")
        return self._process

    # ---- The records ---------------------------------------------------------------------------------------

    def events(self, kind=None):
        """Every line of RUN_DIR/metrics.jsonl so far as a dict (docs/METRICS.md), or only those whose "event" is
        `kind` ("start", "step", "epoch", "summary", ...). Each call reads what was added since the last one; a
        last line still being written is left out until it is complete."""
        records = self._metrics.read()
        return records if kind is None else [r for r in records if r.get("event") == kind]

    def metrics(self):
        """The epoch lines so far (one dict per epoch, combined over the workers: what metrics.csv holds)."""
        return self.events("epoch")

    def progress(self):
        """The latest lines: {"step": the last step line or None, "epoch": the last epoch line or None}."""
        records = self.events()
        last = {"step": None, "epoch": None}
        for r in records:
            if r.get("event") in last:
                last[r["event"]] = r
        return last

    def summary(self):
        """The end-of-job summary line once it is written (the job has ended), else None."""
        found = self.events("summary")
        return found[-1] if found else None

    def results(self):
        """A job started with launch(fn=...): each rank's return value, in rank order (None for a rank that
        returned none it could pickle, or has not returned yet)."""
        from .launch import function_results
        return function_results(self.dir)

    @property
    def output_path(self):
        """RUN_DIR/launch.log: what the launch printed (pshard.launch() writes it; a run started otherwise has
        none)."""
        return os.path.join(self.dir, OUTPUT_FILE)

    @property
    def output(self):
        """The launch's output so far (stdout and stderr together), "" when there is none."""
        try:
            with open(self.output_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def dashboard_url(self, timeout_s=10.0):
        """The address of the job's live web page, with its token (a job launched with dashboard=...): waits up to
        timeout_s for the launch to print it. None when the launch has ended without one or prints none in time."""
        deadline = time.monotonic() + timeout_s
        while True:
            for line in self.output.split("\n"):
                if line.startswith("[launch] dashboard: "):
                    return line.split(": ", 1)[1].strip()
            if self._process is None or self.poll() is not None or time.monotonic() > deadline:
                return None
            time.sleep(0.05)

    def output_tail(self, lines=20):
        """The output's last `lines` lines."""
        return "\n".join(self.output.rstrip("\n").split("\n")[-lines:])


def load_run(run_dir):
    """A Run of an existing run directory (finished or still running), read-only: events(), metrics(), progress(),
    summary(), output. PshardError when the directory holds no run."""
    if not os.path.isdir(run_dir):
        raise PshardError("pshard.load_run: %s is not a directory" % run_dir, "PSHARD_ERR_ARGUMENT")
    marks = ("metrics.jsonl", "config.toml", "run-id", OUTPUT_FILE)
    if not any(os.path.exists(os.path.join(run_dir, m)) for m in marks):
        raise PshardError("pshard.load_run: %s holds no run (none of %s)" % (run_dir, ", ".join(marks)),
                          "PSHARD_ERR_ARGUMENT")
    return Run(run_dir)


def _signal_group(process, sig, group=True):
    """Sends `sig` to the launch (group=False) or to its process group; a process already gone is no error."""
    try:
        if group:
            os.killpg(process.pid, sig)
        else:
            os.kill(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill(process):
    """SIGKILL to the launch's process group, then a bounded wait that reaps it; its exit status, or None."""
    if process.poll() is None:
        _signal_group(process, signal.SIGKILL)
    try:
        return process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        return None


def _track(run):
    global _atexit_registered
    with _live_lock:
        _live.add(run)
        if not _atexit_registered:
            atexit.register(_stop_at_exit)
            _atexit_registered = True


def _stop_at_exit():
    # The interpreter exits while jobs it started still run: stop each (SIGTERM, then SIGKILL after a short grace).
    with _live_lock:
        runs = list(_live)
    for run in runs:
        if run._owner_pid != os.getpid() or run._process is None or run._process.poll() is not None:
            continue
        try:
            run.stop(grace_s=min(run._grace_s + 5.0, 15.0))
        except Exception:
            run.kill()

