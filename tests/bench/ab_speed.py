#!/usr/bin/env python3
"""Two pshard executables (before and after a change) on the same benchmarks, alternated round by round so that both
see the same machine: `bench kv` over TCP and over shared memory (push+pull GB/s), and the ResNet-50 profile job
(configs/profile_resnet50_sync.toml: real-size tensors, compute replaced by each layer's modelled time) at 1, 2 and 4
workers with 2 servers (samples/s from the summary). Prints each run, then per benchmark the median of each side and
after / before; a change is "no slowdown" when every ratio is at least 0.95 (the target the worker-side split asks
for). Reports only: exits 0 whatever the ratios, non-zero only when a run fails.

  tests/bench/ab_speed.py --before /path/to/old/pshard --after build/bin/pshard --rounds 3 [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def kv(exe, transport):
    out = subprocess.run([exe, "bench", "kv", "--transport", transport, "--model-mib", "64", "--rounds", "16",
                          "--rtt-iters", "200", "--json"], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit("bench kv failed: %s" % out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])["push_pull_gbps"]


def profile(exe, workers, run_dir):
    steps = 8
    cmd = [exe, "launch", "--servers", "2", "--workers", str(workers), "--timeout", "600", "--config",
           os.path.join(REPO, "configs", "profile_resnet50_sync.toml"), "--run-dir", run_dir,
           "--set", "data.train_size=%d" % (64 * workers * steps)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=REPO)
    if out.returncode != 0:
        raise SystemExit("profile job failed: %s" % out.stderr[-2000:])
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return json.loads([line for line in f if line.strip()][-1])["samples_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    benches = [("kv tcp GB/s", lambda exe, d: kv(exe, "tcp")), ("kv shm GB/s", lambda exe, d: kv(exe, "shm"))]
    for w in [int(x) for x in a.workers.split(",") if x]:  # --workers "": the kv benchmarks only
        benches.append(("resnet50 profile %d workers samples/s" % w, lambda exe, d, w=w: profile(exe, w, d)))
    results = {name: {"before": [], "after": []} for name, _ in benches}
    tmp = tempfile.mkdtemp(prefix="pshard-ab-")
    n = 0
    for r in range(a.rounds):
        for name, fn in benches:
            # Alternate which side goes first, so that neither always runs on a machine warmed by the other.
            for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                n += 1
                load = os.getloadavg()[0]
                value = fn(a.before if side == "before" else a.after, os.path.join(tmp, "run-%d" % n))
                results[name][side].append(value)
                print("round %d  %-38s %-6s %10.3f  load %.2f" % (r, name, side, value, load), flush=True)
    summary = {}
    for name, sides in results.items():
        before, after = statistics.median(sides["before"]), statistics.median(sides["after"])
        summary[name] = {"before": before, "after": after, "ratio": after / before, "runs": sides}
        print("%-40s before %10.3f  after %10.3f  after/before %.3f" % (name, before, after, after / before))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"before": a.before, "after": a.after, "rounds": a.rounds, "results": summary}, f, indent=1)
            f.write("\n")
    sys.exit(0)


if __name__ == "__main__":
    main()
