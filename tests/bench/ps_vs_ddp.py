#!/usr/bin/env python3
"""pshard sync (W workers + S servers) against PyTorch DDP (gloo, W processes), side by side (bench label);
with --python also pshard's Python path: the same MLP in PyTorch through pshard.torch.

Both train the Fashion-MNIST MLP 784-256-128-10 with momentum SGD (0.9), cosine schedule, batch --batch per
worker (global batch W x batch), --threads compute threads per process, --epochs epochs over the real training
set, evaluation off:
  pshard:  pshard launch --servers S --workers W --config configs/fmnist_mlp_sync.toml  (lr 0.05 x W by the
           config's linear scaling rule, applied on the servers)
  DDP:     tests/bench/ddp_reference.py --world W (gloo on 127.0.0.1, torch.set_num_threads, DistributedSampler,
           lr 0.05 x W so that both follow the same schedule)
  python:  pshard launch ... -- python3 tests/bench/torch_mlp_worker.py (the DDP reference's model and batches in
           PyTorch, gradients and weights through pshard's servers with the same config)
Each round runs every side, rotating which goes first; samples/s = training samples of all workers / training
seconds (pshard: the run's metrics.jsonl summary; DDP: the slowest rank). ratio = pshard / DDP (target:
>= 1.5); py/ddp = python / DDP (target: >= 1.3) and py/c++ = python / pshard (target: >= 0.85). Every round is printed with the 1-minute load average before each run. Reports only: exits 0 whatever
the ratio, non-zero only when a run fails; skips the comparison with a message when PyTorch is missing.

  tests/bench/ps_vs_ddp.py --pshard build/bin/pshard --workers 2 --servers 1 --batch 64 --rounds 3
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ddp_reference import torch_or_reexec  # noqa: E402
from ps_overhead import REPO, children_cpu_s, run_pshard  # noqa: E402


def run_ddp(args, lr):
    load = os.getloadavg()[0]
    cpu0 = children_cpu_s()
    cmd = [sys.executable, os.path.join(HERE, "ddp_reference.py"), "--world", str(args.workers), "--batch",
           str(args.batch), "--threads", str(args.threads), "--epochs", str(args.epochs), "--lr", repr(lr),
           "--train-size", str(args.train_size), "--timeout", str(args.timeout)]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=args.timeout + 60)
    except subprocess.TimeoutExpired:
        raise SystemExit("timed out: " + " ".join(cmd))
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-4000:])
        raise SystemExit("failed with exit code %d: %s" % (p.returncode, " ".join(cmd)))
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["load1"] = load
    r["cpu_s"] = children_cpu_s() - cpu0
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pshard", default=os.environ.get("PSHARD_BIN") or shutil.which("pshard"),
                    help="pshard executable (default: $PSHARD_BIN)")
    ap.add_argument("--workers", type=int, default=2, help="pshard workers = DDP processes")
    ap.add_argument("--servers", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64, help="per worker")
    ap.add_argument("--threads", type=int, default=1, help="compute threads per process, both sides")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--train-size", type=int, default=0, help="training samples to use (0: all 60000)")
    ap.add_argument("--rounds", type=int, default=3, help="side-by-side rounds; every round is reported")
    ap.add_argument("--timeout", type=int, default=900, help="seconds one run may take before it counts as failed")
    ap.add_argument("--python", action="store_true",
                    help="also run the Python path (pshard.torch workers, tests/bench/torch_mlp_worker.py)")
    ap.add_argument("--json", action="store_true", help="one JSON object per round instead of the table")
    args = ap.parse_args()

    torch = torch_or_reexec()
    if torch is None or not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        print("SKIP: PyTorch with the gloo backend is not installed (apt-get install python3-torch); "
              "nothing to compare against")
        return 0
    if not args.pshard or not os.path.exists(args.pshard):
        print("SKIP: pshard executable not found (--pshard or $PSHARD_BIN)")
        return 0
    lr = 0.05 * args.workers  # configs/fmnist_mlp_sync.toml: lr 0.05, linear scaling to the global batch, ref 64
    launch = [args.pshard, "launch", "--servers", str(args.servers), "--workers", str(args.workers), "--timeout",
              str(args.timeout), "--config", os.path.join(REPO, "configs", "fmnist_mlp_sync.toml"),
              "--set", "train.eval=false", "--set", "train.epochs=%d" % args.epochs,
              "--set", "train.threads=%d" % args.threads, "--set", "train.batch_size=%d" % args.batch,
              "--set", "lr_schedule.reference_batch=64", "--set", "data.train_size=%d" % args.train_size]
    sides = ["ddp", "pshard"] + (["python"] if args.python else [])
    if args.python:
        # The package finds the library next to the executable's build folder.
        lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(args.pshard))), "lib", "libpshard_c.so")
        os.environ.setdefault("PSHARD_LIBRARY", lib)
        os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    python_launch = launch + ["--", "/usr/bin/python3", os.path.join(HERE, "torch_mlp_worker.py")]
    work = tempfile.mkdtemp(prefix="ps_vs_ddp.")
    rows = []
    try:
        for r in range(args.rounds):
            got = {}
            for side in sides[r % len(sides):] + sides[:r % len(sides)]:
                if side == "ddp":
                    got[side] = run_ddp(args, lr)
                elif side == "pshard":
                    got[side] = run_pshard(launch, os.path.join(work, "round-%d" % r), args.timeout)
                else:
                    got[side] = run_pshard(python_launch, os.path.join(work, "python-%d" % r), args.timeout)
            p, d = got["pshard"], got["ddp"]
            row = {"round": r + 1, "workers": args.workers, "servers": args.servers, "batch": args.batch,
                   "global_batch": args.batch * args.workers, "threads": args.threads,
                   "pshard_samples_per_s": p["samples_per_s"], "ddp_samples_per_s": d["samples_per_s"],
                   "ratio": p["samples_per_s"] / d["samples_per_s"], "pshard_train_s": p["train_s"],
                   "ddp_train_s": d["train_s"], "pshard_fwd_bwd_s": p["forward_s"] + p["backward_s"],
                   "pshard_comm_wait_s": p["comm_wait_s"], "pshard_train_loss": p["train_loss"],
                   "ddp_train_loss": d["train_loss"], "cpu_s_pshard": p["cpu_s"],
                   "cpu_s_ddp": d["cpu_s"], "load1_pshard": p["load1"], "load1_ddp": d["load1"]}
            if args.python:
                y = got["python"]
                row.update({"python_samples_per_s": y["samples_per_s"],
                            "ratio_python_ddp": y["samples_per_s"] / d["samples_per_s"],
                            "ratio_python_cpp": y["samples_per_s"] / p["samples_per_s"],
                            "python_train_loss": y["train_loss"], "python_comm_wait_s": y["comm_wait_s"],
                            "cpu_s_python": y["cpu_s"], "load1_python": y["load1"]})
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    if not args.json:
        print("pshard sync %d workers + %d server(s) vs PyTorch %s DDP gloo %d processes: Fashion-MNIST MLP, batch %d "
              "per worker (global %d), %d thread(s) per process, %d epoch(s), eval off"
              % (args.workers, args.servers, torch.__version__, args.workers, args.batch, args.batch * args.workers,
                 args.threads, args.epochs))
        print("(fwd+bwd, commwait: pshard's, mean over workers; cpu s: CPU seconds of all processes of each command,"
              " start-up, data loading and `import torch` included)")
        print("%5s %10s %10s %6s %9s %9s %9s %9s %13s  %s" % ("round", "pshard/s", "ddp/s", "ratio", "fwd+bwd",
                                                               "commwait", "loss ps", "loss ddp", "cpu s (p/d)",
                                                               "load1 (p/d)"))
        for x in rows:
            print("%5d %10.0f %10.0f %6.2f %9.2f %9.2f %9.4f %9.4f %6.1f/%6.1f  %.1f/%.1f" % (
                x["round"], x["pshard_samples_per_s"], x["ddp_samples_per_s"], x["ratio"], x["pshard_fwd_bwd_s"],
                x["pshard_comm_wait_s"], x["pshard_train_loss"], x["ddp_train_loss"], x["cpu_s_pshard"],
                x["cpu_s_ddp"], x["load1_pshard"], x["load1_ddp"]))
        if args.python:
            print("Python path (pshard.torch workers): samples/s, ratios to DDP and to pshard's C++ workers")
            print("%5s %10s %7s %7s %9s %9s %7s %6s" % ("round", "python/s", "py/ddp", "py/c++", "commwait", "loss py",
                                                       "cpu s", "load1"))
            for x in rows:
                print("%5d %10.0f %7.2f %7.2f %9.2f %9.4f %7.1f %6.1f" % (
                    x["round"], x["python_samples_per_s"], x["ratio_python_ddp"], x["ratio_python_cpp"],
                    x["python_comm_wait_s"], x["python_train_loss"], x["cpu_s_python"], x["load1_python"]))
            for key, target in (("ratio_python_ddp", 1.3), ("ratio_python_cpp", 0.85)):
                med = statistics.median(x[key] for x in rows)
                print("median %s %.2f; target >= %.2f: %s" % (key, med, target, "met" if med >= target else "NOT met"))
        ratios = [x["ratio"] for x in rows]
        med = statistics.median(ratios)
        print("median ratio %.2f (runs %s); target >= 1.5: %s" % (
            med, ", ".join("%.2f" % v for v in ratios),
            "met" if med >= 1.5 else "NOT met (%.0f%% short)" % (100 * (1.5 - med) / 1.5)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
