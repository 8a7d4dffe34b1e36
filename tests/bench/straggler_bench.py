#!/usr/bin/python3
"""A straggler's cost per sync step, with and without backup workers (bench label; docs/PERFORMANCE.md, "Stragglers").

A sync job of --workers workers and --servers servers on this machine trains configs/linreg_sgd.toml (10 weights:
the data plane moves almost nothing) with train.simulate_compute_ms = --compute-ms, so that each worker's step is a
sleep of that length and the step time is what the servers' closing rule makes of it. Three variants, alternated
round by round:

- even: every worker computes --compute-ms; cluster.backup_workers = 0 (the anchor);
- straggler: worker --workers - 1 takes --factor times as long (train.straggler_rank, train.straggler_factor);
  cluster.backup_workers = 0: every step waits for it;
- backup: the same straggler, cluster.backup_workers = 1: a step closes without its push after the grace.

Per run it reads the summary's train_s and steps (the step time) and late_steps, and prints each variant's best step
time over the rounds as a ratio to `even` in the same run (the target: backup <= 1.2 x even, where straggler is about
--factor x). Reports only: exits non-zero when a run fails or a figure is missing, never because of a figure.

  /usr/bin/python3 tests/bench/straggler_bench.py --pshard build/bin/pshard --out straggler.json
  /usr/bin/python3 tests/bench/straggler_bench.py --pshard build/bin/pshard --steps 12 --rounds 1  # the suite's
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_record import commit  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCH = 16
VARIANTS = ("even", "straggler", "backup")



def run(args, variant, run_dir):
    """One job; returns its figures."""
    cmd = [args.pshard, "launch", "--servers", str(args.servers), "--workers", str(args.workers), "--timeout",
           str(args.timeout), "--config", os.path.join(REPO, "configs", "linreg_sgd.toml"), "--run-dir", run_dir,
           "--set", "train.epochs=1", "--set", "train.batch_size=%d" % BATCH,
           "--set", "data.train_size=%d" % (args.workers * BATCH * args.steps), "--set", "train.eval=false",
           "--set", "train.log_every=0", "--set", "train.simulate_compute_ms=%g" % args.compute_ms]
    if variant != "even":
        cmd += ["--set", "train.straggler_rank=%d" % (args.workers - 1), "--set",
                "train.straggler_factor=%g" % args.factor]
    cmd += ["--set", "cluster.backup_workers=%d" % (1 if variant == "backup" else 0)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout + 60, cwd=REPO)
    if out.returncode != 0:
        raise SystemExit("straggler_bench: the %s job failed (status %d):\n%s" %
                         (variant, out.returncode, out.stderr[-3000:]))
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        summary = json.loads([line for line in f if line.strip()][-1])
    for key in ("steps", "train_s"):
        if not isinstance(summary.get(key), (int, float)) or summary[key] <= 0:
            raise SystemExit("straggler_bench: the %s job's summary has no positive %s: %s" %
                             (variant, key, json.dumps(summary)[:2000]))
    return {"variant": variant, "steps": summary["steps"], "train_s": summary["train_s"],
            "step_ms": 1000.0 * summary["train_s"] / summary["steps"],
            "late_steps": summary.get("late_steps", 0)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pshard", required=True)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--compute-ms", type=float, default=100)
    ap.add_argument("--factor", type=float, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--out", help="also write the figures here (JSON)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pshard-straggler-")
    runs = []
    try:
        for r in range(args.rounds):
            order = VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))
            for variant in order:
                load = os.getloadavg()[0]
                fig = run(args, variant, os.path.join(tmp, "%s-%d" % (variant, r)))
                fig["load_before"] = load
                runs.append(fig)
                print("round %d  %-9s  step %.1f ms over %d steps, %d late steps, load %.2f" %
                      (r, variant, fig["step_ms"], fig["steps"], fig["late_steps"], load), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    best = {v: min(f["step_ms"] for f in runs if f["variant"] == v) for v in VARIANTS}
    ratios = {v: best[v] / best["even"] for v in VARIANTS}
    for v in VARIANTS:
        print("%-9s best step %.1f ms = %.2f x even" % (v, best[v], ratios[v]))
    print("target: backup <= 1.20 x even (%d workers, one %gx slower, %g ms of simulated compute; %d cores)" %
          (args.workers, args.factor, args.compute_ms, os.cpu_count()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       "commit": commit(), "nproc": os.cpu_count(), "workers": args.workers,
                       "servers": args.servers, "steps": args.steps, "compute_ms": args.compute_ms,
                       "factor": args.factor, "runs": runs, "best_step_ms": best, "ratio_to_even": ratios}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
