"""An embedding table of 1M rows that only the servers hold (ps.EmbeddingBag), trained by 2 Python workers in sync
steps through 2 servers beside a dense layer, ends where single-process PyTorch ends with nn.EmbeddingBag(sparse=True)
over the global batch: with SGD and with Adagrad on the table's rows (embedding.optimizer), SGD on the dense layer,
within 1e-6 on every row the data touched. A job stopped at step 55 and resumed from its checkpoint of step 40 ends
with the undisturbed run's rows, bit for bit, and so does one whose server is killed at step 55 and restarted by the
launch from that checkpoint; a worker killed under cluster.restart_workers rejoins and finds the trained rows. Also:
rows no worker pushed keep their initial values, a table made after the optimizer and an id outside the table are
refused with their names. Rows stored as bf16 (Adagrad) take 3/4 of the bytes, train, and end near the float32 run's.
A hashed table (any 64-bit ids) makes a row for each id its batches pushed, which the servers report, and one with
admission and expiry resumes from its checkpoint bit for bit."""
import json
import os
import signal
import sys
import time

import torch
import torch.nn.functional as F

import support

ROWS, DIM, BAG, BATCH, STEPS = 1_000_000, 8, 4, 16, 100
DENSE_LR, TABLE_LR = 0.1, 0.05
CONFIG = """
[optimizer]
name = "sgd"
lr = %g
momentum = 0.0

[embedding]
optimizer = "%%s"
lr = %g

[train]
batch_size = %d

[cluster]
mode = "sync"
""" % (DENSE_LR, TABLE_LR, BATCH)


def data():
    """Bags of BAG ids, skewed towards low ids (shared by the workers' batches), and 0/1 labels."""
    g = torch.Generator()
    g.manual_seed(11)
    u = torch.rand(STEPS * 2 * BATCH, BAG, generator=g)
    ids = (u ** 4 * ROWS).to(torch.int64)
    y = (torch.rand(STEPS * 2 * BATCH, generator=g) < 0.3).to(torch.float32)
    return ids, y


class Net(torch.nn.Module):
    def __init__(self, bag):
        super().__init__()
        self.bag = bag
        self.fc = torch.nn.Linear(DIM, 1)

    def forward(self, ids):
        return self.fc(self.bag(ids)).squeeze(1)


def hashed_ids(step, rank):
    """Bags of 64-bit hashed ids (any value, negative int64 for the upper half), 64 distinct values in all."""
    g = torch.Generator()
    g.manual_seed(1000 * step + rank)
    values = torch.tensor([(i * 0x9E3779B97F4A7C15) % (1 << 64) - (1 << 63) for i in range(64)], dtype=torch.int64)
    return values[torch.randint(0, 64, (BATCH, BAG), generator=g)]


def hashed_worker(out_dir, mode):
    """A hashed table (ids any 64-bit values, rows made on first push; "hashed-admit": on the second, dropped after 4
    unused steps) trains beside a dense layer; "hashed-stop" stops at step 12, after the checkpoint of step 10."""
    import pshard.torch as ps
    ps.init()
    torch.manual_seed(5)
    admit = dict(admit_after=2, expire_after=4) if mode != "hashed" else {}
    net = Net(ps.EmbeddingBag(1000, DIM, mode="sum", name="hashed", hashed=True, init_scale=0.1, **admit))
    opt = ps.DistributedOptimizer(net, steps_per_epoch=20)
    never = torch.tensor([12345])  # never in a batch: read as the row it would start as, the same every time
    first = net.bag.pull(never)
    for t in range(ps.start_step(), 20):
        if mode == "hashed-stop" and ps.rank() == 0 and t == 12:  # (before step 15 can be a checkpoint)
            wait_for_checkpoint(10)
            os._exit(3)
        y = (hashed_ids(t, ps.rank())[:, 0] % 2 == 0).to(torch.float32)
        loss = F.binary_cross_entropy_with_logits(net(hashed_ids(t, ps.rank())), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert torch.equal(net.bag.pull(never), first), "a row nobody pushed changed"
    seen = torch.unique(torch.cat([hashed_ids(t, r).reshape(-1) for t in range(20) for r in range(2)]))
    trained = net.bag.pull(seen)
    ps.report(epoch=1, train_loss=float(loss))
    if ps.rank() == 0:
        torch.save({"seen": seen.numel(), "trained": trained, "fc": net.fc.state_dict()},
                   os.path.join(out_dir, "hashed.pt"))
    ps.shutdown()


def worker(out_dir, mode):
    if mode.startswith("hashed"):
        return hashed_worker(out_dir, mode)
    import pshard.torch as ps
    ps.init()
    torch.manual_seed(5)
    net = Net(ps.EmbeddingBag(ROWS, DIM, mode="mean", name="items", init="uniform", init_scale=0.1))
    opt = ps.DistributedOptimizer(net, steps_per_epoch=STEPS)  # one epoch (a restarted worker needs its length)
    try:
        ps.Embedding(10, 2, name="late")
        raise AssertionError("a table made after the optimizer was accepted")
    except ps.PshardError as e:
        assert "made after DistributedOptimizer" in str(e), str(e)
    try:
        net.bag.pull(torch.tensor([ROWS]))
        raise AssertionError("an id outside the table was accepted")
    except ps.PshardError as e:
        assert "id 1000000 is outside embedding table 'items' (1000000 rows)" in str(e), str(e)
    ids, y = data()
    touched = torch.unique(ids)
    start = net.bag.pull(touched)
    seen = set(touched.tolist())
    untouched = torch.tensor([i for i in (ROWS - 1, ROWS - 2, ROWS // 2 + 1, ROWS // 2 + 3) if i not in seen][:2])
    assert untouched.numel() == 2
    untouched_start = net.bag.pull(untouched)
    first_run = not os.path.exists(os.path.join(out_dir, "fault"))
    if mode == "worker-kill" and not first_run and ps.rank() == 1:  # the restarted worker: what it found
        torch.save({"start_step": ps.start_step(), "rows": start}, os.path.join(out_dir, "rejoined.pt"))
    for t in range(ps.start_step(), STEPS):
        if mode == "stop" and ps.rank() == 0 and t == 55:
            wait_for_checkpoint(40)  # its tables' rows take a moment to write
            os._exit(3)  # the job stops (failure_policy = abort) after the checkpoint of step 40
        if mode == "server-kill" and first_run and ps.rank() == 0 and t == 55:
            wait_for_checkpoint(40)
            open(os.path.join(out_dir, "fault"), "w").close()
            os.kill(node_pid("server", 1), signal.SIGKILL)  # the launch restarts the job from the step-40 checkpoint
        if mode == "worker-kill" and first_run and ps.rank() == 1 and t == 55:
            open(os.path.join(out_dir, "fault"), "w").close()
            os.kill(os.getpid(), signal.SIGKILL)  # the launch restarts this worker, which rejoins the running job
        if mode == "worker-kill" and ps.rank() == 0 and t > 55 and not os.path.exists(os.path.join(out_dir,
                                                                                                  "rejoined.pt")):
            time.sleep(0.5)  # until the restarted worker is back, so that the job is not over before it can rejoin
        lo = t * 2 * BATCH + ps.rank() * BATCH
        loss = F.binary_cross_entropy_with_logits(net(ids[lo:lo + BATCH]), y[lo:lo + BATCH])
        opt.zero_grad()
        loss.backward()
        opt.step()
    opt.synchronize()
    final = net.bag.pull(touched)
    assert torch.equal(net.bag.pull(untouched), untouched_start), "rows no worker pushed changed"
    if ps.rank() == 0:
        torch.save({"touched": touched, "start": start, "final": final, "fc": net.fc.state_dict(),
                    "fc_start": FC_START}, os.path.join(out_dir, "rows.pt"))
    ps.report(epoch=1, train_loss=float(loss))
    ps.shutdown()


FC_START = None


def node_pid(role, rank):
    with open(os.path.join(os.environ["PSHARD_RUN_DIR"], "cluster.json")) as f:
        return [n["pid"] for n in json.load(f)["nodes"] if n["role"] == role and n["rank"] == rank][0]


def wait_for_checkpoint(step, servers=2, limit_s=60):
    names = ["server-%d.step-%08d.ckpt" % (r, step) for r in range(servers)]
    folder = os.path.join(os.environ["PSHARD_RUN_DIR"], "checkpoints")
    deadline = time.time() + limit_s
    while not all(os.path.exists(os.path.join(folder, n)) for n in names):
        assert time.time() < deadline, "no checkpoint of step %d after %d s" % (step, limit_s)
        time.sleep(0.05)


def reference(rule, got):
    """Single-process PyTorch over the global batch (both workers' samples, each half's mean loss, as the workers
    compute them): nn.EmbeddingBag(sparse=True) with the rows the job started from, the same dense layer,
    torch.optim's SGD or Adagrad on the table."""
    torch.manual_seed(5)
    net = Net(torch.nn.EmbeddingBag(ROWS, DIM, mode="mean", sparse=True))
    with torch.no_grad():
        net.bag.weight.zero_()
        net.bag.weight[got["touched"]] = got["start"]
        net.fc.load_state_dict(got["fc_start"])
    dense = torch.optim.SGD(net.fc.parameters(), lr=DENSE_LR)
    if rule == "adagrad":
        table = torch.optim.Adagrad([net.bag.weight], lr=TABLE_LR, eps=1e-10)
    else:
        table = torch.optim.SGD([net.bag.weight], lr=TABLE_LR)
    ids, y = data()
    for t in range(STEPS):
        dense.zero_grad()
        table.zero_grad()
        for r in range(2):  # the mean of the workers' gradients: (g0 + g1) / 2 = g0 / 2 + g1 / 2 exactly
            lo = t * 2 * BATCH + r * BATCH
            loss = F.binary_cross_entropy_with_logits(net(ids[lo:lo + BATCH]), y[lo:lo + BATCH])
            (loss / 2).backward()
        dense.step()
        table.step()
    return net


def stop_and_resume(config, out, stop_mode, resumed_mode, step, name):
    """Launches the job that stops itself (worker mode `stop_mode`) and resumes it with --resume, which must start at
    the checkpoint of `step`; returns the resumed launch's output."""
    status, output, run_dir = support.launch(config, 2, 2, [os.path.abspath(__file__), "worker", out, stop_mode], 240,
                                             name)
    support.expect(status != 0, "%s: the job meant to stop finished" % name, output)
    status, output = support.run([support.PSHARD_BIN, "launch", "--servers", "2", "--workers", "2", "--resume", run_dir,
                                  "--grace-ms", "5000", "--timeout", "240", "--", support.PYTHON,
                                  os.path.abspath(__file__), "worker", out, resumed_mode], 270)
    support.expect(status == 0, "%s: --resume failed" % name, output)
    support.expect("resuming at step %d" % step in output,
                   "%s: the resumed job did not start at step %d" % (name, step), output)
    return output


def expect_same(got, want, rows, what, output):
    """The rows (key `rows`) and the dense layer of two runs, bit for bit."""
    support.expect(torch.equal(got[rows], want[rows]), "%s: the rows differ from the undisturbed run's" % what, output)
    for name in want["fc"]:
        support.expect(torch.equal(got["fc"][name], want["fc"][name]),
                       "%s: fc.%s differs from the undisturbed run's" % (what, name), output)


def resume(rule, reference):
    """A job with checkpoints every 20 steps, stopped at step 55 and resumed with --resume from the checkpoint of
    step 40, ends with the rows and weights of the undisturbed run, bit for bit."""
    out = support.fresh_dir("embedding-resume")
    output = stop_and_resume(CONFIG % rule + "\n[checkpoint]\nevery_steps = 20\n", out, "stop", "resumed", 40,
                             "embedding-stop")
    expect_same(torch.load(os.path.join(out, "rows.pt"), weights_only=True), reference, "final", "the resumed run",
                output)
    print("embedding %s: stopped at step 55, --resume from step 40: the same rows and weights, bit for bit" % rule)


def server_restart(rule, reference):
    """A server SIGKILLed at step 55 under cluster.server_failure_policy = restart: the launch restarts the job from
    the checkpoint of step 40, and it ends with the rows and weights of the undisturbed run, bit for bit."""
    out = support.fresh_dir("embedding-server-kill")
    config = CONFIG % rule + "\n[checkpoint]\nevery_steps = 20\n"
    status, output, run_dir = support.launch(config, 2, 2, [os.path.abspath(__file__), "worker", out, "server-kill"],
                                             240, "embedding-server-kill",
                                             extra=["--set", "cluster.server_failure_policy=restart"])
    support.expect(status == 0, "the job whose server was killed failed (status %d)" % status, output)
    support.expect(os.path.exists(os.path.join(out, "fault")), "server 1 was never killed", output)
    support.expect("from the checkpoint of step 40" in output, "the job did not restart from the checkpoint of step 40",
                   output)
    expect_same(torch.load(os.path.join(out, "rows.pt"), weights_only=True), reference, "final", "the restarted job",
                output)
    print("embedding %s: server 1 killed at step 55, the job restarted from step 40: the same rows and weights, bit "
          "for bit" % rule)


def worker_restart(rule):
    """A worker SIGKILLed at step 55 under cluster.restart_workers: the restarted worker rejoins the running job and
    finds the table's trained rows (not rows made again), and the job completes with both workers."""
    out = support.fresh_dir("embedding-worker-kill")
    status, output, run_dir = support.launch(CONFIG % rule, 2, 2, [os.path.abspath(__file__), "worker", out,
                                                                   "worker-kill"], 240, "embedding-worker-kill",
                                             extra=["--set", "cluster.failure_policy=continue",
                                                    "--set", "cluster.restart_workers=true"])
    support.expect(status == 0, "the job whose worker was killed failed (status %d)" % status, output)
    support.expect("rejoined the job in place of the dead worker 1" in output, "worker 1 did not rejoin", output)
    rejoined = torch.load(os.path.join(out, "rejoined.pt"), weights_only=True)
    got = torch.load(os.path.join(out, "rows.pt"), weights_only=True)
    support.expect(rejoined["start_step"] >= 55, "the restarted worker started at step %d" % rejoined["start_step"],
                   output)
    moved = float((rejoined["rows"] - got["start"]).abs().max())
    support.expect(moved > 1e-3 and bool(torch.isfinite(rejoined["rows"]).all()),
                   "the rejoined worker found the rows the job started from (moved %.3g): the table was lost" % moved,
                   output)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        summary = [json.loads(line) for line in f if '"event":"summary"' in line][-1]
    support.expect(summary["workers_finished"] == [0, 1], "summary: %s" % summary, output)
    print("embedding %s: worker 1 killed at step 55 rejoined at step %d and found the trained rows (moved up to %.3g)"
          % (rule, rejoined["start_step"], moved))


def hashed(rule):
    """The servers report the hashed table's rows: every distinct id pushed was admitted (admit_after 0), none
    expired, and the rows held are those ids."""
    out = support.fresh_dir("embedding-hashed")
    status, output, run_dir = support.launch(CONFIG % rule, 2, 2, [os.path.abspath(__file__), "worker", out, "hashed"],
                                             240, "embedding-hashed")
    support.expect(status == 0, "the job with a hashed table failed (status %d)" % status, output)
    got = torch.load(os.path.join(out, "hashed.pt"), weights_only=True)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        summary = [json.loads(line) for line in f if '"event":"summary"' in line][-1]
    phases = summary["server_phases"]
    support.expect(len(phases) == 2, "the summary has %d servers' phases, expected 2" % len(phases), output)
    tables = [e["tables"][0] for e in phases]
    admitted = sum(t["admitted"] for t in tables)
    held = sum(t["rows_held"] for t in tables)
    support.expect(admitted == got["seen"] and held == got["seen"],
                   "the servers admitted %d and hold %d rows of the hashed table, the batches held %d distinct ids"
                   % (admitted, held, got["seen"]), output)
    support.expect(all(t["expired"] == 0 and t["not_admitted"] == 0 for t in tables), "rows expired or not admitted: "
                   + json.dumps(tables), output)
    print("embedding hashed: %d distinct 64-bit ids admitted over 2 servers; a row never pushed reads the same" % admitted)


def hashed_resume(rule):
    """A hashed table whose ids are admitted on their second step and dropped after 4 unused ones, stopped at step 12
    and resumed from its checkpoint of step 10: its rows, ids pending admission and counts come back with it, and the
    job ends with the undisturbed run's rows and weights, bit for bit."""
    config = CONFIG % rule + "\n[checkpoint]\nevery_steps = 5\n"
    undisturbed = support.fresh_dir("embedding-hashed-admit")
    status, output, _ = support.launch(config, 2, 2, [os.path.abspath(__file__), "worker", undisturbed,
                                                      "hashed-admit"], 240, "embedding-hashed-admit")
    support.expect(status == 0, "the hashed job with admission failed (status %d)" % status, output)
    out = support.fresh_dir("embedding-hashed-resume")
    output = stop_and_resume(config, out, "hashed-stop", "hashed-admit", 10, "embedding-hashed-stop")
    expect_same(torch.load(os.path.join(out, "hashed.pt"), weights_only=True),
                torch.load(os.path.join(undisturbed, "hashed.pt"), weights_only=True), "trained",
                "the resumed hashed job", output)
    print("embedding hashed %s: stopped at step 12, --resume from step 10: the same rows and weights, bit for bit"
          % rule)


def table_bytes(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        summary = [json.loads(line) for line in f if '"event":"summary"' in line][-1]
    return sum(e["tables"][0]["bytes"] for e in summary["server_phases"])


def bf16_storage(rule, fp32, fp32_run_dir):
    """embedding.storage = bf16: the servers hold the rows in 2 bytes a value (Adagrad's state stays 4: 3/4 of the
    float32 table's bytes), every row read is a bf16 value, the rows train, and they end near the float32 run's (each
    update rounded to bf16)."""
    out = support.fresh_dir("embedding-bf16")
    status, output, run_dir = support.launch(CONFIG % rule, 2, 2, [os.path.abspath(__file__), "worker", out, "plain"],
                                             240, "embedding-bf16", extra=["--set", "embedding.storage=bf16"])
    support.expect(status == 0, "bf16: the job failed (status %d)" % status, output)
    got = torch.load(os.path.join(out, "rows.pt"), weights_only=True)
    low_bits = int((got["final"].view(torch.int32) & 0xFFFF).abs().max())
    support.expect(low_bits == 0, "bf16: a row read back has float32 bits below bf16's", output)
    moved = float((got["final"] - got["start"]).abs().max())
    support.expect(moved > 0.1, "bf16: the rows did not train (moved %.3g)" % moved, output)
    err = float((got["final"] - fp32["final"]).abs().max())
    support.expect(err < 0.05, "bf16: the rows end %.3g from the float32 run's (measured 0.019)" % err, output)
    ratio = table_bytes(run_dir) / table_bytes(fp32_run_dir)
    support.expect(ratio == 0.75, "bf16: the servers hold %.3f of the float32 table's bytes" % ratio, output)
    print("embedding %s, bf16 storage: 3/4 of the bytes, rows moved up to %.3g, within %.3g of the float32 run's"
          % (rule, moved, err))


def main():
    hashed("adagrad")
    hashed_resume("adagrad")
    for rule in ("sgd", "adagrad"):
        out = support.fresh_dir("embedding-" + rule)
        status, output, run_dir = support.launch(CONFIG % rule, 2, 2,
                                                 [os.path.abspath(__file__), "worker", out, "plain"], 240,
                                                 "embedding-" + rule)
        support.expect(status == 0, "%s: the job failed (status %d)" % (rule, status), output)
        got = torch.load(os.path.join(out, "rows.pt"), weights_only=True)
        ref = reference(rule, got)
        want = ref.bag.weight.detach()[got["touched"]]
        moved = float((want - got["start"]).abs().max())
        support.expect(moved > 1e-3, "%s: the table's rows did not train (moved %.3g)" % (rule, moved), output)
        err = float((got["final"] - want).abs().max())
        support.expect(err <= 1e-6, "%s: the table's rows differ from PyTorch's by %.3g > 1e-6" % (rule, err), output)
        for name, w in ref.fc.state_dict().items():
            derr = float((got["fc"][name] - w).abs().max() / w.abs().max())
            support.expect(derr <= 1e-5, "%s: fc.%s differs from PyTorch's by %.3g (relative)" % (rule, name, derr),
                           output)
        print("embedding %s: %d rows touched of %d, moved up to %.3g, off PyTorch's by %.3g"
              % (rule, got["touched"].numel(), ROWS, moved, err))
        if rule == "adagrad":
            bf16_storage(rule, got, run_dir)
            resume(rule, got)
            server_restart(rule, got)
            worker_restart(rule)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        torch.manual_seed(5)
        FC_START = Net(torch.nn.Identity()).fc.state_dict()
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
        support.passed()
