#!/usr/bin/env python3
"""The Fashion-MNIST MLP of ddp_reference.py as a pshard.torch worker (bench): `pshard launch ... -- python3 this`.

Same data (ddp_reference.load_fashion_mnist), model (784-hidden...-10, seed 1), batch cutting (a per-epoch seeded
shuffle, this rank's equal share, no DataLoader) and threads as the DDP reference; the optimizer and schedule are
the job config's, on the servers. Batch size, epochs and threads come from the config (train.batch_size,
train.epochs, train.threads). Reports each epoch, so the run's summary has samples_per_s like a C++ worker's.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
from ddp_reference import load_fashion_mnist  # noqa: E402

import torch  # noqa: E402

import pshard.torch as ps  # noqa: E402


def main():
    ps.init()
    torch.set_num_threads(ps.config("train.threads"))
    x, y = load_fashion_mnist(torch, ps.config("data.dir"), ps.config("data.train_size"))
    batch, epochs = ps.config("train.batch_size"), ps.config("train.epochs")
    torch.manual_seed(1)
    layers, last = [], x.shape[1]
    for h in ps.config("model.hidden"):
        layers += [torch.nn.Linear(last, h), torch.nn.ReLU()]
        last = h
    model = torch.nn.Sequential(*layers, torch.nn.Linear(last, 10))
    per_rank = len(x) // ps.size()
    steps = per_rank // batch
    opt = ps.DistributedOptimizer(model, steps_per_epoch=steps, name="mlp")
    loss_fn = torch.nn.CrossEntropyLoss()
    for epoch in range(epochs):
        g = torch.Generator()
        g.manual_seed(1 + epoch)
        order = torch.randperm(len(x), generator=g)[ps.rank() * per_rank:(ps.rank() + 1) * per_rank]
        loss_sum, correct = 0.0, 0
        for s in range(steps):
            idx = order[s * batch:(s + 1) * batch]
            xb, yb = x[idx], y[idx]
            out = model(xb)
            loss = loss_fn(out, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(idx)
            correct += int((out.argmax(1) == yb).sum())
        ps.report(epoch=epoch, train_loss=loss_sum / (steps * batch), train_acc=correct / (steps * batch))
    ps.shutdown()


if __name__ == "__main__":
    main()
