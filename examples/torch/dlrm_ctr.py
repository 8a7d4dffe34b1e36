"""A DLRM-style click model on synthetic click data, its embedding tables held only by pshard's servers.

    pshard launch --servers 2 --workers 2 --config configs/dlrm_ctr.toml -- python3 examples/torch/dlrm_ctr.py
    pshard launch --servers 2 --workers 2 --config configs/dlrm_ctr.toml \
        -- python3 examples/torch/dlrm_ctr.py --rows 1000000 --dim 16 --steps-per-epoch 500

The job config (configs/dlrm_ctr.toml) sets the dense layers' optimizer ([optimizer]: adam), the tables' rule
([embedding]: adagrad, lr 0.05), train.epochs and train.batch_size, and sync mode. --epochs and --batch override
the last two for this script; give the same numbers with --set train.epochs=N --set train.batch_size=B so that the
run's declared length and the metrics agree. docs/SPARSE.md explains the tables, their memory and their optimizers.

The model: dense features -> bottom MLP -> a vector of --dim values; each categorical field -> its own
ps.EmbeddingBag (rows on the servers, row r on server r mod S) -> a vector of --dim values; the dot product of every
pair of these F + 1 vectors, with the bottom MLP's vector, -> top MLP -> the click logit.

The data is made here from --seed, in numpy, in the form of the synthetic-ctr generator of docs/DATA.md (not its
bytes): per field, ids from a power law with exponent --zipf (id 0 the most frequent); dense features N(0, 1); a
hidden factor model gives each (field, id) a bias and a factor vector from a hash of (seed, field, id), so nothing is
stored per id, and the label is Bernoulli(sigmoid(logit)) with
logit = -1.5 + sum_f b_f / sqrt(F) + sum_{f<g} <v_f, v_g> / sqrt(K F (F-1) / 2) + 0.5 sum_j w_j x_j / sqrt(D).
Rank r makes its own training samples, new ones each epoch (--steps-per-epoch x --batch samples from (seed, r,
epoch)): click logs are read once, as DLRM trains on them. Every rank makes the same test set from the seed and
evaluates all of it.

Each epoch every rank reports its train loss, the test log loss, the test accuracy at threshold 0.5 and the test AUC
(exact: ties share their average rank) as a figure of its own (ps.report(figures=...): metrics.jsonl's "figures" and
`pshard report`'s test_auc column); rank 0 prints them with the AUC of the hidden model's own probabilities on the same
labels, which no model of these features can be expected to beat.
"""
import argparse
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import pshard.torch as ps

# ---- synthetic click data ------------------------------------------------------------------------------------------

FACTORS = 4  # K: the hidden model's factor dimension
INTERCEPT = -1.5
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)


def _mix(x):
    """splitmix64's finaliser on a uint64 array (wrapping arithmetic)."""
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _MUL1
    x = (x ^ (x >> np.uint64(27))) * _MUL2
    return x ^ (x >> np.uint64(31))


def hidden_uniform(seed, field, ids, slot):
    """The hidden model's value `slot` of (field, id) for every id in `ids`: uniform with mean 0 and variance 1,
    a function of (seed, field, id, slot) alone."""
    h = _mix(np.full(ids.shape, seed, dtype=np.uint64))
    h = _mix(h ^ np.uint64(field + 1))
    h = _mix(h ^ ids.astype(np.uint64))
    h = _mix(h ^ np.uint64(slot + 1))
    u = (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))  # [0, 1)
    return (u * 2.0 - 1.0) * math.sqrt(3.0)


def power_law_ids(rng, n, rows, exponent):
    """n ids in [0, rows): floor(x) - 1 for x drawn from the density x^-exponent on [1, rows + 1), by inversion, so
    that id k - 1 is drawn with probability close to k^-exponent / sum_j j^-exponent (a Zipf law), for any rows."""
    u = rng.random(n)
    if abs(exponent - 1.0) < 1e-9:
        x = np.exp(u * math.log(rows + 1.0))
    else:
        a = 1.0 - exponent
        x = (1.0 + u * ((rows + 1.0) ** a - 1.0)) ** (1.0 / a)
    return np.clip(np.floor(x).astype(np.int64) - 1, 0, rows - 1)


def make_clicks(seed, stream, n, fields, rows, dense, exponent):
    """n samples of stream `stream` (a list of ints: [0] the test set, [1 + r, e] rank r's samples of epoch e): dense
    features (n x dense float32), ids (n x fields int64), labels (n float32) and the hidden model's click
    probabilities (n float64)."""
    rng = np.random.default_rng([seed] + list(stream))
    ids = np.stack([power_law_ids(rng, n, rows, exponent) for _ in range(fields)], axis=1)
    x = rng.standard_normal((n, dense))
    logit = np.full(n, INTERCEPT)
    factors = []
    for f in range(fields):
        logit += hidden_uniform(seed, f, ids[:, f], 0) / math.sqrt(fields)
        factors.append(np.stack([hidden_uniform(seed, f, ids[:, f], 1 + k) for k in range(FACTORS)], axis=1))
    pairs = fields * (fields - 1) // 2
    if pairs:
        scale = math.sqrt(FACTORS * pairs)
        for f in range(fields):
            for g in range(f + 1, fields):
                logit += (factors[f] * factors[g]).sum(axis=1) / scale
    w = hidden_uniform(seed, fields, np.arange(dense, dtype=np.uint64), 0)  # the dense features' weights
    logit += 0.5 * (x @ w) / math.sqrt(dense)
    p = 1.0 / (1.0 + np.exp(-logit))
    y = (rng.random(n) < p).astype(np.float32)
    return (torch.from_numpy(x.astype(np.float32)), torch.from_numpy(ids), torch.from_numpy(y), p)


# ---- metrics -------------------------------------------------------------------------------------------------------

def auc(scores, labels):
    """The exact area under the ROC curve: the Mann-Whitney statistic, tied scores sharing their average rank.
    NaN when the labels hold one class only."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels) > 0.5
    n, pos = scores.size, int(labels.sum())
    neg = n - pos
    if pos == 0 or neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    _, first, counts = np.unique(scores[order], return_index=True, return_counts=True)
    ranks = np.repeat(first + (counts + 1) / 2.0, counts)  # 1-based ranks, ties averaged, in sorted order
    return float((ranks[labels[order]].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def log_loss(p, labels):
    """Mean binary log loss, probabilities clamped to [1e-7, 1 - 1e-7]."""
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-7, 1.0 - 1e-7)
    y = np.asarray(labels, dtype=np.float64)
    return float(-(y * np.log(p) + (1.0 - y) * np.log(1.0 - p)).mean())


# ---- the model -----------------------------------------------------------------------------------------------------

def mlp(sizes, last_relu):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    """Bottom MLP on the dense features, one server-held table per categorical field, pairwise dot interaction,
    top MLP to the click logit."""

    def __init__(self, fields, rows, dim, dense, init_scale):
        super().__init__()
        self.bottom = mlp([dense, 64, dim], last_relu=True)
        # The tables are made before DistributedOptimizer (it declares them to the servers); their names must be the
        # same on every rank.
        self.tables = nn.ModuleList([ps.EmbeddingBag(rows, dim, mode="sum", name="field%d" % f, init="uniform",
                                                     init_scale=init_scale) for f in range(fields)])
        vectors = fields + 1
        self.pairs = torch.triu_indices(vectors, vectors, offset=1)
        self.top = mlp([dim + vectors * (vectors - 1) // 2, 64, 32, 1], last_relu=False)

    def forward(self, x, ids):
        z = self.bottom(x)
        vecs = torch.stack([z] + [t(ids[:, f:f + 1]) for f, t in enumerate(self.tables)], dim=1)  # B x (F+1) x dim
        dots = torch.bmm(vecs, vecs.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
        return self.top(torch.cat([z, dots], dim=1)).squeeze(1)


def evaluate(model, test, batch):
    """Probabilities of the test set (no gradients: the rows are only read)."""
    x, ids = test[0], test[1]
    model.eval()
    out = []
    with torch.no_grad():
        for lo in range(0, x.shape[0], batch):
            out.append(torch.sigmoid(model(x[lo:lo + batch], ids[lo:lo + batch])))
    model.train()
    return torch.cat(out).double().numpy()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fields", type=int, default=8, help="categorical fields, one table each")
    p.add_argument("--rows", type=int, default=100000, help="rows (ids) per field's table")
    p.add_argument("--dim", type=int, default=16, help="embedding dimension")
    p.add_argument("--dense", type=int, default=4, help="dense features")
    p.add_argument("--epochs", type=int, default=None, help="epochs (default: the config's train.epochs)")
    p.add_argument("--steps-per-epoch", type=int, default=200, help="steps per epoch on each rank")
    p.add_argument("--batch", type=int, default=None, help="samples per step on each rank (default: the config's "
                                                           "train.batch_size)")
    p.add_argument("--test-size", type=int, default=8192, help="test samples (every rank evaluates all of them)")
    p.add_argument("--zipf", type=float, default=1.05, help="exponent of the ids' power law")
    p.add_argument("--init-scale", type=float, default=0.05, help="rows start uniform on [-s, s]")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if min(args.fields, args.rows, args.dim, args.dense, args.steps_per_epoch, args.test_size) < 1:
        p.error("--fields, --rows, --dim, --dense, --steps-per-epoch and --test-size must be at least 1")

    ps.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    epochs = args.epochs if args.epochs is not None else ps.config("train.epochs")
    batch = args.batch if args.batch is not None else ps.config("train.batch_size")
    if epochs < 1 or batch < 1:
        p.error("epochs (%d) and batch (%d) must be at least 1: give --epochs and --batch, or set train.epochs and "
                "train.batch_size in the job config" % (epochs, batch))
    make = lambda stream, n: make_clicks(args.seed, stream, n, args.fields, args.rows, args.dense, args.zipf)
    test = make([0], args.test_size)
    bound = auc(test[3], test[2].numpy())

    model = DLRM(args.fields, args.rows, args.dim, args.dense, args.init_scale)
    opt = ps.DistributedOptimizer(model, steps_per_epoch=args.steps_per_epoch, batch_size=batch, name="dlrm_ctr")
    for epoch in range(epochs):
        x, ids, y, _ = make([1 + ps.rank(), epoch], args.steps_per_epoch * batch)
        loss_sum, n = 0.0, 0
        for step in range(args.steps_per_epoch):
            b = slice(step * batch, (step + 1) * batch)
            loss = F.binary_cross_entropy_with_logits(model(x[b], ids[b]), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()  # pushes the dense gradients and each table's rows of this step
            ps.report_step(float(loss))
            loss_sum += float(loss) * batch
            n += batch
        t0 = time.perf_counter()
        prob = evaluate(model, test, 2048)
        labels = test[2].numpy()
        test_loss, test_auc = log_loss(prob, labels), auc(prob, labels)
        test_acc = float(((prob > 0.5) == (labels > 0.5)).mean())
        ps.report(epoch=epoch, train_loss=loss_sum / n, samples=n, test_loss=test_loss, test_acc=test_acc,
                  eval_s=time.perf_counter() - t0, figures={"test_auc": test_auc})
        if ps.rank() == 0:
            print("epoch %d/%d: train loss %.4f, test log loss %.4f, test accuracy %.4f, test AUC %.4f (the hidden "
                  "model's own AUC %.4f)" % (epoch + 1, epochs, loss_sum / n, test_loss, test_acc, test_auc, bound),
                  flush=True)
    ps.shutdown()


if __name__ == "__main__":
    main()
