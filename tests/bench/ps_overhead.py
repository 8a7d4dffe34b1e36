#!/usr/bin/env python3
"""Parameter-server overhead: `pshard launch` sync 1 worker + 1 server against `pshard train` (bench label).

For each model, runs the same training twice per round, side by side: `pshard train --config
configs/fmnist_<model>.toml` (one process, optimizer in-process) and `pshard launch --servers 1 --workers 1
--config configs/fmnist_<model>_sync.toml` (the worker pushes each layer's gradients and pulls the weights
through one server, which runs the optimizer), with the same batch, threads, epochs, data and seed, evaluation
off. Both report `samples_per_s` = training samples / training seconds from the run's metrics.jsonl summary;
ratio = launch / train (target: >= 0.9). Also prints forward_s + backward_s and comm_wait_s of the distributed run
(where its time goes), the train loss of both (they match when both trained the same thing), and the 1-minute
load average before each run (the machine may be shared). Reports only: exits 0 whatever the ratio, non-zero only
when a run fails.

  tests/bench/ps_overhead.py --pshard build/bin/pshard --models mlp,lenet --rounds 3
  tests/bench/ps_overhead.py --pshard build/bin/pshard --models mlp --launch-set cluster.compression=bf16 \
      --launch-set cluster.pull_precision=bf16      # the same with bf16 pushes and pulls
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def summary_of(run_dir):
    """The last line (`summary` event) of RUN_DIR/metrics.jsonl."""
    path = os.path.join(run_dir, "metrics.jsonl")
    with open(path) as f:
        lines = [line for line in f if line.strip()]
    if not lines:
        raise SystemExit("%s: empty, the run wrote no metrics" % path)
    s = json.loads(lines[-1])
    if s.get("event") != "summary":
        raise SystemExit("%s: last line is not the summary: %s" % (path, lines[-1][:200]))
    return s


def children_cpu_s():
    """User + system CPU seconds of all finished (waited-for) child processes so far, grandchildren included."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_pshard(cmd, run_dir, timeout):
    """Runs one pshard command; returns its summary plus `load1` (the 1-minute load average just before it
    started) and `cpu_s` (CPU seconds of all its processes, start-up and data loading included)."""
    load = os.getloadavg()[0]
    cpu0 = children_cpu_s()
    try:
        # Before a `-- CMD ARGS` (Python workers): what follows it is the workers' command line.
        at = cmd.index("--") if "--" in cmd else len(cmd)
        p = subprocess.run(cmd[:at] + ["--run-dir", run_dir] + cmd[at:], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SystemExit("timed out after %d s: %s" % (timeout, " ".join(cmd)))
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-4000:])
        raise SystemExit("failed with exit code %d: %s" % (p.returncode, " ".join(cmd)))
    s = summary_of(run_dir)
    s["load1"] = load
    s["cpu_s"] = children_cpu_s() - cpu0
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pshard", default=os.environ.get("PSHARD_BIN") or shutil.which("pshard"),
                    help="pshard executable (default: $PSHARD_BIN)")
    ap.add_argument("--models", default="mlp,lenet", help="comma list of mlp, lenet (configs/fmnist_<model>*.toml)")
    ap.add_argument("--rounds", type=int, default=3, help="side-by-side rounds; every round is reported")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1, help="train.threads of every process")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--train-size", default="mlp=0,lenet=6400",
                    help="training samples per model, 0: all 60000 (LeNet on one thread is ~100x slower than the MLP)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds one run may take before it counts as failed")
    ap.add_argument("--keep", metavar="DIR", help="keep the run directories under DIR (default: a removed temp dir)")
    ap.add_argument("--json", action="store_true", help="one JSON object per round instead of the table")
    ap.add_argument("--launch-set", metavar="KEY=VALUE", action="append", default=[],
                    help="config override for the launch side only (repeatable), e.g. cluster.compression=bf16")
    args = ap.parse_args()

    if not args.pshard or not os.path.exists(args.pshard):
        print("SKIP: pshard executable not found (--pshard or $PSHARD_BIN)")
        return 0
    sizes = dict(kv.split("=") for kv in args.train_size.split(","))
    work = args.keep or tempfile.mkdtemp(prefix="ps_overhead.")
    rows = []
    try:
        for model in args.models.split(","):
            common = ["--set", "train.eval=false", "--set", "train.epochs=%d" % args.epochs,
                      "--set", "train.threads=%d" % args.threads, "--set", "train.batch_size=%d" % args.batch,
                      "--set", "data.train_size=%s" % sizes.get(model, "0")]
            train_cmd = [args.pshard, "train", "--config", os.path.join(REPO, "configs", "fmnist_%s.toml" % model)]
            launch_cmd = [args.pshard, "launch", "--servers", "1", "--workers", "1", "--timeout", str(args.timeout),
                          "--config", os.path.join(REPO, "configs", "fmnist_%s_sync.toml" % model)]
            for kv in args.launch_set:
                launch_cmd += ["--set", kv]
            for r in range(args.rounds):
                base = os.path.join(work, "%s-%d" % (model, r))
                # Alternate which side goes first so that a load change does not always hit the same side.
                order = [("train", train_cmd), ("launch", launch_cmd)]
                if r % 2:
                    order.reverse()
                got = {name: run_pshard(cmd + common, base + "-" + name, args.timeout) for name, cmd in order}
                t, d = got["train"], got["launch"]
                row = {"model": model, "round": r + 1, "batch": args.batch, "threads": args.threads,
                       "samples": round(d["samples_per_s"] * d["train_s"]), "train_samples_per_s": t["samples_per_s"],
                       "launch_samples_per_s": d["samples_per_s"], "ratio": d["samples_per_s"] / t["samples_per_s"],
                       "train_s": t["train_s"], "launch_train_s": d["train_s"], "launch_fwd_bwd_s": d["forward_s"] + d["backward_s"],
                       "launch_comm_wait_s": d["comm_wait_s"], "train_loss_local": t["train_loss"],
                       "train_loss_ps": d["train_loss"], "cpu_s_train": t["cpu_s"], "cpu_s_launch": d["cpu_s"],
                       "load1_train": t["load1"], "load1_launch": d["load1"]}
                rows.append(row)
                if args.json:
                    print(json.dumps(row), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    if not args.json:
        print("PS overhead: sync 1 worker + 1 server vs pshard train, batch %d, %d thread(s), %d epoch(s), eval off%s"
              % (args.batch, args.threads, args.epochs,
                 "; launch with " + " ".join(args.launch_set) if args.launch_set else ""))
        print("(fwd+bwd, commwait: the launch run's; cpu s: CPU seconds of all processes of each command, start-up"
              " included)")
        print("%-6s %5s %8s %10s %10s %6s %9s %9s %9s %9s %13s  %s" % (
            "model", "round", "samples", "train/s", "launch/s", "ratio", "fwd+bwd", "commwait", "loss loc",
            "loss ps", "cpu s (t/l)", "load1 (t/l)"))
        for x in rows:
            print("%-6s %5d %8d %10.0f %10.0f %6.2f %9.2f %9.2f %9.4f %9.4f %6.1f/%6.1f  %.1f/%.1f" % (
                x["model"], x["round"], x["samples"], x["train_samples_per_s"], x["launch_samples_per_s"], x["ratio"],
                x["launch_fwd_bwd_s"], x["launch_comm_wait_s"], x["train_loss_local"], x["train_loss_ps"],
                x["cpu_s_train"], x["cpu_s_launch"], x["load1_train"], x["load1_launch"]))
        for model in args.models.split(","):
            ratios = [x["ratio"] for x in rows if x["model"] == model]
            med = statistics.median(ratios)
            print("%s: median ratio %.2f (runs %s); target >= 0.90: %s" % (
                model, med, ", ".join("%.2f" % v for v in ratios),
                "met" if med >= 0.9 else "NOT met (%.0f%% short)" % (100 * (0.9 - med) / 0.9)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
