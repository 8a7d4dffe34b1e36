"""Starting pshard jobs from Python and reading their runs, cell by cell as in a notebook (docs/PYTHON.md, "Starting
a job from Python"). Run it whole with `python3 examples/launch_from_python.py` (PYTHONPATH=python, or the wheel
installed), or paste the cells into a notebook.

The run directories go to runs/ under the working directory (runs/linreg_sgd, runs/linreg_sgd.1, ...).
"""
# %% Cell 1: the function each worker of a function job runs. pshard.launch(fn=...) finds it by module and name, as
# multiprocessing's spawn does: in a notebook, put it in a file next to the notebook (say my_training.py) and
# `from my_training import train_tiny`; in a script, at the top level, with the launching part under
# `if __name__ == "__main__":` (each worker imports the script to find the function).
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))  # not needed with the wheel installed

import pshard  # noqa: E402  (pshard.launch and pshard.load_run do not import torch)


def train_tiny(epochs, steps):
    """Linear regression on synthetic data through pshard.torch: every worker trains its own batches, the servers
    average the gradients and run the config's optimizer. Returns this rank's last loss."""
    import torch
    import pshard.torch as ps
    ps.init()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = ps.DistributedOptimizer(model, steps_per_epoch=steps)
    target = torch.arange(8, dtype=torch.float32).unsqueeze(1) / 8
    g = torch.Generator().manual_seed(100 + ps.rank())
    for epoch in range(1, epochs + 1):
        for _ in range(steps):
            x = torch.randn(32, 8, generator=g)
            loss = torch.nn.functional.mse_loss(model(x), x @ target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        ps.report(epoch=epoch, train_loss=float(loss))
    ps.shutdown()
    return float(loss)


if __name__ == "__main__":  # in a notebook: leave this line out and run the cells below at the top level
    # %% Cell 2: pshard's own workers train the config's model (1 server, 2 workers); launch() returns at once.
    run = pshard.launch(servers=1, workers=2, config=os.path.join(REPO, "configs", "linreg_sgd.toml"),
                        settings={"train.epochs": 3, "data.train_size": 4096}, timeout_s=300)
    print("started", run)
    deadline = time.monotonic() + 300
    while run.poll() is None and time.monotonic() < deadline:  # what launch's progress line shows, from Python
        latest = run.progress()["epoch"]
        if latest:
            print("  epoch %d: train loss %.4f" % (latest["epoch"], latest["train_loss"]))
        time.sleep(0.5)
    print("exit status", run.wait(timeout=60))
    print("test loss after %d epochs: %.4f" % (run.summary()["epochs"], run.summary()["test_loss"]))

    # %% Cell 3: a function on every worker, with the config as a dict (RUN_DIR/job.toml) and an override;
    # wait=True blocks and raises PshardError (with .exit_code and the output's last lines) if the job fails.
    config = {"run": {"name": "tiny_torch"}, "optimizer": {"name": "sgd", "lr": 0.05}, "train": {"batch_size": 32}}
    run = pshard.launch(servers=1, workers=2, config=config, settings={"optimizer.lr": 0.1}, fn=train_tiny,
                        args=(3, 20), wait=True, timeout_s=300)
    print("each rank's last loss:", run.results())
    for line in run.metrics():
        print("  epoch %d: train loss %.5f, %.0f samples/s" % (line["epoch"], line["train_loss"],
                                                               line["samples_per_s"]))

    # %% Cell 4: a script on every worker is script=[path, args...] (`pshard launch ... -- python3 path args`), e.g.
    # pshard.launch(servers=1, workers=2, config="configs/torch_fmnist_cnn.toml",
    #               script=["examples/torch/fmnist_cnn.py", "--data", DATA_DIR])

    # %% Cell 5: any run directory, finished or still running, read-only.
    done = pshard.load_run(run.dir)
    print(done, "summary:", {k: done.summary()[k] for k in ("epochs", "steps", "workers", "train_loss")})

    # %% Cell 6: stop a running job (SIGTERM to the launch; with checkpoint.on_sigterm = "checkpoint" it stops at the
    # next step boundary and `pshard launch --resume RUN_DIR` continues it).
    run = pshard.launch(servers=1, workers=2, config=os.path.join(REPO, "configs", "linreg_sgd.toml"),
                        settings={"train.epochs": 1000, "train.simulate_compute_ms": 5, "train.log_every": 10})
    deadline = time.monotonic() + 60
    while not run.events("step") and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    print("stopped at step", run.progress()["step"]["step"], "exit status", run.stop())
    print("the last lines of its output:\n" + run.output_tail(3))
