"""Python workers continue a run: `pshard launch --resume` of a stopped job, and a job restarted after its server was
killed (cluster.server_failure_policy = restart), both end with the weights of an undisturbed run, bit for bit; a
worker SIGKILLed under cluster.restart_workers rejoins the running sync job (start_step() past the servers' step) and
the job ends as accurate as an undisturbed one (within 0.5 points). ShardSampler skips what a resumed epoch trained."""
import json
import os
import signal
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

import support

SPE = 40  # steps per epoch: 2 workers x 40 steps x batch 16 = 1280 samples
EPOCHS = 3
BATCH = 16
CONFIG = """
[optimizer]
name = "momentum"
lr = 0.05
momentum = 0.9

[train]
batch_size = 16
epochs = 3

[checkpoint]
every_steps = 10

[cluster]
mode = "sync"
heartbeat_interval_ms = 200
heartbeat_timeout_ms = 1500
failure_policy = "%s"
server_failure_policy = "%s"
restart_workers = %s
"""


def teacher_data(n, seed):
    """n samples of 10 features, labelled by a fixed linear teacher into 3 classes."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 10, generator=g)
    w = torch.randn(10, 3, generator=torch.Generator().manual_seed(1234))
    return x, (x @ w).argmax(dim=1)


def worker(out_dir, mode):
    import pshard.torch as ps
    torch.set_num_threads(1)
    ps.init()
    if mode == "early-sigterm" and ps.rank() == 1:
        os.kill(os.getpid(), signal.SIGTERM)  # before the DistributedOptimizer exists: remembered, not fatal
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(),
                              torch.nn.Linear(32, 3))
    opt = ps.DistributedOptimizer(net, steps_per_epoch=SPE)
    x, y = teacher_data(2 * SPE * BATCH, 7)
    data = torch.utils.data.TensorDataset(x, y)
    sampler = ps.ShardSampler(data, shuffle=True, seed=3)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, sampler=sampler)
    start = ps.start_step()
    sampler.set_epoch(ps.start_epoch())
    with open(os.path.join(out_dir, "start-%d-%d" % (ps.rank(), os.getpid())), "w") as f:
        f.write("%d %d %d" % (start, ps.start_epoch(), len(sampler) if start % SPE else -1))
    if start > 0:  # the BatchNorm statistics it starts with: the job's, kept at the last report()
        torch.save(net[1].running_mean.clone(), os.path.join(out_dir, "bn-start-%d-%d.pt" % (ps.rank(), os.getpid())))
    step = start
    ps_rank = ps.rank()
    for epoch in range(ps.start_epoch(), EPOCHS):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            if mode == "stop" and ps.rank() == 0 and step == 55:
                os._exit(3)  # the job stops (failure_policy = abort) after the checkpoint of step 50
            if mode == "kill" and ps.rank() == 1 and step == 5 and start == 0:
                os.kill(os.getpid(), signal.SIGKILL)  # restarted by the launcher (restart_workers)
            loss = F.cross_entropy(net(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            # Slow enough for the kill cases: the server is killed mid-run, the worker restarted (importing torch
            # takes seconds) rejoins 20 steps past the servers' step before the survivor gets there.
            time.sleep(0.25 if mode == "kill" and step < 60 else 0.05 if mode in ("slow", "sigterm") else 0.01)
        ps.report(epoch=epoch, train_loss=float(loss))
        if ps.rank() == 0:
            torch.save(net[1].running_mean.clone(), os.path.join(out_dir, "bn-after-epoch%d.pt" % epoch))
    opt.synchronize()
    if ps.rank() == 0:
        tx, ty = teacher_data(4000, 99)
        with torch.no_grad():
            acc = (net(tx).argmax(dim=1) == ty).float().mean().item()
        torch.save({"state": net.state_dict(), "accuracy": acc}, os.path.join(out_dir, "final.pt"))
    stop_on_sigterm = ps.config("checkpoint.on_sigterm") == "checkpoint"
    ps.shutdown()
    if stop_on_sigterm:  # what a SIGTERM does from here to the end of the interpreter's exit
        with open(os.path.join(out_dir, "sigterm-after-shutdown-%d-%d" % (ps_rank, os.getpid())), "w") as f:
            f.write("ignored" if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN else
                    repr(signal.getsignal(signal.SIGTERM)))


def final(out_dir):
    return torch.load(os.path.join(out_dir, "final.pt"))


def starts(out_dir):
    """(start_step, start_epoch, sampler length) written by each worker process, by rank, in the order the processes
    wrote them (not by name: the pid in the name sorts a restart with a pid of more digits first)."""
    found = {}
    names = [n for n in os.listdir(out_dir) if n.startswith("start-")]
    for name in sorted(names, key=lambda n: os.stat(os.path.join(out_dir, n)).st_mtime_ns):
        rank = int(name.split("-")[1])
        with open(os.path.join(out_dir, name)) as f:
            found.setdefault(rank, []).append(tuple(int(v) for v in f.read().split()))
    return found


def launch(name, policy, server_policy, restart, mode, extra=()):
    out = support.fresh_dir(name + "-out")
    config = CONFIG % (policy, server_policy, "true" if restart else "false")
    status, output, run_dir = support.launch(config, 2, 1, [os.path.abspath(__file__), "worker", out, mode], 120,
                                             name, extra)
    return status, output, run_dir, out


def same_weights(a, b):
    """The parameters (the BatchNorm statistics are each rank's own between two reports, so not compared)."""
    return all(torch.equal(a["state"][k], b["state"][k]) for k in a["state"] if "running" not in k and "batches" not in k)


def main():
    t0 = time.time()
    status, output, _, plain = launch("plain", "abort", "abort", False, "plain")
    support.expect(status == 0, "the undisturbed run failed", output)
    reference = final(plain)
    print("undisturbed: accuracy %.4f (%.1f s)" % (reference["accuracy"], time.time() - t0))

    # --resume of a run that stopped at step 55: it continues from the checkpoint of step 50, mid-epoch 1.
    status, output, run_dir, out = launch("stopped", "abort", "abort", False, "stop")
    support.expect(status != 0, "the run meant to stop at step 55 succeeded", output)
    status, output = support.run([support.PSHARD_BIN, "launch", "--servers", "1", "--workers", "2", "--resume", run_dir,
                                  "--timeout", "120", "--",
                                  support.PYTHON, os.path.abspath(__file__), "worker", out, "plain"], 150)
    support.expect(status == 0, "--resume failed", output)
    support.expect("resuming at step 50" in output, "the resumed job did not start at step 50", output)
    got = starts(out)
    support.expect(all((50, 1, 30 * BATCH) in got[r] for r in (0, 1)),
                   "start_step/start_epoch/ShardSampler of the resumed workers: %s (expected 50, 1, %d)"
                   % (got, 30 * BATCH), output)
    support.expect(same_weights(final(out), reference), "the resumed run's weights differ from the undisturbed run's",
                   output)
    kept = torch.load(os.path.join(out, "bn-after-epoch0.pt"))  # written by the stopped run's rank 0
    for name in os.listdir(out):
        if name.startswith("bn-start-"):
            support.expect(torch.equal(torch.load(os.path.join(out, name)), kept),
                           "%s: the resumed worker did not start with the job's BatchNorm statistics" % name, output)
    support.expect(float(kept.abs().sum()) > 0, "no BatchNorm statistics were kept", output)
    print("--resume at step 50: the same weights, bit for bit; BatchNorm statistics of epoch 1 loaded")

    # The server SIGKILLed mid-run: the launcher restarts the job from the newest checkpoint.
    out = support.fresh_dir("server-kill-out")
    d = support.fresh_dir("server-kill")
    cfg = os.path.join(d, "job.toml")
    with open(cfg, "w") as f:
        f.write(CONFIG % ("abort", "restart", "false"))
    run_dir = os.path.join(d, "run")
    job = subprocess.Popen([support.PSHARD_BIN, "launch", "--servers", "1", "--workers", "2", "--config", cfg,
                            "--run-dir", run_dir, "--timeout", "120", "--", support.PYTHON,
                            os.path.abspath(__file__), "worker", out, "slow"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=support.env(), cwd=d,
                           start_new_session=True)
    killed = False
    deadline = time.time() + 120
    while not killed and time.time() < deadline and job.poll() is None:
        folder = os.path.join(run_dir, "checkpoints")
        if os.path.isdir(folder) and "server-0.step-00000030.ckpt" in os.listdir(folder):
            for pid in os.listdir("/proc"):
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as f:
                        argv = f.read().split(b"\0")
                except OSError:
                    continue
                if len(argv) > 2 and argv[1] == b"server" and run_dir.encode() in argv:
                    os.kill(int(pid), signal.SIGKILL)
                    killed = True
        time.sleep(0.05)
    try:
        output = job.communicate(timeout=150)[0].decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        raise AssertionError("the job with a killed server did not end")
    support.expect(killed, "no server was found to kill", output)
    support.expect(job.returncode == 0, "the job with a restarted server failed", output)
    support.expect("restarting the job" in output, "the launcher did not restart the job", output)
    support.expect(same_weights(final(out), reference), "the restarted job's weights differ from the undisturbed run's",
                   output)
    print("server killed, job restarted from its checkpoint: the same weights, bit for bit")

    # checkpoint.on_sigterm = checkpoint: a SIGTERM to the launch mid-run stops every rank at the next step boundary,
    # which the server checkpoints; the launch exits 75 and --resume ends with the same weights.
    out = support.fresh_dir("sigterm-out")
    d = support.fresh_dir("sigterm")
    cfg = os.path.join(d, "job.toml")
    with open(cfg, "w") as f:
        f.write(CONFIG.replace("every_steps = 10", 'every_steps = 10\non_sigterm = "checkpoint"')
                % ("abort", "abort", "false"))
    run_dir = os.path.join(d, "run")
    job = subprocess.Popen([support.PSHARD_BIN, "launch", "--servers", "1", "--workers", "2", "--config", cfg,
                            "--run-dir", run_dir, "--timeout", "120", "--", support.PYTHON,
                            os.path.abspath(__file__), "worker", out, "sigterm"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=support.env(), cwd=d,
                           start_new_session=True)
    folder = os.path.join(run_dir, "checkpoints")
    deadline = time.time() + 120
    while time.time() < deadline and job.poll() is None and not (
            os.path.isdir(folder) and "server-0.step-00000030.ckpt" in os.listdir(folder)):
        time.sleep(0.05)
    job.send_signal(signal.SIGTERM)
    try:
        output = job.communicate(timeout=150)[0].decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        raise AssertionError("the job did not stop after SIGTERM")
    support.expect(job.returncode == 75, "the launch exited %d after SIGTERM, not 75" % job.returncode, output)
    support.expect("stopped at step" in output and "on SIGTERM" in output, "no rank said where it stopped", output)
    support.expect(not os.path.exists(os.path.join(out, "final.pt")), "a stopped rank ran to the end", output)
    status, output = support.run([support.PSHARD_BIN, "launch", "--servers", "1", "--workers", "2", "--resume", run_dir,
                                  "--timeout", "120", "--", support.PYTHON, os.path.abspath(__file__), "worker", out,
                                  "plain"], 150)
    support.expect(status == 0, "--resume after the SIGTERM stop failed", output)
    support.expect(same_weights(final(out), reference), "the weights after the SIGTERM stop and --resume differ",
                   output)
    # A worker that left the job ignores SIGTERM until it exits (Python gives its handler back to SIG_DFL while the
    # interpreter exits, and a SIGTERM then would turn a finished job into one whose workers were killed).
    after = [open(os.path.join(out, n)).read() for n in os.listdir(out) if n.startswith("sigterm-after-shutdown-")]
    support.expect(len(after) == 2 and all(a == "ignored" for a in after),
                   "SIGTERM after ps.shutdown() of the resumed workers: %s (expected ignored by both)" % after, output)
    print("SIGTERM: every rank stopped at a checkpoint (exit 75), --resume: the same weights, bit for bit")

    # A SIGTERM that comes after ps.init() but before the DistributedOptimizer exists is remembered: the job stops at
    # the boundary after its first step (the signalled rank flags step 1's pushes), and --resume continues there.
    out = support.fresh_dir("early-sigterm-out")
    early = CONFIG.replace("every_steps = 10", 'every_steps = 10\non_sigterm = "checkpoint"') % ("abort", "abort", "false")
    status, output, run_dir = support.launch(early, 2, 1, [os.path.abspath(__file__), "worker", out, "early-sigterm"],
                                             120, "early-sigterm")
    support.expect(status == 75, "the early SIGTERM gave exit %d, not 75" % status, output)
    support.expect("stopped at step 2 on SIGTERM" in output, "the job did not stop at step 2", output)
    status, output = support.run([support.PSHARD_BIN, "launch", "--servers", "1", "--workers", "2", "--resume", run_dir,
                                  "--timeout", "120", "--", support.PYTHON, os.path.abspath(__file__), "worker", out,
                                  "plain"], 150)
    support.expect(status == 0 and "resuming at step 2" in output, "--resume after the early stop failed", output)
    support.expect(same_weights(final(out), reference), "the weights after the early stop and --resume differ", output)
    print("SIGTERM before the DistributedOptimizer: stopped at step 2 (exit 75), --resume: the same weights")

    # A worker SIGKILLed at step 5 and restarted: it rejoins, and the job ends as accurate as the undisturbed one.
    status, output, run_dir, out = launch("rejoin", "continue", "abort", True, "kill")
    support.expect(status == 0, "the job with a restarted worker failed", output)
    support.expect("rejoining the job at step" in output, "the restarted worker did not rejoin", output)
    got = starts(out)
    support.expect(len(got[1]) == 2 and got[1][1][0] > 5, "rank 1's starts: %s" % got.get(1), output)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        summary = json.loads(f.read().splitlines()[-1])
    support.expect(summary.get("event") == "summary" and summary.get("workers_finished") == [0, 1],
                   "the summary does not list both workers: %s" % summary, output)
    acc = final(out)["accuracy"]
    # At least as accurate as the undisturbed run (0.5 points below it at most): a rejoin that harmed training shows
    # as a loss. The disturbed run trains other samples, and may end above it (0.9275 against 0.9202 when the worker
    # rejoined at step 31 of 120, on an AMD EPYC VM, 2026-11-28).
    support.expect(acc >= reference["accuracy"] - 0.005, "accuracy %.4f against %.4f undisturbed"
                   % (acc, reference["accuracy"]), output)
    print("worker 1 killed at step 5, rejoined at step %d: accuracy %.4f (undisturbed %.4f)"
          % (got[1][1][0], acc, reference["accuracy"]))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
        support.passed()
