#!/usr/bin/env python3
"""PyTorch DDP reference run (gloo, CPU) of the Fashion-MNIST MLP that pshard trains through its servers (bench).

Starts --world processes on 127.0.0.1 (torch.distributed, backend gloo), each with torch.set_num_threads(--threads).
Every process reads Fashion-MNIST from the IDX .gz files itself (gzip + numpy, no torchvision), scales pixels to
[0,1] and normalises with the training set's mean/std (as pshard's data.normalize does), and trains an MLP
784-hidden...-10 with momentum SGD and a per-step cosine schedule, batch --batch per process (global batch
world x batch) on its DistributedSampler shard; the last partial batch is dropped, as pshard does. Batches are cut
straight from the in-memory tensor with the sampler's indices (no DataLoader collation, which would only slow
PyTorch down).

Measured: training samples of all processes / the slowest process's training seconds (from a barrier after the
DDP wrap to its last optimizer step), the same definition as pshard's `samples_per_s`. Prints one JSON line:

  tests/bench/ddp_reference.py --world 2 --batch 64 --threads 1 --epochs 1
  {"samples_per_s": 18000.0, "train_s": 3.3, "samples": 59904, "steps": 468, ...}

Exits 0 and prints SKIP when PyTorch (or its gloo backend) is not installed.
"""
import argparse
import datetime
import gzip
import json
import os
import socket
import subprocess
import sys
import time


def torch_or_reexec():
    """Imports torch; when this python3 has none, re-runs the script under Debian's /usr/bin/python3 (once)."""
    try:
        import torch  # noqa: F401
        return torch
    except ImportError:
        # Debian's python3-torch lives in the system interpreter; a pyenv/venv python3 on PATH does not see it.
        system = "/usr/bin/python3"
        if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system) \
                and not os.environ.get("PSHARD_BENCH_REEXEC"):
            os.environ["PSHARD_BENCH_REEXEC"] = "1"
            os.execv(system, [system] + sys.argv)
        return None


def read_idx_gz(path, kind):
    """Reads an IDX file (.gz): kind 'images' gives uint8 [n, rows*cols], 'labels' gives uint8 [n]."""
    import numpy as np
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = int.from_bytes(raw[0:4], "big")
    n = int.from_bytes(raw[4:8], "big")
    if kind == "images":
        if magic != 2051:
            raise SystemExit("%s: not an IDX image file (magic %d, want 2051)" % (path, magic))
        rows, cols = int.from_bytes(raw[8:12], "big"), int.from_bytes(raw[12:16], "big")
        data = np.frombuffer(raw, dtype=np.uint8, offset=16)
        if data.size != n * rows * cols:
            raise SystemExit("%s: %d pixel bytes, header says %d x %d x %d" % (path, data.size, n, rows, cols))
        return data.reshape(n, rows * cols)
    if magic != 2049:
        raise SystemExit("%s: not an IDX label file (magic %d, want 2049)" % (path, magic))
    data = np.frombuffer(raw, dtype=np.uint8, offset=8)
    if data.size != n:
        raise SystemExit("%s: %d labels, header says %d" % (path, data.size, n))
    return data


def load_fashion_mnist(torch, data_dir, train_size):
    """Training images as float32 [n, 784] normalised with the set's mean/std, labels as int64 [n]."""
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"):
        if not os.path.exists(os.path.join(data_dir, name)):
            raise SystemExit("Fashion-MNIST not found: %s (apt-get install dataset-fashion-mnist, or --data-dir)"
                             % os.path.join(data_dir, name))
    x = read_idx_gz(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), "images")
    y = read_idx_gz(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), "labels")
    if len(x) != len(y):
        raise SystemExit("%s: %d images but %d labels" % (data_dir, len(x), len(y)))
    if train_size:
        x, y = x[:train_size], y[:train_size]
    xf = x.astype("float32") / 255.0
    xf = (xf - xf.mean()) / xf.std()
    return torch.from_numpy(xf), torch.from_numpy(y.astype("int64"))


def train_process(torch, args):
    """One DDP rank: returns (to rank 0) the combined measurement as a dict."""
    import math
    import torch.distributed as dist
    from torch.utils.data.distributed import DistributedSampler

    torch.set_num_threads(args.threads)
    x, y = load_fashion_mnist(torch, args.data_dir, args.train_size)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % args.port, rank=args.rank,
                            world_size=args.world, timeout=datetime.timedelta(seconds=args.timeout))
    torch.manual_seed(args.seed)
    nn = torch.nn
    layers, last = [], x.shape[1]
    for h in (int(v) for v in args.hidden.split(",")):
        layers += [nn.Linear(last, h), nn.ReLU()]
        last = h
    model = nn.parallel.DistributedDataParallel(nn.Sequential(*layers, nn.Linear(last, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    sampler = DistributedSampler(range(len(x)), num_replicas=args.world, rank=args.rank, shuffle=True,
                                 seed=args.seed, drop_last=True)
    steps_per_epoch = len(sampler) // args.batch
    total_steps = steps_per_epoch * args.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1.0 + math.cos(math.pi * s / total_steps)))
    loss_fn = nn.CrossEntropyLoss()

    dist.barrier()
    t0 = time.perf_counter()
    loss_sum, correct, samples = 0.0, 0, 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(sampler), dtype=torch.int64)
        for s in range(steps_per_epoch):
            idx = order[s * args.batch:(s + 1) * args.batch]
            xb, yb = x[idx], y[idx]
            opt.zero_grad(set_to_none=True)
            out = model(xb)
            loss = loss_fn(out, yb)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item() * len(idx)
            correct += int((out.argmax(1) == yb).sum())
            samples += len(idx)
    train_s = time.perf_counter() - t0

    # Slowest rank's time, all ranks' samples, loss and accuracy.
    t = torch.tensor([train_s], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    sums = torch.tensor([loss_sum, correct, samples], dtype=torch.float64)
    dist.all_reduce(sums)
    dist.destroy_process_group()
    total = int(sums[2])
    return {"samples_per_s": total / t.item(), "train_s": t.item(), "samples": total, "steps": total_steps,
            "train_loss": sums[0].item() / total, "train_acc": sums[1].item() / total, "world": args.world,
            "batch_size": args.batch, "global_batch": args.batch * args.world, "threads": args.threads,
            "epochs": args.epochs, "lr": args.lr, "backend": "gloo", "torch": torch.__version__}


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(args):
    """Starts the --world rank processes, waits for them (bounded), returns rank 0's JSON result."""
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    procs = []
    for rank in range(args.world):
        cmd = [sys.executable, os.path.abspath(__file__), "--rank", str(rank), "--port", str(port)] + sys.argv[1:]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                                      text=True))
    deadline = time.monotonic() + args.timeout
    failed = []
    try:
        # Rank 0 prints one short line, so polling cannot block on a full pipe. A rank that fails ends the job
        # at once instead of leaving the others waiting in gloo until their own timeout.
        while any(p.poll() is None for p in procs):
            if any(p.returncode for p in procs):
                break
            if time.monotonic() > deadline:
                failed.append("DDP job did not finish within %d s" % args.timeout)
                break
            time.sleep(0.05)
        failed += ["rank %d exited with %d" % (r, p.returncode) for r, p in enumerate(procs) if p.returncode]
        out = "" if failed else procs[0].stdout.read()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        procs[0].stdout.close()
    if failed:
        raise SystemExit("ddp_reference: " + "; ".join(failed))
    lines = out.strip().splitlines()
    if not lines:
        raise SystemExit("ddp_reference: rank 0 printed no result")
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=int, default=2, help="DDP processes")
    ap.add_argument("--batch", type=int, default=64, help="samples per step per process")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads per process")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.05, help="peak learning rate (cosine decay to 0 per step)")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--hidden", default="256,128", help="MLP hidden sizes")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--train-size", type=int, default=0, help="training samples to use (0: all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=600, help="seconds before the job is stopped as failed")
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)  # set for the rank processes
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()

    torch = torch_or_reexec()
    if torch is None or not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        print("SKIP: PyTorch with the gloo backend is not installed (apt-get install python3-torch)")
        return 0
    if args.rank >= 0:
        result = train_process(torch, args)
        if args.rank == 0:
            print(json.dumps(result), flush=True)
        return 0
    print(json.dumps(run_job(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
