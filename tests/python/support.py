"""Helpers of the Python tests: run `pshard launch ... -- python3 SCRIPT` jobs with a time limit, in fresh folders."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile

PSHARD_BIN = os.environ.get("PSHARD_BIN", "")
SOURCE_DIR = os.environ.get("PSHARD_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
PYTHON = os.environ.get("PSHARD_PYTHON", "/usr/bin/python3")  # Debian's holds torch; the GPU machine's is another
sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))  # the package under test, for the tests' own process


def env():
    """The environment of a job's processes: the package from the source tree, the library from the build."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.path.join(SOURCE_DIR, "python") + os.pathsep + e.get("PYTHONPATH", "")
    if PSHARD_BIN and "PSHARD_LIBRARY" not in e:
        e["PSHARD_LIBRARY"] = os.path.join(os.path.dirname(os.path.dirname(PSHARD_BIN)), "lib", "libpshard_c.so")
    e.setdefault("OMP_NUM_THREADS", "1")  # two workers on a small machine: one thread each
    return e


_dirs = []


def fresh_dir(name):
    """A new folder under /tmp; passed() removes it (a failed test's folders stay for inspection)."""
    d = tempfile.mkdtemp(prefix="pshard-pytest-%s-" % name)
    _dirs.append(d)
    return d


def passed():
    """The test passed: removes the folders it made."""
    for d in _dirs:
        shutil.rmtree(d, ignore_errors=True)
    del _dirs[:]


def run(argv, timeout, cwd=None):
    """Runs argv in its own process group; returns (exit status, output). The group is killed at the limit
    (status 124), so that a hung job leaves nothing behind."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env(), cwd=cwd,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return 124, out.decode("utf-8", "replace") + "\n[test] killed after %d s\n" % timeout


def launch(config_text, workers, servers, script_args, timeout, name="job", extra=()):
    """`pshard launch` of a job whose workers are `python3 script_args...`; returns (status, output, run_dir)."""
    d = fresh_dir(name)
    cfg = os.path.join(d, "job.toml")
    with open(cfg, "w") as f:
        f.write(config_text)
    run_dir = os.path.join(d, "run")
    argv = [PSHARD_BIN, "launch", "--servers", str(servers), "--workers", str(workers), "--config", cfg,
            "--run-dir", run_dir, "--grace-ms", "5000", "--timeout", str(timeout)] + list(extra) + \
        ["--", PYTHON] + list(script_args)
    status, out = run(argv, timeout + 30, cwd=d)
    return status, out, run_dir


def expect(cond, message, output=""):
    if not cond:
        sys.stderr.write(output[-6000:] + "\n")
        raise AssertionError(message)
