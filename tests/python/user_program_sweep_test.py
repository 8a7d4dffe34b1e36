"""`pshard bench scaling -- CMD` and `pshard sweep -- CMD` run a Python program as the workers of every run: each
run's value reaches the program (PSHARD_SET and ps.config()), its run directory holds the value (config.toml and
sweep_point.json), and the scaling table and the sweep summary are written from the phases and figures the program
reports."""
import json
import os
import sys

import torch
import torch.nn.functional as F

import support

STEPS = 5
CONFIG = """
[optimizer]
name = "sgd"
lr = 0.05
momentum = 0.0

[train]
batch_size = 8
epochs = 2
log_every = 1

[cluster]
mode = "sync"
heartbeat_interval_ms = 200
heartbeat_timeout_ms = 4000
"""


def worker(out_dir):
    import pshard.torch as ps
    ps.init()
    torch.manual_seed(0)
    net = torch.nn.Linear(6, 3)
    opt = ps.DistributedOptimizer(net, steps_per_epoch=STEPS)
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    for epoch in range(2):
        for _ in range(STEPS):
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        ps.report(epoch=epoch, train_loss=float(loss))
    seen = {"lr": ps.config("optimizer.lr"), "workers": ps.size(), "set": os.environ.get("PSHARD_SET", ""),
            "run_dir": os.environ.get("PSHARD_RUN_DIR", "")}
    with open(os.path.join(out_dir, "seen-%s-rank%d.json" % (os.path.basename(seen["run_dir"]), ps.rank())),
              "w") as f:
        json.dump(seen, f)
    ps.shutdown()


def read_json(path):
    with open(path) as f:
        return json.load(f)


def setup(name):
    d = support.fresh_dir(name)
    cfg = os.path.join(d, "job.toml")
    with open(cfg, "w") as f:
        f.write(CONFIG)
    return d, cfg


def scaling():
    d, cfg = setup("scaling")
    out = os.path.join(d, "runs")
    seen_dir = os.path.join(d, "seen")
    os.makedirs(seen_dir)
    status, text = support.run([support.PSHARD_BIN, "bench", "scaling", "--workers", "1,2", "--config", cfg, "--out",
                                out, "--run-timeout", "120", "--", support.PYTHON, os.path.abspath(__file__),
                                "worker", seen_dir], 400, cwd=d)
    support.expect(status == 0, "bench scaling -- CMD failed (%d)" % status, text)
    runs = sorted(n for n in os.listdir(out) if n[0].isdigit())
    support.expect(runs == ["1_workers=1", "2_workers=2"], "bench scaling: run directories %s" % runs, text)
    for n, workers in zip(runs, (1, 2)):
        point = read_json(os.path.join(out, n, "sweep_point.json"))
        support.expect(point["values"] == {"workers": str(workers)} and point["workers"] == workers and
                       point["command"][-4:] == [support.PYTHON, os.path.abspath(__file__), "worker", seen_dir],
                       "bench scaling: %s/sweep_point.json is %s" % (n, point), text)
        for rank in range(workers):
            seen = read_json(os.path.join(seen_dir, "seen-%s-rank%d.json" % (n, rank)))
            support.expect(seen["workers"] == workers, "bench scaling: %s rank %d saw %s" % (n, rank, seen), text)
    # The scaling table: a row per worker count, with the speedup and the compute and communication phases the
    # program measured (data, forward, backward, comm in ms per step).
    rows = [line for line in text.splitlines() if line.startswith("| W=")]
    support.expect(len(rows) == 2, "bench scaling: no scaling table rows in the output", text)
    for row in rows:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        support.expect(all(cells[i] not in ("", "n/a") for i in (3, 4, 5, 7, 9, 10, 11)),
                       "bench scaling: a scaling row lacks figures: %s" % row, text)
    support.expect(os.path.isfile(os.path.join(out, "report", "report.md")), "bench scaling: no report.md", text)
    # --simulate-compute replaces pshard's own workers' compute: refused with a program, before anything runs.
    status, text = support.run([support.PSHARD_BIN, "bench", "scaling", "--workers", "1", "--simulate-compute", "5",
                                "--config", cfg, "--out", os.path.join(d, "refused"), "--", support.PYTHON,
                                os.path.abspath(__file__), "worker", seen_dir], 60, cwd=d)
    support.expect(status != 0 and "a program after -- computes itself" in text and
                   not os.path.exists(os.path.join(d, "refused")),
                   "bench scaling --simulate-compute -- CMD: status %d" % status, text)
    print("bench scaling -- python3 ...: 1 and 2 workers, their settings in sweep_point.json, a scaling table with "
          "the program's phases")


def sweep():
    d, cfg = setup("sweep")
    out = os.path.join(d, "runs")
    seen_dir = os.path.join(d, "seen")
    os.makedirs(seen_dir)
    status, text = support.run([support.PSHARD_BIN, "sweep", "--grid", "optimizer.lr=0.1,0.02", "--config", cfg,
                                "--out", out, "--run-timeout", "120", "--", support.PYTHON,
                                os.path.abspath(__file__), "worker", seen_dir], 400, cwd=d)
    support.expect(status == 0, "sweep -- CMD failed (%d)" % status, text)
    for n, lr in (("1_lr=0.1", 0.1), ("2_lr=0.02", 0.02)):
        run_dir = os.path.join(out, n)
        point = read_json(os.path.join(run_dir, "sweep_point.json"))
        support.expect(point["values"] == {"optimizer.lr": str(lr)} and point["workers"] == 1,
                       "sweep: %s/sweep_point.json is %s" % (n, point), text)
        with open(os.path.join(run_dir, "config.toml")) as f:
            support.expect("lr = %s" % lr in f.read(), "sweep: %s/config.toml lacks lr = %s" % (n, lr), text)
        seen = read_json(os.path.join(seen_dir, "seen-%s-rank0.json" % n))
        support.expect(seen["lr"] == lr and "optimizer.lr=%s" % lr in seen["set"].split("\n"),
                       "sweep: the program of %s saw %s" % (n, seen), text)
    with open(os.path.join(out, "sweep.md")) as f:
        md = f.read()
    rows = [line for line in md.splitlines() if line.startswith("| ") and "_lr=" in line]
    support.expect(len(rows) == 2 and all("| done |" in r for r in rows), "sweep: sweep.md rows %s" % rows, md)
    for row in rows:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        support.expect(cells[5] != "", "sweep: no train loss in %s" % row, md)  # #, run, lr, status, epochs, loss
    support.expect(os.path.isfile(os.path.join(out, "report", "report.md")), "sweep: no report.md", text)
    print("sweep -- python3 ...: each lr reached the program (ps.config, PSHARD_SET) and its run directory; "
          "sweep.md has both runs")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2])
    else:
        scaling()
        sweep()
        support.passed()
