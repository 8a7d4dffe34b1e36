#!/usr/bin/python3
"""Runs the headline benchmarks of docs/PERFORMANCE.md that fit a CPU machine and writes one JSON file
(scripts/bench-report.sh runs it; tools/bench_table.py turns the JSON into the table).

Each benchmark is run once, in the order below, with the 1-minute load average read just before it; the JSON keeps
the machine (CPU model, cores), the commit, the date, the kernels (oneDNN's own info lines from one
`pshard bench compute` run with ONEDNN_VERBOSE=1, PyTorch's build configuration, OPENBLAS_CORETYPE), every
benchmark's command, load, duration and parsed output, and one row per headline measure. Measures that cannot run
here (GPU rows, runs too long for the report) are carried over from the previous report, or from
docs/PERFORMANCE.md's table when there is none, with their original date and the reason: `status` is "measured" for
rows of this run and "carried" for the others.

  tools/bench_report.py --pshard build/bin/pshard --out docs/results/bench-report-YYYY-MM-DD.json
  tools/bench_report.py --only kv,compute --out ...   # a subset (the other rows are carried over)
"""
import argparse
import csv
import datetime
import glob
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))
import bench_table  # noqa: E402

PY = "/usr/bin/python3"

# Every headline measure, in table order: (id, measure). Rows that no benchmark below measures are carried over.
MEASURES = [
    ("compute_resnet20_t1", "CPU training step, ResNet-20, batch 64, 1 thread (samples/s)"),
    ("compute_resnet20_t2", "CPU training step, ResNet-20, batch 64, 2 threads (samples/s)"),
    ("compute_lenet_t1", "CPU training step, LeNet, batch 64, 1 thread (samples/s)"),
    ("compute_mlp_t1", "CPU training step, MLP 784-256-128-10, batch 64, 1 thread (samples/s)"),
    ("compute_lowest", "CPU, lowest ratio over the 3 models, batches 32-512, 1 and 2 threads"),
    ("compute_rss_resnet20", "CPU peak RSS, ResNet-20, batch 64, 1 thread (MiB)"),
    ("gpu_resnet20", "GPU training step, ResNet-20, batch 128 (images/s, `bench compute --device cuda`)"),
    ("gpu_kernel_time", "GPU kernel time per ResNet-20 batch-128 step (ms)"),
    ("gpu_ps_overhead", "GPU PS overhead: 1 CUDA worker + 1 server over `pshard train` on the GPU, LeNet (samples/s)"),
    ("gpu_resnet50_bf16", "GPU ResNet-50 training, bf16, batch 128 (images/s, GPU SGD)"),
    ("gpu_resnet50_fp16", "GPU ResNet-50 training, fp16, batch 128 (images/s, GPU SGD)"),
    ("gpu_resnet20_fp16", "GPU ResNet-20 training, fp16 over fp32, batch 128 (images/s, GPU SGD)"),
    ("gpu_accuracy_lenet", "GPU LeNet, Fashion-MNIST test accuracy after 5 epochs, bf16 / fp16 (`pshard train`)"),
    ("gpu_accuracy_resnet20", "GPU ResNet-20, Fashion-MNIST test accuracy after 3 epochs, bf16 / fp16 (`pshard train`)"),
    ("kv_gbps_tcp", "64 MiB push+pull, 1 worker + 1 server, TCP (GB/s)"),
    ("kv_gbps_shm", "64 MiB push+pull, 1 worker + 1 server, shared memory (GB/s)"),
    ("kv_rtt_tcp", "4 KiB push_pull round trip, p50, TCP (us)"),
    ("kv_rtt_shm", "4 KiB push_pull round trip, p50, shared memory (us)"),
    ("kv_server_rss", "Server peak RSS in the 64 MiB benchmark, SGD, TCP (MiB)"),
    ("kv_curve", "64 MiB push+pull with CurveZMQ (GB/s)"),
    ("compression_bytes", "Bytes pushed and pulled per step with bf16 both ways (Fashion-MNIST MLP, 2 workers + 2 "
                          "servers)"),
    ("ps_overhead_bf16", "PS overhead: sync 1 worker + 1 server over `pshard train`, MLP, bf16 both ways"),
    ("scaling_mlp_bf16", "MLP scaling: 2 workers over 1 worker, 1 server, bf16 both ways (speedup)"),
    ("ddp_cpp", "C++ workers, sync 2 workers + 1 server, MLP (samples/s)"),
    ("ddp_python", "Python workers (`pshard.torch`), same job (samples/s)"),
    ("python_vs_cpp", "Python workers against C++ workers, same job"),
    ("torch_step", "`pshard.torch` step, MLP, 1 worker + 1 server (ms per step, wall)"),
    ("profile_resnet50", "Profile ResNet-50 (simulated compute, batch 64), 2 workers + 1 server over DDP (samples/s)"),
    ("host_aggregation_2x2", "Profile ResNet-50, 2 hosts x 2 workers on a 1 Gbit/s link (`tc`), one push per host "
                             "(samples/s; efficiency per worker against 2 hosts x 1)"),
    ("host_aggregation_bytes", "Same job: network bytes per host and step, in models (fp32 model bytes)"),
    ("trace_overhead", "Timeline: every step traced, MLP sync 2 workers + 1 server (samples/s, medians)"),
    ("idle_server_rss", "Idle `pshard server` RSS, CUDA-enabled build (MiB)"),
    ("help_time", "`pshard --help` wall time (ms)"),
]

# Rows the report does not measure, and why (shown in the table).
NOT_HERE = {
    "compute_lowest": "the full sweep (3 models x 4 batches x 2 thread counts) takes about 10 minutes",
    "gpu_resnet20": "needs a GPU (scripts/gpu-check.sh)",
    "gpu_kernel_time": "needs a GPU (scripts/gpu-check.sh)",
    "gpu_ps_overhead": "needs a GPU (scripts/gpu-check.sh)",
    "gpu_resnet50_bf16": "needs a GPU (scripts/gpu-check.sh)",
    "gpu_resnet50_fp16": "needs a GPU (scripts/gpu-check.sh)",
    "gpu_resnet20_fp16": "needs a GPU (scripts/gpu-check.sh)",
    "gpu_accuracy_lenet": "needs a GPU (scripts/gpu-check.sh)",
    "gpu_accuracy_resnet20": "needs a GPU (scripts/gpu-check.sh)",
    "compression_bytes": "10-epoch accuracy runs of compression_accuracy_test",
    "idle_server_rss": "needs a CUDA-enabled build",
    "help_time": "its anchor is an older build (57a6a7d)",
    "host_aggregation_2x2": "needs root (network namespaces and tc)",
    "host_aggregation_bytes": "needs root (network namespaces and tc)",
}
# Older names of a measure in docs/PERFORMANCE.md, for carrying a row from the table written before the reports.
OLD_NAMES = {
    "compute_resnet20_t2": ["same, 2 threads"],
    "kv_gbps_tcp": ["64 MiB push+pull, 1 worker + 1 server (GB/s)"],
    "kv_rtt_tcp": ["4 KiB push_pull round trip, p50 (us)"],
    "kv_server_rss": ["Server peak RSS in the 64 MiB benchmark, SGD (MiB)"],
}


def load1():
    return round(os.getloadavg()[0], 2)


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc)


def fmt_num(x):
    """1234567 -> '1,234,567'; small numbers keep 2-3 significant decimals."""
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return "{:,.0f}".format(x)
    if abs(x) >= 100:
        return "%.0f" % x
    if abs(x) >= 10:
        return "%.1f" % x
    return "%.2f" % x


def fmt_range(xs):
    xs = sorted(xs)
    if not xs:
        return "-"
    if len(xs) == 1 or fmt_num(xs[0]) == fmt_num(xs[-1]):
        return fmt_num(xs[0])
    return "%s-%s" % (fmt_num(xs[0]), fmt_num(xs[-1]))


def as_list(x):
    return x if isinstance(x, list) else [x]


def json_lines(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


class Runner:
    def __init__(self, args):
        self.args = args
        self.benchmarks = []
        self.rows = {}
        self.when = {}

    def run(self, name, cmd, env=None, timeout=900):
        """Runs one benchmark command; returns its stdout (stderr goes to the record's tail on failure)."""
        # As a reader types it from the source directory: relative paths, the scripts run as executables.
        shown = " ".join(os.path.relpath(c, REPO) if c.startswith(REPO + "/") else c
                         for c in (cmd[1:] if cmd[0] == PY else cmd))
        rec = {"name": name, "command": shown, "load1_before": load1(), "started": now_utc().strftime("%H:%M:%S")}
        sys.stderr.write("bench-report: %s (load %.2f): %s\n" % (name, rec["load1_before"], shown))
        t0 = time.time()
        full_env = dict(os.environ)
        full_env.update(env or {})
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
                               timeout=timeout, cwd=REPO)
            rec["rc"], out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rec["rc"], out, err = "timeout", e.stdout or "", e.stderr or ""
            out = out if isinstance(out, str) else out.decode(errors="replace")
            err = err if isinstance(err, str) else err.decode(errors="replace")
        rec["seconds"] = round(time.time() - t0, 1)
        rec["load1_after"] = load1()
        if rec["rc"] != 0:
            rec["stderr_tail"] = (err or "")[-2000:]
            sys.stderr.write("bench-report: %s failed (%s): %s\n" % (name, rec["rc"], (err or out)[-1000:]))
        self.benchmarks.append(rec)
        return rec, out

    def row(self, rid, pshard, anchor, ratio, rec, note="", loads=None):
        """loads: the load averages before each run of a measure that several runs make (default: rec's)."""
        loads = sorted(loads or [rec["load1_before"]])
        shown = "%.2f" % loads[0] if loads[0] == loads[-1] else "%.2f-%.2f" % (loads[0], loads[-1])
        machine = "%s, load %s" % (self.args.machine_short, shown)
        self.rows[rid] = {"pshard": pshard, "anchor": anchor, "ratio": ratio, "command": rec["command"],
                          "machine_load": machine, "load1_before": rec["load1_before"], "benchmark": rec["name"],
                          "note": note}


def bench_kv(r, pshard):
    results, loads = {}, {}
    for transport in ("tcp", "shm"):
        runs = []
        loads[transport] = []
        for i in range(r.args.kv_runs):
            cmd = [pshard, "bench", "kv", "--servers", "1", "--workers", "1", "--model-mib", "64", "--slice-kib",
                   "1024", "--rtt-iters", "20000", "--transport", transport, "--json"]
            rec, out = r.run("kv_%s_%d" % (transport, i + 1), cmd)
            got = json_lines(out)
            rec["results"] = got
            if rec["rc"] == 0 and got:
                runs.append(got[-1])
                loads[transport].append(rec["load1_before"])
        results[transport] = (runs, rec)
    for transport, (runs, rec) in results.items():
        if not runs:
            continue
        gb = [x["push_pull_gbps"] for x in runs]
        tcp = [x["tcp_baseline_gbps"] for x in runs]
        ratios = [x["ratio"] for x in runs]
        r.row("kv_gbps_" + transport, fmt_range(gb), "raw TCP loopback stream, median of 5: " + fmt_range(tcp),
              "**%.2f** (median; %s)" % (statistics.median(ratios), fmt_range(ratios)), rec,
              note="%d runs" % len(runs), loads=loads[transport])
        p50 = [x["rtt_4k_us_p50"] for x in runs]
        zmq = [x["rtt_4k_zmq_us_p50"] for x in runs]
        rr = [x["rtt_ratio"] for x in runs if x.get("rtt_ratio")]
        r.row("kv_rtt_" + transport, fmt_range(p50), "bare ZeroMQ DEALER/ROUTER ping-pong: " + fmt_range(zmq),
              "**%.2f** (median; %s)" % (statistics.median(rr), fmt_range(rr)) if rr else "-", rec,
              note="%d runs" % len(runs), loads=loads[transport])
        if transport == "tcp":
            rss = [max(as_list(x["server_peak_rss_mib"])) for x in runs]  # one figure per server
            bound = min(as_list(runs[0]["server_rss_bound_mib"]))
            r.row("kv_server_rss", fmt_range(rss),
                  "bound: 1.25 x (weights + state + one aggregation buffer) + 100 MiB = %s" % fmt_num(bound),
                  "within" if all(all(as_list(x["server_rss_within_bound"])) for x in runs) else "**over the bound**", rec,
                  note="%d runs" % len(runs), loads=loads[transport])
    tcp_runs = results.get("tcp", ([], None))[0]
    cmd = [pshard, "bench", "kv", "--servers", "1", "--workers", "1", "--model-mib", "64", "--slice-kib", "1024",
           "--rounds", "16", "--rtt-iters", "200", "--transport", "tcp", "--curve", "--json"]
    rec, out = r.run("kv_curve", cmd)
    got = json_lines(out)
    rec["results"] = got
    if rec["rc"] == 0 and got and tcp_runs:
        c = got[-1]["push_pull_gbps"]
        plain = statistics.median(x["push_pull_gbps"] for x in tcp_runs)
        r.row("kv_curve", fmt_num(c), "plain sockets, the TCP runs above: %s" % fmt_num(plain), "%.2f" % (c / plain),
              rec)


def bench_compute(r, pshard):
    script = os.path.join(REPO, "tests/bench/compute_vs_pytorch.py")
    cmd = [PY, script, "--pshard", pshard, "--models", "resnet20", "--threads", "1,2", "--batch", "64", "--rounds",
           str(r.args.compute_rounds), "--seconds", "1.5", "--json"]
    rec, out = r.run("compute_resnet20", cmd, timeout=600)
    got = json_lines(out)
    rec["results"] = got
    for x in got:
        if x["model"] == "resnet20" and x["batch"] == 64:
            anchor = "PyTorch %s: %s" % (r.args.torch_version, fmt_num(x["pytorch_samples_per_s"]))
            r.row("compute_resnet20_t%d" % x["threads"], fmt_num(x["pshard_samples_per_s"]), anchor,
                  "**%.2f**" % x["ratio"], rec)
            if x["threads"] == 1:
                r.row("compute_rss_resnet20", fmt_num(x["pshard_peak_rss_mib"]),
                      "PyTorch: %s" % fmt_num(x["pytorch_peak_rss_mib"]),
                      "%.2f" % (x["pshard_peak_rss_mib"] / x["pytorch_peak_rss_mib"]), rec)
    cmd = [PY, script, "--pshard", pshard, "--models", "lenet,mlp", "--threads", "1", "--batch", "64", "--rounds",
           str(r.args.compute_rounds), "--seconds", "1.5", "--json"]
    rec, out = r.run("compute_lenet_mlp", cmd, timeout=600)
    got = json_lines(out)
    rec["results"] = got
    for x in got:
        anchor = "PyTorch %s: %s" % (r.args.torch_version, fmt_num(x["pytorch_samples_per_s"]))
        r.row("compute_%s_t1" % x["model"], fmt_num(x["pshard_samples_per_s"]), anchor, "**%.2f**" % x["ratio"], rec)


def bench_python(r, pshard):
    env = {"PSHARD_LIBRARY": r.args.library}
    cmd = [PY, os.path.join(REPO, "tests/bench/ps_vs_ddp.py"), "--pshard", pshard, "--workers", "2", "--servers", "1",
           "--batch", "64", "--rounds", str(r.args.ddp_rounds), "--python", "--json"]
    rec, out = r.run("ps_vs_ddp", cmd, env=env, timeout=900)
    got = json_lines(out)
    rec["results"] = got
    if got:
        p = [x["pshard_samples_per_s"] for x in got]
        d = [x["ddp_samples_per_s"] for x in got]
        ratio = [x["ratio"] for x in got]
        r.row("ddp_cpp", fmt_range(p), "PyTorch DDP (gloo, 2 processes): " + fmt_range(d),
              "**median %.2f** (%s)" % (statistics.median(ratio), fmt_range(ratio)), rec)
        if "python_samples_per_s" in got[0]:
            y = [x["python_samples_per_s"] for x in got]
            yd = [x["ratio_python_ddp"] for x in got]
            yc = [x["ratio_python_cpp"] for x in got]
            r.row("ddp_python", fmt_range(y), "DDP: " + fmt_range(d),
                  "**median %.2f** (%s)" % (statistics.median(yd), fmt_range(yd)), rec)
            r.row("python_vs_cpp", fmt_range(y), "C++ workers: " + fmt_range(p),
                  "median %.2f (%s)" % (statistics.median(yc), fmt_range(yc)), rec)

    cmd = [PY, os.path.join(REPO, "tests/bench/torch_step_cost.py"), "--pshard", pshard, "--workers", "1", "--steps",
           "500", "--rounds", "3"]
    rec, out = r.run("torch_step_cost", cmd, env=env, timeout=600)
    pat = re.compile(r"^\s*(\d+)\s+([\d.]+) /\s+([\d.]+)\s+([\d.]+) /\s+([\d.]+) /\s+([\d.]+)\s+([\d.]+)\s*$")
    rounds = [m.groups() for m in (pat.match(line) for line in out.splitlines()) if m]
    rec["results"] = [{"round": int(g[0]), "torch_wall_ms": float(g[1]), "pshard_wall_ms": float(g[3])}
                      for g in rounds]
    if rec["results"]:
        t = statistics.median(x["torch_wall_ms"] for x in rec["results"])
        s = statistics.median(x["pshard_wall_ms"] for x in rec["results"])
        r.row("torch_step", "%.2f" % s, "torch alone, local SGD: %.2f" % t, "-", rec,
              note="medians of %d rounds" % len(rec["results"]))


def bench_jobs(r, pshard):
    bf16 = ["cluster.compression=bf16", "cluster.pull_precision=bf16"]
    cmd = [PY, os.path.join(REPO, "tests/bench/ps_overhead.py"), "--pshard", pshard, "--models", "mlp", "--rounds",
           "3", "--json"]
    for kv in bf16:
        cmd += ["--launch-set", kv]
    rec, out = r.run("ps_overhead_bf16", cmd, timeout=900)
    got = json_lines(out)
    rec["results"] = got
    if got:
        ratio = [x["ratio"] for x in got]
        r.row("ps_overhead_bf16", fmt_range([x["launch_samples_per_s"] for x in got]),
              "`pshard train`: " + fmt_range([x["train_samples_per_s"] for x in got]),
              "**median %.2f** (%s)" % (statistics.median(ratio), fmt_range(ratio)), rec)

    out_dir = tempfile.mkdtemp(prefix="bench-report-scaling.")
    cmd = [pshard, "bench", "scaling", "--workers", "1,2", "--servers", "1", "--config",
           os.path.join(REPO, "configs/fmnist_mlp.toml"), "--out", out_dir, "--set", "train.epochs=1", "--set",
           "data.test_size=1000", "--set", "train.threads=1"]
    for kv in bf16:
        cmd += ["--set", kv]
    rec, out = r.run("scaling_mlp_bf16", cmd, timeout=900)
    rec["command"] = rec["command"].replace(out_dir, "DIR")
    files = glob.glob(os.path.join(out_dir, "**", "scaling.csv"), recursive=True)
    if rec["rc"] == 0 and files:
        with open(files[0]) as f:
            got = list(csv.DictReader(f))
        rec["results"] = got
        two = [x for x in got if x.get("workers") == "2"]
        one = [x for x in got if x.get("workers") == "1"]
        if two and one:
            r.row("scaling_mlp_bf16", "%.2f" % float(two[0]["speedup"]),
                  "the 1-worker job of the same command: %s samples/s" % fmt_num(float(one[0]["samples_per_s"])),
                  "-", rec, note="2 workers: %s samples/s" % fmt_num(float(two[0]["samples_per_s"])))

    cmd = [PY, os.path.join(REPO, "tests/bench/trace_overhead.py"), "--pshard", pshard, "--model", "mlp", "--samples",
           "60000", "--rounds", str(r.args.trace_rounds)]
    rec, out = r.run("trace_overhead", cmd, timeout=900)
    got = json_lines(out)
    rec["results"] = got
    if got:
        x = got[-1]
        r.row("trace_overhead", fmt_num(x["samples_per_s_traced"]), "tracing off: " + fmt_num(x["samples_per_s_off"]),
              "**%.3f**" % x["ratio"], rec)

    cmd = [PY, os.path.join(REPO, "tests/bench/ddp_profile.py"), "--profile", os.path.join(REPO, "profiles/resnet50.json"),
           "--workers", "1,2", "--steps", str(r.args.profile_steps), "--pshard", pshard, "--json"]
    rec, out = r.run("ddp_profile_resnet50", cmd, timeout=900)
    got = json_lines(out)
    rec["results"] = got
    two = [x for x in got if x.get("workers") == 2 and "pshard_samples_per_s" in x]
    if two:
        x = two[0]
        r.row("profile_resnet50", "%s (efficiency %.2f)" % (fmt_num(x["pshard_samples_per_s"]), x["pshard_efficiency"]),
              "PyTorch DDP (gloo): %s (efficiency %.2f)" % (fmt_num(x["ddp_samples_per_s"]), x["ddp_efficiency"]),
              "**%.2f**" % x["ratio"], rec, note="%d steps per worker" % x["steps"])


def bench_hosts(r, pshard):
    """One push per host between two network-namespace hosts on a tc-limited link (root only: skipped otherwise)."""
    if os.geteuid() != 0:
        sys.stderr.write("bench-report: hosts: not root, the host_aggregation rows are carried over\n")
        return
    out_json = tempfile.mktemp(prefix="bench-report-hosts.", suffix=".json")
    cmd = ["bash", os.path.join(REPO, "tests/bench/host_aggregation_netns.sh"), "--pshard", pshard, "--rate", "1gbit",
           "--steps", "8", "--json", out_json]
    rec, out = r.run("host_aggregation_netns", cmd, timeout=900)
    rec["command"] = rec["command"].replace(out_json, "FILE")
    if rec["rc"] != 0 or not os.path.exists(out_json):
        return
    with open(out_json) as f:
        got = json.load(f)
    os.unlink(out_json)
    rec["results"] = got
    jobs = {j["job"]: j for j in got["jobs"]}
    auto, off = jobs.get("2x2-auto"), jobs.get("2x2-off")
    if not (auto and off):
        return
    loads = [j["load_1min"] for j in got["jobs"]]
    r.row("host_aggregation_2x2", "%s (efficiency %.2f)" % (fmt_num(auto["samples_per_s"]), auto["efficiency"]),
          "each worker pushing its own (`off`): %s (efficiency %.2f)" % (fmt_num(off["samples_per_s"]),
                                                                         off["efficiency"]),
          "**%.2f**" % (auto["samples_per_s"] / off["samples_per_s"]), rec, loads=loads,
          note="%d steps per worker" % auto["steps"])
    r.row("host_aggregation_bytes", "%.2f" % auto["network_models_per_host_step"],
          "`off`: %.2f; target <= 2.2" % off["network_models_per_host_step"],
          "%.2f" % (auto["network_models_per_host_step"] / off["network_models_per_host_step"]), rec, loads=loads)


def kernels(pshard):
    """What the compute kernels are: oneDNN's info lines and the implementations it picked, PyTorch's build."""
    out = {"OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "")}
    env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1")
    p = subprocess.run([pshard, "bench", "compute", "--model", "resnet20", "--batch", "16", "--threads", "1", "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=300)
    info, impls = [], set()
    for line in p.stdout.splitlines():
        f = line.split(",")
        if line.startswith(("onednn_verbose,info", "dnnl_verbose,info")):
            if line not in info:
                info.append(line)
        elif line.startswith(("onednn_verbose,exec", "dnnl_verbose,exec")) and len(f) > 4:
            impls.add("%s: %s" % (f[3], f[4]))  # exec,cpu,PRIMITIVE,IMPLEMENTATION,...
    out["pshard_onednn_info"] = info
    out["pshard_onednn_implementations"] = sorted(impls)
    # OpenBLAS as PyTorch's process loaded it: its own configuration line names the core it picked.
    probe = ("import ctypes, torch\n"
             "libs = sorted({l.split()[-1] for l in open('/proc/self/maps') if 'openblas' in l and '.so' in l})\n"
             "for p in libs:\n"
             "    try:\n"
             "        f = ctypes.CDLL(p).openblas_get_config\n"
             "        f.restype = ctypes.c_char_p\n"
             "        print('OPENBLAS ' + f().decode())\n"
             "        break\n"
             "    except (OSError, AttributeError):\n"
             "        pass\n"
             "print(torch.__version__)\n"
             "print(torch.__config__.show())\n")
    q = subprocess.run([PY, "-c", probe], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    lines = [l for l in q.stdout.splitlines() if not l.startswith("OPENBLAS ")]
    out["pytorch_openblas"] = next((l[9:] for l in q.stdout.splitlines() if l.startswith("OPENBLAS ")), "")
    out["pytorch_version"] = lines[0].strip() if lines else ""
    out["pytorch_config"] = [l.strip() for l in lines[1:] if re.search(r"BLAS|MKL|oneDNN|LAPACK|CPU capability",
                                                                         l, re.I)]
    return out


def machine():
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    flags = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = line
                break
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) / 1024 / 1024
    return {"cpu_model": model, "cores": os.cpu_count(), "avx512": " avx512f " in flags,
            "memory_gib": round(mem, 1), "kernel": platform.release()}


def git(*a):
    return subprocess.run(["git"] + list(a), cwd=REPO, stdout=subprocess.PIPE, text=True).stdout.strip()


def previous_rows(out_path):
    """The rows of the newest earlier report, or of docs/PERFORMANCE.md's table when there is none, by id."""
    prev = bench_table.latest_report(os.path.join(REPO, "docs", "results"), exclude=out_path)
    if prev:
        with open(prev) as f:
            doc = json.load(f)
        return {x["id"]: x for x in doc["rows"]}, os.path.relpath(prev, REPO)
    rows = bench_table.read_legacy_table(os.path.join(REPO, "docs", "PERFORMANCE.md"))
    by_name = {x["measure"]: x for x in rows}
    out = {}
    for rid, measure in MEASURES:
        for name in [measure] + OLD_NAMES.get(rid, []):
            if name in by_name:
                out[rid] = dict(by_name[name], id=rid, measure=measure)
                break
    return out, "docs/PERFORMANCE.md"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pshard", default=os.path.join(REPO, "build", "bin", "pshard"))
    ap.add_argument("--library", default="", help="libpshard_c.so (default: next to the executable's lib/)")
    ap.add_argument("--out", required=True, help="the JSON file to write")
    ap.add_argument("--only", default="", help="comma list of kv, compute, python, jobs, hosts (default: all)")
    ap.add_argument("--kv-runs", type=int, default=3, help="runs of `bench kv` per transport")
    ap.add_argument("--compute-rounds", type=int, default=3)
    ap.add_argument("--ddp-rounds", type=int, default=5)
    ap.add_argument("--trace-rounds", type=int, default=6)
    ap.add_argument("--profile-steps", type=int, default=10)
    args = ap.parse_args()
    pshard = os.path.abspath(args.pshard)
    if not os.access(pshard, os.X_OK):
        raise SystemExit("bench-report: no pshard executable at %s (scripts/build.sh)" % pshard)
    args.library = args.library or os.path.join(os.path.dirname(os.path.dirname(pshard)), "lib", "libpshard_c.so")
    start = now_utc()
    m = machine()
    args.machine_short = "%d-core VM" % m["cores"]
    k = kernels(pshard)
    args.torch_version = ".".join(k["pytorch_version"].split("+")[0].split(".")[:2]) or "?"

    r = Runner(args)
    groups = {"kv": bench_kv, "compute": bench_compute, "python": bench_python, "jobs": bench_jobs, "hosts": bench_hosts}
    chosen = [g for g in args.only.split(",") if g] or list(groups)
    for g in chosen:
        groups[g](r, pshard)
    end = now_utc()

    commit = git("rev-parse", "--short", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    when = "%s %s-%s" % (start.strftime("%Y-%m-%d"), start.strftime("%H:%M"), end.strftime("%H:%M"))
    prev, prev_source = previous_rows(args.out)
    rows = []
    for rid, measure in MEASURES:
        if rid in r.rows:
            row = dict(r.rows[rid], id=rid, measure=measure, status="measured", when=when, commit=commit)
        elif rid in prev:
            row = dict(prev[rid], id=rid, measure=measure, status="carried",
                       reason=NOT_HERE.get(rid, "not measured in this run"),
                       carried_from=prev[rid].get("carried_from", prev_source))
        else:
            continue
        rows.append(row)
    failed = [b["name"] for b in r.benchmarks if b["rc"] != 0]
    doc = {
        "schema": 1,
        "date": start.strftime("%Y-%m-%d"),
        "started_utc": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "finished_utc": end.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seconds": round((end - start).total_seconds()),
        "commit": commit,
        "commit_dirty": dirty,
        "machine": m,
        "kernels": k,
        "load1_at_start": r.benchmarks[0]["load1_before"] if r.benchmarks else load1(),
        "settings": {"kv_runs": args.kv_runs, "compute_rounds": args.compute_rounds, "ddp_rounds": args.ddp_rounds,
                     "trace_rounds": args.trace_rounds, "profile_steps": args.profile_steps, "groups": chosen},
        "failed": failed,
        "benchmarks": r.benchmarks,
        "rows": rows,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    sys.stderr.write("bench-report: wrote %s (%d s, %d benchmarks, %d failed)\n" % (
        args.out, doc["seconds"], len(r.benchmarks), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
