"""ps.report() makes the BatchNorm running statistics the mean over the workers: 2 workers whose data differ end an
epoch with the same running_mean/running_var, the mean of what each had, and their own num_batches_tracked; rank 0
keeps that mean in RUN_DIR/buffers/latest.pt (what a worker that starts mid-run loads). The job
runs with CurveZMQ on, so the Python workers' encrypted, authenticated connections are tested here too. A buffers file
that would run code when unpickled is refused (read with weights_only), and the code does not run."""
import os
import sys

import torch
import torch.nn.functional as F

import support

CONFIG = """
[optimizer]
name = "sgd"
lr = 0.05
momentum = 0.0

[train]
batch_size = 16
epochs = 1

[security]
curve = true  # also: Python workers find the job's CurveZMQ keys (PSHARD_KEY_DIR)
"""


def worker(out_dir):
    import pshard.torch as ps
    ps.init()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2))
    opt = ps.DistributedOptimizer(net, steps_per_epoch=5)
    g = torch.Generator()
    g.manual_seed(ps.rank())
    for _ in range(5):
        x = torch.randn(16, 3, generator=g) + 10.0 * ps.rank()  # the ranks' statistics differ
        y = torch.randint(0, 2, (16,), generator=g)
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    before = {n: b.clone() for n, b in net.named_buffers()}
    ps.report(epoch=0, train_loss=float(loss))
    torch.save({"before": before, "after": dict(net.named_buffers())}, os.path.join(out_dir, "rank%d.pt" % ps.rank()))
    ps.shutdown()


def main():
    out = support.fresh_dir("buffers")
    status, output, run_dir = support.launch(CONFIG, 2, 1, [os.path.abspath(__file__), "worker", out], 120, "buffers")
    support.expect(status == 0, "the job failed (status %d)" % status, output)
    r0, r1 = (torch.load(os.path.join(out, "rank%d.pt" % r)) for r in (0, 1))
    name = "0.running_mean"
    support.expect(float((r0["before"][name] - r1["before"][name]).abs().max()) > 1.0,
                   "the ranks' statistics did not differ before report()")
    for name in ("0.running_mean", "0.running_var"):
        want = (r0["before"][name] + r1["before"][name]) / 2
        for r in (r0, r1):
            err = float((r["after"][name] - want).abs().max())
            support.expect(err < 1e-6, "%s is not the mean over the workers (off by %g)" % (name, err), output)
    support.expect(int(r0["after"]["0.num_batches_tracked"]) == 5, "num_batches_tracked changed", output)
    # The ranks' files are gone; rank 0 kept the averaged statistics of the epoch for a worker that starts mid-run.
    folder = os.path.join(run_dir, "buffers")
    support.expect(os.listdir(folder) == ["latest.pt"], "buffer files left: %s" % os.listdir(folder), output)
    kept = torch.load(os.path.join(folder, "latest.pt"))
    support.expect(kept["epoch"] == 1 and torch.equal(kept["buffers"]["0.running_mean"], r0["after"]["0.running_mean"]),
                   "latest.pt does not hold the averaged statistics of epoch 1", output)
    print("report(): BatchNorm running statistics averaged over 2 workers, kept in buffers/latest.pt")


def full_disk():
    """The buffer files on a full disk (/dev/full refuses every write with ENOSPC) or cut short by one: the error names
    the file and the full disk, not "EOFError: Ran out of input"."""
    import pshard.torch as ps
    from pshard import buffers
    d = support.fresh_dir("buffers-full")
    full = os.path.join(d, "epoch1-rank0.pt")
    os.symlink("/dev/full", full + ".tmp")
    try:
        buffers._write_file(full, {"x": torch.zeros(1000)})
        raise AssertionError("a write to a full disk did not raise")
    except ps.PshardError as e:
        support.expect(full + ".tmp" in str(e) and "the disk is full" in str(e), "write: %s" % e)
    empty = os.path.join(d, "epoch1-rank1.pt")
    open(empty, "wb").close()
    try:
        buffers._read_file(empty)
        raise AssertionError("an empty buffer file did not raise")
    except ps.PshardError as e:
        support.expect(empty in str(e) and "empty" in str(e), "read: %s" % e)
    buffers._write_file(os.path.join(d, "ok.pt"), {"x": torch.ones(3)})
    support.expect(float(buffers._read_file(os.path.join(d, "ok.pt"))["x"].sum()) == 3.0, "a round trip failed")
    print("buffer files: a full disk and an empty file are errors naming the file")


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, ("touch " + self.marker,))


def code_in_a_buffers_file():
    import pshard.torch as ps
    from pshard import buffers
    d = support.fresh_dir("code-in-buffers")
    path, marker = os.path.join(d, "latest.pt"), os.path.join(d, "the-code-ran")
    torch.save({"epoch": 1, "buffers": {"0.running_mean": torch.zeros(2)}, "x": _RunsCode(marker)}, path)
    try:
        buffers._read_file(path)
        raise AssertionError("a buffers file holding code was read")
    except ps.PshardError as e:
        support.expect("cannot read %s" % path in str(e) and "Weights only load failed" in str(e),
                       "the refusal says %r" % str(e))
    support.expect(not os.path.exists(marker), "reading the buffers file ran its code")
    buffers._write_file(path, {"epoch": 1, "buffers": {"0.running_mean": torch.ones(2)}})
    support.expect(torch.equal(buffers._read_file(path)["buffers"]["0.running_mean"], torch.ones(2)),
                   "a buffers file of tensors does not read back")
    print("a buffers file holding code: refused, the code not run; one of tensors reads back")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2])
    else:
        code_in_a_buffers_file()
        full_disk()
        main()
        support.passed()
