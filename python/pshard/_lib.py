"""ctypes bindings of libpshard_c.so (worker/capi/pshard_c.h); nothing here is compiled against Python or torch."""
import ctypes
import os

# pshard_status (pshard_c.h)
OK = 0
PENDING = 1
JOB_ENDED = 2
ERR_ARGUMENT = -1
ERR_ENVIRONMENT = -2
ERR_CONFIG = -3
ERR_CONNECT = -4
ERR_STATE = -5
ERR_SERVER = -6
ERR_TIMEOUT = -7
ERR_ABORTED = -8
ERR_INTERNAL = -9
FLOAT32 = 0
# pshard_config_type (pshard_c.h)
CONFIG_STRING = 0
CONFIG_INT = 1
CONFIG_DOUBLE = 2
CONFIG_BOOL = 3
CONFIG_INT_LIST = 4
# pshard_epoch_report.figures (pshard_c.h)
TRAIN_LOSS = 1
TRAIN_ACC = 2
TEST_LOSS = 4
TEST_ACC = 8
LOSS_SCALING = 16
LOSS_MEANS = 32


class PshardError(RuntimeError):
    """A pshard call failed; `status` is the C API's status name (e.g. "PSHARD_ERR_ABORTED")."""

    def __init__(self, message, status="PSHARD_ERR_STATE"):
        super().__init__(message)
        self.status = status


class EpochReport(ctypes.Structure):
    _fields_ = [
        ("epoch", ctypes.c_int64),
        ("step", ctypes.c_int64),
        ("samples", ctypes.c_int64),
        ("loss_sum", ctypes.c_double),
        ("correct", ctypes.c_int64),
        ("test_samples", ctypes.c_int64),
        ("test_loss_sum", ctypes.c_double),
        ("test_correct", ctypes.c_int64),
        ("epoch_s", ctypes.c_double),
        ("eval_s", ctypes.c_double),
        ("data_s", ctypes.c_double),
        ("forward_s", ctypes.c_double),
        ("backward_s", ctypes.c_double),
        ("figures", ctypes.c_uint32),
        ("loss_scale", ctypes.c_double),
        ("skipped_steps", ctypes.c_int64),
        ("label", ctypes.c_int64),
    ]


def _candidates():
    """Where the library may be: PSHARD_LIBRARY, next to this package, the source tree's build/lib."""
    env = os.environ.get("PSHARD_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    return [os.path.join(here, "libpshard_c.so"), os.path.join(repo, "build", "lib", "libpshard_c.so")]


def _load():
    tried = []
    for path in _candidates():
        if os.path.isfile(path):
            lib = ctypes.CDLL(path)
            _declare(lib)
            return lib
        tried.append(path)
    raise PshardError(
        "pshard: libpshard_c.so not found (tried " + ", ".join(tried) + "): build pshard (cmake --build build) "
        "or set PSHARD_LIBRARY to the library's path", "PSHARD_ERR_ENVIRONMENT")


def _declare(lib):
    c = ctypes
    client = c.c_void_p
    sigs = {
        "pshard_last_error": (c.c_char_p, []),
        "pshard_status_name": (c.c_char_p, [c.c_int]),
        "pshard_connect": (c.c_int, [c.POINTER(client)]),
        "pshard_close": (c.c_int, [client, c.c_int, c.c_char_p]),
        "pshard_rank": (c.c_int, [client]),
        "pshard_size": (c.c_int, [client]),
        "pshard_local_rank": (c.c_int, [client]),
        "pshard_elastic": (c.c_int, [client]),
        "pshard_epoch_plan": (c.c_int, [client, c.c_int64, c.c_int64, c.POINTER(c.c_int64), c.POINTER(c.c_int),
                                        c.POINTER(c.c_int), c.POINTER(c.c_uint32), c.c_int]),
        "pshard_joining_epoch": (c.c_int, [client, c.POINTER(c.c_int64)]),
        "pshard_config_get": (c.c_int, [client, c.c_char_p, c.c_char_p, c.c_size_t]),
        "pshard_config_type": (c.c_int, [c.c_char_p]),
        "pshard_barrier": (c.c_int, [client, c.c_char_p, c.c_int64]),
        "pshard_barrier_vote": (c.c_int, [client, c.c_char_p, c.c_int, c.POINTER(c.c_int), c.c_int64]),
        "pshard_add_tensor": (c.c_int, [client, c.c_char_p, c.c_int, c.POINTER(c.c_int64), c.c_int]),
        "pshard_start": (c.c_int, [client, c.c_char_p, c.c_int64, c.c_int64]),
        "pshard_start_step": (c.c_int, [client, c.POINTER(c.c_int64)]),
        "pshard_request_stop": (c.c_int, [client, c.c_int64]),
        "pshard_scale_loss": (c.c_int, [client]),
        "pshard_request_skip": (c.c_int, [client, c.c_int64]),
        "pshard_stop_at": (c.c_int, [client, c.POINTER(c.c_int64)]),
        "pshard_init_tensor": (c.c_int, [client, c.c_int, c.c_void_p, c.POINTER(c.c_uint64)]),
        "pshard_initialiser": (c.c_int, [client, c.POINTER(c.c_int)]),
        "pshard_pull": (c.c_int, [client, c.c_int, c.c_void_p, c.c_int64, c.POINTER(c.c_uint64)]),
        "pshard_push_pull": (c.c_int, [client, c.c_int, c.c_void_p, c.c_void_p, c.c_int64, c.POINTER(c.c_uint64)]),
        "pshard_add_table": (c.c_int, [client, c.c_char_p, c.c_uint64, c.c_int, c.c_int, c.c_double]),
        "pshard_add_hashed_table": (c.c_int, [client, c.c_char_p, c.c_uint64, c.c_int, c.c_int, c.c_double,
                                              c.c_uint32, c.c_int64]),
        "pshard_pull_rows": (c.c_int, [client, c.c_int, c.c_void_p, c.c_size_t, c.c_void_p, c.c_int64,
                                       c.POINTER(c.c_uint64)]),
        "pshard_push_rows": (c.c_int, [client, c.c_int, c.c_void_p, c.c_size_t, c.c_void_p, c.c_int64,
                                       c.POINTER(c.c_uint64)]),
        "pshard_poll": (c.c_int, [client, c.c_uint64]),
        "pshard_wait": (c.c_int, [client, c.c_uint64, c.c_int64]),
        "pshard_wait_skipped": (c.c_int, [client, c.c_uint64, c.c_int64, c.POINTER(c.c_int)]),
        "pshard_report_step": (c.c_int, [client, c.c_int64, c.c_int64, c.c_double]),
        "pshard_report_epoch": (c.c_int, [client, c.POINTER(EpochReport)]),
        "pshard_report_figure": (c.c_int, [client, c.c_char_p, c.c_double]),
        "pshard_traces": (c.c_int, [client, c.c_int64]),
        "pshard_trace_span": (c.c_int, [client, c.c_char_p, c.c_char_p, c.c_int64, c.c_int64, c.c_int64]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args


_lib = None


def lib():
    """The loaded library (loaded on first use)."""
    global _lib
    if _lib is None:
        _lib = _load()
    return _lib


def check(status, what=""):
    """Raises PshardError for an error status, with the library's message; returns the status otherwise."""
    if status >= 0:
        return status
    message = lib().pshard_last_error().decode("utf-8", "replace")
    name = lib().pshard_status_name(status).decode()
    raise PshardError((what + ": " if what else "") + message, name)
