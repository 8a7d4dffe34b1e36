"""One process per worker rank: a child process that inherits a worker's environment and calls ps.init() is refused
with a clear error while the worker lives (under cluster.failure_policy = continue too, where a registration would
otherwise take the rank over), and the worker trains to the end. ps.config() returns a string key as a string."""
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

import support

CONFIG = """
[optimizer]
name = "sgd"
lr = 0.1

[train]
batch_size = 8
epochs = 1

[cluster]
mode = "sync"
failure_policy = "continue"
heartbeat_interval_ms = 200
heartbeat_timeout_ms = 4000

[data]
dir = "true"
"""


def child(out_dir):
    import pshard as ps
    try:
        ps.init()
        message = "JOINED as rank %d" % ps.rank()
    except ps.PshardError as e:
        message = "REFUSED " + str(e)
    with open(os.path.join(out_dir, "child.txt"), "w") as f:
        f.write(message)


def worker(out_dir):
    import pshard.torch as ps
    ps.init()
    kinds = (ps.config("data.dir"), ps.config("train.epochs"), ps.config("optimizer.lr"), ps.config("train.eval"))
    with open(os.path.join(out_dir, "config.txt"), "w") as f:
        f.write(repr(kinds))
    net = torch.nn.Linear(6, 4)
    opt = ps.DistributedOptimizer(net, steps_per_epoch=20)
    x, y = torch.randn(8, 6), torch.randint(0, 4, (8,))
    subprocess.run([sys.executable, os.path.abspath(__file__), "child", out_dir], timeout=60, check=True)
    for _ in range(20):
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    ps.report(epoch=0, train_loss=float(loss))
    ps.shutdown()


def main():
    out = support.fresh_dir("one-init")
    t0 = time.time()
    status, output, _ = support.launch(CONFIG, 1, 1, [os.path.abspath(__file__), "worker", out], 90, "one-init")
    support.expect(status == 0, "the job failed (status %d)" % status, output)
    said = open(os.path.join(out, "child.txt")).read()
    support.expect(said.startswith("REFUSED ") and "worker rank 0 is alive" in said and
                   "a second process cannot join the job with its rank" in said,
                   "the child's ps.init(): %s" % said, output)
    support.expect("is dead" not in output and "rejoined" not in output, "the worker lost its rank", output)
    kinds = open(os.path.join(out, "config.txt")).read()
    support.expect(kinds == "('true', 1, 0.1, True)", "ps.config() values: %s" % kinds, output)
    print("a child's ps.init() is refused; the worker trained to the end (%.1f s)" % (time.time() - t0))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2])
    elif len(sys.argv) > 1 and sys.argv[1] == "child":
        child(sys.argv[2])
    else:
        main()
        support.passed()
