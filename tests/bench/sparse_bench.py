#!/usr/bin/python3
"""Embedding tables on the servers against PyTorch alone (bench label; docs/SPARSE.md).

The model: one EmbeddingBag table (--rows x --dim, mode sum; bags of --bag ids from a Zipf-like law, id k drawn with
probability about 1 / (k + 1)) feeding an MLP (--dim -> --hidden -> ReLU -> 1), BCE-with-logits loss on 0/1 labels,
--batch bags per step and worker. pshard: ps.EmbeddingBag + ps.DistributedOptimizer, sync, embedding.optimizer =
adagrad on the rows and sgd on the MLP. PyTorch: nn.EmbeddingBag(sparse=True) + torch.optim.Adagrad on the table
and SGD on the MLP, the same learning rates, the same batches, in this process. Both sides use --threads compute
threads. Every figure is samples/s over --steps timed steps after --warmup steps (pshard: from the first worker's
start of the timed steps to the last worker's end, opt.synchronize() included). Three measurements, each with its
anchor measured in the same run (only same-run ratios mean anything on a shared machine):

1. speed: 1 worker + 1 server against PyTorch alone, alternated (pshard, torch, pshard, torch, ...) --repeats
   times; the best of each side and the ratio of the bests.
2. scaling: the same model with --compute-ms of sleep in every step (after backward, before the optimizer's step)
   standing in for dense compute; 2 workers + 2 servers against 1 worker + 1 server, the same batch per worker:
   samples/s of each and the speedup (target >= 1.6).
3. scale (only with --scale): a --scale-rows x --dim table (default 10^8 x 16: 12.8 GB of rows and Adagrad state)
   on --scale-servers servers, --scale-workers workers, --scale-steps steps: each worker's peak RSS (VmHWM), each
   server's RSS and peak RSS, and the seconds DistributedOptimizer(model) took, in which the servers make the rows
   (the first declaration of the tables makes them; the workers pass a barrier just before, so that their
   start-up is not counted). Needs the table's
   bytes free in memory and an idle machine; it refuses to start when MemAvailable is short.

Prints a table and, with --out FILE, writes every figure as JSON with the machine (nproc, memory), the 1-minute load
average before each measurement, the commit and the date. Reports speed only: exits non-zero when a run fails or a
result is incomplete (a figure missing or not positive, a loss not finite, the table's rows unchanged on the
servers after training), never because of a speed.

  /usr/bin/python3 tests/bench/sparse_bench.py --pshard build/bin/pshard --out sparse.json
  /usr/bin/python3 tests/bench/sparse_bench.py --pshard build/bin/pshard --scale --out sparse-scale.json

Worker processes run this file as `sparse_bench.py worker RESULT_DIR ...` under `pshard launch`; each writes
RESULT_DIR/worker-RANK.json.
"""
import argparse
import datetime
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "python"))
sys.path.insert(0, HERE)
import support  # noqa: E402
from bench_record import commit  # noqa: E402

DENSE_LR, TABLE_LR = 0.05, 0.05
CONFIG = """
[run]
seed = 7

[train]
batch_size = %(batch)d

[optimizer]
name = "sgd"
lr = %(dense_lr)g
momentum = 0.0

[embedding]
optimizer = "adagrad"
lr = %(table_lr)g
eps = 1e-10

[cluster]
mode = "sync"
request_timeout_ms = %(request_timeout_ms)d
"""


# ---- the model and its data, shared by both sides ----------------------------------------------------------------
def batches(torch, seed, rows, bag, batch, count):
    """`count` batches of `batch` bags of `bag` ids, id k with probability ~ 1 / (k + 1) (rows^u - 1 for u uniform),
    and 0/1 labels (30 % ones)."""
    g = torch.Generator()
    g.manual_seed(seed)
    u = torch.rand(count, batch, bag, generator=g, dtype=torch.float64)
    ids = (torch.pow(float(rows), u) - 1.0).floor().clamp_(0, rows - 1).to(torch.int64)
    y = (torch.rand(count, batch, generator=g) < 0.3).to(torch.float32)
    return ids, y


def make_model(torch, bag, dim, hidden):
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = bag
            self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))

        def forward(self, ids):
            return self.mlp(self.bag(ids)).squeeze(1)

    return Model()


def proc_status(pid="self"):
    """VmRSS and VmHWM of a process in KiB (None where unreadable: it exited)."""
    out = {"vmrss_kib": None, "vmhwm_kib": None}
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    out["vmrss_kib"] = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    out["vmhwm_kib"] = int(line.split()[1])
    except OSError:
        pass
    return out


def server_processes():
    """This worker's sibling `pshard server` processes (the launcher's children, in the order they were started),
    with the address each serves on and their memory."""
    parent = os.getppid()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != parent:
                continue
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
        except (OSError, ValueError, IndexError):
            continue
        if len(argv) > 1 and argv[1] == "server":
            bind = argv[argv.index("--bind") + 1] if "--bind" in argv[:-1] else None
            found.append(dict({"pid": int(pid), "bind": bind}, **proc_status(pid)))
    return sorted(found, key=lambda s: s["pid"])


# ---- a pshard worker (run by pshard launch) ----------------------------------------------------------------------
def worker(argv):
    ap = argparse.ArgumentParser(prog="sparse_bench.py worker")
    ap.add_argument("result_dir")
    for name in ("rows", "dim", "bag", "batch", "hidden", "warmup", "steps", "threads", "seed"):
        ap.add_argument("--" + name, type=int, required=True)
    ap.add_argument("--compute-ms", type=float, default=0.0)
    a = ap.parse_args(argv)
    import torch
    import pshard.torch as ps
    torch.set_num_threads(a.threads)
    ps.init()
    rank = ps.rank()
    ids, y = batches(torch, a.seed + rank, a.rows, a.bag, a.batch, a.warmup + a.steps)
    torch.manual_seed(a.seed)
    model = make_model(torch, ps.EmbeddingBag(a.rows, a.dim, mode="sum", name="items"), a.dim, a.hidden)
    ps.barrier("sparse_bench: every worker ready")  # so that the time below is the tables' making, not start-up
    t = time.perf_counter()
    opt = ps.DistributedOptimizer(model)
    start_s = time.perf_counter() - t
    probe = torch.unique(ids[0])
    before = model.bag.pull(probe)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    sleep_s = a.compute_ms / 1000.0
    t0 = load1 = None
    for s in range(a.warmup + a.steps):
        if s == a.warmup:
            load1 = os.getloadavg()[0]
            t0 = time.time()
        loss = loss_fn(model(ids[s]), y[s])
        opt.zero_grad()
        loss.backward()
        if sleep_s:
            time.sleep(sleep_s)
        opt.step()
    opt.synchronize()
    t1 = time.time()
    moved = float((model.bag.pull(probe) - before).abs().max())
    result = {"rank": rank, "workers": ps.size(), "steps": a.steps, "batch": a.batch, "start_time": t0,
              "end_time": t1, "seconds": t1 - t0, "samples_per_s": a.steps * a.batch / (t1 - t0),
              "optimizer_start_s": start_s, "final_loss": float(loss), "rows_moved": moved, "load1": load1}
    result.update(proc_status())
    if rank == 0:
        result["servers"] = server_processes()
    path = os.path.join(a.result_dir, "worker-%d.json" % rank)
    with open(path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(path + ".tmp", path)
    ps.shutdown()


# ---- the benchmark's own process ---------------------------------------------------------------------------------
def run_job(args, workers, servers, rows, steps, compute_ms, name, request_timeout_ms=60000):
    """One `pshard launch` of the workers; returns the job's figures and each worker's record."""
    cfg = CONFIG % {"batch": args.batch, "dense_lr": DENSE_LR, "table_lr": TABLE_LR,
                    "request_timeout_ms": request_timeout_ms}
    result_dir = support.fresh_dir("sparse-bench-results")
    script = [os.path.abspath(__file__), "worker", result_dir, "--rows", str(rows), "--dim", str(args.dim),
              "--bag", str(args.bag), "--batch", str(args.batch), "--hidden", str(args.hidden), "--warmup",
              str(args.warmup), "--steps", str(steps), "--threads", str(args.threads), "--seed", str(args.seed),
              "--compute-ms", repr(compute_ms)]
    load1 = os.getloadavg()[0]
    t = time.perf_counter()
    status, output, _ = support.launch(cfg, workers, servers, script, args.timeout, name)
    wall = time.perf_counter() - t
    if status != 0:
        sys.stderr.write(output[-6000:] + "\n")
        raise SystemExit("sparse_bench: %s (%d workers, %d servers) failed with status %d"
                         % (name, workers, servers, status))
    records = []
    for r in range(workers):
        with open(os.path.join(result_dir, "worker-%d.json" % r)) as f:
            records.append(json.load(f))
    seconds = max(w["end_time"] for w in records) - min(w["start_time"] for w in records)
    return {"workers": workers, "servers": servers, "rows": rows, "steps": steps, "batch": args.batch,
            "compute_ms": compute_ms, "samples_per_s": workers * steps * args.batch / seconds, "seconds": seconds,
            "job_wall_s": wall, "load1": load1, "worker_records": records}


def run_torch(args, torch):
    """PyTorch alone in this process, the pshard worker's loop with nn.EmbeddingBag(sparse=True)."""
    ids, y = batches(torch, args.seed, args.rows, args.bag, args.batch, args.warmup + args.steps)
    torch.manual_seed(args.seed)
    model = make_model(torch, torch.nn.EmbeddingBag(args.rows, args.dim, mode="sum", sparse=True), args.dim,
                       args.hidden)
    table = torch.optim.Adagrad([model.bag.weight], lr=TABLE_LR, eps=1e-10)
    dense = torch.optim.SGD(model.mlp.parameters(), lr=DENSE_LR)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    probe = torch.unique(ids[0])
    before = model.bag.weight.detach()[probe].clone()
    load1 = os.getloadavg()[0]
    t0 = None
    for s in range(args.warmup + args.steps):
        if s == args.warmup:
            t0 = time.perf_counter()
        loss = loss_fn(model(ids[s]), y[s])
        dense.zero_grad()
        table.zero_grad()
        loss.backward()
        dense.step()
        table.step()
    seconds = time.perf_counter() - t0
    moved = float((model.bag.weight.detach()[probe] - before).abs().max())
    return {"samples_per_s": args.steps * args.batch / seconds, "seconds": seconds, "load1": load1,
            "final_loss": float(loss), "rows_moved": moved}


def machine():
    mem = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, value = line.split(":", 1)
            if key in ("MemTotal", "MemAvailable"):
                mem[key] = int(value.split()[0])
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem_total_kib": mem.get("MemTotal"),
            "mem_available_kib": mem.get("MemAvailable"), "load1_at_start": os.getloadavg()[0]}



def check_run(what, r):
    """The completeness checks: a failure here is a broken run, not a slow one."""
    problems = []
    if not (r.get("samples_per_s") or 0) > 0:
        problems.append("samples/s %r" % r.get("samples_per_s"))
    for w in r.get("worker_records", [r]):
        if not math.isfinite(w.get("final_loss", float("nan"))):
            problems.append("loss %r" % w.get("final_loss"))
        if not (w.get("rows_moved") or 0) > 0:
            problems.append("the table's rows did not change (max |change| %r)" % w.get("rows_moved"))
    if problems:
        raise SystemExit("sparse_bench: %s: %s" % (what, "; ".join(problems)))


def mib(kib):
    return "-" if kib is None else "%.0f" % (kib / 1024.0)


def speed(args, torch):
    rounds = []
    for i in range(args.repeats):
        p = run_job(args, 1, 1, args.rows, args.steps, 0.0, "sparse-speed")
        check_run("pshard, round %d" % (i + 1), p)
        t = run_torch(args, torch)
        check_run("PyTorch, round %d" % (i + 1), t)
        rounds.append({"pshard": p, "torch": t, "ratio": p["samples_per_s"] / t["samples_per_s"]})
    best_p = max(r["pshard"]["samples_per_s"] for r in rounds)
    best_t = max(r["torch"]["samples_per_s"] for r in rounds)
    return {"rounds": rounds, "pshard_best_samples_per_s": best_p, "torch_best_samples_per_s": best_t,
            "ratio_of_bests": best_p / best_t}


def scaling(args):
    one = run_job(args, 1, 1, args.rows, args.compute_steps, args.compute_ms, "sparse-scaling-1")
    check_run("scaling, 1 worker", one)
    two = run_job(args, 2, 2, args.rows, args.compute_steps, args.compute_ms, "sparse-scaling-2")
    check_run("scaling, 2 workers", two)
    ideal = args.batch / (args.compute_ms / 1000.0) if args.compute_ms > 0 else None
    return {"one": one, "two": two, "speedup": two["samples_per_s"] / one["samples_per_s"], "target": 1.6,
            "ideal_per_worker_samples_per_s": ideal}


def scale(args, mach):
    need = args.scale_rows * args.dim * 4 * 2  # rows and one Adagrad state value per value
    avail = (mach["mem_available_kib"] or 0) * 1024
    if avail < need * 1.15:
        raise SystemExit("sparse_bench: --scale needs about %.1f GB for the table's rows and state (plus the "
                         "workers); MemAvailable is %.1f GB" % (need / 1e9, avail / 1e9))
    r = run_job(args, args.scale_workers, args.scale_servers, args.scale_rows, args.scale_steps, 0.0,
                "sparse-scale", request_timeout_ms=max(600000, args.timeout * 1000))
    check_run("scale", r)
    r["table_bytes"] = need
    r["servers_memory"] = r["worker_records"][0].get("servers", [])
    r["optimizer_start_s_max"] = max(w["optimizer_start_s"] for w in r["worker_records"])
    return r


def print_report(rec):
    a = rec["args"]
    m = rec["machine"]
    print("sparse_bench: commit %s, %s; %d CPUs (%s), %.1f GiB memory (%.1f available); load %.2f at the start"
          % (rec["commit"], rec["date"], m["nproc"], m["cpu"], m["mem_total_kib"] / 2 ** 20,
             m["mem_available_kib"] / 2 ** 20, m["load1_at_start"]))
    print("model (speed, scaling): EmbeddingBag %d x %d (sum, bags of %d Zipf-like ids) -> MLP %d-%d-1, BCE; "
          "batch %d per worker; rows adagrad, MLP sgd; %d threads; %d warm-up steps"
          % (a["rows"], a["dim"], a["bag"], a["dim"], a["hidden"], a["batch"], a["threads"], a["warmup"]))
    s = rec.get("speed")
    if s:
        print("\n1. speed, 1 worker + 1 server against PyTorch alone (%d timed steps; samples/s)" % a["steps"])
        print("%6s %12s %8s %12s %8s %8s" % ("round", "pshard", "load1", "torch", "load1", "ratio"))
        for i, r in enumerate(s["rounds"]):
            print("%6d %12.0f %8.2f %12.0f %8.2f %8.3f" % (i + 1, r["pshard"]["samples_per_s"], r["pshard"]["load1"],
                                                         r["torch"]["samples_per_s"], r["torch"]["load1"], r["ratio"]))
        print("%6s %12.0f %8s %12.0f %8s %8.3f" % ("best", s["pshard_best_samples_per_s"], "",
                                                   s["torch_best_samples_per_s"], "", s["ratio_of_bests"]))
    c = rec.get("scaling")
    if c:
        print("\n2. scaling with %.1f ms of simulated compute per step (%d timed steps; ideal %s samples/s per "
              "worker)" % (a["compute_ms"], a["compute_steps"], "%.0f" % c["ideal_per_worker_samples_per_s"]
                           if c["ideal_per_worker_samples_per_s"] else "-"))
        print("%20s %12s %8s" % ("job", "samples/s", "load1"))
        for key, label in (("one", "1 worker, 1 server"), ("two", "2 workers, 2 servers")):
            print("%20s %12.0f %8.2f" % (label, c[key]["samples_per_s"], c[key]["load1"]))
        print("speedup %.3f (target >= %.1f)" % (c["speedup"], c["target"]))
    g = rec.get("scale")
    if g:
        print("\n3. scale: %d x %d table (%.1f GB of rows + adagrad state), %d servers, %d workers, %d steps: "
              "%.0f samples/s, load %.2f before" % (g["rows"], a["dim"], g["table_bytes"] / 1e9, g["servers"],
                                                    g["workers"], g["steps"], g["samples_per_s"], g["load1"]))
        for w in g["worker_records"]:
            print("  worker %d: peak RSS %s MiB; DistributedOptimizer(model), the servers making the rows: %.2f s"
                  % (w["rank"], mib(w["vmhwm_kib"]), w["optimizer_start_s"]))
        for sv in g["servers_memory"]:
            print("  server pid %d (%s): RSS %s MiB, peak RSS %s MiB" % (sv["pid"], sv["bind"], mib(sv["vmrss_kib"]),
                                                                       mib(sv["vmhwm_kib"])))
        if not g["servers_memory"]:
            print("  servers: not found among the worker's siblings (no RSS)")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        return worker(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pshard", default=os.environ.get("PSHARD_BIN", ""), help="pshard executable ($PSHARD_BIN)")
    ap.add_argument("--rows", type=int, default=1_000_000, help="table rows (speed and scaling)")
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--bag", type=int, default=8, help="ids per bag")
    ap.add_argument("--batch", type=int, default=256, help="bags per step and worker")
    ap.add_argument("--hidden", type=int, default=64, help="the MLP's hidden width")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps before the timed ones")
    ap.add_argument("--steps", type=int, default=300, help="timed steps of the speed measurement")
    ap.add_argument("--repeats", type=int, default=3, help="pshard / PyTorch alternations of the speed measurement")
    ap.add_argument("--compute-ms", type=float, default=20.0, help="simulated dense compute per step (scaling)")
    ap.add_argument("--compute-steps", type=int, default=100, help="timed steps of the scaling measurement")
    ap.add_argument("--threads", type=int, default=1, help="compute threads of each worker and of PyTorch alone")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-speed", action="store_true", help="leave out measurement 1")
    ap.add_argument("--skip-scaling", action="store_true", help="leave out measurement 2")
    ap.add_argument("--scale", action="store_true", help="also measurement 3 (needs the table's memory)")
    ap.add_argument("--scale-rows", type=int, default=100_000_000)
    ap.add_argument("--scale-servers", type=int, default=4)
    ap.add_argument("--scale-workers", type=int, default=2)
    ap.add_argument("--scale-steps", type=int, default=300)
    ap.add_argument("--timeout", type=int, default=600, help="seconds one pshard job may take")
    ap.add_argument("--out", metavar="FILE", help="write every figure as JSON")
    args = ap.parse_args()
    if not args.pshard or not os.path.exists(args.pshard):
        raise SystemExit("sparse_bench: the pshard executable was not found (--pshard or $PSHARD_BIN)")
    for name in ("rows", "dim", "bag", "batch", "hidden", "steps", "repeats", "compute_steps", "threads",
                 "scale_rows", "scale_servers", "scale_workers", "scale_steps"):
        if getattr(args, name) < 1:
            raise SystemExit("sparse_bench: --%s must be >= 1" % name.replace("_", "-"))
    support.PSHARD_BIN = os.path.abspath(args.pshard)  # its jobs' workers load the C library beside it
    import torch
    torch.set_num_threads(args.threads)

    rec = {"benchmark": "sparse_bench", "commit": commit(),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "argv": sys.argv, "args": vars(args), "machine": machine(), "torch": torch.__version__,
           "dense_lr": DENSE_LR, "table_lr": TABLE_LR}
    if not args.skip_speed:
        rec["speed"] = speed(args, torch)
    if not args.skip_scaling:
        rec["scaling"] = scaling(args)
    if args.scale:
        rec["scale"] = scale(args, rec["machine"])
    rec["end_date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print_report(rec)
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            json.dump(rec, f, indent=1)
        os.replace(args.out + ".tmp", args.out)
        print("\nwrote %s" % args.out)
    support.passed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
