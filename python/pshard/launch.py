"""Starting a pshard job from Python (a notebook, a driver script): `pshard launch` as a child process, as a Run.

    import pshard
    run = pshard.launch(servers=1, workers=2, config="configs/linreg_sgd.toml")           # pshard's own workers
    run = pshard.launch(servers=1, workers=2, config={"optimizer": {"lr": 0.05}},
                        script="train.py", args=["--epochs", "3"])                       # python3 train.py ...
    run = pshard.launch(servers=1, workers=2, config=cfg, fn=train, args=(data_dir,))    # train(data_dir) per worker
    run.wait(timeout=600); run.summary()

Non-blocking unless wait=True; the Run (pshard/run.py) reads the run directory as it grows. A function is found by
the workers by its module and name, as multiprocessing's spawn finds it: define it at the top level of a module
they can import (a .py file next to the notebook, on the same sys.path), or of the script that calls launch() under
`if __name__ == "__main__":` (each worker imports that script as `__mp_main__`, so its guarded part does not run
again). Nothing here imports torch.
"""
import json
import math
import os
import pickle
import shutil
import subprocess
import sys

from ._lib import PshardError
from .run import OUTPUT_FILE, Run

# In RUN_DIR, written before the launch starts (pshard launch counts none of them as a run of its own):
CONFIG_FILE = "job.toml"          # a config given as a dict, as TOML
FUNCTION_FILE = "function.pkl"    # fn=: what each worker calls (two pickles: how to import it, then the call)
RESULTS_DIR = "function-results"  # fn=: rank-R.pkl, each worker's return value

# What every worker of an fn= job runs: python3 -c RUNNER PACKAGE_PARENT FUNCTION_FILE.
RUNNER = ("import sys; sys.path.insert(0, sys.argv[1]); from pshard.launch import run_function; "
          "run_function(sys.argv[2])")

# The files by which `pshard launch` recognises a run (common/run/run_directory.cc, run_files_in): a directory that
# holds one is refused before anything of ours is written into it.
_RUN_FILES = ("config.toml", "metrics.jsonl", "metrics.csv", "model.bin", "run-id", "checkpoints")

# Set in a worker of an fn= job while it imports the script that called launch() (see run_function).
_importing_main = False


def launch(script=None, fn=None, args=(), kwargs=None, servers=1, workers=1, config=None, settings=None,
           run_dir=None, wait=False, timeout_s=None, grace_s=5.0, python=None, pshard_bin=None, env=None, cwd=None,
           launch_args=(), dashboard=False):
    """Starts `pshard launch` for a job and returns its Run (pshard/run.py); see docs/PYTHON.md, "Starting a job
    from Python".

    script: a Python script each worker runs (`-- PYTHON script args...`), a path or [path, arg, ...]; fn: a
        picklable top-level function each worker calls as fn(*args, **kwargs) (it calls pshard.init() itself);
        neither: pshard's own C++ workers train the config's model.
    servers, workers: the counts (`workers` may be "MIN:MAX", an elastic job).
    config: a TOML file's path, or a dict of sections ({"train": {"batch_size": 32}}) written to RUN_DIR/job.toml.
    settings: {"optimizer.lr": 0.05, ...}, each passed as --set KEY=VALUE.
    run_dir: the run directory (default: runs/<run.name>, runs/<run.name>.1, ..., the first that holds no run, as
        pshard launch picks); one that holds a run is refused. RUN_DIR/launch.log keeps the launch's output.
    wait: block until the job ends; PshardError (with .exit_code) naming the status and the output's last lines
        when it failed. timeout_s: the job's limit (pshard launch --timeout). grace_s: --grace-ms, in seconds.
    python: the workers' interpreter (default: this one, sys.executable). pshard_bin: the pshard executable
        (default: the wheel's, the source tree's build/bin/pshard, then PATH). env: variables added to the job's
        environment; cwd: the launch's working directory; launch_args: more pshard launch options.
    dashboard: True (127.0.0.1, a free port) or "ADDR:PORT": serve the job's live web page (pshard launch
        --dashboard); Run.dashboard_url() gives its address with the token.
    """
    if _importing_main:
        raise PshardError("pshard.launch() was called while a worker imported the script that defined its function: "
                          "call it under `if __name__ == \"__main__\":`", "PSHARD_ERR_STATE")
    if script is not None and fn is not None:
        raise PshardError("pshard.launch: give script= or fn=, not both", "PSHARD_ERR_ARGUMENT")
    if fn is None and kwargs:
        raise PshardError("pshard.launch: kwargs= is for fn=", "PSHARD_ERR_ARGUMENT")
    if isinstance(args, str):
        args = [args]
    if script is None and fn is None and args:
        raise PshardError("pshard.launch: args= needs script= or fn= (pshard's own workers take none)",
                          "PSHARD_ERR_ARGUMENT")
    exe = find_pshard(pshard_bin)
    python = python or sys.executable or "python3"
    base = os.path.abspath(cwd or os.getcwd())
    config_path = None
    if isinstance(config, str):
        config_path = os.path.abspath(os.path.join(base, config))
        if not os.path.isfile(config_path):
            raise PshardError("pshard.launch: config %s is not a file" % config_path, "PSHARD_ERR_CONFIG")
    elif config is not None and not isinstance(config, dict):
        raise PshardError("pshard.launch: config must be a TOML file's path or a dict, not %s" % type(config).__name__,
                          "PSHARD_ERR_ARGUMENT")
    call = _pickled_call(fn, args, kwargs) if fn is not None else None  # before anything is written

    if run_dir is None:
        run_dir = _free_run_dir(base, _run_name(config, config_path, settings))
    run_dir = os.path.abspath(os.path.join(base, run_dir))
    held = [f for f in _RUN_FILES if os.path.exists(os.path.join(run_dir, f))]
    if held:
        raise PshardError("pshard.launch: %s already holds a run (%s): choose another run_dir, or read it with "
                          "pshard.load_run()" % (run_dir, ", ".join(held)), "PSHARD_ERR_ARGUMENT")
    os.makedirs(run_dir, exist_ok=True)
    if isinstance(config, dict):
        config_path = os.path.join(run_dir, CONFIG_FILE)
        _write_atomically(config_path, to_toml(config).encode())

    argv = [exe, "launch", "--servers", str(servers), "--workers", str(workers), "--run-dir", run_dir,
            "--grace-ms", str(int(grace_s * 1000))]
    if config_path:
        argv += ["--config", config_path]
    for key, value in (settings or {}).items():
        argv += ["--set", "%s=%s" % (key, _setting(value))]
    if timeout_s:
        argv += ["--timeout", str(int(math.ceil(timeout_s)))]
    if dashboard:
        argv += ["--dashboard"] + (["--dashboard-listen", dashboard] if isinstance(dashboard, str) else [])
    argv += list(launch_args)
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if script is not None:
        command = [script] if isinstance(script, str) else list(script)
        command[0] = os.path.abspath(os.path.join(base, command[0]))
        argv += ["--", python] + command + [str(a) for a in args]
    elif fn is not None:
        _write_atomically(os.path.join(run_dir, FUNCTION_FILE), call)
        argv += ["--", python, "-c", RUNNER, package_parent, os.path.join(run_dir, FUNCTION_FILE)]

    child_env = dict(os.environ)
    # The workers import the same pshard package as this process.
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, child_env.get("PYTHONPATH")) if p)
    child_env.update({k: str(v) for k, v in (env or {}).items()})
    with open(os.path.join(run_dir, OUTPUT_FILE), "wb") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   env=child_env, cwd=base, start_new_session=True)
    run = Run(run_dir, process=process, argv=argv, grace_s=grace_s)
    if wait:
        # pshard launch --timeout ends the job; the margin covers its grace and the processes' exit.
        limit = None if not timeout_s else timeout_s + grace_s + 30
        try:
            run.wait(timeout=limit, check=True)
        except PshardError as e:
            if e.status == "PSHARD_ERR_TIMEOUT":
                run.stop()
            raise
        except KeyboardInterrupt:
            run.stop()
            raise
    return run


def find_pshard(pshard_bin=None):
    """The pshard executable: `pshard_bin`; else the one inside an installed wheel (pshard/bin/pshard); else the
    source tree's build/bin/pshard (next to build/lib/libpshard_c.so, as the library is found); else `pshard` on
    PATH."""
    if pshard_bin:
        if not (os.path.isfile(pshard_bin) and os.access(pshard_bin, os.X_OK)):
            raise PshardError("pshard.launch: pshard_bin %s is not an executable file" % pshard_bin,
                              "PSHARD_ERR_ENVIRONMENT")
        return os.path.abspath(pshard_bin)
    here = os.path.dirname(os.path.abspath(__file__))
    tried = [os.path.join(here, "bin", "pshard"),
             os.path.join(os.path.dirname(os.path.dirname(here)), "build", "bin", "pshard")]
    for path in tried:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    on_path = shutil.which("pshard")
    if on_path:
        return on_path
    raise PshardError("pshard.launch: the pshard executable was not found (tried %s and PATH): build pshard (cmake "
                      "--build build), install the wheel, or pass pshard_bin=" % ", ".join(tried),
                      "PSHARD_ERR_ENVIRONMENT")


def to_toml(config):
    """A config dict as TOML text: top-level {section: {key: value}} (nested dicts become [a.b] tables); values are
    str, bool, int, float or lists of them."""
    lines = []
    plain = {k: v for k, v in config.items() if not isinstance(v, dict)}
    for key, value in plain.items():
        lines.append("%s = %s" % (_toml_key(key), _toml_value(value)))

    def table(prefix, d):
        scalars = {k: v for k, v in d.items() if not isinstance(v, dict)}
        if scalars or not d:
            lines.append("")
            lines.append("[%s]" % prefix)
            for key, value in scalars.items():
                lines.append("%s = %s" % (_toml_key(key), _toml_value(value)))
        for key, value in d.items():
            if isinstance(value, dict):
                table(prefix + "." + _toml_key(key), value)

    for key, value in config.items():
        if isinstance(value, dict):
            table(_toml_key(key), value)
    return "\n".join(lines).lstrip("\n") + "\n"


def _toml_key(key):
    key = str(key)
    if key and all(c.isalnum() or c in "_-" for c in key):
        return key
    return json.dumps(key)


def _toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: the same escapes (\", \\, \n, \uXXXX)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise PshardError("pshard.launch: config value %r (%s) has no TOML form" % (value, type(value).__name__),
                      "PSHARD_ERR_CONFIG")


def _setting(value):
    # --set KEY=VALUE takes the value as text: booleans as TOML spells them, lists as TOML arrays.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_setting(v) for v in value) + "]"
    return str(value)


def _run_name(config, config_path, settings):
    """run.name as the job will see it (--set, then the config), for the default run directory."""
    if settings and "run.name" in settings:
        return str(settings["run.name"])
    if isinstance(config, dict):
        return str(config.get("run", {}).get("name", "run"))
    if config_path:
        try:
            import tomllib  # Python 3.11+
        except ImportError:
            return "run"
        try:
            with open(config_path, "rb") as f:
                return str(tomllib.load(f).get("run", {}).get("name", "run"))
        except (OSError, ValueError):
            return "run"  # pshard launch names what is wrong with the file
    return "run"


def _free_run_dir(base, name):
    # runs/NAME, runs/NAME.1, ...: the first that holds neither a run nor another launch's output.
    for n in range(0, 100000):
        candidate = os.path.join(base, "runs", name if n == 0 else "%s.%d" % (name, n))
        if not any(os.path.exists(os.path.join(candidate, f)) for f in _RUN_FILES + (OUTPUT_FILE,)):
            return candidate
    raise PshardError("pshard.launch: no free run directory under %s/runs/%s.N" % (base, name), "PSHARD_ERR_STATE")


def _write_atomically(path, data):
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


# ---- fn= jobs: the function's journey to the workers ----------------------------------------------------------


def _pickled_call(fn, args, kwargs):
    """Two pickles: how a worker finds the function's module (this process's sys.path, with "" as the working
    directory, and its main script), then (fn, args, kwargs), which pickle stores as the function's module and
    name."""
    if not callable(fn):
        raise PshardError("pshard.launch: fn=%r is not callable" % (fn,), "PSHARD_ERR_ARGUMENT")
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", getattr(fn, "__name__", "?"))
    main = sys.modules.get("__main__")
    main_path = getattr(main, "__file__", None)
    if module == "__main__" and not main_path:
        raise PshardError("pshard.launch: fn %s is defined in __main__ without a file (a notebook, python3 -c): the "
                          "workers import a function by its module and name, so define it in a module they can "
                          "import (a .py file next to the notebook) and import it from there" % qualname,
                          "PSHARD_ERR_ARGUMENT")
    if "<" in qualname:
        raise PshardError("pshard.launch: fn %s is not a top-level function (a lambda or a function defined inside "
                          "another): the workers import it by its module and name" % qualname, "PSHARD_ERR_ARGUMENT")
    where = {"sys_path": [os.path.abspath(p) for p in sys.path],  # "" is this process's working directory
             "main_path": os.path.abspath(main_path) if module == "__main__" else None}
    try:
        return pickle.dumps(where) + pickle.dumps((fn, tuple(args), dict(kwargs or {})))
    except Exception as e:
        raise PshardError("pshard.launch: fn %s and its arguments cannot be pickled for the workers: %s: %s"
                          % (qualname, type(e).__name__, e), "PSHARD_ERR_ARGUMENT")


def run_function(path):
    """A worker of an fn= job (started as `python3 -c RUNNER ...`): imports the function as the launching process
    described it, calls it, and keeps its return value in RUN_DIR/function-results/rank-R.pkl. An exception ends
    the worker as a script's would (the job's failure, quoted by the coordinator)."""
    global _importing_main
    with open(path, "rb") as f:
        where = pickle.load(f)
        # The launching process's folders after the worker's own (the same ones when it runs the same interpreter):
        # its script's folder, its working directory, what it added.
        sys.path.extend(p for p in where["sys_path"] if p not in sys.path)
        if where["main_path"]:
            # As multiprocessing's spawn does: the launching script runs as __mp_main__ (its `if __name__ ==
            # "__main__":` part does not) and stands for __main__ while the function is unpickled.
            import runpy
            import types
            main = types.ModuleType("__mp_main__")
            main.__file__ = where["main_path"]
            sys.modules["__mp_main__"] = main
            _importing_main = True
            try:
                main.__dict__.update(runpy.run_path(where["main_path"], run_name="__mp_main__"))
            finally:
                _importing_main = False
            sys.modules["__main__"] = main
        fn, args, kwargs = pickle.load(f)
    result = fn(*args, **kwargs)
    rank = os.environ.get("PSHARD_RANK")
    if rank is None:
        return
    out_dir = os.path.join(os.path.dirname(os.path.abspath(path)), RESULTS_DIR)
    try:
        data = pickle.dumps(result)
    except Exception as e:
        sys.stderr.write("pshard: the return value of %s on rank %s cannot be pickled (%s: %s): not kept\n"
                         % (getattr(fn, "__qualname__", fn), rank, type(e).__name__, e))
        return
    os.makedirs(out_dir, exist_ok=True)
    _write_atomically(os.path.join(out_dir, "rank-%s.pkl" % rank), data)


def function_results(run_dir):
    """The return values in RUN_DIR/function-results, in rank order (None for a rank without one)."""
    out_dir = os.path.join(run_dir, RESULTS_DIR)
    if not os.path.isdir(out_dir):
        return []
    ranks = {}
    for name in os.listdir(out_dir):
        if name.startswith("rank-") and name.endswith(".pkl") and name[5:-4].isdigit():
            with open(os.path.join(out_dir, name), "rb") as f:
                ranks[int(name[5:-4])] = pickle.load(f)
    return [ranks.get(r) for r in range(max(ranks) + 1)] if ranks else []
