"""Non-finite values are never lost or applied silently: a NaN or infinite loss given to ps.report() is recorded
as "nan"/"inf" in metrics.jsonl and metrics.csv while the later epochs and the summary are still written, and a
finite loss near the largest double is recorded as given (not as an overflowed sum); a NaN
gradient is refused by the server, and the job fails naming the tensor and the worker."""
import json
import os
import sys

import torch
import torch.nn.functional as F

import support

STEPS = 6
CONFIG = """
[optimizer]
name = "sgd"
lr = 0.05
momentum = 0.0

[train]
batch_size = 8
epochs = 3

[cluster]
mode = "sync"
heartbeat_interval_ms = 200
heartbeat_timeout_ms = 4000
"""


def worker(case):
    import pshard.torch as ps
    ps.init()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))
    opt = ps.DistributedOptimizer(net, steps_per_epoch=STEPS)
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    poison = []  # "nan-gradient": rank 1's gradient of 2.weight in epoch 1, step 2, gets a NaN (before it is pushed)

    def nan_in(grad):
        if poison:
            grad = grad.clone()
            grad[0, 0] = float("nan")
        return grad
    net[2].weight.register_hook(nan_in)
    for epoch in range(3):
        for t in range(STEPS):
            poison[:] = [1] if case == "nan-gradient" and ps.rank() == 1 and epoch == 1 and t == 2 else []
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if case == "nan-report" and ps.rank() == 1 and epoch == 0:
            ps.report(epoch=epoch, train_loss=float("nan"), test_loss=float("inf"), test_acc=0.5)
        elif case == "nan-report" and epoch == 2:  # finite, near the largest double: recorded as given, not "inf"
            ps.report(epoch=epoch, train_loss=1e308, test_loss=1.5e308, test_acc=0.5)
        else:
            ps.report(epoch=epoch, train_loss=1.0, test_loss=2.0, test_acc=0.5)
    ps.shutdown()


def nan_report():
    status, output, run_dir = support.launch(CONFIG, 2, 1, [os.path.abspath(__file__), "worker", "nan-report"], 90,
                                             "nan-report")
    support.expect(status == 0, "nan-report: the job failed (%d)" % status, output)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        events = [json.loads(line) for line in f]
    epochs = [e for e in events if e["event"] == "epoch"]
    support.expect([(e["epoch"], e["train_loss"], e["test_loss"], e["test_acc"]) for e in epochs] ==
                   [(0, "nan", "inf", 0.5), (1, 1.0, 2.0, 0.5), (2, 1e308, 1.5e308, 0.5)],
                   "nan-report: epoch lines %s" % epochs, output)
    support.expect(events[-1]["event"] == "summary" and events[-1]["epochs"] == 3 and events[-1]["train_loss"] == 1e308,
                   "nan-report: summary %s" % events[-1], output)
    support.expect("worker 1" in output and "reported a non-finite training loss (nan) for epoch 0" in output,
                   "nan-report: no warning names the rank", output)
    with open(os.path.join(run_dir, "metrics.csv")) as f:
        rows = f.read().splitlines()
    header = rows[0].split(",")
    first = dict(zip(header, rows[1].split(",")))
    support.expect(first["train_loss"] == "nan" and first["test_loss"] == "inf", "nan-report: csv %s" % rows[1])
    print("a NaN/inf report: recorded as \"nan\"/\"inf\", epochs 2 and 3 and the summary written")


def nan_gradient():
    status, output, run_dir = support.launch(CONFIG, 2, 1, [os.path.abspath(__file__), "worker", "nan-gradient"], 90,
                                             "nan-gradient")
    support.expect(status != 0, "nan-gradient: the job succeeded", output)
    support.expect("worker 1 pushed a non-finite gradient for 2.weight[3,4]" in output,
                   "nan-gradient: the refusal does not name the worker and the tensor", output)
    support.expect("element 0 is nan" in output and "nonFiniteGradient" in output,
                   "nan-gradient: the refusal does not say what was wrong", output)
    support.expect("aborting the job: worker 1" in output, "nan-gradient: the job's abort does not name rank 1",
                   output)
    print("a NaN gradient: refused by the server, the job aborted naming the tensor and the worker")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2])
    else:
        nan_report()
        nan_gradient()
        support.passed()
