#!/usr/bin/env python3
"""Compute throughput of pshard's CPU backend against PyTorch CPU on the same architectures (bench label).

For each model, thread count and batch size, runs forward + backward + SGD update in PyTorch and with
`pshard bench compute`, each side in a fresh process, alternating the two several times and keeping each one's best
run (the machine may be shared), then prints samples/s of both, the ratio pshard / PyTorch and the peak resident
memory (RSS) of each side's process. Reports only: exits 0 whatever the ratio, and skips with a message when PyTorch
is not installed.

  tests/bench/compute_vs_pytorch.py --pshard build/bin/pshard --models mlp,lenet --threads 1,2 --batch 64
  # bf16 (train.precision = bf16) against pshard's own fp32 and PyTorch's torch.autocast("cpu", torch.bfloat16), all
  # three alternated in the same run:
  tests/bench/compute_vs_pytorch.py --pshard build/bin/pshard --models resnet20,lenet --threads 2 --batch 64 \
      --precision bf16
  # the ImageNet-layout ResNets at a small input side (224 is the default):
  tests/bench/compute_vs_pytorch.py --pshard build/bin/pshard --models resnet18,resnet50 --threads 2 --batch 16 \
      --image-size 64
  # the table of docs/PERFORMANCE.md:
  tests/bench/compute_vs_pytorch.py --pshard build/bin/pshard --models resnet20,lenet,mlp --threads 1,2 \
      --batch 32,64,128,512
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time


def torch_or_reexec():
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


def torch_model(torch, name, hidden, image_size=224):
    nn = torch.nn
    if name in ("resnet18", "resnet50"):
        import torchvision  # the ImageNet-layout models of pshard's zoo are torchvision's (models/zoo/resnet18.cc)
        return getattr(torchvision.models, name)(num_classes=10), (3, image_size, image_size)
    if name == "mlp":
        layers, last = [nn.Flatten()], 784
        for h in hidden:
            layers += [nn.Linear(last, h), nn.ReLU()]
            last = h
        return nn.Sequential(*layers, nn.Linear(last, 10)), (1, 28, 28)
    if name == "lenet":
        return nn.Sequential(nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10)), (1, 28, 28)
    if name == "resnet20":
        class Block(nn.Module):
            def __init__(self, cin, cout, stride):
                super().__init__()
                self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
                self.b1 = nn.BatchNorm2d(cout)
                self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
                self.b2 = nn.BatchNorm2d(cout)
                self.stride, self.pad = stride, (cout - cin) // 2

            def forward(self, x):
                out = torch.relu(self.b1(self.c1(x)))
                out = self.b2(self.c2(out))
                sc = x
                if self.stride != 1 or self.pad:
                    sc = nn.functional.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, self.pad, self.pad))
                return torch.relu(out + sc)

        blocks, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for b in range(3):
                blocks.append(Block(cin, cout, stride if b == 0 else 1))
                cin = cout
        return nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), *blocks,
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)), (3, 32, 32)
    raise SystemExit("unknown model " + name)


def torch_samples_per_s(torch, name, hidden, batch, threads, iters, warmup, image_size, autocast=False):
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model, shape = torch_model(torch, name, hidden, image_size)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, *shape)
    y = torch.arange(batch) % 10
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        # autocast: PyTorch's CPU mixed precision (convolutions and GEMMs in bf16, the loss in float32).
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = model(x)
        loss = loss_fn(out.float(), y)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    return batch * iters / (time.perf_counter() - t0)


def run_json(cmd, timeout=600):
    """Runs cmd and returns the JSON object on the last line of its output."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise SystemExit("timed out after %d s: %s" % (timeout, " ".join(cmd)))
    if proc.returncode != 0:
        raise SystemExit("failed (exit %d): %s\n%s" % (proc.returncode, " ".join(cmd), err))
    return json.loads(out.strip().splitlines()[-1])


def torch_child(name, hidden, batch, threads, iters, warmup, image_size, autocast=False):
    """PyTorch side in a fresh process (so its peak RSS is its own): (samples/s, peak RSS MiB)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-child", name, "--hidden", ",".join(map(str, hidden)),
           "--batch", str(batch), "--threads", str(threads), "--iters", str(iters), "--warmup", str(warmup),
           "--image-size", str(image_size)]
    if autocast:
        cmd.append("--autocast")
    r = run_json(cmd)
    return r["samples_per_s"], r["peak_rss_mib"]


def pshard_samples_per_s(binary, name, hidden, batch, threads, iters, warmup, image_size, precision="fp32"):
    """pshard side: (samples/s, peak RSS MiB)."""
    cmd = [binary, "bench", "compute", "--model", name, "--batch", str(batch), "--threads", str(threads),
           "--iters", str(iters), "--warmup", str(warmup), "--hidden", ",".join(map(str, hidden)), "--json",
           "--precision", precision]
    if name in IMAGE_SIZED:
        cmd += ["--input", "3,%d,%d" % (image_size, image_size)]
    r = run_json(cmd)
    return r["samples_per_s"], r["peak_rss_mib"]


# Models whose input side --image-size sets (the others run on their fixed 28x28 or 32x32 inputs).
IMAGE_SIZED = ("resnet18", "resnet50")


def peak_rss_mib():
    """VmHWM of this process in MiB (not ru_maxrss, which keeps the pre-exec peak of the forking parent)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def bf16_table(args, torch, hidden):
    """pshard bf16 against pshard fp32 and PyTorch autocast bf16: the three alternated, each one's best run."""
    if not args.json:
        print("bf16 compute throughput, forward + backward + SGD (PyTorch %s autocast bf16, best of %d alternating "
              "runs; load average %.2f %.2f %.2f at the start)" % ((torch.__version__, args.rounds) + os.getloadavg()))
        print("| model | threads | batch | pshard fp32 samples/s | pshard bf16 samples/s | bf16 / fp32 "
              "| PyTorch autocast bf16 samples/s | pshard bf16 / PyTorch bf16 |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    for name in args.models.split(","):
        for threads in (int(t) for t in args.threads.split(",")):
            for batch in (int(b) for b in args.batch.split(",")):
                size = args.image_size
                sides = {
                    "pshard_fp32": lambda it, w: pshard_samples_per_s(args.pshard, name, hidden, batch, threads, it, w,
                                                                      size),
                    "pshard_bf16": lambda it, w: pshard_samples_per_s(args.pshard, name, hidden, batch, threads, it, w,
                                                                      size, "bf16"),
                    "pytorch_autocast_bf16": lambda it, w: torch_child(name, hidden, batch, threads, it, w, size, True),
                }
                iters = {k: max(3, int(args.seconds * run(3, 1)[0] / batch)) for k, run in sides.items()}
                best = {k: 0.0 for k in sides}
                for _ in range(args.rounds):
                    for k, run in sides.items():
                        best[k] = max(best[k], run(iters[k], 2)[0])
                r = {"model": name, "batch": batch, "threads": threads, **{k + "_samples_per_s": v for k, v in best.items()},
                     "bf16_over_fp32": best["pshard_bf16"] / best["pshard_fp32"],
                     "bf16_over_pytorch_bf16": best["pshard_bf16"] / best["pytorch_autocast_bf16"]}
                if args.json:
                    print(json.dumps(r), flush=True)
                else:
                    print("| %s | %d | %d | %.0f | %.0f | %.2f | %.0f | %.2f |" % (
                        name, threads, batch, best["pshard_fp32"], best["pshard_bf16"], r["bf16_over_fp32"],
                        best["pytorch_autocast_bf16"], r["bf16_over_pytorch_bf16"]), flush=True)
    if not args.json:
        print("load average %.2f %.2f %.2f at the end" % os.getloadavg())
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pshard", default=os.environ.get("PSHARD_BIN") or shutil.which("pshard"),
                    help="pshard executable (default: $PSHARD_BIN)")
    ap.add_argument("--models", default="mlp,lenet", help="comma list of mlp, lenet, resnet20, resnet18, resnet50")
    ap.add_argument("--image-size", type=int, default=224,
                    help="resnet18/resnet50: square input side (default 224; torchvision needed for these two)")
    ap.add_argument("--threads", default="1,2", help="comma list of thread counts")
    ap.add_argument("--batch", default="64", help="comma list of batch sizes")
    ap.add_argument("--hidden", default="256,128", help="mlp hidden sizes")
    ap.add_argument("--seconds", type=float, default=1.5, help="target seconds per timed run")
    ap.add_argument("--rounds", type=int, default=3, help="alternating runs of each side; the best one counts")
    ap.add_argument("--json", action="store_true", help="one JSON object per line instead of the table")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: pshard with train.precision = bf16 against pshard fp32 and PyTorch autocast bf16")
    ap.add_argument("--torch-child", metavar="MODEL", help=argparse.SUPPRESS)  # internal: one PyTorch run
    ap.add_argument("--iters", type=int, default=10, help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--autocast", action="store_true", help=argparse.SUPPRESS)  # internal: the child autocasts
    args = ap.parse_args()

    torch = torch_or_reexec()
    if torch is None:
        print("SKIP: PyTorch is not installed (apt-get install python3-torch); nothing to compare against")
        return 0
    hidden = [int(h) for h in args.hidden.split(",")]
    if args.torch_child:
        sps = torch_samples_per_s(torch, args.torch_child, hidden, int(args.batch), int(args.threads), args.iters,
                                  args.warmup, args.image_size, args.autocast)
        print(json.dumps({"samples_per_s": sps, "peak_rss_mib": peak_rss_mib()}))
        return 0
    if not args.pshard or not os.path.exists(args.pshard):
        print("SKIP: pshard executable not found (--pshard or $PSHARD_BIN)")
        return 0
    if args.precision == "bf16":
        return bf16_table(args, torch, hidden)
    if not args.json:
        # Rows are printed as they are measured: the whole table takes a while.
        print("compute throughput, forward + backward + SGD (PyTorch %s, best of %d alternating runs; load average "
              "%.2f %.2f %.2f at the start)" % ((torch.__version__, args.rounds) + os.getloadavg()))
        print("| model | threads | batch | PyTorch samples/s | pshard samples/s | ratio | PyTorch peak RSS MiB "
              "| pshard peak RSS MiB |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    for name in args.models.split(","):
        for threads in (int(t) for t in args.threads.split(",")):
            for batch in (int(b) for b in args.batch.split(",")):
                # Size the runs from one short probe of each side so that both run about --seconds.
                size = args.image_size
                probe_t, _ = torch_child(name, hidden, batch, threads, 3, 1, size)
                probe_p, _ = pshard_samples_per_s(args.pshard, name, hidden, batch, threads, 3, 1, size)
                it_t = max(3, int(args.seconds * probe_t / batch))
                it_p = max(3, int(args.seconds * probe_p / batch))
                best_t = best_p = rss_t = rss_p = 0.0
                for _ in range(args.rounds):
                    sps, rss = torch_child(name, hidden, batch, threads, it_t, 2, size)
                    best_t, rss_t = max(best_t, sps), max(rss_t, rss)
                    sps, rss = pshard_samples_per_s(args.pshard, name, hidden, batch, threads, it_p, 2, size)
                    best_p, rss_p = max(best_p, sps), max(rss_p, rss)
                r = {"model": name, "batch": batch, "threads": threads,
                     "input": "3x%dx%d" % (size, size) if name in IMAGE_SIZED else "default",
                     "pytorch_samples_per_s": best_t,
                     "pshard_samples_per_s": best_p, "ratio": best_p / best_t if best_t else 0.0,
                     "pytorch_peak_rss_mib": rss_t, "pshard_peak_rss_mib": rss_p}
                if args.json:
                    print(json.dumps(r), flush=True)
                else:
                    label = r["model"] + (" " + r["input"] if r["input"] != "default" else "")
                    print("| %s | %d | %d | %.0f | %.0f | %.2f | %.0f | %.0f |" % (
                        label, r["threads"], r["batch"], r["pytorch_samples_per_s"], r["pshard_samples_per_s"],
                        r["ratio"], r["pytorch_peak_rss_mib"], r["pshard_peak_rss_mib"]), flush=True)
    if not args.json:
        print("load average %.2f %.2f %.2f at the end" % os.getloadavg())
    return 0


if __name__ == "__main__":
    sys.exit(main())
