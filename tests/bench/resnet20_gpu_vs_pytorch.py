#!/usr/bin/env python3
"""ResNet-20 (CIFAR, option-A shortcut) training throughput on one GPU: pshard's CUDA backend next to PyTorch.

Both sides run forward + backward + an SGD step on synthetic 3x32x32 images at the same batch size, in FP32
(TF32 off on both unless --tf32; `pshard bench compute` always runs FP32). Prints images/s of each and the ratios.
--cuda-wgrad picks pshard's convolution weight gradient (train.cuda_conv_wgrad: gemm, the default, or cudnn).
Reports only: exits 0 and says SKIP when there is no GPU, no torch with CUDA, or no pshard binary that runs on it.

  python3 tests/bench/resnet20_gpu_vs_pytorch.py --batch 128 --iters 50 \
      --throughput-bin build/tests/models_cuda_throughput
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(0)


def torch_resnet20():
    """PyTorch's twin of pshard's resnet20 (CIFAR, option-A shortcut): what the comparisons here train."""
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, c_in, c_out, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c_out)
            self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c_out)
            self.pad = c_out - c_in
            self.stride = stride

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            sc = x
            if self.stride != 1 or self.pad:
                sc = x[:, :, :: self.stride, :: self.stride]
                sc = F.pad(sc, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
            return F.relu(out + sc)

    class ResNet20(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            blocks, c = [], 16
            for stage, width in enumerate((16, 32, 64)):
                for b in range(3):
                    blocks.append(Block(c, width, 2 if stage > 0 and b == 0 else 1))
                    c = width
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x)))
            x = self.blocks(x)
            x = F.adaptive_avg_pool2d(x, 1).flatten(1)
            return self.fc(x)

    return ResNet20()


def pytorch_images_per_s(batch, iters, warmup, tf32, kernel_profile=False):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = False  # heuristics, as pshard's cuDNN plan choice

    dev = torch.device("cuda:0")
    model = torch_resnet20().to(dev)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x_host = torch.rand(batch, 3, 32, 32) * 2 - 1
    y_host = torch.arange(batch) % 10

    def step():
        # Host batch uploaded every step and the loss read back, as pshard's Model::forward does.
        x, y = x_host.to(dev), y_host.to(dev)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    if kernel_profile:
        return profile_pytorch_kernels(step), params, torch.cuda.get_device_name(0)
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    return batch * iters / seconds, params, torch.cuda.get_device_name(0)


PROFILED_STEPS = 3


def profile_pytorch_kernels(step):
    """{kernel name: [launches, device seconds]} over PROFILED_STEPS steps (torch.profiler's CUDA activity), and the
    steps' wall time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(PROFILED_STEPS):
            step()
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    kernels = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and "memcpy" not in e.name.lower() \
                and "memset" not in e.name.lower():
            k = kernels.setdefault(e.name, [0, 0.0])
            k[0] += 1
            k[1] += e.time_range.elapsed_us() * 1e-6  # a kernel event's range is its run on the device
    return kernels, wall


def profile_pshard_kernels(args):
    """{kernel name: [launches, device seconds]} of models_cuda_throughput over PROFILED_STEPS steps (its first
    one included: every kernel is replayed alone by ncu, so a first launch costs what a later one does), from Nsight
    Compute's gpu__time_duration; None when ncu or the binary is missing."""
    import csv
    import io

    ncu = shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if os.path.exists(p)), None)
    if not ncu or not (args.throughput_bin and os.path.exists(args.throughput_bin)):
        return None
    cmd = [ncu, "--csv", "--metrics", "gpu__time_duration.sum", args.throughput_bin, "--model", "resnet20",
           "--device", "cuda", "--batch", str(args.batch), "--iters", str(PROFILED_STEPS - 1), "--warmup", "1",
           "--cuda-wgrad", args.cuda_wgrad]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=100)
    rows = [l for l in out.stdout.splitlines() if l.startswith('"')]
    scale = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "ns": 1e-9, "us": 1e-6, "ms": 1e-3,
             "s": 1.0}
    kernels = {}
    for r in csv.DictReader(io.StringIO("\n".join(rows))):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        k = kernels.setdefault(r["Kernel Name"], [0, 0.0])
        k[0] += 1
        k[1] += float(r["Metric Value"].replace(",", "")) * scale.get(r["Metric Unit"], 1e-9)
    if not kernels:
        print(f"ncu gave no kernel rows (exit {out.returncode}): {(out.stderr or out.stdout)[-500:]}")
    return kernels


def print_kernels(label, kernels, wall=None, top=15):
    total = sum(t for _, t in kernels.values())
    launches = sum(n for n, _ in kernels.values())
    per = PROFILED_STEPS
    line = f"{label}: {launches / per:.0f} kernels, {total / per * 1e3:.3f} ms of kernel time per step"
    if wall:
        line += f" (wall {wall / per * 1e3:.3f} ms per step under the profiler)"
    print(line)
    for name, (n, t) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {t / per * 1e3:8.3f} ms  {n / per:5.1f} x  {name[:110]}")


def pshard_runs(args):
    """[(label, images/s or None, error)] for `pshard bench compute --device cuda` (optimizer update on the host,
    weights and gradients copied every step, as a worker does) and models_cuda_throughput (SGD on the GPU, what
    PyTorch does)."""
    runs = []
    pshard = os.environ.get("PSHARD_BIN", "")
    if pshard and os.path.exists(pshard):
        runs.append(("pshard bench compute (host update)",
                     [pshard, "bench", "compute", "--model", "resnet20", "--device", "cuda", "--batch",
                      str(args.batch), "--iters", str(args.iters), "--warmup", str(args.warmup), "--cuda-wgrad",
                      args.cuda_wgrad, "--json"]))
    if args.throughput_bin and os.path.exists(args.throughput_bin):
        runs.append(("pshard models_cuda_throughput (GPU SGD)",
                     [args.throughput_bin, "--model", "resnet20", "--device", "cuda", "--batch", str(args.batch),
                      "--iters", str(args.iters), "--warmup", str(args.warmup), "--cuda-wgrad", args.cuda_wgrad,
                      "--json"] + (["--tf32"] if args.tf32 else [])))
    results = []
    for label, cmd in runs:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            results.append((label, None, "timed out"))
            continue
        lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
        if out.returncode == 0 and lines:
            results.append((label, json.loads(lines[-1])["samples_per_s"], ""))
        else:
            results.append((label, None, f"exit {out.returncode}: {out.stderr.strip()[-300:]}"))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--tf32", action="store_true", help="allow TF32 on both sides")
    ap.add_argument("--throughput-bin", default="", help="path of models_cuda_throughput")
    ap.add_argument("--cuda-wgrad", choices=("gemm", "cudnn"), default="gemm",
                    help="pshard's convolution weight gradient (train.cuda_conv_wgrad)")
    ap.add_argument("--json", action="store_true", help="also print the numbers as one JSON line (scripts/gpu-check.sh)")
    ap.add_argument("--kernel-profile", action="store_true",
                    help=f"instead of timing: each side's GPU kernels over {PROFILED_STEPS} steps, device time per "
                         "kernel (PyTorch: torch.profiler; pshard: Nsight Compute's ncu on --throughput-bin)")
    args = ap.parse_args()

    if shutil.which("nvidia-smi") is None:
        skip("no NVIDIA driver (nvidia-smi not found)")
    try:
        import torch
    except ImportError:
        skip("PyTorch is not installed (pip install torch, or apt-get install python3-torch)")
    if not torch.cuda.is_available():
        skip("PyTorch has no usable CUDA device")

    if args.kernel_profile:
        (theirs, wall), _, gpu = pytorch_images_per_s(args.batch, 0, args.warmup, args.tf32, kernel_profile=True)
        print(f"resnet20 batch {args.batch}, {'TF32' if args.tf32 else 'FP32'}, {gpu}: GPU kernels per training step "
              f"(pshard's weight gradient: {args.cuda_wgrad})")
        print_kernels(f"PyTorch {torch.__version__}", theirs, wall)
        ours = profile_pshard_kernels(args)
        if ours is None:
            print("pshard: not profiled (needs ncu and --throughput-bin)")
        else:
            print_kernels("pshard models_cuda_throughput (ncu, each kernel alone)", ours)
        return
    ours = pshard_runs(args)
    if not any(v for _, v, _ in ours):
        why = "; ".join(f"{label}: {err}" for label, _, err in ours) or "no pshard binary (PSHARD_BIN, --throughput-bin)"
        skip(f"pshard could not run resnet20 on the GPU: {why}")
    theirs, params, gpu = pytorch_images_per_s(args.batch, args.iters, args.warmup, args.tf32)
    math = "TF32" if args.tf32 else "FP32"
    print(f"resnet20 ({params} parameters), batch {args.batch}, {math}, {gpu}, pshard's weight gradient "
          f"{args.cuda_wgrad}")
    print(f"  {'PyTorch ' + torch.__version__ + ' (GPU SGD)':42s} {theirs:10.1f} images/s")
    for label, value, err in ours:
        if value is None:
            print(f"  {label:42s} failed: {err}")
        else:
            print(f"  {label:42s} {value:10.1f} images/s   ratio to PyTorch {value / theirs:.2f}")
    if args.json:
        print(json.dumps({"batch": args.batch, "math": math, "gpu": gpu, "torch": torch.__version__,
                          "cuda_wgrad": args.cuda_wgrad,
                          "pytorch_images_per_s": theirs,
                          "pshard": [{"run": label, "images_per_s": value, "ratio_to_pytorch":
                                      value / theirs if value else None, "error": err} for label, value, err in ours]}))

if __name__ == "__main__":
    main()
