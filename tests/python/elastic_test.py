"""An elastic PyTorch job (`pshard launch --workers 2:3 -- python3 ...`): a worker added with `pshard join RUN_DIR`
trains from the next epoch's start, ShardSampler cuts each epoch's data among that epoch's members, the servers'
learning rate follows their global batch (the linear scaling rule), and a worker that dies is dropped: the job ends
with status 0 and a model that learned. A worker that joins during the last epoch has nothing to train: it leaves with
status 0, as a C++ worker does (elastic_workers_test)."""
import json
import os
import signal
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

import support

EPOCHS = 5
SAMPLES = 1920  # 2 workers x batch 16: 60 steps an epoch; 3 workers: 40
CONFIG = """
[optimizer]
name = "sgd"
lr = 0.05
momentum = 0.0

[lr_schedule]
scaling = "linear"
reference_batch = 16

[train]
batch_size = 16
epochs = %d

[cluster]
mode = "sync"
heartbeat_interval_ms = 200
heartbeat_timeout_ms = 3000
""" % EPOCHS


def data():
    g = torch.Generator()
    g.manual_seed(7)
    x = torch.randn(SAMPLES, 10, generator=g)
    teacher = torch.randn(10, 3, generator=g)
    return torch.utils.data.TensorDataset(x, (x @ teacher).argmax(dim=1))


def worker(out_dir, epochs=str(EPOCHS), pause="0.05"):
    import pshard.torch as ps
    ps.init()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    train = data()
    sampler = ps.ShardSampler(train, seed=1)
    loader = torch.utils.data.DataLoader(train, batch_size=16, sampler=sampler, drop_last=True)
    opt = ps.DistributedOptimizer(net)
    for epoch in range(ps.start_epoch(), int(epochs)):
        sampler.set_epoch(epoch)
        _, index, count = ps.epoch_plan(epoch)  # the plan ShardSampler got (asking again returns it)
        loss_sum, n = 0.0, 0
        for step, (x, y) in enumerate(loader):
            # Worker 1 of the first three-worker epoch dies in it: the others finish it and go on without it.
            if count == 3 and ps.rank() == 1 and step == 5 and not os.path.exists(os.path.join(out_dir, "killed")):
                open(os.path.join(out_dir, "killed"), "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum, n = loss_sum + float(loss) * len(y), n + len(y)
            time.sleep(float(pause))  # epochs of a few seconds: the joining worker starts (imports torch) within one
        with open(os.path.join(out_dir, "epochs-%d-%d" % (ps.rank(), os.getpid())), "a") as f:
            f.write("%d %d %d %d\n" % (epoch, index, count, n))
        ps.report(epoch=epoch, train_loss=loss_sum / n, samples=n)
    ps.shutdown()


def start_job(name, out, epochs=EPOCHS, pause=0.05):
    """`pshard launch --workers 2:3` of this script's worker; returns the process and the run directory."""
    d = support.fresh_dir(name)
    cfg = os.path.join(d, "job.toml")
    with open(cfg, "w") as f:
        f.write(CONFIG)
    run_dir = os.path.join(d, "run")
    argv = [support.PSHARD_BIN, "launch", "--servers", "1", "--workers", "2:3", "--config", cfg, "--run-dir", run_dir,
            "--timeout", "240", "--set", "train.epochs=%d" % epochs, "--", support.PYTHON, os.path.abspath(__file__),
            "worker", out, str(epochs), str(pause)]
    job = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=support.env(), cwd=d,
                           start_new_session=True)
    return job, run_dir


def wait_for_members(run_dir):
    """Until the job's first epoch plan is in its metrics (its workers train)."""
    metrics = os.path.join(run_dir, "metrics.jsonl")
    deadline = time.time() + 120
    while time.time() < deadline and not (os.path.exists(metrics) and '"members"' in open(metrics).read()):
        time.sleep(0.1)


def run_with_joiner(job, run_dir):
    """Starts `pshard join RUN_DIR` once the job trains; both processes' output once both ended."""
    joiner = None
    try:
        wait_for_members(run_dir)
        joiner = subprocess.Popen([support.PSHARD_BIN, "join", run_dir], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, env=support.env(), start_new_session=True)
        output = job.communicate(timeout=270)[0].decode("utf-8", "replace")
        output += joiner.communicate(timeout=60)[0].decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        for p in (job, joiner):
            if p is not None:
                os.killpg(p.pid, signal.SIGKILL)
        raise AssertionError("the elastic job hung")
    return joiner, output


def late_join():
    """A one-epoch job of about 12 s: a worker joining during it waits for a next epoch that never comes, and leaves
    with status 0 having trained nothing."""
    out = support.fresh_dir("elastic-late")
    job, run_dir = start_job("elastic-late-job", out, epochs=1, pause=0.2)
    joiner, output = run_with_joiner(job, run_dir)
    support.expect(job.returncode == 0, "the elastic job failed (status %d)" % job.returncode, output)
    support.expect(joiner.returncode == 0, "the late worker left with status %d" % joiner.returncode, output)
    support.expect("the job ended before another epoch began: this worker joined too late to train" in output,
                   "the late worker did not say why it did not train", output)
    trained = [n for n in os.listdir(out) if n.startswith("epochs-")]
    support.expect(len(trained) == 2, "workers that trained: %s (the late one must not)" % trained, output)


def main():
    out = support.fresh_dir("elastic")
    job, run_dir = start_job("elastic-job", out)
    joiner, output = run_with_joiner(job, run_dir)
    support.expect(job.returncode == 0, "the elastic job failed (status %d)" % job.returncode, output)
    support.expect(joiner.returncode == 0, "the joining worker failed (status %d)" % joiner.returncode, output)

    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        events = [json.loads(line) for line in f if line.strip()]
    plans = [e for e in events if e.get("event") == "members"]
    support.expect(len(plans) == EPOCHS, "%d plans for %d epochs: %s" % (len(plans), EPOCHS, plans), output)
    step = 0
    for p in plans:
        n = len(p["workers"])
        support.expect(p["first_step"] == step, "plan %s starts at step %d" % (p, step), output)
        support.expect(p["global_batch"] == 16 * n and abs(p["lr"] - 0.05 * n) < 1e-6,
                       "plan %s: the global batch and the learning rate do not follow its %d workers" % (p, n), output)
        step += SAMPLES // (16 * n)
    counts = [len(p["workers"]) for p in plans]
    support.expect(counts[0] == 2 and 3 in counts, "the joining worker never trained: %s" % counts, output)
    support.expect("joined: worker" in output and "is dead: its process was killed by signal 9" in output,
                   "the join and the death are not both logged", output)
    # Each member trained its share of each epoch: samples // members, in whole batches.
    for name in os.listdir(out):
        if not name.startswith("epochs-"):
            continue
        for line in open(os.path.join(out, name)):
            epoch, index, count, n = (int(v) for v in line.split())
            support.expect(n == SAMPLES // count // 16 * 16, "%s: epoch %d trained %d samples with %d workers"
                           % (name, epoch, n, count), output)
    summary = events[-1]
    support.expect(summary.get("event") == "summary" and summary.get("epochs") == EPOCHS, "no summary", output)
    first = [e for e in events if e.get("event") == "epoch"][0]
    support.expect(summary["train_loss"] < 0.8 * first["train_loss"],
                   "the model did not learn: train loss %.3f after %.3f" % (summary["train_loss"], first["train_loss"]),
                   output)
    print("elastic job: workers per epoch %s, learning rates %s" % (counts, [round(p["lr"], 3) for p in plans]))
    late_join()
    support.passed()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(*sys.argv[2:])
    else:
        main()
