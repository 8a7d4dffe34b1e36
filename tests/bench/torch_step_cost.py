#!/usr/bin/env python3
"""Where a pshard.torch step's time goes beyond torch's own (bench label; the Python path's overhead).

Launches `pshard launch --servers 1 --workers W --config configs/fmnist_mlp_sync.toml -- python3 THIS --worker`;
each worker times the bench MLP (784-256-128-10, batch --batch, contiguous slices of random data, one torch
thread) for --steps steps, in rounds alternating two ways: torch alone (torch.optim.SGD in the process, no pshard)
and through pshard.torch (DistributedOptimizer, the optimizer on the server). Prints rank 0's milliseconds per step:
wall, CPU of the whole process (the library's I/O threads included) and CPU of the training thread; and, from a
last pshard.torch round with timing wrappers (which add their own few microseconds), the wall and thread-CPU
microseconds per call of the gradient hook, the modules' weight loading, step() and the two C calls. The 1-minute
load average is printed with each round. Reports only; exits non-zero only when the job fails.

  tests/bench/torch_step_cost.py --pshard build/bin/pshard --workers 1 --steps 500 --rounds 3
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from ddp_reference import torch_or_reexec  # noqa: E402


def worker(steps, rounds, batch):
    sys.path.insert(0, os.path.join(REPO, "python"))
    import torch
    import pshard.torch as ps
    ps.init()
    torch.set_num_threads(1)
    torch.manual_seed(1)

    def mlp():
        return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                                   torch.nn.ReLU(), torch.nn.Linear(128, 10))

    x, y = torch.randn(100 * batch, 784), torch.randint(0, 10, (100 * batch,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def loop(model, zero_grad, step):
        wall, cpu, thread = time.perf_counter(), time.process_time(), time.thread_time()
        for s in range(steps):
            lo = (s % 100) * batch
            loss = loss_fn(model(x[lo:lo + batch]), y[lo:lo + batch])
            zero_grad()
            loss.backward()
            step()
            loss.item()
        return {"wall_ms": (time.perf_counter() - wall) / steps * 1e3,
                "cpu_ms": (time.process_time() - cpu) / steps * 1e3,
                "thread_cpu_ms": (time.thread_time() - thread) / steps * 1e3, "load1": os.getloadavg()[0]}

    ref = mlp()
    sgd = torch.optim.SGD(ref.parameters(), lr=0.01, momentum=0.9)
    net = mlp()
    opt = ps.DistributedOptimizer(net, steps_per_epoch=(2 * rounds + 1) * steps, batch_size=batch)
    out = {"rounds": []}
    for _ in range(rounds):
        out["rounds"].append({"torch": loop(ref, sgd.zero_grad, sgd.step), "pshard": loop(net, opt.zero_grad,
                                                                                          opt.step)})
    calls = {}

    def timed(name, f):
        def call(*args):
            wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
            r = f(*args)
            c = calls.setdefault(name, [0, 0, 0])
            c[0] += 1
            c[1] += time.perf_counter_ns() - wall
            c[2] += time.thread_time_ns() - cpu
            return r
        return call

    # Instance attributes shadow the methods the hooks and step() look up on `opt`.
    opt.push_pull = timed("pshard_push_pull (C)", opt.push_pull)
    opt.wait = timed("pshard_wait (C)", opt.wait)
    opt._grad_ready = timed("gradient hook (copy + push)", opt._grad_ready)
    opt._complete = timed("module pre-hook (wait + load)", opt._complete)
    timed_step = timed("step()", opt.step)
    loop(net, opt.zero_grad, timed_step)
    out["calls"] = {k: {"calls": v[0], "wall_us": v[1] / v[0] / 1e3, "thread_cpu_us": v[2] / v[0] / 1e3}
                    for k, v in calls.items()}
    ps.report(epoch=0, train_loss=0.0)
    if ps.rank() == 0:
        print("STEP_COST " + json.dumps(out), flush=True)
    ps.shutdown()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pshard", default=os.environ.get("PSHARD_BIN") or shutil.which("pshard"))
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--steps", type=int, default=500, help="steps per timed loop")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.steps, args.rounds, args.batch)
    if torch_or_reexec() is None:
        print("SKIP: PyTorch is not installed (apt-get install python3-torch)")
        return 0
    if not args.pshard or not os.path.exists(args.pshard):
        print("SKIP: pshard executable not found (--pshard or $PSHARD_BIN)")
        return 0
    env = dict(os.environ)
    env.setdefault("PSHARD_LIBRARY", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(args.pshard))),
                                                  "lib", "libpshard_c.so"))
    env.setdefault("OMP_NUM_THREADS", "1")
    work = tempfile.mkdtemp(prefix="torch_step_cost.")
    cmd = [args.pshard, "launch", "--servers", "1", "--workers", str(args.workers), "--timeout", str(args.timeout),
           "--config", os.path.join(REPO, "configs", "fmnist_mlp_sync.toml"), "--run-dir", os.path.join(work, "run"),
           "--set", "train.batch_size=%d" % args.batch, "--set", "train.threads=1", "--set", "train.epochs=1",
           "--", sys.executable, os.path.abspath(__file__), "--worker", "--steps", str(args.steps), "--rounds",
           str(args.rounds), "--batch", str(args.batch)]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                           timeout=args.timeout + 60)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [line for line in p.stdout.splitlines() if "STEP_COST " in line]
    if p.returncode != 0 or not lines:
        sys.stderr.write(p.stdout[-4000:])
        raise SystemExit("the job failed (exit %d): %s" % (p.returncode, " ".join(cmd)))
    r = json.loads(lines[-1].split("STEP_COST ", 1)[1])
    print("pshard.torch vs torch alone, MLP 784-256-128-10, batch %d, %d worker(s) + 1 server, %d steps per loop, "
          "1 torch thread (ms per step; rank 0)" % (args.batch, args.workers, args.steps))
    print("%5s %24s %34s %6s" % ("round", "torch alone: wall/cpu", "pshard.torch: wall/cpu/thread cpu", "load1"))
    for i, x in enumerate(r["rounds"]):
        t, s = x["torch"], x["pshard"]
        print("%5d %11.3f / %6.3f %13.3f / %6.3f / %6.3f %6.2f" % (i + 1, t["wall_ms"], t["cpu_ms"], s["wall_ms"],
                                                                  s["cpu_ms"], s["thread_cpu_ms"], s["load1"]))
    print("per call, a timed pshard.torch loop: %-32s %7s %9s %14s" % ("", "calls", "wall us", "thread cpu us"))
    for name, c in sorted(r["calls"].items()):
        print("  %-68s %7d %9.1f %14.1f" % (name, c["calls"], c["wall_us"], c["thread_cpu_us"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
