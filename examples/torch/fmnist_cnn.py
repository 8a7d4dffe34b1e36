"""A small CNN on Fashion-MNIST, trained through pshard's servers by any number of workers.

    pshard launch --servers 1 --workers 2 --config configs/torch_fmnist_cnn.toml -- python3 examples/torch/fmnist_cnn.py

Reads the IDX files with numpy (no torchvision); batch size and epochs come from the job config (train.batch_size,
train.epochs), the optimizer runs on the servers ([optimizer]). Each worker trains on its shard and evaluates its
share of the test set; the coordinator combines the shares into metrics.jsonl.
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import pshard.torch as ps


def read_idx(path):
    """An IDX file (gzipped or not) as a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 8:
        raise ValueError("%s is not an IDX file of unsigned bytes" % path)
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError("%s: the header says %s, the file holds %d bytes" % (path, dims, body.size))
    return body.reshape(dims)


def load(data_dir, split, limit):
    prefix = "train" if split == "train" else "t10k"
    find = lambda stem: next((os.path.join(data_dir, stem + s) for s in (".gz", "") if
                              os.path.exists(os.path.join(data_dir, stem + s))), os.path.join(data_dir, stem))
    x = read_idx(find(prefix + "-images-idx3-ubyte"))
    y = read_idx(find(prefix + "-labels-idx1-ubyte"))
    if limit:
        x, y = x[:limit], y[:limit]
    x = (torch.from_numpy(x.astype(np.float32) / 255.0) - 0.2860) / 0.3530
    return torch.utils.data.TensorDataset(x.unsqueeze(1), torch.from_numpy(y.astype(np.int64)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(64 * 5 * 5, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def evaluate(model, dataset, batch):
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for x, y in torch.utils.data.DataLoader(dataset, batch_size=512):
            out = model(x)
            loss += float(F.cross_entropy(out, y, reduction="sum"))
            correct += int((out.argmax(1) == y).sum())
    model.train()
    return loss / len(dataset), correct / len(dataset)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="folder of the IDX files")
    p.add_argument("--train-size", type=int, default=0, help="training samples to use (0: all)")
    p.add_argument("--test-size", type=int, default=0, help="test samples to use (0: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--save", default="", help="rank 0 saves the trained state_dict here")
    args = p.parse_args()

    ps.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    train, test = load(args.data, "train", args.train_size), load(args.data, "test", args.test_size)
    batch, epochs = ps.config("train.batch_size"), ps.config("train.epochs")
    sampler = ps.ShardSampler(train, shuffle=True, seed=args.seed)
    loader = torch.utils.data.DataLoader(train, batch_size=batch, sampler=sampler, drop_last=True)
    test_share = ps.shard(test)

    model = Net()
    opt = ps.DistributedOptimizer(model, steps_per_epoch=len(loader), name="fmnist_cnn")
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        loss_sum, correct, n = 0.0, 0, 0
        for x, y in loader:
            out = model(x)
            loss = F.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ps.report_step(float(loss))
            loss_sum += float(loss) * len(y)
            correct += int((out.argmax(1) == y).sum())
            n += len(y)
        t0 = time.perf_counter()
        test_loss, test_acc = evaluate(model, test_share, batch)
        ps.report(epoch=epoch, train_loss=loss_sum / n, train_acc=correct / n, samples=n, test_loss=test_loss,
                  test_acc=test_acc, test_samples=len(test_share), eval_s=time.perf_counter() - t0)
        if ps.rank() == 0:
            print("epoch %d: train loss %.4f, test accuracy of this rank's share %.4f" % (epoch + 1, loss_sum / n,
                                                                                       test_acc), flush=True)
    if args.save and ps.rank() == 0:
        torch.save(model.state_dict(), args.save)
    ps.shutdown()


if __name__ == "__main__":
    main()
