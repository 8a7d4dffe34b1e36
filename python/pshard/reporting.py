"""What a pshard.torch script tells the job: each epoch's figures (report), each step's loss (report_step), and where
a worker starts (start_step, start_epoch). Used as pshard.torch's names (docs/PYTHON.md)."""
import ctypes
import time

from . import _state
from ._lib import (LOSS_MEANS, LOSS_SCALING, TEST_ACC, TEST_LOSS, TRAIN_ACC, TRAIN_LOSS, EpochReport, PshardError,
                   check, lib)
from . import client, elastic
from .buffers import _average_buffers


def _scaler_enabled(scaler):
    """False for a disabled GradScaler (torch 1.13's without CUDA: scale 1, never changed)."""
    return not (callable(getattr(scaler, "is_enabled", None)) and not scaler.is_enabled())


def report(epoch, train_loss=None, train_acc=None, test_loss=None, test_acc=None, samples=None, test_samples=None,
           eval_s=0.0, loss=None, figures=None):
    """Reports this worker's figures of epoch `epoch`, numbered as the script numbers its epochs (from 0 or 1, or
    any increasing integers; recorded as given; in an elastic job, the plans' numbering from start_epoch()), then
    makes the model's floating-point buffers (BatchNorm running statistics) the mean over the
    workers (evaluate after report() to use them). Every rank calls it; the coordinator combines the ranks' reports into the epoch's line:
    weighted by `samples` (default: this rank's steps in the epoch x batch size) and `test_samples` (default:
    equal weights), so pass them when the ranks' shares differ. Bytes on the wire and the time blocked on the
    servers are measured by the library. Only the figures given reach metrics.jsonl (the others are null there, not
    zero); a NaN or infinite loss is recorded as "nan", "inf" or "-inf". `figures`: the script's own figures by name
    ({"test_auc": 0.79, "test_logloss": 0.45}, at most 16; names of letters, digits and "_", starting with a
    letter): the epoch line's "figures" holds each one's mean over the ranks, weighted as the test figures (as the
    samples when the ranks did not evaluate), and `pshard report` shows them. A PshardError for an epoch number that
    does not increase from this rank's last report, an accuracy outside [0, 1], or a figure name or value that is not
    one."""
    opt = _state.optimizer
    if opt is None:
        raise PshardError("pshard: report() needs a DistributedOptimizer (and ps.init() before it)")
    # The ranks' reports of an epoch are combined by its place in the run: an elastic job's plan, else the epoch
    # after this rank's last report (the first: the epoch of start_step(), with steps_per_epoch).
    if _state.plan is not None or elastic():
        place = int(epoch) + 1
    elif opt.reported_place:
        place = opt.reported_place + 1
    else:
        place = 1 + (opt.start_step // opt.steps_per_epoch if opt.steps_per_epoch else 0)
    for name, acc in (("train_acc", train_acc), ("test_acc", test_acc)):
        if acc is not None and not 0.0 <= float(acc) <= 1.0:
            raise PshardError("pshard.report: %s=%r is not an accuracy (a fraction in [0, 1])" % (name, acc),
                              "PSHARD_ERR_ARGUMENT")
    own = []
    for name, value in (figures or {}).items():
        try:
            own.append((str(name).encode("utf-8"), float(value)))
        except (TypeError, ValueError):
            raise PshardError("pshard.report: figure %r=%r is not a number" % (name, value), "PSHARD_ERR_ARGUMENT")
    for name, value in own:  # (a refused one drops those given before it)
        check(lib().pshard_report_figure(client(), name, value), "pshard.report")
    opt.synchronize()  # the epoch's last weights are part of it
    now = time.perf_counter()
    n = int(samples if samples is not None else opt.epoch_steps * opt.batch_size)
    r = EpochReport()
    r.epoch = place
    r.label = int(epoch)
    r.step = opt.step_count
    r.samples = n
    if train_loss is None:
        train_loss = loss
    # Only the figures given are sent (the others are null in metrics.jsonl); a NaN or infinite loss is recorded. The
    # losses go as means (LOSS_MEANS): a mean near the largest double would overflow as a sum over the samples.
    figures = LOSS_MEANS
    if train_loss is not None:
        figures |= TRAIN_LOSS
        r.loss_sum = float(train_loss)
    if train_acc is not None:
        figures |= TRAIN_ACC
        r.correct = int(round(float(train_acc) * n))
    if test_acc is not None or test_loss is not None:
        # Equal weights without test_samples: a large count keeps the accuracy's rounding below 1e-6.
        tn = int(test_samples) if test_samples is not None else 1000000
        r.test_samples = tn
        if test_loss is not None:
            figures |= TEST_LOSS
            r.test_loss_sum = float(test_loss)
        if test_acc is not None:
            figures |= TEST_ACC
            r.test_correct = int(round(float(test_acc) * tn))
    else:
        r.test_samples = -1
    if opt.scaler is not None and _scaler_enabled(opt.scaler):
        figures |= LOSS_SCALING
        r.loss_scale = float(opt.scaler.get_scale())
        r.skipped_steps = opt.epoch_skipped
    r.figures = figures
    r.epoch_s = now - opt.epoch_started - float(eval_s)
    r.eval_s = float(eval_s)
    r.data_s = opt.phase_s["data"]
    r.forward_s = opt.phase_s["forward"]
    r.backward_s = opt.phase_s["backward"]
    check(lib().pshard_report_epoch(client(), ctypes.byref(r)), "pshard.report")
    opt.reported_place = place
    _average_buffers(opt.model, r.epoch)
    opt.epoch_steps = 0
    opt.epoch_skipped = 0
    opt.phase_s = dict.fromkeys(opt.phase_s, 0.0)
    opt.forward_at = opt.backward_at = None
    opt.outside_ns = 0
    opt.epoch_started = time.perf_counter()
    opt.step_started = time.monotonic_ns()  # the next step's data phase starts here, not at the last step()


def start_step():
    """The step this worker starts at (after DistributedOptimizer(model)): 0 in a new run; the checkpoint's step in a
    resumed run (`pshard launch --resume`, or a job restarted after a server failed); for a worker restarted by the
    launcher (cluster.restart_workers), the step at which it rejoins the running job."""
    opt = _state.optimizer
    if opt is None:
        raise PshardError("pshard: start_step() is known once DistributedOptimizer(model) was made", "PSHARD_ERR_STATE")
    return opt.start_step


def start_epoch():
    """The epoch (0-based) of start_step(): `for epoch in range(ps.start_epoch(), epochs)`. Needs steps_per_epoch
    (in an elastic job: the epoch a joining worker starts with, else 0)."""
    opt = _state.optimizer
    if opt is not None and opt.joining_epoch:
        return opt.joining_epoch - 1
    if opt is not None and elastic():
        return 0
    if opt is None or not opt.steps_per_epoch:
        raise PshardError("pshard: start_epoch() needs DistributedOptimizer(model, steps_per_epoch=N)",
                          "PSHARD_ERR_STATE")
    return opt.start_step // opt.steps_per_epoch


def report_step(loss):
    """The loss of the step just taken; rank 0 writes a `step` line every train.log_every steps."""
    opt = _state.optimizer
    if opt is None:
        raise PshardError("pshard: report_step() needs a DistributedOptimizer")
    if _state.plan is not None:  # elastic: the epoch being trained
        epoch = _state.plan[0] + 1
    else:
        epoch = 1 + (opt.step_count - 1) // opt.steps_per_epoch if opt.steps_per_epoch else 1
    check(lib().pshard_report_step(client(), epoch, max(opt.step_count - 1, 0), float(loss)), "pshard.report_step")
