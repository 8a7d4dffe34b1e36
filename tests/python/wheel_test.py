#!/usr/bin/python3
"""The wheel: scripts/build_wheel.py packs the build, `pip install --no-index` puts it into a fresh virtual
environment, and from there, with no PYTHONPATH, no PSHARD_LIBRARY and not in the source tree, `pshard --version`
agrees with the package's version and a 2-worker `pshard launch ... -- python3 script.py` job trains. Prints how long
the install and the job took (the target: under 30 s together on a small machine).
"""
import json
import os
import subprocess
import sys
import time

import support

BUILD = os.path.dirname(os.path.dirname(os.path.abspath(support.PSHARD_BIN)))


def run(cmd, env, cwd, timeout, what):
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        sys.exit("%s failed (exit %d):\n%s\n%s" % (what, r.returncode, r.stdout[-4000:], r.stderr[-4000:]))
    return r.stdout


def main():
    work = support.fresh_dir("wheel")
    src = support.SOURCE_DIR
    wheel = run(["/usr/bin/python3", os.path.join(src, "scripts", "build_wheel.py"), "--build", BUILD, "--out",
                 os.path.join(work, "dist")], dict(os.environ), work, 120, "build_wheel.py").strip().splitlines()[-1]
    assert os.path.basename(wheel).startswith("pshard-") and wheel.endswith(".whl"), wheel
    venv = os.path.join(work, "venv")
    # The system's site packages hold torch (Debian's python3-torch); pshard itself comes from the wheel only.
    run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], dict(os.environ), work, 120, "venv")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PSHARD_LIBRARY", "PSHARD_BIN", "PSHARD_SOURCE_DIR")}
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    env["OMP_NUM_THREADS"] = "1"
    started = time.monotonic()
    run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "--no-cache-dir", "--disable-pip-version-check",
         wheel], env, work, 120, "pip install")
    installed = time.monotonic() - started

    py = os.path.join(venv, "bin", "python3")
    where = run([py, "-c", "import pshard, pshard._lib as l; print(pshard.__file__); print(pshard.__version__)"],
                env, work, 60, "import pshard").split()
    assert where[0].startswith(venv), "pshard imported from %s, not from the virtual environment" % where[0]
    version = run([os.path.join(venv, "bin", "pshard"), "--version"], env, work, 60, "pshard --version").split()[-1]
    assert version == where[1], "pshard --version says %s, the package %s" % (version, where[1])

    run_dir = os.path.join(work, "run")
    job_started = time.monotonic()
    run([os.path.join(venv, "bin", "pshard"), "launch", "--servers", "1", "--workers", "2", "--timeout", "240",
         "--config", os.path.join(src, "configs", "torch_fmnist_cnn.toml"), "--set", "train.epochs=1",
         "--run-dir", run_dir, "--", py, os.path.join(src, "examples", "torch", "fmnist_cnn.py"),
         "--train-size", "2048", "--test-size", "512"], env, work, 300, "the 2-worker job")
    job = time.monotonic() - job_started
    summary = None
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == "summary":
                summary = e
    assert summary is not None, "no summary in metrics.jsonl"
    assert summary.get("workers") == 2, summary
    assert summary.get("test_acc") is not None and summary["test_acc"] > 0.5, summary
    print("wheel %s: pip install %.1f s, 2-worker job %.1f s (test accuracy %.3f), %.1f s together"
          % (os.path.basename(wheel), installed, job, summary["test_acc"], installed + job))
    support.passed()


if __name__ == "__main__":
    main()
