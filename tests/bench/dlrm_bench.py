#!/usr/bin/python3
"""pshard's own DLRM (model.name = dlrm) with its tables on the servers, against PyTorch alone (bench label;
docs/SPARSE.md, docs/PERFORMANCE.md "Embedding tables").

The model of configs/dlrm_synthetic_ctr.toml: --fields tables of --rows rows x 16 (one per categorical field), a
bottom MLP 4-32-16, the pairwise dots, a top MLP 26-64-2; batch --batch per worker; rows with Adagrad (lr 0.05), the
dense layers with Adam (lr 0.001); one compute thread per process. pshard's figures are the run summary's
samples/s (training time only). Every measurement's anchor is measured in the same run (only same-run ratios mean
anything on a shared machine):

1. speed: `pshard launch` of 1 worker + 1 server (the tables on the server, over loopback) against PyTorch alone on
   the same model (nn.Embedding(sparse=True) + torch.optim.Adagrad for the tables, Adam for the MLPs, the same
   sizes, batches of the same id law) in this process, alternated --repeats times; the best of each and the ratio
   of the bests (target >= 0.8). `pshard train` (the tables in the process) is reported beside them.
2. scaling: --compute-ms of simulated dense compute a step (train.simulate_compute_ms: the rows are still pulled
   and pushed); 2 workers + 2 servers against 1 worker + 1 server, the same batch per worker (target >= 1.6).
3. async (with --async): 2 workers + 2 servers training for real, worker 1 slowed --slow times
   (train.straggler_factor), sync against async over the same samples, async once with each worker's static shard
   and once with cluster.batch_assignment = dynamic (the workers claim the epoch's batches as they go): the job's
   samples/s, each worker's own samples/s, and the test AUC of each (dynamic: target >= 1.5 x sync, AUC within 0.005).
4. transport (with --transport): 1 worker + 1 server with cluster.transport = tcp (rows and dense tensors over
   loopback) against auto (through shared memory, only the ids and the headers on the socket), alternated --repeats
   times: the best of each, their ratio, and the bytes each sent on its sockets.
5. scale (with --scale): --scale-fields tables of --scale-rows rows (10^8 rows x 16 in all by default: 12.8 GB of
   rows and Adagrad state) on 4 servers, 2 workers training --scale-samples samples: each worker's and server's peak
   RSS (VmHWM, read while the job runs), the samples/s, and the test AUC against the generator's bound.

Prints a table and, with --out FILE, writes every figure as JSON with the machine, the load before each run, the
commit and the date. Exits non-zero when a run fails or a figure is missing, never because of a speed.

  /usr/bin/python3 tests/bench/dlrm_bench.py --pshard build/bin/pshard --out dlrm.json
  /usr/bin/python3 tests/bench/dlrm_bench.py --pshard build/bin/pshard --skip-speed --skip-scaling --async --scale
  /usr/bin/python3 tests/bench/dlrm_bench.py --pshard build/bin/pshard --skip-speed --skip-scaling --transport --fields 26
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_record import commit  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CONFIG = os.path.join(REPO, "configs", "dlrm_synthetic_ctr.toml")
DIM, DENSE, BOTTOM, TOP = 16, 4, 32, 64
DENSE_LR, TABLE_LR = 0.001, 0.05


def pshard_job(args, name, workers, servers, samples, extra=(), watch=False):
    """One `pshard train` (servers = 0) or `pshard launch`; returns the summary's figures (and, with watch, the peak
    RSS of every pshard process of the job, read from /proc while it runs)."""
    run_dir = tempfile.mkdtemp(prefix="pshard-dlrm-bench-%s-" % name)
    sets = ["data.fields=%d" % args.fields, "data.cardinality=%d" % args.rows, "data.train_size=%d" % samples,
            "data.test_size=%d" % args.test_size, "train.epochs=1", "train.batch_size=%d" % args.batch,
            "train.threads=1", "log.level=warn"] + list(extra)
    argv = [args.pshard, "train"] if servers == 0 else [
        args.pshard, "launch", "--servers", str(servers), "--workers", str(workers), "--timeout", str(args.timeout)]
    argv += ["--config", CONFIG, "--run-dir", os.path.join(run_dir, "run")]
    for s in sets:
        argv += ["--set", s]
    load1 = os.getloadavg()[0]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peaks = {}
    stop = threading.Event()

    def sample():
        while not stop.wait(0.5):
            for pid, role in pshard_processes(proc.pid):
                hwm = vmhwm_kib(pid)
                if hwm is not None:
                    peaks[(pid, role)] = max(peaks.get((pid, role), 0), hwm)

    watcher = threading.Thread(target=sample, daemon=True) if watch else None
    if watcher:
        watcher.start()
    out, _ = proc.communicate(timeout=args.timeout + 60)
    stop.set()
    if watcher:
        watcher.join()
    if proc.returncode != 0:
        sys.stderr.write(out[-6000:] + "\n")
        raise SystemExit("dlrm_bench: %s failed with status %d" % (name, proc.returncode))
    summary, workers_rate = None, {}
    with open(os.path.join(run_dir, "run", "metrics.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == "summary":
                summary = e
            elif e.get("event") == "epoch":
                for w in e.get("workers", []):
                    if w.get("epoch_s"):
                        workers_rate[w["rank"]] = w["samples"] / w["epoch_s"]
    figures = (summary or {}).get("figures") or {}
    if not summary or not (summary.get("samples_per_s") or 0) > 0 or "test_auc" not in figures:
        raise SystemExit("dlrm_bench: %s: the summary lacks samples/s or the test AUC: %r" % (name, summary))
    r = {"name": name, "workers": workers, "servers": servers, "samples": samples, "load1": load1,
         "samples_per_s": summary["samples_per_s"], "test_auc": figures["test_auc"],
         "test_auc_bound": figures.get("test_auc_bound"), "test_logloss": figures.get("test_logloss"),
         "worker_samples_per_s": [workers_rate[k] for k in sorted(workers_rate)], "settings": sets,
         "bytes_sent": summary.get("bytes_sent"), "shm_bytes_sent": summary.get("shm_bytes_sent")}
    if watch:
        r["peak_rss_mib"] = {"worker": sorted(v / 1024.0 for (p, role), v in peaks.items() if role == "worker"),
                             "server": sorted(v / 1024.0 for (p, role), v in peaks.items() if role == "server")}
    subprocess.run(["rm", "-rf", run_dir])
    return r


def pshard_processes(root):
    """(pid, role) of the `pshard worker` and `pshard server` processes under `root`."""
    children, found = {}, []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(pid))
        except (OSError, ValueError, IndexError):
            continue
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            try:
                with open("/proc/%d/cmdline" % child, "rb") as f:
                    argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
            except OSError:
                continue
            if len(argv) > 1 and argv[1] in ("worker", "server"):
                found.append((child, argv[1]))
    return found


def vmhwm_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def torch_alone(args, samples):
    """The same DLRM in PyTorch, in this process: samples/s over the same number of steps."""
    import numpy as np
    import torch
    import torch.nn as nn
    torch.set_num_threads(1)
    torch.manual_seed(1)
    fields = args.fields

    class Dlrm(nn.Module):
        def __init__(self):
            super().__init__()
            self.bottom = nn.Sequential(nn.Linear(DENSE, BOTTOM), nn.ReLU(), nn.Linear(BOTTOM, DIM), nn.ReLU())
            self.tables = nn.ModuleList([nn.Embedding(args.rows, DIM, sparse=True) for _ in range(fields)])
            for t in self.tables:
                nn.init.uniform_(t.weight, -0.05, 0.05)
            pairs = (fields + 1) * fields // 2
            self.top = nn.Sequential(nn.Linear(DIM + pairs, TOP), nn.ReLU(), nn.Linear(TOP, 2))
            self.upper = torch.triu_indices(fields + 1, fields + 1, 1)

        def forward(self, dense, ids):
            z0 = self.bottom(dense)
            z = torch.stack([z0] + [t(ids[:, f]) for f, t in enumerate(self.tables)], 1)
            dots = torch.bmm(z, z.transpose(1, 2))[:, self.upper[0], self.upper[1]]
            return self.top(torch.cat([z0, dots], 1))

    # Ids of the synthetic-ctr law: Zipf with exponent 1.05 over each field's rows (inverse CDF), dense N(0, 1).
    rng = np.random.default_rng(1)
    cdf = np.cumsum(np.arange(1, args.rows + 1, dtype=np.float64) ** -1.05)
    cdf /= cdf[-1]
    steps = samples // args.batch
    ids = torch.from_numpy(np.searchsorted(cdf, rng.random((steps, args.batch, fields))).astype(np.int64))
    dense = torch.from_numpy(rng.standard_normal((steps, args.batch, DENSE)).astype(np.float32))
    labels = torch.from_numpy((rng.random((steps, args.batch)) < 0.23).astype(np.int64))
    model = Dlrm()
    tables = torch.optim.Adagrad([t.weight for t in model.tables], lr=TABLE_LR, eps=1e-8)
    mlps = torch.optim.Adam(list(model.bottom.parameters()) + list(model.top.parameters()), lr=DENSE_LR)
    loss_fn = nn.CrossEntropyLoss()
    load1 = os.getloadavg()[0]
    t0 = time.perf_counter()
    for s in range(steps):
        loss = loss_fn(model(dense[s], ids[s]), labels[s])
        tables.zero_grad()
        mlps.zero_grad()
        loss.backward()
        tables.step()
        mlps.step()
    seconds = time.perf_counter() - t0
    if not torch.isfinite(loss):
        raise SystemExit("dlrm_bench: PyTorch's loss is not finite")
    return {"samples_per_s": steps * args.batch / seconds, "seconds": seconds, "load1": load1}


def speed(args):
    rounds = []
    for _ in range(args.repeats):
        p = pshard_job(args, "speed-1w1s", 1, 1, args.samples)
        t = torch_alone(args, args.samples)
        rounds.append({"pshard": p, "torch": t, "ratio": p["samples_per_s"] / t["samples_per_s"]})
    local = pshard_job(args, "speed-local", 1, 0, args.samples)
    best_p = max(r["pshard"]["samples_per_s"] for r in rounds)
    best_t = max(r["torch"]["samples_per_s"] for r in rounds)
    return {"rounds": rounds, "pshard_train": local, "pshard_best_samples_per_s": best_p,
            "torch_best_samples_per_s": best_t, "ratio_of_bests": best_p / best_t, "target": 0.8}


def scaling(args):
    per_worker = args.compute_steps * args.batch
    extra = ["train.simulate_compute_ms=%g" % args.compute_ms]
    one = pshard_job(args, "scaling-1", 1, 1, per_worker, extra)
    two = pshard_job(args, "scaling-2", 2, 2, 2 * per_worker, extra)
    return {"one": one, "two": two, "speedup": two["samples_per_s"] / one["samples_per_s"], "target": 1.6,
            "compute_ms": args.compute_ms}


def asynchronous(args):
    slow = ["train.straggler_rank=1", "train.straggler_factor=%g" % args.slow]
    sync = pshard_job(args, "async-sync", 2, 2, args.async_samples, slow + ["cluster.mode=sync"])
    asy = pshard_job(args, "async-async", 2, 2, args.async_samples, slow + ["cluster.mode=async"])
    dyn = pshard_job(args, "async-dynamic", 2, 2, args.async_samples,
                     slow + ["cluster.mode=async", "cluster.batch_assignment=dynamic"])
    return {"sync": sync, "async": asy, "dynamic": dyn, "slow": args.slow,
            "samples_per_s_ratio": asy["samples_per_s"] / sync["samples_per_s"],
            "worker_rate_sum_ratio": sum(asy["worker_samples_per_s"]) / sum(sync["worker_samples_per_s"]),
            "auc_difference": asy["test_auc"] - sync["test_auc"],
            "dynamic_samples_per_s_ratio": dyn["samples_per_s"] / sync["samples_per_s"],
            "dynamic_auc_difference": dyn["test_auc"] - sync["test_auc"]}


def transport(args):
    rounds = []
    for _ in range(args.repeats):
        rounds.append({t: pshard_job(args, "transport-" + t, 1, 1, args.samples, ["cluster.transport=" + t])
                       for t in ("tcp", "auto")})
    best = {t: max(r[t]["samples_per_s"] for r in rounds) for t in ("tcp", "auto")}
    return {"rounds": rounds, "best_tcp": best["tcp"], "best_auto": best["auto"],
            "ratio_of_bests": best["auto"] / best["tcp"]}


def scale(args):
    need = args.scale_rows * DIM * 4 * 2
    with open("/proc/meminfo") as f:
        avail = next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable"))
    if avail < need * 1.2:
        raise SystemExit("dlrm_bench: --scale needs about %.1f GB for the rows and their state; MemAvailable is "
                         "%.1f GB" % (need / 1e9, avail / 1e9))
    saved = args.fields, args.rows
    args.fields, args.rows = args.scale_fields, args.scale_rows // args.scale_fields
    try:
        r = pshard_job(args, "scale", 2, 4, args.scale_samples, ["cluster.request_timeout_ms=600000"], watch=True)
    finally:
        args.fields, args.rows = saved
    r["table_bytes"] = need
    return r



def report(rec):
    print("dlrm_bench: commit %s, %s, %d CPUs" % (rec["commit"], rec["date"], os.cpu_count()))
    if "speed" in rec:
        s = rec["speed"]
        for i, r in enumerate(s["rounds"]):
            print("  speed round %d: pshard 1 worker + 1 server %.0f samples/s (load %.2f), PyTorch alone %.0f "
                  "(load %.2f): %.2f" % (i + 1, r["pshard"]["samples_per_s"], r["pshard"]["load1"],
                                         r["torch"]["samples_per_s"], r["torch"]["load1"], r["ratio"]))
        print("  speed: best %.0f against %.0f samples/s: ratio %.2f (target %.1f); pshard train %.0f samples/s"
              % (s["pshard_best_samples_per_s"], s["torch_best_samples_per_s"], s["ratio_of_bests"], s["target"],
                 s["pshard_train"]["samples_per_s"]))
    if "scaling" in rec:
        s = rec["scaling"]
        print("  scaling (%g ms simulated compute): 1 worker %.0f, 2 workers %.0f samples/s: %.2f x (target %.1f)"
              % (s["compute_ms"], s["one"]["samples_per_s"], s["two"]["samples_per_s"], s["speedup"], s["target"]))
    if "async" in rec:
        a = rec["async"]
        for k in ("sync", "async", "dynamic"):
            print("  %s, worker 1 slowed %gx: %.0f samples/s (workers %s), test AUC %.4f (bound %.4f)"
                  % (k, a["slow"], a[k]["samples_per_s"], ", ".join("%.0f" % x for x in a[k]["worker_samples_per_s"]),
                     a[k]["test_auc"], a[k]["test_auc_bound"] or float("nan")))
        print("  async / sync: job samples/s %.2f, workers' own samples/s summed %.2f, AUC difference %+.4f"
              % (a["samples_per_s_ratio"], a["worker_rate_sum_ratio"], a["auc_difference"]))
        print("  async with cluster.batch_assignment = dynamic / sync: job samples/s %.2f (target 1.5), AUC difference "
              "%+.4f (target within 0.005)" % (a["dynamic_samples_per_s_ratio"], a["dynamic_auc_difference"]))
    if "transport" in rec:
        s = rec["transport"]
        for i, r in enumerate(s["rounds"]):
            print("  transport round %d: tcp %.0f samples/s (load %.2f, %.1f MB on sockets), shared memory %.0f "
                  "(load %.2f, %.1f MB on sockets, %.1f MB through shared memory)"
                  % (i + 1, r["tcp"]["samples_per_s"], r["tcp"]["load1"], r["tcp"]["bytes_sent"] / 1e6,
                     r["auto"]["samples_per_s"], r["auto"]["load1"], r["auto"]["bytes_sent"] / 1e6,
                     r["auto"]["shm_bytes_sent"] / 1e6))
        print("  transport: best %.0f through shared memory against %.0f over TCP: %.2f x"
              % (s["best_auto"], s["best_tcp"], s["ratio_of_bests"]))
    if "scale" in rec:
        s = rec["scale"]
        print("  scale: %d tables, %.1f GB of rows and state on 4 servers, 2 workers: peak RSS workers %s MiB, "
              "servers %s MiB; %.0f samples/s; test AUC %.4f (bound %.4f)"
              % (rec["args"]["scale_fields"], s["table_bytes"] / 1e9,
                 ", ".join("%.0f" % x for x in s["peak_rss_mib"]["worker"]),
                 ", ".join("%.0f" % x for x in s["peak_rss_mib"]["server"]), s["samples_per_s"], s["test_auc"],
                 s["test_auc_bound"] or float("nan")))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pshard", default=os.environ.get("PSHARD_BIN", ""), help="pshard executable ($PSHARD_BIN)")
    ap.add_argument("--fields", type=int, default=4)
    ap.add_argument("--rows", type=int, default=250000, help="rows of each table (speed, scaling, async)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--samples", type=int, default=256000, help="training samples of a speed run")
    ap.add_argument("--test-size", type=int, default=4000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compute-ms", type=float, default=20.0)
    ap.add_argument("--compute-steps", type=int, default=100)
    ap.add_argument("--async", dest="run_async", action="store_true", help="also measurement 3")
    ap.add_argument("--slow", type=float, default=2.0, help="how many times slower worker 1 is (async)")
    ap.add_argument("--async-samples", type=int, default=256000)
    ap.add_argument("--transport", dest="run_transport", action="store_true", help="also measurement 4")
    ap.add_argument("--scale", action="store_true", help="also measurement 5 (needs the tables' memory)")
    ap.add_argument("--scale-rows", type=int, default=100_000_000, help="rows of all tables together")
    ap.add_argument("--scale-fields", type=int, default=4)
    ap.add_argument("--scale-samples", type=int, default=1_000_000)
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-scaling", action="store_true")
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args()
    if not args.pshard:
        raise SystemExit("dlrm_bench: give --pshard or set PSHARD_BIN")
    rec = {"commit": commit(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "args": vars(args), "load1_at_start": os.getloadavg()[0]}
    if not args.skip_speed:
        rec["speed"] = speed(args)
    if not args.skip_scaling:
        rec["scaling"] = scaling(args)
    if args.run_async:
        rec["async"] = asynchronous(args)
    if args.run_transport:
        rec["transport"] = transport(args)
    if args.scale:
        rec["scale"] = scale(args)
    report(rec)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rec, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
