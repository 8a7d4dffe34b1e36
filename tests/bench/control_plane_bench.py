#!/usr/bin/python3
"""The control plane's cost per step with many workers (bench label; docs/PERFORMANCE.md, "Control plane").

A sync job of --workers workers and --servers servers on this machine trains configs/linreg_sgd.toml (10 weights: the
data plane moves almost nothing, so the coordinator's share shows) for --steps steps, batch 16 per worker, one
epoch. The coordinator's work per step is its heartbeats (every node every cluster.heartbeat_interval_ms), the step
lines every worker reports (train.log_every) and the epoch records. Two variants, alternated round by round:

- none: train.loss_scaling = none;
- scaled: train.loss_scaling = dynamic (float32 compute): every step may be skipped for all workers, which each push
  says (whether its worker's gradients were finite) and the servers decide, without the coordinator.

Per run it reads the summary's coordinator_cpu_s (the coordinator's CPU time, user + system, its ZeroMQ threads
included), steps and train_s, and prints the coordinator's CPU milliseconds per step, that as a share of a 100 ms
step (the target: under 2 %), and the step time of each variant (scaled against none in the same run: what loss
scaling adds to a step on this machine, where every process shares the cores). The best round of each variant is
reported.
Reports only: exits non-zero when a run fails or a figure is missing, never because of a figure.

  /usr/bin/python3 tests/bench/control_plane_bench.py --pshard build/bin/pshard --out control-plane.json
  /usr/bin/python3 tests/bench/control_plane_bench.py --pshard build/bin/pshard --workers 8 --servers 2 --steps 40 \\
      --rounds 1      # the suite's short check
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



def run(args, variant, run_dir):
    """One job; returns its figures."""
    scaling = "dynamic" if variant == "scaled" else "none"
    cmd = [args.pshard, "launch", "--servers", str(args.servers), "--workers", str(args.workers), "--timeout",
           str(args.timeout), "--config", os.path.join(REPO, "configs", "linreg_sgd.toml"), "--run-dir", run_dir,
           "--set", "train.epochs=1", "--set", "train.batch_size=%d" % BATCH,
           "--set", "data.train_size=%d" % (args.workers * BATCH * args.steps),
           "--set", "train.loss_scaling=" + scaling]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout + 60, cwd=REPO)
    if out.returncode != 0:
        raise SystemExit("control_plane_bench: the %s job failed (status %d):\n%s" %
                         (variant, out.returncode, out.stderr[-3000:]))
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        summary = json.loads([line for line in f if line.strip()][-1])
    for key in ("coordinator_cpu_s", "steps", "train_s"):
        if not isinstance(summary.get(key), (int, float)) or summary[key] <= 0:
            raise SystemExit("control_plane_bench: the %s job's summary has no positive %s: %s" %
                             (variant, key, json.dumps(summary)[:2000]))
    steps = summary["steps"]
    cpu_ms = 1000.0 * summary["coordinator_cpu_s"] / steps
    return {"variant": variant, "steps": steps, "coordinator_cpu_s": summary["coordinator_cpu_s"],
            "coordinator_cpu_ms_per_step": cpu_ms, "share_of_100ms_step": cpu_ms / 100.0,
            "step_ms": 1000.0 * summary["train_s"] / steps, "wall_s": summary["wall_s"],
            "load_before": os.getloadavg()[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pshard", required=True)
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--servers", type=int, default=16)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--out", help="also write the figures here (JSON)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pshard-control-plane-")
    runs = []
    try:
        for r in range(args.rounds):
            for variant in (("none", "scaled") if r % 2 == 0 else ("scaled", "none")):
                load = os.getloadavg()[0]
                fig = run(args, variant, os.path.join(tmp, "%s-%d" % (variant, r)))
                fig["load_before"] = load
                runs.append(fig)
                print("round %d  %-6s  coordinator %.3f ms CPU/step (%.2f %% of a 100 ms step), step %.1f ms, "
                      "%d steps, load %.2f" % (r, variant, fig["coordinator_cpu_ms_per_step"],
                                               100 * fig["share_of_100ms_step"], fig["step_ms"], fig["steps"], load),
                      flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    best = {}
    for v in ("none", "scaled"):
        mine = [f for f in runs if f["variant"] == v]
        best[v] = {"coordinator_cpu_ms_per_step": min(f["coordinator_cpu_ms_per_step"] for f in mine),
                   "step_ms": min(f["step_ms"] for f in mine)}
        print("%-6s best: coordinator %.3f ms CPU per step = %.2f %% of a 100 ms step (target < 2 %%); step %.1f ms"
              % (v, best[v]["coordinator_cpu_ms_per_step"], best[v]["coordinator_cpu_ms_per_step"],
                 best[v]["step_ms"]))
    added = best["scaled"]["step_ms"] - best["none"]["step_ms"]
    print("loss scaling adds %.1f ms to a step here (%d workers and %d servers sharing %d cores)" %
          (added, args.workers, args.servers, os.cpu_count()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       "commit": commit(), "nproc": os.cpu_count(), "workers": args.workers,
                       "servers": args.servers, "steps": args.steps, "batch": BATCH, "runs": runs, "best": best,
                       "scaled_adds_ms": added}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
