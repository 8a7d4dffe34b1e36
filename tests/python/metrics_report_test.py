"""Every figure a script gives ps.report() reaches metrics.jsonl and `pshard report`, and only those: test accuracy
alone is recorded (not null), figures never given are null (not zero), epochs are recorded as the script numbers
them, an accuracy outside [0, 1] is refused with a clear error, a script's own figures (an AUC) are combined
weighted by the test samples and shown by `pshard report`, and a rank that never reports makes the job's end name it while the other ranks' epochs and the
summary are still written."""
import json
import os
import sys

import torch
import torch.nn.functional as F

import support

STEPS = 6
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


def worker(case, out_dir):
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
        if case == "test-acc-only":
            ps.report(epoch=epoch, test_acc=0.5 + 0.25 * ps.rank())  # the mean over the 2 ranks: 0.625
        elif case == "own-figures":
            # Weighted by the test samples, as test_acc: AUC (0.7 x 100 + 0.8 x 300) / 400 = 0.775.
            figures = {"test_auc": 0.7 + 0.1 * ps.rank() + 0.01 * epoch, "test_logloss": 0.5}
            errors = []
            for bad in ({"bad name": 1.0}, {"test_auc": "high"}, {("f%d" % i): 1.0 for i in range(17)}):
                try:
                    ps.report(epoch=epoch, test_acc=0.5, test_samples=100, figures=bad)
                    errors.append("accepted %r" % bad)
                except ps.PshardError as e:
                    errors.append(str(e))
            with open(os.path.join(out_dir, "errors-%d.json" % ps.rank()), "w") as f:
                json.dump(errors, f)
            ps.report(epoch=epoch, test_acc=0.5, test_samples=100 + 200 * ps.rank(), figures=figures)
        elif ps.rank() == 0:
            ps.report(epoch=epoch, train_loss=2.0 + epoch)
        else:  # "silent": rank 1 never reports; its accuracies that are not fractions are refused
            errors = []
            for bad in (-0.25, 1.5):
                try:
                    ps.report(epoch=epoch, train_loss=1.0, test_acc=bad)
                    errors.append("accepted test_acc=%r" % bad)
                except ps.PshardError as e:
                    errors.append(str(e))
            with open(os.path.join(out_dir, "errors.json"), "w") as f:
                json.dump(errors, f)
    ps.shutdown()


def lines(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_acc_only():
    out = support.fresh_dir("test-acc-only-out")
    status, output, run_dir = support.launch(CONFIG, 2, 1, [os.path.abspath(__file__), "worker", "test-acc-only", out],
                                             90, "test-acc-only")
    support.expect(status == 0, "test-acc-only: the job failed (%d)" % status, output)
    events = lines(run_dir)
    epochs = [e for e in events if e["event"] == "epoch"]
    support.expect([e["epoch"] for e in epochs] == [0, 1], "test-acc-only: epoch lines %s" % epochs, output)
    for e in epochs + [events[-1]]:
        support.expect(abs(e["test_acc"] - 0.625) < 1e-6, "test-acc-only: test_acc is %r in %s" % (e["test_acc"], e),
                       output)
        for never_given in ("train_loss", "train_acc", "test_loss"):
            support.expect(e[never_given] is None, "test-acc-only: %s is %r, not null" % (never_given, e[never_given]),
                           output)
    support.expect(events[-1]["event"] == "summary", "test-acc-only: no summary", output)
    code, text = support.run([support.PSHARD_BIN, "report", run_dir], 60)
    support.expect(code == 0, "pshard report failed", text)
    with open(os.path.join(run_dir, "report", "report.md")) as f:
        row = [line for line in f if line.startswith("| run")][1]
    cells = [c.strip() for c in row.split("|")]
    support.expect(cells[13] == "0.625" and cells[11] == "n/a", "report.md's row: %s" % row, text)
    print("test_acc alone: 0.625 in every epoch line, the summary and pshard report; the other figures null")


def own_figures():
    out = support.fresh_dir("own-figures-out")
    status, output, run_dir = support.launch(CONFIG, 2, 1, [os.path.abspath(__file__), "worker", "own-figures", out],
                                             90, "own-figures")
    support.expect(status == 0, "own-figures: the job failed (%d)" % status, output)
    with open(os.path.join(out, "errors-0.json")) as f:
        errors = json.load(f)
    support.expect("figure name 'bad name' is not 1-64 characters of [A-Za-z0-9_]" in errors[0],
                   "own-figures: a name with a space: %s" % errors[0], output)
    support.expect("figure 'test_auc'='high' is not a number" in errors[1], "own-figures: a text: %s" % errors[1],
                   output)
    support.expect("at most 16 figures" in errors[2], "own-figures: 17 figures: %s" % errors[2], output)
    events = lines(run_dir)
    epochs = [e for e in events if e["event"] == "epoch"]
    for epoch, e in enumerate(epochs):
        want = 0.775 + 0.01 * epoch
        support.expect(abs(e["figures"]["test_auc"] - want) < 1e-9 and abs(e["figures"]["test_logloss"] - 0.5) < 1e-9,
                       "own-figures: epoch %d's figures %s, not AUC %g" % (epoch, e.get("figures"), want), output)
    summary = events[-1]
    support.expect(summary["event"] == "summary" and summary["figures"] == epochs[-1]["figures"],
                   "own-figures: the summary's figures %s" % summary.get("figures"), output)
    support.expect("test_auc 0.7850  test_logloss 0.5000" in output, "own-figures: no figures on the epoch line",
                   output)
    code, text = support.run([support.PSHARD_BIN, "report", run_dir], 60)
    support.expect(code == 0, "pshard report failed", text)
    with open(os.path.join(run_dir, "report", "runs.csv")) as f:
        header, row = [line.strip().split(",") for line in f][:2]
    support.expect(header[-2:] == ["test_auc", "test_logloss"] and abs(float(row[-2]) - 0.785) < 1e-6,
                   "runs.csv: %s / %s" % (header, row), text)
    with open(os.path.join(run_dir, "report", "report.md")) as f:
        table = [line for line in f if line.startswith("| run")]
    support.expect(table[0].rstrip().endswith("| test_auc | test_logloss |") and "| 0.785 | 0.5 |" in table[1],
                   "report.md's runs table: %s" % table, text)
    print("own figures: AUC weighted by the test samples (0.775, 0.785) in the epoch lines, the summary, the epoch "
          "line printed, runs.csv and report.md; bad names, values and counts refused")


def silent_rank():
    out = support.fresh_dir("silent-out")
    status, output, run_dir = support.launch(CONFIG, 2, 1, [os.path.abspath(__file__), "worker", "silent", out], 90,
                                             "silent")
    support.expect(status == 0, "silent: the job failed (%d)" % status, output)
    with open(os.path.join(out, "errors.json")) as f:
        errors = json.load(f)
    support.expect("test_acc=-0.25 is not an accuracy (a fraction in [0, 1])" in errors[0],
                   "silent: test_acc -0.25: %s" % errors[0], output)
    support.expect("test_acc=1.5 is not an accuracy" in errors[1], "silent: test_acc 1.5: %s" % errors[1], output)
    support.expect("worker 1 never reported an epoch" in output, "silent: the silent rank is not named", output)
    events = lines(run_dir)
    epochs = [e for e in events if e["event"] == "epoch"]
    support.expect([(e["epoch"], e["train_loss"], e.get("missing_workers")) for e in epochs] ==
                   [(0, 2.0, [1]), (1, 3.0, [1])], "silent: epoch lines %s" % epochs, output)
    support.expect(events[-1]["event"] == "summary" and events[-1]["train_loss"] == 3.0,
                   "silent: summary %s" % events[-1], output)
    print("a rank that never reports: named at the end; rank 0's epochs and the summary are written")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        test_acc_only()
        own_figures()
        silent_rank()
        support.passed()
