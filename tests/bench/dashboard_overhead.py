#!/usr/bin/env python3
"""What the live dashboard costs a job, and how fast its page loads (bench label).

The same `pshard launch` job runs without a dashboard and with `--dashboard` watched by N pages (--pages), rounds
alternating so that both see the same machine. A watching page is what the browser's script does: GET /metrics
once a second for the lines after its offset; every fifth second it is opened afresh and the load is timed: GET /
(the page) and then GET /metrics from offset 0 (everything the page reads before its first drawing), as a browser
does on opening the URL; the browser's own drawing is not included.

Both report `samples_per_s` from the run's summary; ratio = watched / unwatched (target: >= 0.99). Since a 2-core
machine's samples/s moves by more than that from run to run, the dashboard's cost is also measured directly: the CPU
seconds of the launch process's own threads (its supervision and the dashboard's server; the jobs' processes are its
children), watched against unwatched, as a share of the CPU seconds of the whole run. And the page load's median and
worst (target: < 200 ms). Prints the 1-minute load average before each run (the machine may be
shared). Reports only: exits 0 whatever the figures, non-zero only when a run fails.

  tests/bench/dashboard_overhead.py --pshard build/bin/pshard --model lenet --rounds 3
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def watch(url, stop, loads):
    """One page: polls /metrics once a second as the page's script does; every fifth poll it is opened afresh (the
    page, then every metrics line so far), timed into `loads`."""
    base, token = url.split("/?token=")
    offset, file_id, n = 0, "", 0
    while not stop.is_set():
        fresh = n % 5 == 0
        if fresh:
            t0 = time.perf_counter()
            with urllib.request.urlopen(url, timeout=10) as r:
                r.read()
            offset, file_id = 0, ""
        q = "%s/metrics?token=%s&from=%d&file=%s" % (base, token, offset, urllib.request.quote(file_id))
        with urllib.request.urlopen(q, timeout=10) as r:
            r.read()
            offset = int(r.headers["X-Pshard-Next"])
            file_id = r.headers["X-Pshard-File"]
        if fresh:
            loads.append(time.perf_counter() - t0)
        n += 1
        stop.wait(1.0)


def own_cpu_s(pid, last):
    """Samples the CPU seconds of process `pid` itself (its threads, not its children) into last[0] until it ends:
    the launch, whose threads are the supervision and, when it serves one, the dashboard."""
    tick = os.sysconf("SC_CLK_TCK")
    while True:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return
        if fields[0] == "Z":
            return
        last[0] = (int(fields[11]) + int(fields[12])) / tick
        time.sleep(0.1)


def run(cmd, run_dir, pages, timeout):
    """samples/s of the run's summary, the 1-minute load before it, the page loads timed while it ran, the launch's
    own CPU seconds and those of every process of the run."""
    load = os.getloadavg()[0]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    argv = cmd + ["--run-dir", run_dir] + (["--dashboard"] if pages else [])
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stop, loads, threads, err, launch_cpu = threading.Event(), [], [], [], [0.0]
    reader = threading.Thread(target=lambda: err.extend(p.stderr), daemon=True)
    reader.start()
    sampler = threading.Thread(target=own_cpu_s, args=(p.pid, launch_cpu), daemon=True)
    sampler.start()
    if pages:
        deadline = time.time() + 60
        url = None
        while url is None and time.time() < deadline and p.poll() is None:
            m = re.search(r"\[launch\] dashboard: (http://\S+)", "".join(err))
            url = m.group(1) if m else None
            time.sleep(0.01)
        if url is None:
            raise SystemExit("no dashboard URL: " + "".join(err)[-2000:])
        for _ in range(pages):
            t = threading.Thread(target=watch, args=(url, stop, loads), daemon=True)
            t.start()
            threads.append(t)
    sampler.join(timeout=timeout)
    rc = p.wait(timeout=timeout)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    job_cpu = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    stop.set()
    for t in threads:
        t.join(timeout=15)
    reader.join(timeout=15)
    if rc != 0:
        sys.stderr.write("".join(err)[-4000:])
        raise SystemExit("failed (exit %d): %s" % (rc, " ".join(argv)))
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        summary = json.loads([line for line in f if line.strip()][-1])
    return summary["samples_per_s"], load, loads, launch_cpu[0], job_cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pshard", required=True)
    ap.add_argument("--model", default="lenet", help="configs/fmnist_MODEL_sync.toml")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--samples", type=int, default=12800, help="data.train_size per epoch")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--pages", type=int, default=1, help="pages watching the watched runs")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=900)
    a = ap.parse_args()
    base = [a.pshard, "launch", "--servers", str(a.servers), "--workers", str(a.workers), "--timeout",
            str(a.timeout), "--config", os.path.join(REPO, "configs", "fmnist_%s_sync.toml" % a.model),
            "--set", "data.train_size=%d" % a.samples, "--set", "data.test_size=256",
            "--set", "train.epochs=%d" % a.epochs, "--set", "train.threads=1", "--set", "train.log_every=10"]
    tmp = tempfile.mkdtemp(prefix="pshard-dashboard-bench-")
    rows = []
    try:
        for r in range(a.rounds):
            for pages in (0, a.pages):
                d = os.path.join(tmp, "r%d-%d" % (r, pages))
                sps, load, loads, launch_cpu, job_cpu = run(base, d, pages, a.timeout)
                rows.append({"round": r, "pages": pages, "samples_per_s": sps, "load1": load,
                             "page_load_s": loads, "launch_cpu_s": launch_cpu, "job_cpu_s": job_cpu})
                print("round %d  pages %d  %9.1f samples/s  launch CPU %.2f s of %.1f s  load %.2f%s" % (
                    r, pages, sps, launch_cpu, job_cpu, load, "  page load %s ms" % ", ".join(
                        "%.1f" % (1e3 * x) for x in loads) if loads else ""), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    off = statistics.median(x["samples_per_s"] for x in rows if not x["pages"])
    on = statistics.median(x["samples_per_s"] for x in rows if x["pages"])
    loads = [t for x in rows for t in x["page_load_s"]]
    # The dashboard's own cost: what the launch's threads spent more when it served, against all the run's CPU.
    launch_on = statistics.median(x["launch_cpu_s"] for x in rows if x["pages"])
    launch_off = statistics.median(x["launch_cpu_s"] for x in rows if not x["pages"])
    job_cpu = statistics.median(x["job_cpu_s"] for x in rows if x["pages"])
    print("%s, %d workers + %d servers, %d epochs of %d samples: median %.1f samples/s watched by %d page(s) vs "
          "%.1f unwatched, ratio %.3f; the launch's own CPU %.2f s watched vs %.2f s unwatched, of %.1f CPU s of the "
          "whole run (share %.4f); page load (page + every metrics line so far) median %.1f ms, worst %.1f ms"
          % (a.model, a.workers, a.servers, a.epochs, a.samples, on, a.pages, off, on / off, launch_on, launch_off,
             job_cpu, max(0.0, launch_on - launch_off) / job_cpu, 1e3 * statistics.median(loads), 1e3 * max(loads)))
    print(json.dumps({"model": a.model, "workers": a.workers, "servers": a.servers, "pages": a.pages,
                      "launch_cpu_s_watched": launch_on, "launch_cpu_s_unwatched": launch_off, "job_cpu_s": job_cpu,
                      "samples_per_s_unwatched": off, "samples_per_s_watched": on, "ratio": on / off,
                      "page_load_ms_median": 1e3 * statistics.median(loads), "page_load_ms_worst": 1e3 * max(loads),
                      "rounds": rows}))


if __name__ == "__main__":
    main()
