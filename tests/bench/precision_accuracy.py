#!/usr/bin/env python3
"""Accuracy and wire bytes of train.precision = bf16 or fp16 against fp32 on Fashion-MNIST (bench label, report only).

For each model, trains configs/fmnist_<model>_sync.toml (sync, 2 workers + 2 servers) once in fp32 and once in the
low precision (bf16: bf16 compute, pushes and pulls by default; fp16: fp16 compute with dynamic loss scaling, fp16
pulls, float32 pushes), then prints each run's test accuracy, the difference in points, the bytes the last epoch
moved against their float32 volume and the steps loss scaling skipped. One run per side: a 10-epoch run's accuracy
moves by about half a point with the trajectory alone (docs/PERFORMANCE.md), so a difference is one sample of it.

  tests/bench/precision_accuracy.py --pshard build/bin/pshard --models mlp,lenet --epochs 10 [--precision fp16]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def train(binary, model, precision, epochs, seed, workdir):
    """One launch; returns (test accuracy, last epoch's metrics, wall seconds, steps skipped by loss scaling or "-")."""
    run_dir = os.path.join(workdir, "%s-%s" % (model, precision))
    cmd = [binary, "launch", "--servers", "2", "--workers", "2", "--timeout", "3000", "--config",
           os.path.join(SOURCE, "configs", "fmnist_%s_sync.toml" % model), "--set", "train.precision=" + precision,
           "--set", "train.epochs=%d" % epochs, "--set", "run.seed=%d" % seed, "--set", "cluster.transport=tcp",
           "--run-dir", run_dir]
    t0 = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit("failed (exit %d): %s\n%s" % (proc.returncode, " ".join(cmd), proc.stdout[-4000:]))
    summary = last = None
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if j.get("event") == "epoch":
                last = j
            elif j.get("event") == "summary":
                summary = j
    return summary["test_acc"], last, time.time() - t0, summary.get("skipped_steps", "-")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pshard", default=os.environ.get("PSHARD_BIN") or shutil.which("pshard"),
                    help="pshard executable (default: $PSHARD_BIN)")
    ap.add_argument("--models", default="mlp,lenet", help="comma list of mlp, lenet")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp16"], help="the precision compared with fp32")
    args = ap.parse_args()
    low = args.precision
    if not args.pshard or not os.path.exists(args.pshard):
        print("SKIP: pshard executable not found (--pshard or $PSHARD_BIN)")
        return 0
    if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
        print("SKIP: dataset-fashion-mnist is not installed")
        return 0
    print("Fashion-MNIST sync 2 workers + 2 servers, %d epochs, seed %d (load average %.2f %.2f %.2f at the start)"
          % ((args.epochs, args.seed) + os.getloadavg()))
    print("| model | fp32 test acc | {0} test acc | {0} - fp32 (points) | {0} pushed / fp32 bytes "
          "| {0} pulled / fp32 bytes | fp32 s | {0} s | {0} steps skipped |".format(low))
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    with tempfile.TemporaryDirectory(prefix="pshard-precision-") as workdir:
        for model in args.models.split(","):
            acc32, _, s32, _ = train(args.pshard, model, "fp32", args.epochs, args.seed, workdir)
            acc16, last, s16, skipped = train(args.pshard, model, low, args.epochs, args.seed, workdir)
            print("| %s | %.4f | %.4f | %+.2f | %.3f | %.3f | %.0f | %.0f | %s |" % (
                model, acc32, acc16, 100 * (acc16 - acc32), last["bytes_sent"] / last["fp32_bytes_sent"],
                last["bytes_recv"] / last["fp32_bytes_recv"], s32, s16, skipped), flush=True)
    print("load average %.2f %.2f %.2f at the end" % os.getloadavg())
    return 0


if __name__ == "__main__":
    sys.exit(main())
