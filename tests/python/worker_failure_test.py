"""A Python worker SIGKILLed mid-run: cluster.failure_policy = abort ends the job naming it; continue finishes the
run with the survivor, whose summary lists it as the only worker that finished. Neither hangs. Rank 0 SIGKILLed
before it sent the initial weights (continue): the lowest live rank sends its own, and the others train to the end
without waiting cluster.request_timeout_ms for weights that would never come."""
import json
import os
import signal
import sys
import time

import torch
import torch.nn.functional as F

import support

STEPS = 60
CONFIG = """
[optimizer]
name = "sgd"
lr = 0.05
momentum = 0.0

[train]
batch_size = 16
epochs = 1

[cluster]
mode = "sync"
heartbeat_interval_ms = 200
heartbeat_timeout_ms = 1500
failure_policy = "%s"
"""


def worker(out_dir, victim="1"):
    import pshard.torch as ps
    ps.init()
    if victim == "0-before-init" and ps.rank() == 0:
        time.sleep(0.5)  # the other ranks are waiting for the weights of step 0 by now
        os.kill(os.getpid(), signal.SIGKILL)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    opt = ps.DistributedOptimizer(net, steps_per_epoch=STEPS)
    x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
    for t in range(STEPS):
        if victim == "1" and ps.rank() == 1 and t == 10:
            os.kill(os.getpid(), signal.SIGKILL)
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.02)
    ps.report(epoch=0, train_loss=float(loss))
    open(os.path.join(out_dir, "finished-%d" % ps.rank()), "w").close()
    ps.shutdown()


def run(policy):
    out = support.fresh_dir("kill-" + policy)
    t0 = time.time()
    status, output, run_dir = support.launch(CONFIG % policy, 2, 1, [os.path.abspath(__file__), "worker", out], 90,
                                             "kill-" + policy)
    took = time.time() - t0
    support.expect(took < 60, "%s: the job took %.0f s" % (policy, took), output)
    support.expect("worker 1" in output and "SIGKILL" in output, "%s: worker 1's death is not named" % policy,
                   output)
    if policy == "abort":
        support.expect(status != 0, "abort: the job succeeded", output)
        support.expect(not os.path.exists(os.path.join(out, "finished-0")), "abort: worker 0 finished", output)
    else:
        # The run completed with worker 0 alone; launch still reports the dead worker as a failure (as for the C++
        # workers: tests/integration/training/worker_failure_test.cc).
        support.expect(os.path.exists(os.path.join(out, "finished-0")), "continue: worker 0 did not finish", output)
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            summary = json.loads(f.read().splitlines()[-1])
        support.expect(summary.get("event") == "summary" and summary.get("workers_finished") == [0],
                       "continue: the summary does not list worker 0 alone: %s" % summary, output)
    print("%s: %s in %.1f s" % (policy, "job aborted" if policy == "abort" else "the survivor finished", took))


def rank0_before_init():
    out = support.fresh_dir("kill-rank0")
    config = CONFIG % "continue" + "request_timeout_ms = 60000\n"
    t0 = time.time()
    status, output, run_dir = support.launch(config, 3, 1,
                                             [os.path.abspath(__file__), "worker", out, "0-before-init"], 90,
                                             "kill-rank0")
    took = time.time() - t0
    support.expect(took < 30, "rank 0 killed before the initial weights: the job took %.0f s (the survivors waited "
                   "for weights nobody sends)" % took, output)
    for r in (1, 2):
        support.expect(os.path.exists(os.path.join(out, "finished-%d" % r)),
                       "rank 0 killed before the initial weights: worker %d did not finish" % r, output)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        summary = json.loads(f.read().splitlines()[-1])
    support.expect(summary.get("event") == "summary" and summary.get("workers_finished") == [1, 2],
                   "rank 0 killed before the initial weights: the summary does not list workers 1 and 2: %s"
                   % summary, output)
    print("continue, rank 0 killed before the initial weights: workers 1 and 2 finished in %.1f s" % took)


def worker_killed_after_last_step():
    """Rank 1 reports the last epoch (it pushed every step) and is SIGKILLed before ps.shutdown(); the launcher starts
    it again (cluster.restart_workers), and the restart comes while the job ends or after it ended."""
    import pshard.torch as ps
    ps.init()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    opt = ps.DistributedOptimizer(net, steps_per_epoch=STEPS)
    x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
    loss = torch.zeros(())
    for _ in range(ps.start_step(), STEPS):
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    ps.report(epoch=0, train_loss=float(loss))
    if ps.rank() == 1 and os.environ.get("PSHARD_REJOIN") != "1":
        time.sleep(0.5)  # its report of the last epoch is on its way (a kill in the same instant may overtake it)
        os.kill(os.getpid(), signal.SIGKILL)
    ps.shutdown()


def killed_after_last_step():
    config = CONFIG % "continue" + "restart_workers = true\n"
    status, output, run_dir = support.launch(config, 2, 1, [os.path.abspath(__file__), "after-last-step"], 90,
                                             "kill-after-last-step")
    support.expect("after it had pushed the job's last step: counted as finished" in output,
                   "the worker killed after its last step is not counted as finished", output)
    support.expect(status == 0, "a worker killed after its last step failed the job (status %d)" % status, output)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        summary = json.loads(f.read().splitlines()[-1])
    support.expect(summary.get("event") == "summary" and summary.get("epochs") == 1, "no summary: %s" % summary,
                   output)
    print("continue + restart_workers, a worker killed after its last step: the job succeeded")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(*sys.argv[2:])
    elif len(sys.argv) > 1 and sys.argv[1] == "after-last-step":
        worker_killed_after_last_step(*sys.argv[2:])
    else:
        run("abort")
        run("continue")
        rank0_before_init()
        killed_after_last_step()
        support.passed()
