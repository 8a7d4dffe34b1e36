"""The Python worker of scripts/failure_soak.py --python: an MLP on Fashion-MNIST through pshard.torch.

    pshard launch --servers 2 --workers 3 --config JOB.toml -- python3 scripts/failure_soak_worker.py TRAIN TEST

Cooperates with every way the soak disturbs a job: it starts at ps.start_step() / ps.start_epoch() (a resumed,
restarted or rejoining worker), draws its batches from a ShardSampler (a resumed epoch skips what was trained),
stops with status 75 on SIGTERM under checkpoint.on_sigterm = checkpoint (DistributedOptimizer does), and every rank
writes the final weights to RUN_DIR/model.pt (atomically; exit 74 when the disk is full), so that a completed run
without a model is seen. Each rank reports its share of the test accuracy every epoch.
"""
import gzip
import io
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

import pshard.torch as ps

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split, limit):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(DATA, prefix + "-images-idx3-ubyte.gz"))[:limit]
    y = read_idx(os.path.join(DATA, prefix + "-labels-idx1-ubyte.gz"))[:limit]
    x = (torch.from_numpy(x.astype(np.float32) / 255.0).flatten(1) - 0.2860) / 0.3530
    return torch.utils.data.TensorDataset(x, torch.from_numpy(y.astype(np.int64)))


def save_model(net):
    """RUN_DIR/model.pt, written to a temporary file and renamed (a full disk leaves no partial model). Every rank
    writes it: in a sync job they all hold the last step's weights, and a job that lost rank 0 (failure_policy =
    continue) still leaves its model."""
    path = os.path.join(os.environ["PSHARD_RUN_DIR"], "model.pt")
    tmp = "%s.tmp.%d" % (path, ps.rank())
    # Serialised in memory first: torch.save into a file on a full disk raises from its writer, whose destructor
    # then aborts the process at exit; a plain write says ENOSPC as an OSError.
    data = io.BytesIO()
    torch.save(net.state_dict(), data)
    try:
        with open(tmp, "wb") as f:
            f.write(data.getvalue())
        os.replace(tmp, path)
    except OSError as e:
        sys.stderr.write("failure_soak_worker: the model was not saved (%s)\n" % e)
        try:
            os.remove(tmp)
        except OSError:
            pass
        sys.exit(74)


def main():
    train_size, test_size = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(1)
    ps.init()
    batch = ps.config("train.batch_size")
    epochs = ps.config("train.epochs")
    torch.manual_seed(0)  # every rank starts from the same weights; rank 0's are sent to the servers
    net = torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    train = load("train", train_size)
    sampler = ps.ShardSampler(train, shuffle=True, seed=1)
    loader = torch.utils.data.DataLoader(train, batch_size=batch, sampler=sampler, drop_last=True)
    opt = ps.DistributedOptimizer(net, steps_per_epoch=len(train) // ps.size() // batch)
    test = ps.shard(load("test", test_size))
    tx = torch.stack([test[i][0] for i in range(len(test))])
    ty = torch.stack([test[i][1] for i in range(len(test))])
    for epoch in range(ps.start_epoch(), epochs):
        sampler.set_epoch(epoch)
        loss = torch.zeros(())
        for xb, yb in loader:
            loss = F.cross_entropy(net(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        opt.synchronize()
        with torch.no_grad():
            acc = (net(tx).argmax(dim=1) == ty).float().mean().item()
        ps.report(epoch=epoch, train_loss=float(loss), test_acc=acc, test_samples=len(ty))
    opt.synchronize()
    save_model(net)
    ps.shutdown()


if __name__ == "__main__":
    main()
