"""pshard from Python: a worker of a pshard job, over ctypes (libpshard_c.so); see docs/PYTHON.md.

The framework-neutral part lives here (the job: init, rank, size, config, barrier, shutdown); pshard.torch adds
DistributedOptimizer for PyTorch models.
"""
import atexit
import ctypes
import signal
import sys
import threading

from . import _lib
from ._lib import PshardError, check, lib
from .launch import launch
from .run import Run, load_run

__all__ = ["PshardError", "init", "is_initialized", "shutdown", "rank", "size", "local_rank", "config", "barrier",
           "barrier_vote", "client", "launch", "load_run", "Run"]

# The pshard version this package belongs to; `pshard --version` says the same (scripts/build_wheel.py checks).
__version__ = "0.1.0"

_client = None


def init():
    """Joins the job this process was started for by `pshard launch ... -- CMD` or `pshard task/slurm ... -- CMD`
    (it reads the PSHARD_* variables they export; a clear PshardError otherwise). Blocks until every node of the
    job registered. Calling it again does nothing."""
    global _client
    if _client is not None:
        return
    handle = ctypes.c_void_p()
    check(lib().pshard_connect(ctypes.byref(handle)), "pshard.init")
    _client = handle
    atexit.register(_leave_at_exit)
    # checkpoint.on_sigterm = checkpoint: from here on a SIGTERM (a preemption, a time limit) is remembered, not
    # fatal, even before the DistributedOptimizer exists; the optimizer then stops the job at a step boundary.
    if config("checkpoint.on_sigterm") == "checkpoint" and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum, frame):
    from . import _state
    _state.sigterm = True


def is_initialized():
    return _client is not None


def client():
    """The C API's client handle; a PshardError naming init() when there is none."""
    if _client is None:
        raise PshardError("pshard: call pshard.init() (ps.init()) first", "PSHARD_ERR_STATE")
    return _client


def shutdown(exit_status=0, reason=None):
    """Leaves the job (exit_status 0: this worker finished; else `reason` is what the job's abort quotes). The
    script decides how long it trains: the job has finished when every rank left having pushed the same steps. A
    rank that leaves having pushed fewer steps than a rank that goes on is the job's failure, whatever exit_status
    says: cluster.failure_policy = abort ends the job naming it, continue finishes without it (launch exits 1)."""
    global _client
    if _client is None:
        return
    if exit_status == 0 and reason is None:
        reason = "ps.shutdown() was called"  # quoted only when it is called before the end of the job
    from . import _state
    failed = None
    if exit_status == 0 and _state.optimizer is not None:
        # The last step's weights (DistributedOptimizer loads them lazily): every request ends before the client.
        try:
            _state.optimizer.synchronize()
        except PshardError as e:
            failed, exit_status, reason = e, 1, str(e)
    stop_on_sigterm = _state.optimizer is not None and _state.optimizer.stop_on_sigterm
    c, _client = _client, None
    _state.forget()
    check(lib().pshard_close(c, int(exit_status), reason.encode() if reason else None), "pshard.shutdown")
    if stop_on_sigterm and threading.current_thread() is threading.main_thread():
        # checkpoint.on_sigterm = checkpoint: this worker has left the job, so a SIGTERM (which the launch passes on
        # to every process when it is stopped) has nothing left to stop. Ignored, it cannot kill the process while
        # the interpreter exits (Python gives its own handler back to SIG_DFL then), which would turn a worker that
        # finished into one "killed by signal 15" and the finished job into a failed one.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if failed is not None:
        raise failed


def _leave_at_exit():
    # A script that ends without shutdown(): leave as failed when an exception is ending it, so that the
    # coordinator's abort quotes it instead of waiting for the heartbeat timeout. Python tells an atexit function
    # nothing of sys.exit(status): the library judges such a leave by how far the job got (a sys.exit(1) before the
    # end is a failure), and the launcher sees the process's own exit status.
    if _client is None:
        return
    last = getattr(sys, "last_value", None)
    if last is not None:
        shutdown(1, "%s: %s" % (type(last).__name__, last))
    else:
        shutdown(0, "the script ended (sys.exit() or its last line) without ps.shutdown()")


def rank():
    """This worker's rank, 0..size()-1."""
    return check(lib().pshard_rank(client()), "pshard.rank")


def size():
    """The number of workers in the job (an elastic job's most: epoch_plan() says who trains an epoch)."""
    return check(lib().pshard_size(client()), "pshard.size")


def elastic():
    """True in an elastic job (`pshard launch --workers MIN:MAX`): who trains changes between epochs."""
    return check(lib().pshard_elastic(client()), "pshard.elastic") == 1


def local_rank():
    """This worker's index among the workers on its host (pick a GPU with it)."""
    return check(lib().pshard_local_rank(client()), "pshard.local_rank")


def config(key):
    """The job config's value of `key` ("train.epochs") as a Python value (int, float, bool, str or list)."""
    buf = ctypes.create_string_buffer(256)
    n = check(lib().pshard_config_get(client(), key.encode(), buf, len(buf)), "pshard.config")
    if n >= len(buf):
        buf = ctypes.create_string_buffer(n + 1)
        check(lib().pshard_config_get(client(), key.encode(), buf, len(buf)), "pshard.config")
    text = buf.value.decode()
    kind = check(lib().pshard_config_type(key.encode()), "pshard.config")
    if kind == _lib.CONFIG_BOOL:
        return text == "true"
    if kind == _lib.CONFIG_INT:
        return int(text)
    if kind == _lib.CONFIG_DOUBLE:
        return float(text)
    if kind == _lib.CONFIG_INT_LIST:
        return [int(x) for x in text[1:-1].split(",") if x.strip()]
    return text  # a string stays one, whatever it looks like ("true", "3")


def barrier(name="barrier", timeout_s=None):
    """Blocks until every live worker entered barrier `name`."""
    ms = -1 if timeout_s is None else int(timeout_s * 1000)
    check(lib().pshard_barrier(client(), name.encode(), ms), "pshard.barrier")


def barrier_vote(vote, name="vote", timeout_s=None):
    """barrier(name) where each worker raises a flag (vote=True) or not: True when some worker of the round raised
    it, the same answer on every worker."""
    ms = -1 if timeout_s is None else int(timeout_s * 1000)
    any_vote = ctypes.c_int(0)
    check(lib().pshard_barrier_vote(client(), name.encode(), 1 if vote else 0, ctypes.byref(any_vote), ms),
          "pshard.barrier_vote")
    return any_vote.value != 0
