"""A rank that leaves while another goes on (ps.shutdown() mid-run, sys.exit(1), os._exit(0)) is a failure under the
job's failure policy, never a rank that finished, named with the steps it pushed: abort ends the job naming the rank
(no stall until the request timeout); continue finishes with the other rank and the job still ends non-zero, naming
it."""
import os
import sys
import time

import torch
import torch.nn.functional as F

import support

STEPS = 10
CONFIG = """
[optimizer]
name = "sgd"
lr = 0.05
momentum = 0.0

[train]
batch_size = 8
epochs = 2

[cluster]
mode = "sync"
heartbeat_interval_ms = 200
heartbeat_timeout_ms = 1500
failure_policy = "%s"
"""


def worker(how, out_dir):
    import pshard.torch as ps
    ps.init()
    torch.manual_seed(0)
    net = torch.nn.Linear(6, 3)
    opt = ps.DistributedOptimizer(net, steps_per_epoch=STEPS)
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    for epoch in range(2):
        for t in range(STEPS):
            if ps.rank() == 1 and epoch == 0 and t == 4:
                if how == "shutdown":
                    ps.shutdown()
                    return
                if how == "exit1":
                    sys.exit(1)
                if how == "os-exit0":
                    os._exit(0)
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        ps.report(epoch=epoch, train_loss=float(loss))
    open(os.path.join(out_dir, "finished-%d" % ps.rank()), "w").close()
    ps.shutdown()


def run(how, policy, *expect_texts):
    out = support.fresh_dir("%s-%s-out" % (how, policy))
    t0 = time.time()
    status, output, run_dir = support.launch(CONFIG % policy, 2, 1, [os.path.abspath(__file__), "worker", how, out],
                                             90, "%s-%s" % (how, policy))
    took = time.time() - t0
    support.expect(status != 0, "%s/%s: the job ended with status 0" % (how, policy), output)
    for text in expect_texts:
        support.expect(text in output, "%s/%s: the output does not say %r" % (how, policy, text), output)
    support.expect("every process exited successfully" not in output, "%s/%s: launch says all succeeded" % (how, policy),
                   output)
    support.expect(took < 45, "%s/%s: the job took %.0f s (a stall?)" % (how, policy, took), output)
    if policy == "continue":
        support.expect(os.path.exists(os.path.join(out, "finished-0")), "%s/continue: rank 0 did not finish" % how,
                       output)
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            text = f.read()
        support.expect('"event":"summary"' in text and '"workers_finished":[0]' in text,
                       "%s/continue: no summary listing rank 0 alone" % how, output)
    print("%s under %s: status %d in %.1f s, the rank named" % (how, policy, status, took))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        early = "worker 1 (host %s" % os.uname().nodename
        run("shutdown", "abort", "aborting the job: %s" % early,
            "it left after 4 pushed steps, while worker 0 (host %s" % os.uname().nodename, "pushed 20")
        run("exit1", "continue", "the job finished without some of its workers (cluster.failure_policy = continue): "
            "worker 1: it left after 4 pushed steps, while worker 0 (host")
        run("os-exit0", "continue", "job finished, but not every worker did", "worker 1: no heartbeat for 1500 ms")
        support.passed()
