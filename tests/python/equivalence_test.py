"""2 Python workers with batch 32 through 2 servers, sync, server-side SGD, end with the same weights after 20 steps
as single-process PyTorch SGD with batch 64 (relative 1e-5): the Python path adds nothing to BSP's arithmetic. Rank 1
starts 3 s late: the epoch's clock starts when every rank is ready, so rank 0's epoch_s does not count the delay.
The same job with one push per host (cluster.host_aggregation = always, over TCP) ends with the same bits, having
put about twice the model's bytes on the network per step instead of four times."""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

import support

STEPS, BATCH, LR = 20, 32, 0.1
START_SKEW_S = 3.0
CONFIG = """
[optimizer]
name = "sgd"
lr = %g
momentum = 0.0

[train]
batch_size = %d
epochs = 1

[cluster]
mode = "sync"
slice_bytes = 1024
""" % (LR, BATCH)


def model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 6 * 6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 5))


def data():
    g = torch.Generator()
    g.manual_seed(7)
    x = torch.randn(STEPS * 2 * BATCH, 1, 8, 8, generator=g)
    y = torch.randint(0, 5, (STEPS * 2 * BATCH,), generator=g)
    return x, y


def worker(out_dir):
    import pshard.torch as ps
    ps.init()
    # Rank 1 starts from other weights: the servers' copy (rank 0's) must replace them.
    net = model(seed=1 + ps.rank() * 100)
    if ps.rank() == 1:
        time.sleep(START_SKEW_S)  # a slow start-up (import, data): not rank 0's training time
    opt = ps.DistributedOptimizer(net, steps_per_epoch=STEPS)
    x, y = data()
    for t in range(STEPS):
        lo = t * 2 * BATCH + ps.rank() * BATCH
        loss = F.cross_entropy(net(x[lo:lo + BATCH]), y[lo:lo + BATCH])
        opt.zero_grad()
        loss.backward()
        opt.step()
    ps.report(epoch=0, train_loss=float(loss))
    torch.save(net.state_dict(), os.path.join(out_dir, "rank%d.pt" % ps.rank()))
    ps.shutdown()


def summary(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if '"event":"summary"' in line][-1]


def main():
    out = support.fresh_dir("equivalence")
    status, output, run_dir = support.launch(CONFIG, 2, 2, [os.path.abspath(__file__), "worker", out], 240,
                                             "equivalence")
    support.expect(status == 0, "the job failed (status %d)" % status, output)
    per_host = support.fresh_dir("equivalence-host")
    host_config = CONFIG + 'transport = "tcp"\nhost_aggregation = "always"\n'
    status, host_output, host_run = support.launch(host_config, 2, 2,
                                                   [os.path.abspath(__file__), "worker", per_host], 240,
                                                   "equivalence-host")
    support.expect(status == 0, "the job with one push per host failed (status %d)" % status, host_output)
    for r in range(2):
        a = torch.load(os.path.join(out, "rank%d.pt" % r))
        b = torch.load(os.path.join(per_host, "rank%d.pt" % r))
        for name in a:
            support.expect(torch.equal(a[name], b[name]), "rank %d %s: the job with one push per host ended with "
                           "other weights than the job whose workers pushed their own" % (r, name), host_output)
    host = summary(host_run)
    support.expect(host["network_bytes_per_host_step"] <= 2.2 * host["model_bytes"],
                   "one push per host: %.0f network bytes per host and step for a %d-byte model"
                   % (host["network_bytes_per_host_step"], host["model_bytes"]), host_output)
    ref = model(seed=1)
    sgd = torch.optim.SGD(ref.parameters(), lr=LR)
    x, y = data()
    for t in range(STEPS):
        lo = t * 2 * BATCH
        loss = F.cross_entropy(ref(x[lo:lo + 2 * BATCH]), y[lo:lo + 2 * BATCH])
        sgd.zero_grad()
        loss.backward()
        sgd.step()
    for r in range(2):
        got = torch.load(os.path.join(out, "rank%d.pt" % r))
        for name, want in ref.state_dict().items():
            err = float((got[name] - want).abs().max() / want.abs().max())
            support.expect(err <= 1e-5, "rank %d %s: relative difference %.3g > 1e-5" % (r, name, err), output)
            moved = float((want - model(seed=1).state_dict()[name]).abs().max())
            support.expect(moved > 1e-3, "%s did not train (moved %.3g)" % (name, moved))
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        events = f.read()
    support.expect('"event":"start"' in events and '"event":"epoch"' in events and '"event":"summary"' in events,
                   "metrics.jsonl lacks the start, epoch or summary line:\n" + events)
    # The epoch's clock starts when every rank has its DistributedOptimizer: rank 0 does not count rank 1's slow
    # start-up (both end the last sync step together, so their epoch_s differ by the start-up skew they count).
    epoch = [json.loads(line) for line in events.splitlines() if '"event":"epoch"' in line][0]
    times = [w["epoch_s"] for w in epoch["workers"]]
    support.expect(max(times) - min(times) < START_SKEW_S / 2, "the ranks' epoch_s %s differ by rank 1's start-up "
                   "delay (%.1f s)" % (times, START_SKEW_S), events)
    print("equivalence: 2 workers x batch %d through 2 servers == 1 process x batch %d after %d SGD steps"
          % (BATCH, 2 * BATCH, STEPS))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2])
    else:
        main()
        support.passed()
