#!/usr/bin/env python3
"""What a timeline costs: samples/s of the same `pshard launch` job with trace.steps empty (off) and with
every step traced (the worst case), rounds alternating so that both see the same machine (bench label).

Both report `samples_per_s` = training samples / training seconds from the run's metrics.jsonl summary;
ratio = traced / off (target: >= 0.95), and the CPU seconds of all the job's processes (less sensitive
than wall time to other jobs on a shared machine). Prints the 1-minute load average before each run (the machine
may be shared). Reports only: exits 0 whatever the ratio, non-zero only when a run fails.

  tests/bench/trace_overhead.py --pshard build/bin/pshard --model mlp --rounds 3
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

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd, run_dir, timeout):
    """samples/s of the run's summary, the 1-minute load before it, and the CPU seconds of all its processes."""
    load = os.getloadavg()[0]
    cpu0 = children_cpu_s()
    p = subprocess.run(cmd + ["--run-dir", run_dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-4000:])
        raise SystemExit("failed (exit %d): %s" % (p.returncode, " ".join(cmd)))
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        summary = json.loads([line for line in f if line.strip()][-1])
    return summary["samples_per_s"], load, children_cpu_s() - cpu0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pshard", required=True)
    ap.add_argument("--model", default="mlp", help="configs/fmnist_MODEL.toml")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--servers", type=int, default=1)
    ap.add_argument("--samples", type=int, default=12800, help="data.train_size (one epoch)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=900)
    a = ap.parse_args()
    steps = a.samples // (64 * a.workers)
    base = [a.pshard, "launch", "--servers", str(a.servers), "--workers", str(a.workers), "--timeout",
            str(a.timeout), "--config", os.path.join(REPO, "configs", "fmnist_%s.toml" % a.model),
            "--set", "data.train_size=%d" % a.samples, "--set", "data.test_size=256", "--set", "train.epochs=1",
            "--set", "train.eval=false", "--set", "train.batch_size=64", "--set", "train.threads=1",
            "--set", "cluster.mode=sync"]
    tmp = tempfile.mkdtemp(prefix="pshard-trace-bench-")
    rows = []
    try:
        for r in range(a.rounds):
            for traced in (False, True):
                d = os.path.join(tmp, "r%d-%s" % (r, "on" if traced else "off"))
                cmd = base + (["--trace", "0-%d" % (steps - 1)] if traced else [])
                sps, load, cpu = run(cmd, d, a.timeout)
                rows.append({"round": r, "traced": traced, "samples_per_s": sps, "load1": load, "cpu_s": cpu})
                print("round %d  trace %-3s  %9.1f samples/s  %6.2f cpu s  load %.2f"
                      % (r, "on" if traced else "off", sps, cpu, load), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    off = statistics.median(x["samples_per_s"] for x in rows if not x["traced"])
    on = statistics.median(x["samples_per_s"] for x in rows if x["traced"])
    cpu_off = statistics.median(x["cpu_s"] for x in rows if not x["traced"])
    cpu_on = statistics.median(x["cpu_s"] for x in rows if x["traced"])
    print("%s, %d workers + %d server, %d steps, every step traced: median %.1f samples/s traced vs %.1f off, "
          "ratio %.3f; CPU seconds of all processes (start-up included) %.2f traced vs %.2f off"
          % (a.model, a.workers, a.servers, steps, on, off, on / off, cpu_on, cpu_off))
    print(json.dumps({"model": a.model, "workers": a.workers, "servers": a.servers, "steps": steps,
                      "samples_per_s_off": off, "samples_per_s_traced": on, "ratio": on / off, "cpu_s_off": cpu_off, "cpu_s_traced": cpu_on,
                      "rounds": rows}))


if __name__ == "__main__":
    main()
