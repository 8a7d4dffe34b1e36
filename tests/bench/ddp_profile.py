#!/usr/bin/python3
"""PyTorch DDP on a profile model (bench): the same tensors and per-layer simulated compute that pshard's profile
models (model.name = profile) run, so that both systems can be compared on the communication of a real model.

The model is read from a profile file (profiles/*.json): one module per profile layer holding parameters of the
layer's shapes, whose forward is an autograd Function that sleeps the layer's forward_ms and whose backward sleeps
its backward_ms and returns a gradient for each parameter (a constant 1e-3 broadcast to the parameter's shape, so
making it costs nothing). Times are scaled by --batch / the profile's batch, and paced as pshard paces them (each
sleep shortened by how late the sleeps of the pass have ended so far, restarting at the first layer's forward).
Autograd runs the backwards in reverse layer order and DDP's gradient hooks fire as each layer's gradients are
accumulated, so DDP's buckets are all-reduced (gloo) during the remaining backward sleeps as they would be on a GPU.
Each step: zero_grad, forward, cross-entropy on the last layer's placeholder logits, backward, SGD with momentum.

For each worker count W, W processes are spawned on 127.0.0.1 (gloo, CPU, torch.set_num_threads(--threads)),
each doing --steps steps of --batch samples; samples/s = W x batch x steps / the slowest rank's seconds from a
barrier after the DDP wrap to its last optimizer step (pshard's definition of samples_per_s). Efficiency is
samples/s(W) / samples/s(W0) x W0 / W, W0 the fewest workers.

With --pshard BIN, the same worker counts also run through pshard: `BIN launch --servers S --workers W` of
configs/profile_resnet50_sync.toml with model.profile = the profile, --batch per worker and W x batch x steps
samples (so every worker does --steps steps, as a DDP process does), and the table shows both side by side
(samples/s, efficiency, ratio pshard / DDP). Reports only: exits 0 whatever the numbers, non-zero when a run fails.

  /usr/bin/python3 tests/bench/ddp_profile.py --profile profiles/resnet50.json --workers 1,2 --steps 10 \\
      --pshard build/bin/pshard

Exits 0 and prints SKIP when PyTorch (or its gloo backend) is not installed.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ddp_reference import free_port, torch_or_reexec  # noqa: E402
from ps_overhead import REPO, run_pshard  # noqa: E402

GRAD_VALUE = 1e-3


def read_profile(path):
    with open(path) as f:
        p = json.load(f)
    for key in ("name", "batch", "classes", "layers"):
        if key not in p:
            raise SystemExit("%s: missing field %r (pshard's reader, models/zoo/profile.h, says more)" % (path, key))
    return p


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def build_model(torch, profile, scale):
    """The profile as an nn.Module: ModuleList of layers, each with a ParameterList of the layer's tensors."""
    nn = torch.nn

    class Pace:
        late_ms = 0.0

    def wait(ms):
        shortened = ms - Pace.late_ms
        t0 = time.perf_counter()
        if shortened > 0:
            time.sleep(shortened / 1000.0)
        slept = (time.perf_counter() - t0) * 1000.0
        Pace.late_ms = max(0.0, Pace.late_ms + slept - ms)

    class Sleep(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, layer, *params):
            if layer.first:
                Pace.late_ms = 0.0
            wait(layer.forward_ms)
            ctx.layer = layer
            return x.new_zeros((x.shape[0], layer.outputs))  # a placeholder activation, like pshard's

        @staticmethod
        def backward(ctx, dy):
            layer = ctx.layer
            wait(layer.backward_ms)
            dx = torch.zeros((dy.shape[0], 1)) if ctx.needs_input_grad[0] else None  # the placeholder's gradient
            return (dx, None) + tuple(g.expand(p.shape) for g, p in zip(layer.grad_values, layer.params))

    class Layer(nn.Module):
        def __init__(self, spec, first, outputs):
            super().__init__()
            self.forward_ms = spec["forward_ms"] * scale
            self.backward_ms = spec["backward_ms"] * scale
            self.first, self.outputs = first, outputs
            self.params = nn.ParameterList()
            for p in spec["params"]:
                fan_in = max(1, numel(p["shape"]) // p["shape"][0])
                bound = 1.0 / fan_in ** 0.5
                self.params.append(nn.Parameter(torch.empty(p["shape"]).uniform_(-bound, bound)))
            self.grad_values = [torch.full((), GRAD_VALUE) for _ in self.params]

        def forward(self, x):
            return Sleep.apply(x, self, *self.params)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            n = len(profile["layers"])
            self.layers = nn.ModuleList(
                Layer(spec, i == 0, profile["classes"] if i == n - 1 else 1) for i, spec in enumerate(profile["layers"]))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    return Model()


def rank_process(torch, args):
    """One DDP rank; returns (to rank 0) the measurement."""
    import torch.distributed as dist
    torch.set_num_threads(args.threads)
    profile = read_profile(args.profile)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % args.port, rank=args.rank,
                            world_size=args.world, timeout=datetime.timedelta(seconds=args.timeout))
    torch.manual_seed(args.seed)
    model = build_model(torch, profile, args.batch / profile["batch"])
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb,
                                                    gradient_as_bucket_view=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    x = torch.zeros((args.batch, 1))
    y = torch.arange(args.batch) % profile["classes"]
    loss_fn = torch.nn.CrossEntropyLoss()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=False)  # the gradients are views of DDP's buckets
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - t0
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    dist.destroy_process_group()
    samples = args.world * args.batch * args.steps
    return {"workers": args.world, "samples_per_s": samples / t.item(), "train_s": t.item(), "samples": samples,
            "steps": args.steps, "loss": loss.item()}


def run_ddp(args, world):
    """Starts `world` rank processes (bounded wait, all killed on failure); returns rank 0's result."""
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    argv = [sys.executable, os.path.abspath(__file__), "--profile", args.profile, "--batch", str(args.batch),
            "--steps", str(args.steps), "--threads", str(args.threads), "--lr", repr(args.lr), "--momentum",
            repr(args.momentum), "--bucket-cap-mb", repr(args.bucket_cap_mb), "--seed", str(args.seed),
            "--timeout", str(args.timeout), "--world", str(world), "--port", str(port)]
    load = os.getloadavg()[0]
    procs = [subprocess.Popen(argv + ["--rank", str(r)], env=env, text=True,
                              stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL) for r in range(world)]
    deadline = time.monotonic() + args.timeout
    failed = []
    try:
        while any(p.poll() is None for p in procs):
            if any(p.returncode for p in procs):
                break
            if time.monotonic() > deadline:
                failed.append("DDP with %d workers did not finish within %d s" % (world, args.timeout))
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
        raise SystemExit("ddp_profile: " + "; ".join(failed))
    lines = out.strip().splitlines()
    if not lines:
        raise SystemExit("ddp_profile: rank 0 printed no result")
    r = json.loads(lines[-1])
    r["load1"] = load
    return r


def run_pshard_launch(args, profile, world, work):
    cmd = [args.pshard, "launch", "--servers", str(args.servers), "--workers", str(world), "--timeout",
           str(args.timeout), "--config", os.path.join(REPO, "configs", "profile_resnet50_sync.toml"),
           "--set", "model.profile=" + os.path.abspath(args.profile), "--set", "data.classes=%d" % profile["classes"],
           "--set", "data.train_size=%d" % (world * args.batch * args.steps), "--set", "data.test_size=16",
           "--set", "train.batch_size=%d" % args.batch, "--set", "train.threads=%d" % args.threads,
           "--set", "train.epochs=1", "--set", "train.eval=false", "--set", "optimizer.name=momentum",
           "--set", "optimizer.lr=%r" % args.lr, "--set", "optimizer.momentum=%r" % args.momentum,
           "--set", "lr_schedule.name=constant"]
    for kv in args.pshard_set:
        cmd += ["--set", kv]
    s = run_pshard(cmd, os.path.join(work, "pshard-%d" % world), args.timeout + 60)
    return {"workers": world, "samples_per_s": s["samples_per_s"], "load1": s["load1"]}


def with_efficiency(rows):
    base = rows[0]
    for r in rows:
        r["efficiency"] = r["samples_per_s"] / base["samples_per_s"] * base["workers"] / r["workers"]
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", required=True, help="profile file (profiles/*.json)")
    ap.add_argument("--workers", default="1,2", help="worker counts, e.g. 1,2,4")
    ap.add_argument("--batch", type=int, default=0, help="samples per step per worker (0: the profile's batch)")
    ap.add_argument("--steps", type=int, default=10, help="steps per worker of every run")
    ap.add_argument("--threads", type=int, default=1, help="compute threads per process, both sides")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP's bucket size (its default: 25)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pshard", default="", help="the pshard executable: also run pshard launch, side by side")
    ap.add_argument("--servers", type=int, default=1, help="pshard servers")
    ap.add_argument("--pshard-set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override of every pshard run, e.g. cluster.transport=tcp (repeatable)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds one run may take before it counts as failed")
    ap.add_argument("--json", action="store_true", help="one JSON object per worker count instead of the table")
    ap.add_argument("--world", type=int, default=0, help=argparse.SUPPRESS)  # set for the rank processes
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()

    torch = torch_or_reexec()
    if torch is None or not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        print("SKIP: PyTorch with the gloo backend is not installed (apt-get install python3-torch)")
        return 0
    profile = read_profile(args.profile)
    if args.batch <= 0:
        args.batch = profile["batch"]
    if args.rank >= 0:
        result = rank_process(torch, args)
        if args.rank == 0:
            print(json.dumps(result), flush=True)
        return 0
    if args.steps < 1:
        raise SystemExit("ddp_profile: --steps must be >= 1")
    counts = [int(w) for w in args.workers.split(",")]
    if not counts or min(counts) < 1:
        raise SystemExit("ddp_profile: --workers must list counts >= 1")

    ddp = with_efficiency([run_ddp(args, w) for w in counts])
    ps = []
    if args.pshard:
        with tempfile.TemporaryDirectory(prefix="ddp_profile.") as work:
            ps = with_efficiency([run_pshard_launch(args, profile, w, work) for w in counts])

    scale = args.batch / profile["batch"]
    compute_ms = sum(l["forward_ms"] + l["backward_ms"] for l in profile["layers"]) * scale
    params = sum(numel(p["shape"]) for l in profile["layers"] for p in l["params"])
    if args.json:
        for i, d in enumerate(ddp):
            row = {"profile": profile["name"], "workers": d["workers"], "batch": args.batch, "steps": args.steps,
                   "compute_ms": compute_ms, "ddp_samples_per_s": d["samples_per_s"], "ddp_efficiency": d["efficiency"],
                   "ddp_load1": d["load1"]}
            if ps:
                row.update({"pshard_samples_per_s": ps[i]["samples_per_s"], "pshard_efficiency": ps[i]["efficiency"],
                            "ratio": ps[i]["samples_per_s"] / d["samples_per_s"], "pshard_load1": ps[i]["load1"],
                            "servers": args.servers})
            print(json.dumps(row), flush=True)
        return 0
    print("profile %s: %d parameters in %d layers; batch %d per worker: %.1f ms of simulated compute per step; "
          "%d steps per worker; PyTorch %s DDP gloo%s"
          % (profile["name"], params, len(profile["layers"]), args.batch, compute_ms, args.steps, torch.__version__,
             (" vs pshard sync with %d server(s)" % args.servers) if ps else ""))
    ideal = args.batch / compute_ms * 1000.0
    print("(ideal: %.1f samples/s per worker, all communication hidden; load1: 1-minute load average before each "
          "run)" % ideal)
    if ps:
        print("%7s %12s %8s %12s %8s %10s %12s" % ("workers", "ddp/s", "ddp eff", "pshard/s", "ps eff",
                                                  "pshard/ddp", "load1 (d/p)"))
        for d, p in zip(ddp, ps):
            print("%7d %12.1f %8.2f %12.1f %8.2f %10.2f %5.1f/%5.1f" % (
                d["workers"], d["samples_per_s"], d["efficiency"], p["samples_per_s"], p["efficiency"],
                p["samples_per_s"] / d["samples_per_s"], d["load1"], p["load1"]))
    else:
        print("%7s %12s %8s %6s" % ("workers", "ddp/s", "ddp eff", "load1"))
        for d in ddp:
            print("%7d %12.1f %8.2f %6.1f" % (d["workers"], d["samples_per_s"], d["efficiency"], d["load1"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
