#!/usr/bin/env python3
"""Training images/s of a zoo model on one GPU in fp32, bf16 and fp16: pshard's CUDA backend next to PyTorch.

For each precision and batch size, three runs on the same GPU, forward + backward + SGD on synthetic images (the
batch uploaded from the host and the loss read back every step, on both sides):
- pshard, GPU SGD: models_cuda_throughput --precision P (the update on the device, as PyTorch's loop does; fp16
  scales the loss by 65536 and unscales and checks the gradients each step, as GradScaler does);
- pshard, host update: `pshard bench compute --device cuda --precision P` (gradients down, the optimizer on the host,
  weights up: what a worker's step costs without the network), at --host-batch only;
- PyTorch: torchvision's model (resnet50, resnet18) or the CIFAR ResNet-20 of resnet20_gpu_vs_pytorch.py,
  channels_last, fp32 with TF32 off (pshard's fp32 is full fp32), bf16/fp16 under torch.autocast, fp16 with
  GradScaler; cudnn.benchmark off (heuristics, as pshard's plans).
Prints a table with each pshard figure over PyTorch's and over pshard's own fp32 at the same batch, and one JSON
object last. Reports only: exits 0 and says SKIP without a GPU, torch with CUDA, or the pshard binaries.

  python3 tests/bench/gpu_precision_vs_pytorch.py --model resnet50 --batch 32,64,128,256 \\
      --pshard build/bin/pshard --throughput-bin build/tests/models_cuda_throughput
"""
import argparse
import json
import os
import subprocess
import sys
import time

INPUTS = {"resnet50": (3, 224, 224), "resnet18": (3, 224, 224), "resnet20": (3, 32, 32)}
CLASSES = {"resnet50": 1000, "resnet18": 1000, "resnet20": 10}


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(0)


def torch_model(name, classes):
    import torchvision

    if name in ("resnet50", "resnet18"):
        return getattr(torchvision.models, name)(num_classes=classes)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import resnet20_gpu_vs_pytorch as r20  # noqa: E402  (its ResNet-20 is built inside a function)

    return r20.torch_resnet20()


def pytorch_images_per_s(name, precision, batch, iters, warmup):
    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    dev = torch.device("cuda:0")
    classes = CLASSES[name]
    model = torch_model(name, classes).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")
    x_host = (torch.rand(batch, *INPUTS[name]) * 2 - 1).pin_memory()
    y_host = (torch.arange(batch) % classes).pin_memory()

    def step():
        x = x_host.to(dev, non_blocking=True).contiguous(memory_format=torch.channels_last)
        y = y_host.to(dev, non_blocking=True)
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.item()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    rate = batch * iters / (time.perf_counter() - t0)
    del model, opt
    torch.cuda.empty_cache()
    return rate


def run_json(cmd, timeout):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if out.returncode == 0 and lines:
        return json.loads(lines[-1]), ""
    return None, f"exit {out.returncode}: {(out.stderr or out.stdout).strip()[-400:]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", choices=sorted(INPUTS))
    ap.add_argument("--precisions", default="fp32,bf16,fp16")
    ap.add_argument("--batch", default="32,64,128,256", help="batch sizes of bf16 and fp16")
    ap.add_argument("--fp32-batch", default="128", help="batch sizes of fp32 (the anchor)")
    ap.add_argument("--host-batch", type=int, default=128, help="the batch of the host-update runs (0: none)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--pshard", default=os.environ.get("PSHARD_BIN", ""))
    ap.add_argument("--throughput-bin", default="")
    ap.add_argument("--json-out", default="", help="also write the JSON object to this file")
    args = ap.parse_args()

    try:
        import torch
    except ImportError:
        skip("no torch")
    if not torch.cuda.is_available():
        skip("torch sees no CUDA device")
    if not (args.throughput_bin and os.path.exists(args.throughput_bin)):
        skip("no models_cuda_throughput binary (--throughput-bin)")
    gpu = torch.cuda.get_device_name(0)
    classes = CLASSES[args.model]
    rows = []
    for precision in args.precisions.split(","):
        batches = args.fp32_batch if precision == "fp32" else args.batch
        for batch in [int(b) for b in batches.split(",") if b]:
            row = {"model": args.model, "precision": precision, "batch": batch}
            got, err = run_json([args.throughput_bin, "--model", args.model, "--device", "cuda", "--precision",
                                 precision, "--classes", str(classes), "--batch", str(batch), "--iters",
                                 str(args.iters), "--warmup", str(args.warmup), "--json"], 300)
            row["pshard_gpu_sgd"] = got["samples_per_s"] if got else None
            if got:
                row["pshard_device"] = got["device"]
            if err:
                row["pshard_gpu_sgd_error"] = err
            if batch == args.host_batch and args.pshard and os.path.exists(args.pshard):
                got, err = run_json([args.pshard, "bench", "compute", "--model", args.model, "--device", "cuda",
                                     "--precision", precision, "--classes", str(classes), "--batch", str(batch),
                                     "--iters", str(args.iters), "--warmup", str(args.warmup), "--json"], 300)
                row["pshard_host_update"] = got["samples_per_s"] if got else None
                if err:
                    row["pshard_host_update_error"] = err
            try:
                row["pytorch"] = pytorch_images_per_s(args.model, precision, batch, args.iters, args.warmup)
            except Exception as e:  # noqa: BLE001  (an out-of-memory or missing kernel is a row, not the end)
                row["pytorch"] = None
                row["pytorch_error"] = str(e)[-300:]
            rows.append(row)
            print(json.dumps(row), flush=True)

    anchor = {r["batch"]: r["pshard_gpu_sgd"] for r in rows if r["precision"] == "fp32" and r["pshard_gpu_sgd"]}
    print(f"\n{args.model} training images/s on {gpu} (forward + backward + SGD; one run, ratios within it)")
    print(f"{'prec':>5} {'batch':>5} {'pshard GPU SGD':>14} {'host update':>11} {'PyTorch':>9} "
          f"{'vs PyTorch':>10} {'vs fp32':>8}")
    for r in rows:
        g, t = r["pshard_gpu_sgd"], r["pytorch"]
        r["vs_pytorch"] = g / t if g and t else None
        a = anchor.get(r["batch"])
        r["vs_pshard_fp32"] = g / a if g and a else None
        fmt = lambda v, spec: format(v, spec) if v is not None else "-"  # noqa: E731
        print(f"{r['precision']:>5} {r['batch']:>5} {fmt(g, '14.1f')} {fmt(r.get('pshard_host_update'), '11.1f')} "
              f"{fmt(t, '9.1f')} {fmt(r['vs_pytorch'], '10.2f')} {fmt(r['vs_pshard_fp32'], '8.2f')}")
    for r in rows:
        for key in ("pshard_gpu_sgd_error", "pshard_host_update_error", "pytorch_error"):
            if key in r:
                print(f"  {r['precision']} batch {r['batch']} {key}: {r[key]}")
    result = {"model": args.model, "gpu": gpu, "torch": torch.__version__,
              "cudnn": torch.backends.cudnn.version(), "rows": rows}
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
