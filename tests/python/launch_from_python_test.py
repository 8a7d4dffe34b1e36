"""Starting a job from Python and reading its run (docs/PYTHON.md, "Starting a job from Python"):

- pshard.launch(..., wait=True) of pshard's own workers (1 server, 2 workers, linear regression): exit 0, and the
  Run's summary(), metrics() and events() are metrics.jsonl's lines; pshard.load_run() of the finished run reads
  the same, read-only.
- script=: each worker runs this file as a script, trains 6 sync SGD steps on the C API through the package (numpy,
  no torch) with a config given as a dict and an override given in settings=; both ranks end with the weights that
  the same SGD computed here gives.
- fn=: the same training as a function of this file (found in the workers as __mp_main__, as multiprocessing's
  spawn finds it): the same weights, its return values through run.results(), its epoch report in metrics().
- A job whose workers exit 3: wait=True raises PshardError with the launch's exit status and the output's last
  lines; a lambda, or a function of a file-less __main__, is refused before anything starts.
- dashboard=True: run.dashboard_url() is the live page's address; the page answers with it and refuses a request
  without its token.
- wait(timeout) of a running job raises PshardError(PSHARD_ERR_TIMEOUT) and the job goes on; stop() ends it (exit
  143) and leaves no process of it; so does garbage-collecting its Run, and the exit of an interpreter that started
  a job and did not wait for it.
- events() leaves out a last line still being written, and reads it once it is complete."""
import ctypes
import gc
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import support

import numpy as np

STEPS = 6
BATCH = 8
LR = 0.1
FEATURES = 4
W0 = np.array([0.5, -0.5, 0.25, 0.0], np.float32)
TRUE_W = np.array([1.0, 2.0, -1.0, 0.5], np.float32)


def batch(rank, step):
    rng = np.random.default_rng(1000 * rank + step)
    x = rng.standard_normal((BATCH, FEATURES)).astype(np.float32)
    return x, x @ TRUE_W


def gradient(w, x, y):
    err = x @ w - y
    return (2.0 / BATCH) * (x.T @ err).astype(np.float32), float(np.mean(err * err))


def train_linear(out_dir):
    """A worker: linear regression through the C API (pshard._lib), SGD on the servers. Writes its final weights
    and mean loss to OUT_DIR/rank-R.json and returns them."""
    import pshard
    from pshard import _lib
    lib, check = _lib.lib(), _lib.check
    pshard.init()
    c = pshard.client()
    shape = (ctypes.c_int64 * 1)(FEATURES)
    check(lib.pshard_add_tensor(c, b"w", 1, shape, _lib.FLOAT32), "add_tensor")
    check(lib.pshard_start(c, b"linear", BATCH, STEPS), "start")
    w = W0.copy()
    req = ctypes.c_uint64()
    init = ctypes.c_int()
    check(lib.pshard_initialiser(c, ctypes.byref(init)), "initialiser")
    if init.value:
        check(lib.pshard_init_tensor(c, 0, w.ctypes.data, ctypes.byref(req)), "init")
        check(lib.pshard_wait(c, req.value, -1), "init wait")
    check(lib.pshard_pull(c, 0, w.ctypes.data, 0, ctypes.byref(req)), "pull")
    check(lib.pshard_wait(c, req.value, -1), "pull wait")
    losses = []
    t0 = time.monotonic()
    for t in range(STEPS):
        g, loss = gradient(w, *batch(pshard.rank(), t))
        losses.append(loss)
        check(lib.pshard_push_pull(c, 0, g.ctypes.data, w.ctypes.data, t, ctypes.byref(req)), "push_pull")
        check(lib.pshard_wait(c, req.value, -1), "push_pull wait")
    mean_loss = float(np.mean(losses))
    report = _lib.EpochReport(epoch=1, label=1, step=STEPS, samples=STEPS * BATCH, loss_sum=mean_loss,
                              test_samples=-1, epoch_s=time.monotonic() - t0, eval_s=0.0, data_s=-1.0,
                              forward_s=-1.0, backward_s=-1.0, figures=_lib.TRAIN_LOSS | _lib.LOSS_MEANS)
    check(lib.pshard_report_epoch(c, ctypes.byref(report)), "report_epoch")
    result = {"rank": pshard.rank(), "weights": [float(v) for v in w], "mean_loss": mean_loss,
              "lr": pshard.config("optimizer.lr")}
    pshard.shutdown()
    with open(os.path.join(out_dir, "rank-%d.json" % result["rank"]), "w") as f:
        json.dump(result, f)
    return result


def expected_weights(workers):
    """Sync SGD as the servers run it: the mean of the workers' gradients, w -= lr * mean."""
    w = W0.copy()
    for t in range(STEPS):
        grads = [gradient(w, *batch(r, t))[0] for r in range(workers)]
        w = (w - np.float32(LR) * (sum(grads) / np.float32(workers))).astype(np.float32)
    return w


def jsonl(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


# ---- Processes of a job ---------------------------------------------------------------------------------------


def _stat(pid):
    """(parent pid, state, start time) of a live process, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return int(fields[1]), fields[0], fields[19]


def descendants(pid):
    """{pid: start time} of `pid` and every process below it."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            s = _stat(int(name))
            if s:
                parents[int(name)] = s
    found, todo = {}, [pid]
    while todo:
        p = todo.pop()
        if p in parents:
            found[p] = parents[p][2]
            todo += [c for c, s in parents.items() if s[0] == p]
    return found


def alive(procs):
    """The processes of `procs` ({pid: start time}) that still run (not zombies, not a reused pid)."""
    left = []
    for pid, start in procs.items():
        s = _stat(pid)
        if s and s[2] == start and s[1] != "Z":
            left.append(pid)
    return left


def wait_gone(procs, limit_s):
    deadline = time.monotonic() + limit_s
    while alive(procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(procs)


def group_exists(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def wait_for_steps(run, limit_s):
    """Waits (at most limit_s) until the run's metrics.jsonl has a step line; returns the step lines."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        steps = run.events("step")
        if steps:
            return steps
        if run.poll() is not None:
            break
        time.sleep(0.1)
    return []


# ---- The checks -----------------------------------------------------------------------------------------------

LINREG = os.path.join(support.SOURCE_DIR, "configs", "linreg_sgd.toml")
SMALL = {"train.epochs": 2, "data.train_size": 1024, "data.test_size": 256}
# A job that runs until it is stopped: 10 ms per step, 16 steps per epoch, 1000 epochs.
LONG = {"train.epochs": 1000, "data.train_size": 1024, "data.test_size": 256, "train.simulate_compute_ms": 10,
        "train.log_every": 2}
PYTHON_CONFIG = {"run": {"name": "python-linear"}, "optimizer": {"name": "sgd", "lr": 0.5},
                 "train": {"batch_size": BATCH}, "cluster": {"mode": "sync", "heartbeat_interval_ms": 200}}


def check_own_workers(pshard, base):
    t = time.monotonic()
    run_dir = os.path.join(base, "own")
    run = pshard.launch(servers=1, workers=2, config=LINREG, settings=SMALL, run_dir=run_dir, wait=True,
                        timeout_s=60, pshard_bin=support.PSHARD_BIN)
    lines = jsonl(run_dir)
    support.expect(run.poll() == 0 and run.wait(timeout=1) == 0, "own workers: exit %r" % run.poll(), run.output)
    support.expect(run.events() == lines, "own workers: events() differ from metrics.jsonl", run.output)
    epochs = [r for r in lines if r["event"] == "epoch"]
    support.expect(len(epochs) == 2 and run.metrics() == epochs, "own workers: metrics() %r" % run.metrics(),
                   run.output)
    support.expect(lines[-1]["event"] == "summary" and run.summary() == lines[-1],
                   "own workers: summary() %r" % run.summary(), run.output)
    summary = run.summary()
    support.expect(summary["epochs"] == 2 and summary["workers"] == 2 and summary["servers"] == 1 and
                   summary["workers_finished"] == [0, 1], "own workers: the summary says %r" % summary, run.output)
    progress = run.progress()
    support.expect(progress["epoch"] == epochs[-1] and progress["epoch"]["epoch"] == 2,
                   "own workers: progress() %r" % progress, run.output)
    support.expect("job finished" in run.output and os.path.isfile(os.path.join(run_dir, "launch.log")),
                   "own workers: the output is not kept in launch.log", run.output)
    print("own workers, wait=True: exit 0, summary/metrics/events == metrics.jsonl (%.1f s)" % (time.monotonic() - t))

    loaded = pshard.load_run(run_dir)
    support.expect(isinstance(loaded, pshard.Run) and loaded.summary() == summary and loaded.events() == lines and
                   loaded.metrics() == epochs and loaded.output == run.output and loaded.poll() is None,
                   "load_run: it reads otherwise than the Run that launched it")
    try:
        loaded.wait(timeout=1)
        support.expect(False, "load_run: wait() of a loaded run returned")
    except pshard.PshardError as e:
        support.expect(e.status == "PSHARD_ERR_STATE" and "load_run" in str(e), "load_run: wait() says %s" % e)
    try:
        pshard.launch(servers=1, workers=2, config=LINREG, run_dir=run_dir, pshard_bin=support.PSHARD_BIN)
        support.expect(False, "a run directory that holds a run was taken")
    except pshard.PshardError as e:
        support.expect("already holds a run" in str(e), "a run directory that holds a run: %s" % e)
    support.expect(loaded.output == run.output, "a refused launch wrote into the run's launch.log")
    print("load_run: the same records, read-only; a second launch into the run directory refused")


def check_python_workers(pshard, base):
    expected = expected_weights(2)
    expected_loss = None
    for kind in ("script", "fn"):
        t = time.monotonic()
        out = support.fresh_dir(kind + "-out")
        run_dir = os.path.join(base, kind)
        common = dict(servers=1, workers=2, config=PYTHON_CONFIG, settings={"optimizer.lr": LR}, run_dir=run_dir,
                      wait=True, timeout_s=60, pshard_bin=support.PSHARD_BIN, env=support.env())
        if kind == "script":
            run = pshard.launch(script=[os.path.abspath(__file__), "script-worker"], args=[out], **common)
        else:
            run = pshard.launch(fn=train_linear, args=(out,), **common)
        support.expect(run.poll() == 0, "%s: exit %r" % (kind, run.poll()), run.output)
        support.expect(os.path.isfile(os.path.join(run_dir, "job.toml")), "%s: no job.toml" % kind)
        results = []
        for r in range(2):
            with open(os.path.join(out, "rank-%d.json" % r)) as f:
                results.append(json.load(f))
        for res in results:
            w = np.array(res["weights"], np.float32)
            support.expect(res["lr"] == LR, "%s: rank %d read lr %r, not the setting" % (kind, res["rank"], res["lr"]))
            support.expect(np.allclose(w, expected, rtol=1e-5, atol=1e-6),
                           "%s: rank %d ends with %r, sync SGD gives %r" % (kind, res["rank"], w, expected),
                           run.output)
        support.expect(not np.allclose(expected, W0), "the weights did not move")
        epochs = run.metrics()
        mean = (results[0]["mean_loss"] + results[1]["mean_loss"]) / 2
        support.expect(len(epochs) == 1 and abs(epochs[0]["train_loss"] - mean) <= 1e-6 * max(1.0, mean),
                       "%s: the epoch line %r, the workers' mean loss %r" % (kind, epochs, mean), run.output)
        support.expect(run.summary() is not None and run.summary()["workers_finished"] == [0, 1],
                       "%s: summary %r" % (kind, run.summary()), run.output)
        if kind == "fn":
            support.expect(run.results() == results, "fn: results() %r, the files %r" % (run.results(), results))
        expected_loss = mean if expected_loss is None else expected_loss
        support.expect(abs(mean - expected_loss) <= 1e-6 * max(1.0, mean), "script and fn jobs trained differently")
        print("%s job: 2 ranks end with the weights of sync SGD (%s), the epoch line has their loss (%.1f s)"
              % (kind, np.array2string(expected, precision=4), time.monotonic() - t))


def check_failures(pshard, base):
    t = time.monotonic()
    run_dir = os.path.join(base, "fail")
    try:
        pshard.launch(servers=1, workers=2, config=PYTHON_CONFIG, script=[os.path.abspath(__file__), "fail"],
                      run_dir=run_dir, wait=True, timeout_s=60, pshard_bin=support.PSHARD_BIN, env=support.env())
        support.expect(False, "a job whose workers exit 3 did not raise")
    except pshard.PshardError as e:
        text = str(e)
        support.expect(getattr(e, "exit_code", None) == 1 and "exited with status 1" in text,
                       "failing job: the error says %r (exit_code %r)" % (text, getattr(e, "exit_code", None)))
        support.expect("exited with status 3" in text and "launch.log" in text,
                       "failing job: the error does not quote the output's last lines: %r" % text)
        support.expect(e.run.poll() == 1 and "is about to fail" in e.run.output,
                       "failing job: the Run of the error", e.run.output)
    print("a job whose workers exit 3: PshardError, exit code 1, the output's last lines (%.1f s)"
          % (time.monotonic() - t))

    for fn, what in ((lambda: None, "not a top-level function"),):
        try:
            pshard.launch(fn=fn, config=PYTHON_CONFIG, run_dir=os.path.join(base, "lambda"),
                          pshard_bin=support.PSHARD_BIN)
            support.expect(False, "a lambda was launched")
        except pshard.PshardError as e:
            support.expect(what in str(e), "a lambda: %s" % e)
    support.expect(not os.path.exists(os.path.join(base, "lambda")), "a refused fn left a run directory")
    code = ("import pshard\ndef train():\n    pass\ntry:\n    pshard.launch(fn=train, pshard_bin=%r)\n"
            "except pshard.PshardError as e:\n    print(e)\n" % support.PSHARD_BIN)
    status, out = support.run([support.PYTHON, "-c", code], 30, cwd=base)
    support.expect(status == 0 and "defined in __main__ without a file" in out, "python -c fn: %s" % out, out)
    print("a lambda, and a function of a file-less __main__, refused before anything starts")


def check_stopping(pshard, base):
    # stop(): SIGTERM to the launch, which stops every process.
    t = time.monotonic()
    run = pshard.launch(servers=1, workers=2, config=LINREG, settings=LONG, run_dir=os.path.join(base, "stop"),
                        timeout_s=120, pshard_bin=support.PSHARD_BIN, dashboard=True)
    # Its live page: the URL with its token answers, one without the token is refused.
    url = run.dashboard_url()
    support.expect(url and "?token=" in url, "dashboard=True: no URL in the launch's output", run.output)
    with urllib.request.urlopen(url, timeout=10) as page:
        support.expect(page.status == 200 and b"<title>pshard dashboard</title>" in page.read(),
                       "dashboard: the page at %s" % url)
    try:
        urllib.request.urlopen(url.split("?")[0], timeout=10)
        support.expect(False, "dashboard: a request without the token was answered")
    except urllib.error.HTTPError as e:
        support.expect(e.code == 403, "dashboard: a request without the token got %d" % e.code)
    steps = wait_for_steps(run, 30)
    procs = descendants(run.pid)
    support.expect(steps and len(procs) >= 4, "stop: no step line within 30 s, or processes %r" % procs, run.output)
    try:
        run.wait(timeout=0.2)
        support.expect(False, "stop: wait(timeout=0.2) of a running job returned", run.output)
    except pshard.PshardError as e:
        support.expect(e.status == "PSHARD_ERR_TIMEOUT" and run.poll() is None, "stop: wait(timeout) says %s" % e)
    code = run.stop()
    left = wait_gone(procs, 10)
    support.expect(code == 143 and run.poll() == 143, "stop: the launch exited %r" % code, run.output)
    support.expect(not left and not group_exists(run.pid), "stop: processes left: %r" % left, run.output)
    support.expect(run.summary() is None or run.summary().get("epochs", 0) < 1000, "stop: the job ran to its end")
    print("stop(): exit 143 after %d step lines, none of its %d processes left (%.1f s)"
          % (len(steps), len(procs), time.monotonic() - t))

    # The Run is garbage-collected while its job runs.
    t = time.monotonic()
    run = pshard.launch(servers=1, workers=2, config=LINREG, settings=LONG, run_dir=os.path.join(base, "gc"),
                        timeout_s=120, pshard_bin=support.PSHARD_BIN)
    support.expect(wait_for_steps(run, 30), "gc: no step line within 30 s", run.output)
    procs, pid = descendants(run.pid), run.pid
    del run
    gc.collect()
    left = wait_gone(procs, 10)
    support.expect(not left and not group_exists(pid), "gc: processes left: %r" % left)
    print("a Run collected while its job runs: none of its %d processes left (%.1f s)"
          % (len(procs), time.monotonic() - t))

    # The interpreter that started a job exits without waiting for it.
    t = time.monotonic()
    run_dir = os.path.join(base, "exit")
    code = ("import sys, time\nsys.path.insert(0, %r)\nimport pshard\n"
            "run = pshard.launch(servers=1, workers=2, config=%r, settings=%r, run_dir=%r, pshard_bin=%r)\n"
            "deadline = time.monotonic() + 30\n"
            "while not run.events('step') and time.monotonic() < deadline:\n    time.sleep(0.1)\n"
            "print('launch pid', run.pid, flush=True)\n"
            "sys.stdin.readline()\n"
            % (os.path.join(support.SOURCE_DIR, "python"), LINREG, LONG, run_dir, support.PSHARD_BIN))
    driver = subprocess.Popen([support.PYTHON, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env=support.env(), start_new_session=True)
    try:
        line = driver.stdout.readline().decode()
        support.expect(line.startswith("launch pid "), "exit: the driver printed %r" % line)
        pid = int(line.split()[-1])
        procs = descendants(pid)
        support.expect(len(procs) >= 4, "exit: the job's processes %r" % procs)
        driver.stdin.close()  # the driver's last line returns: its interpreter exits
        driver.wait(timeout=40)
        left = wait_gone(procs, 10)
        support.expect(not left and not group_exists(pid), "exit: processes left: %r" % left)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, 9)
            driver.wait(timeout=10)
    print("an interpreter that exits while its job runs: none of its %d processes left (%.1f s)"
          % (len(procs), time.monotonic() - t))


def check_partial_line(pshard, base):
    run_dir = os.path.join(base, "partial")
    os.makedirs(run_dir)
    path = os.path.join(run_dir, "metrics.jsonl")
    with open(path, "w") as f:
        f.write('{"event": "start", "model": "m"}\n{"event": "step", "st')
    run = pshard.load_run(run_dir)
    support.expect([r["event"] for r in run.events()] == ["start"], "partial: events() %r" % run.events())
    with open(path, "a") as f:
        f.write('ep": 3, "loss": 0.5}\n{"event": "summary", "epochs": 1}\n')
    support.expect(run.events("step") == [{"event": "step", "step": 3, "loss": 0.5}] and
                   run.summary() == {"event": "summary", "epochs": 1} and
                   run.progress()["step"]["step"] == 3, "partial: after the rest, events() %r" % run.events())
    print("events(): a last line being written is left out, then read once complete")


def main():
    import pshard
    support.expect("torch" not in sys.modules, "import pshard imported torch")
    base = support.fresh_dir("launch")
    t = time.monotonic()
    check_partial_line(pshard, base)
    check_own_workers(pshard, base)
    check_python_workers(pshard, base)
    check_failures(pshard, base)
    check_stopping(pshard, base)
    print("total %.1f s" % (time.monotonic() - t))
    support.passed()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "script-worker":
        train_linear(sys.argv[2])
    elif len(sys.argv) > 1 and sys.argv[1] == "fail":
        rank = int(os.environ["PSHARD_RANK"])
        print("worker %d is about to fail" % rank, flush=True)
        sys.exit(3)
    else:
        main()
