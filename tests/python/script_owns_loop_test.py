"""The script owns its loop (docs/PYTHON.md, "The script's loop"): written from that contract alone.

- A job whose config does not set train.epochs trains as many epochs as the script's loop has, numbered as the script
  numbers them (`for epoch in range(1, 9)`), and ends with exit 0 and a summary once every rank called ps.shutdown().
- The epoch numbers are recorded and printed as given, whether or not train.epochs is set.
- A job whose ranks all stop before the declared length (train.epochs x steps_per_epoch) has finished, and its
  summary warns that it stopped short.
- A rank that skips a step (`continue` before backward) pushed fewer steps than the rank that went on: it is the
  job's failure, named with its push count; the rank that waited for it is not.
- Epoch numbers that do not increase are refused with a PshardError."""
import json
import os
import re
import sys

import torch
import torch.nn.functional as F

import support

STEPS = 4  # steps per epoch
CONFIG = """
[optimizer]
name = "sgd"
lr = 0.05

[train]
batch_size = 8
%s

[cluster]
mode = "sync"
heartbeat_interval_ms = 200
heartbeat_timeout_ms = 1500
failure_policy = "%s"
"""


def worker(first, last, skip_rank, out_dir):
    import pshard.torch as ps
    ps.init()
    torch.manual_seed(0)
    net = torch.nn.Linear(6, 3)
    opt = ps.DistributedOptimizer(net, steps_per_epoch=STEPS)
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    for epoch in range(first, last + 1):
        for t in range(STEPS):
            loss = F.cross_entropy(net(x), y)
            if ps.rank() == skip_rank and epoch == first and t == 1:
                continue  # e.g. `if not torch.isfinite(loss): continue`
            opt.zero_grad()
            loss.backward()
            opt.step()
        ps.report(epoch=epoch, train_loss=float(loss))
    if ps.rank() == 0:
        try:
            ps.report(epoch=first, train_loss=0.0)
        except ps.PshardError as e:
            with open(os.path.join(out_dir, "refused"), "w") as f:
                f.write(str(e))
    ps.shutdown()


def records(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def job(name, epochs_line, policy, first, last, skip_rank=-1):
    out = support.fresh_dir(name + "-out")
    status, output, run_dir = support.launch(
        CONFIG % (epochs_line, policy), 2, 1,
        [os.path.abspath(__file__), "worker", str(first), str(last), str(skip_rank), out], 90, name)
    return status, output, run_dir, out


def check_finished(name, status, output, run_dir, labels):
    support.expect(status == 0, "%s: the job ended with status %d, not 0" % (name, status), output)
    lines = records(run_dir)
    epochs = [r["epoch"] for r in lines if r.get("event") == "epoch"]
    support.expect(epochs == labels, "%s: the epoch lines say %r, the script reported %r" % (name, epochs, labels),
                   output)
    summary = [r for r in lines if r.get("event") == "summary"]
    support.expect(len(summary) == 1 and summary[0].get("epochs") == len(labels),
                   "%s: no summary of %d epochs" % (name, len(labels)), output)
    support.expect("out of range" not in output and "left before the end" not in output,
                   "%s: the coordinator judged the script's numbering" % name, output)
    return summary[0]


def main():
    # No train.epochs, epochs numbered from 1: eight epochs, each printed as the script numbers it.
    status, output, run_dir, out = job("one-based", "", "abort", 1, 8)
    summary = check_finished("one-based", status, output, run_dir, list(range(1, 9)))
    support.expect("epoch 1  train loss" in output and "epoch 8  train loss" in output and "/10" not in output,
                   "one-based: the epoch lines are not printed as numbered", output)
    support.expect("warnings" not in summary, "one-based: a warning without a declared length", output)
    support.expect("no worker saved the model" not in output, "one-based: a warning about pshard's model.bin for a "
                   "script, which saves its own model", output)
    with open(os.path.join(out, "refused")) as f:
        refused = f.read()
    support.expect("epoch 1 reported after epoch 8" in refused, "one-based: a repeated epoch: %r" % refused)
    print("no train.epochs, epochs 1..8: exit 0, lines 1..8, a repeated epoch refused")

    # train.epochs = 8 with the script's 1-based epochs: epoch 8 is the last, not out of range.
    status, output, run_dir, _ = job("declared", "epochs = 8", "abort", 1, 8)
    check_finished("declared", status, output, run_dir, list(range(1, 9)))
    support.expect("epoch 8/8" in output, "declared: no 'epoch 8/8' line", output)
    # ... and numbered from 0: printed as given, with its place in the run.
    status, output, run_dir, _ = job("declared-zero", "epochs = 8", "abort", 0, 7)
    check_finished("declared-zero", status, output, run_dir, list(range(0, 8)))
    support.expect("epoch 0 (1 of 8)" in output and "epoch 7 (8 of 8)" in output,
                   "declared-zero: the lines do not say the script's numbers and their places", output)
    print("train.epochs = 8, epochs 1..8 and 0..7: exit 0, as numbered")

    # Every rank stops after 3 of the 8 declared epochs: finished, with a warning in the summary.
    status, output, run_dir, _ = job("short", "epochs = 8", "abort", 1, 3)
    summary = check_finished("short", status, output, run_dir, [1, 2, 3])
    warnings = summary.get("warnings") or []
    support.expect(any("every worker stopped after 12 pushed steps, short of the run's declared length" in w and
                       "32 steps" in w for w in warnings), "short: the summary's warnings are %r" % warnings, output)
    print("3 of 8 declared epochs: exit 0, the summary warns")

    # Rank 1 skips one step: it is the failure under either policy, named with its push count; rank 0 is not.
    for policy in ("continue", "abort"):
        status, output, run_dir, _ = job("skip-" + policy, "", policy, 0, 2, skip_rank=1)
        support.expect(status != 0, "skip/%s: the job ended with status 0" % policy, output)
        support.expect("worker 1 (host" in output and "it left after 11 pushed steps, while worker 0 (host" in output
                       and "pushed 12" in output, "skip/%s: worker 1 is not named with its pushes" % policy, output)
        support.expect(not re.search(r"worker 0 \(host [^)]*\) is (dead|stuck|short)", output) and
                       "worker 0: " not in output, "skip/%s: worker 0, which waited, was named as failed" % policy,
                       output)
        if policy == "continue":
            support.expect("the job finished without some of its workers" in output,
                           "skip/continue: launch did not name the lost worker", output)
        else:
            support.expect("aborting the job: worker 1 (host" in output, "skip/abort: no abort naming worker 1",
                           output)
        print("rank 1 skips a step under %s: status %d, worker 1 named (11 of 12 steps)" % (policy, status))
    support.passed()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        main()
