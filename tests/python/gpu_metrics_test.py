"""A Python worker's GPU utilisation and memory, sampled through NVML by the C API, reach metrics.jsonl and `pshard
report`. NVML is the stand-in library of the tests (tests/support/nvml_stub.c, named by PSHARD_NVML_LIBRARY: GPU 0
always 42 % busy with 1.5 GiB in use); without NVML the same job records no GPU fields and the report says n/a."""
import json
import os
import sys

import torch
import torch.nn.functional as F

import support

STUB = os.environ.get("PSHARD_NVML_STUB", "")
STUB_MEM = 3 << 29  # 1.5 GiB
CONFIG = """
[optimizer]
name = "sgd"
lr = 0.05
momentum = 0.0

[train]
batch_size = 8
epochs = 2

[cluster]
mode = "sync"
heartbeat_interval_ms = 200
heartbeat_timeout_ms = 4000
"""


def worker():
    import pshard.torch as ps
    ps.init()
    torch.manual_seed(0)
    net = torch.nn.Linear(6, 3)
    opt = ps.DistributedOptimizer(net, steps_per_epoch=4)
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    for epoch in range(2):
        for _ in range(4):
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        ps.report(epoch=epoch, train_loss=float(loss))
    ps.shutdown()


def job(name, nvml):
    os.environ["PSHARD_NVML_LIBRARY"] = nvml
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"  # the worker has a GPU in view: the C API samples it
    try:
        status, output, run_dir = support.launch(CONFIG, 2, 1, [os.path.abspath(__file__), "worker"], 90, name)
    finally:
        del os.environ["PSHARD_NVML_LIBRARY"]
        del os.environ["CUDA_VISIBLE_DEVICES"]
    support.expect(status == 0, "%s: the job failed (%d)" % (name, status), output)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        events = [json.loads(line) for line in f]
    code, text = support.run([support.PSHARD_BIN, "report", run_dir], 60)
    support.expect(code == 0, "%s: pshard report failed" % name, text)
    with open(os.path.join(run_dir, "report", "report.md")) as f:
        lines = f.read().splitlines()
    header = [c.strip() for c in next(l for l in lines if l.startswith("| run | label")).split("|")]
    row = [c.strip() for c in [l for l in lines if l.startswith("| run")][1].split("|")]
    table = dict(zip(header, row))
    return events, table, output


def with_stub():
    events, table, output = job("nvml-stub", STUB)
    epochs = [e for e in events if e["event"] == "epoch"]
    support.expect(len(epochs) == 2, "with the stub: epoch lines %s" % epochs, output)
    for e in epochs + [events[-1]]:
        support.expect(e.get("gpu_util_pct") == 42 and e.get("gpu_mem_peak_bytes") == STUB_MEM,
                       "with the stub: GPU fields of %s" % e, output)
    for w in epochs[0]["workers"]:
        support.expect(w.get("gpu_util_pct") == 42, "with the stub: worker entry %s" % w, output)
    support.expect(table["GPU util (%)"] == "42" and table["GPU mem (MiB)"] == "1536",
                   "with the stub: report row %s" % table, output)
    print("NVML stub: gpu_util_pct 42 and gpu_mem_peak_bytes 1.5 GiB in every epoch, the summary and pshard report")


def without_nvml():
    events, table, output = job("no-nvml", "/nonexistent/libnvidia-ml.so.1")
    for e in events:
        support.expect("gpu_util_pct" not in e and "gpu_mem_peak_bytes" not in e,
                       "without NVML: a GPU field in %s" % e, output)
    support.expect(events[-1]["event"] == "summary", "without NVML: no summary", output)
    support.expect(table["GPU util (%)"] == "n/a" and table["GPU mem (MiB)"] == "n/a",
                   "without NVML: report row %s" % table, output)
    print("no NVML: the job runs, no GPU fields, the report says n/a")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker()
    else:
        support.expect(os.path.isfile(STUB), "PSHARD_NVML_STUB does not name the stub library: %r" % STUB)
        with_stub()
        without_nvml()
        support.passed()
