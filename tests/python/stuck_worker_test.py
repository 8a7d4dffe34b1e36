"""A worker that is alive (its heartbeats go on) but stuck before a push, in sync and async jobs under both failure
policies: the servers report it stuck and the coordinator removes it (continue: the healthy worker finishes the run)
or ends the job naming it (abort). The healthy worker is never declared dead for it, the server it waits at is not
blamed, and no job hangs."""
import json
import os
import re
import sys
import time

import torch
import torch.nn.functional as F

import support

STEPS = 60
STUCK_AT = 10
# Requests time out after 3 s: a read waiting 2.4 s (two tenths less) reports the workers it waits for as stuck. The
# heartbeat timeout is longer than that, so only the stall can find the stuck worker.
CONFIG = """
[optimizer]
name = "sgd"
lr = 0.05
momentum = 0.0

[train]
batch_size = 16
epochs = 1

[cluster]
mode = "%s"
heartbeat_interval_ms = 200
heartbeat_timeout_ms = 20000
request_timeout_ms = 3000
stall_warn_ms = 1000
failure_policy = "%s"
"""


def worker(out_dir):
    import pshard.torch as ps
    ps.init()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    opt = ps.DistributedOptimizer(net, steps_per_epoch=STEPS)
    x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
    for t in range(STEPS):
        if ps.rank() == 1 and t == STUCK_AT:
            # Stuck in its own code before the push of this step; the client's thread keeps heartbeating. The
            # launcher stops it when the job is over.
            open(os.path.join(out_dir, "stuck-1"), "w").close()
            time.sleep(3600)
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.02)
    ps.report(epoch=0, train_loss=float(loss))
    open(os.path.join(out_dir, "finished-%d" % ps.rank()), "w").close()
    ps.shutdown()


def run(mode, policy):
    name = "%s-%s" % (mode, policy)
    out = support.fresh_dir("stuck-" + name)
    t0 = time.time()
    status, output, run_dir = support.launch(CONFIG % (mode, policy), 2, 1,
                                             [os.path.abspath(__file__), "worker", out], 60, "stuck-" + name)
    took = time.time() - t0
    support.expect(os.path.exists(os.path.join(out, "stuck-1")), "%s: worker 1 never got stuck" % name, output)
    # The stall is found ~2.4 s after worker 1's last push, then the launcher's 5 s grace for the stuck process.
    support.expect(took < 30, "%s: the job took %.0f s (it hung on the stuck worker)" % (name, took), output)
    support.expect(re.search(r"worker 1 \(host [^)]*\) is stuck: server 0 \(host [^)]*\) reports: ", output),
                   "%s: the coordinator does not name worker 1 stuck" % name, output)
    what = "the push of worker 1, which did not come" if mode == "sync" else "no push from worker 1 for"
    support.expect(what in output, "%s: the server's account ('%s') is not quoted" % (name, what), output)
    support.expect(not re.search(r"worker 0 \(host [^)]*\) is (dead|stuck)", output),
                   "%s: the healthy worker 0 was declared dead" % name, output)
    support.expect("did not answer" not in output, "%s: a healthy server was blamed" % name, output)
    if policy == "abort":
        support.expect(status != 0, "%s: the job succeeded" % name, output)
        headline = [l for l in output.splitlines() if "job failed:" in l]
        support.expect(headline and "worker 1" in headline[0] and "is stuck" in headline[0],
                       "%s: the failure does not name the stuck worker" % name, output)
        if mode == "sync":  # async: worker 0 may well finish before worker 1 is found stuck
            support.expect(not os.path.exists(os.path.join(out, "finished-0")), "%s: worker 0 finished" % name,
                           output)
    else:
        support.expect(os.path.exists(os.path.join(out, "finished-0")), "%s: worker 0 did not finish" % name, output)
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            summary = json.loads(f.read().splitlines()[-1])
        support.expect(summary.get("event") == "summary" and summary.get("workers_finished") == [0],
                       "%s: the summary does not list worker 0 alone: %s" % (name, summary), output)
    print("%s: %s in %.1f s" % (name, "job aborted naming worker 1" if policy == "abort" else
                                "worker 1 removed, worker 0 finished", took))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2])
    else:
        for mode in ("sync", "async"):
            for policy in ("continue", "abort"):
                run(mode, policy)
        support.passed()
