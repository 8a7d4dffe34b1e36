"""Bad use of pshard.torch gives a Python exception with a clear message, and the job ends (no hang) with the
failure named: calls before init(), ranks whose models differ in shape or dtype, a model without trainable
parameters, step() without backward(), a rank that never makes its DistributedOptimizer, a lost coordinator."""
import os
import signal
import sys
import time

import torch
import torch.nn.functional as F

import support

CONFIG = """
[optimizer]
name = "sgd"
lr = 0.1
momentum = 0.0

[train]
batch_size = 8
epochs = 1

[cluster]
mode = "sync"
heartbeat_interval_ms = 200
heartbeat_timeout_ms = 4000  # a loaded 2-core machine can starve a heartbeat thread past 1.5 s
"""


def worker(case, out_dir):
    import pshard.torch as ps
    ps.init()
    r = ps.rank()
    net = torch.nn.Linear(6, 4)
    if case == "shapes" and r == 1:
        net = torch.nn.Linear(4, 6)  # the same number of weights, another shape
    if case == "dtype" and r == 1:
        net = net.double()
    if case == "no-params":
        net.requires_grad_(False)
    if case == "one-optimizer" and r == 1:
        time.sleep(50)  # never makes its DistributedOptimizer (the job's abort ends it)
        return
    if case == "coordinator":
        # The launcher stops the job when its coordinator dies; this worker stays to see the coordinator go silent
        # (as a worker on another node would), until the launcher's SIGKILL after its grace period.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    opt = ps.DistributedOptimizer(net, steps_per_epoch=1000)
    x, y = torch.randn(8, 6), torch.randint(0, 4, (8,))
    if case == "no-backward":
        opt.step()
    open(os.path.join(out_dir, "ready-%d" % r), "w").close()
    for _ in range(100000):  # "coordinator": until the coordinator is gone
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.01)


def before_init():
    import pshard.torch as ps
    for name in [k for k in os.environ if k.startswith("PSHARD_") and k != "PSHARD_LIBRARY"]:
        del os.environ[name]
    for call in (ps.rank, ps.size, lambda: ps.DistributedOptimizer(torch.nn.Linear(2, 2)),
                 lambda: ps.report(epoch=0, train_loss=1.0)):
        try:
            call()
            raise AssertionError("a call before ps.init() did not raise")
        except ps.PshardError as e:
            support.expect("init()" in str(e), "before init: %s" % e)
    try:
        ps.init()
        raise AssertionError("ps.init() outside a job did not raise")
    except ps.PshardError as e:
        support.expect("PSHARD_COORDINATOR is not set" in str(e) and "pshard launch" in str(e), str(e))
        support.expect(e.status == "PSHARD_ERR_ENVIRONMENT", e.status)


def job_fails(case, message, *more, extra=()):
    out = support.fresh_dir(case)
    t0 = time.time()
    status, output, _ = support.launch(CONFIG, 2, 1, [os.path.abspath(__file__), "worker", case, out], 60, case,
                                       extra)
    support.expect(status != 0, "%s: the job did not fail" % case, output)
    for m in (message,) + more:
        support.expect(m in output, "%s: the output does not say %r" % (case, m), output)
    support.expect("PshardError" in output, "%s: no PshardError in the output" % case, output)
    support.expect(time.time() - t0 < 40, "%s: the job took %.0f s to end" % (case, time.time() - t0), output)
    # The coordinator aborted the job on the worker's error, and the servers were not harmed: none crashed. (Whether a
    # server logs the abort it was sent, or is stopped by the launch first, once the coordinator has exited, varies
    # from run to run.)
    support.expect("aborting the job: worker " in output, "%s: the job was not aborted" % case, output)
    support.expect("killed by signal" not in output, "%s: a process crashed" % case, output)
    print("%s: %s (%.1f s)" % (case, message, time.time() - t0))


def lost_coordinator():
    """The coordinator is SIGKILLed mid-run: the worker's next wait raises, naming the coordinator."""
    out = support.fresh_dir("coordinator")
    d = support.fresh_dir("coordinator-job")
    with open(os.path.join(d, "job.toml"), "w") as f:
        f.write(CONFIG)
    import subprocess
    argv = [support.PSHARD_BIN, "launch", "--servers", "1", "--workers", "1", "--config", os.path.join(d, "job.toml"),
            "--run-dir", os.path.join(d, "run"), "--grace-ms", "8000", "--timeout", "60", "--",
            support.PYTHON, os.path.abspath(__file__), "worker", "coordinator", out]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=support.env(),
                         start_new_session=True)
    try:
        deadline = time.time() + 40
        while not os.path.exists(os.path.join(out, "ready-0")) and time.time() < deadline and p.poll() is None:
            time.sleep(0.1)
        support.expect(os.path.exists(os.path.join(out, "ready-0")), "the worker did not start training")
        coordinator = None
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                ppid = int(open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()[1])
                argv = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
            except (OSError, IndexError, ValueError):
                continue
            if ppid == p.pid and argv[1:2] == [b"coordinator"]:
                coordinator = int(pid)
        support.expect(coordinator is not None, "no coordinator among the launch's children")
        os.kill(coordinator, signal.SIGKILL)
        output, _ = p.communicate(timeout=40)
        output = output.decode("utf-8", "replace")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    support.expect("PshardError" in output and "coordinator" in output.split("PshardError", 1)[1],
                   "the worker did not raise naming the coordinator", output)
    print("lost coordinator: the worker raised")


def main():
    before_init()
    job_fails("shapes", "the model on rank 1 differs from rank 0's",
              "the first difference: tensor 0 is 'weight[6,4]' here, 'weight[4,6]' on rank 0")
    job_fails("dtype", "parameter 'weight' is torch.float64")
    job_fails("no-params", "the model has no trainable parameters")
    job_fails("no-backward", "step() without backward()")
    job_fails("one-optimizer", "not every rank created its DistributedOptimizer within cluster.request_timeout_ms = "
              "2000 ms", extra=("--set", "cluster.request_timeout_ms=2000"))
    lost_coordinator()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
        support.passed()
