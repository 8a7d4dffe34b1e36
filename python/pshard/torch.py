"""PyTorch models through pshard's servers: two lines in a training script (docs/PYTHON.md).

    import pshard.torch as ps
    ps.init()
    opt = ps.DistributedOptimizer(model)          # rank 0's weights go to the servers; every rank starts from them
    for x, y in loader:                           # loader over ps.shard(train_set)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()                           # each gradient is pushed as soon as autograd has it
        opt.step()                                # returns once every push is issued; each module's forward
                                                  # waits for its parameters' new weights and copies them in
    ps.report(epoch=epoch, train_loss=..., test_acc=...)
    ps.shutdown()

The optimizer (and learning-rate schedule) runs on the servers, from the job config's [optimizer] and
[lr_schedule]; the script's own torch.optim is not used.
"""
import ctypes
import errno
import glob
import io
import math
import os
import pickle
import sys
import time

import torch

from . import _state
from ._lib import (ERR_TIMEOUT, FLOAT32, LOSS_MEANS, LOSS_SCALING, TEST_ACC, TEST_LOSS, TRAIN_ACC, TRAIN_LOSS, PshardError,
                   check, lib, EpochReport)
from . import init, is_initialized, shutdown, rank, size, local_rank, config, barrier, barrier_vote, client  # noqa: F401
from . import elastic
from .embedding import Embedding, EmbeddingBag, discard_tables, finish_pushes, push_tables, refuse_grad_scaler

__all__ = ["init", "is_initialized", "shutdown", "rank", "size", "local_rank", "config", "barrier", "elastic",
           "DistributedOptimizer", "shard", "ShardSampler", "report", "start_step", "start_epoch", "epoch_plan",
           "PshardError", "Embedding", "EmbeddingBag"]


# The exit status of a rank that stopped at a checkpoint on SIGTERM (checkpoint.on_sigterm = checkpoint): EX_TEMPFAIL,
# as pshard's own workers; `pshard launch --resume` or a requeued job continues the run there.
STOPPED = 75

# A job whose steps are skipped this many times in a row (gradients not finite on some worker), or whose scale falls
# below 2^-24, is not going anywhere: it ends as diverged, as pshard's own workers' (worker/trainer/loss_scaler.cc).
MAX_SKIPPED_IN_A_ROW = 100
MIN_SCALE = 2.0 ** -24

# What DistributedOptimizer(grad_scaler=) uses of a scaler: the scale, and its rule for changing it.
_SCALER_METHODS = ("get_scale", "update", "get_growth_factor", "get_backoff_factor", "get_growth_interval")


def _wait(request, what):
    check(lib().pshard_wait(client(), request, -1), what)


def _ptr(t):
    return ctypes.c_void_p(t.data_ptr())


class ShardSampler(torch.utils.data.Sampler):
    """This rank's share of a dataset, like DistributedSampler: every rank gets len(dataset) // size() samples
    (the rest are left out, so that every rank runs the same number of steps, which sync mode needs), reshuffled
    each epoch with `seed` when shuffle=True (call set_epoch(e) at each epoch).

    In an elastic job (`pshard launch --workers MIN:MAX`) the share is that of the epoch's plan: set_epoch(e), or the
    epoch's first iteration, waits at the epoch's start for the coordinator to say who trains it (epoch_plan()),
    and member i of n gets block i of n. The DistributedOptimizer must exist by then."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.n = len(dataset)
        self.elastic = elastic()
        self.planned = None  # elastic: the epoch whose plan set rank and size
        # An elastic job's first epoch trains with its fewest workers; its plan says which share is this rank's.
        self.rank, self.size = (0, config("cluster.min_workers")) if self.elastic else (rank(), size())
        self.per_rank = self.n // self.size
        if self.per_rank == 0:
            raise PshardError("pshard: a dataset of %d samples cannot be shared by %d workers" % (self.n, self.size))
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch
        if self.elastic and _state.optimizer is not None:
            self._plan()

    def _plan(self):
        """Elastic jobs: this epoch's members decide this rank's share."""
        if self.planned == self.epoch:
            return
        _, index, count = epoch_plan(self.epoch)
        self.rank, self.size, self.planned = index, count, self.epoch
        self.per_rank = self.n // count
        if self.per_rank == 0:
            raise PshardError("pshard: a dataset of %d samples cannot be shared by the %d workers of epoch %d"
                              % (self.n, count, self.epoch))

    def _skipped(self):
        """Samples of this rank's share already trained in this epoch: in the epoch a resumed or rejoining worker
        starts in, those of the steps before start_step() (DistributedOptimizer's batch size); else none (and always
        none in an elastic job, whose workers start at an epoch's start)."""
        opt = _state.optimizer
        if self.elastic or opt is None or not opt.steps_per_epoch or \
                self.epoch != opt.start_step // opt.steps_per_epoch:
            return 0
        return min(self.per_rank, (opt.start_step - self.epoch * opt.steps_per_epoch) * opt.batch_size)

    def __iter__(self):
        if self.elastic:
            self._plan()
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.n, generator=g)
        else:
            order = torch.arange(self.n)
        return iter(order[self.rank * self.per_rank + self._skipped():(self.rank + 1) * self.per_rank].tolist())

    def __len__(self):
        return self.per_rank - self._skipped()


def shard(dataset):
    """This rank's fixed share of `dataset` (a torch Dataset): the contiguous block rank() of size() equal
    blocks. For a per-epoch reshuffle use ShardSampler. In an elastic job, the block of this rank's place among the
    members of the epoch being trained (epoch_plan(); call shard() again each epoch, e.g. for the test set)."""
    index, count = (_state.plan[2], _state.plan[3]) if _state.plan is not None else (rank(), size())
    per = len(dataset) // count
    if per == 0:
        raise PshardError("pshard: a dataset of %d samples cannot be shared by %d workers" % (len(dataset), count))
    return torch.utils.data.Subset(dataset, range(index * per, (index + 1) * per))


def epoch_plan(epoch):
    """Elastic jobs: waits at the start of `epoch` (0-based, as the script's loop counts) until the coordinator says
    who trains it, and returns (first step, this rank's index among the members, their number). ShardSampler calls
    it; a script with its own data split calls it at each epoch's start, after DistributedOptimizer(model), and
    trains block index of count. A worker that joined the running job starts at start_epoch()."""
    opt = _state.optimizer
    if opt is None:
        raise PshardError("pshard: epoch_plan() needs DistributedOptimizer(model) first (the epoch starts at its "
                          "next step)", "PSHARD_ERR_STATE")
    first, index, count = ctypes.c_int64(), ctypes.c_int(), ctypes.c_int()
    check(lib().pshard_epoch_plan(client(), epoch + 1, opt.step_count, ctypes.byref(first), ctypes.byref(index),
                                  ctypes.byref(count), None, 0), "pshard.epoch_plan")
    _state.plan = (epoch, first.value, index.value, count.value)
    opt.step_count = first.value
    return first.value, index.value, count.value


class DistributedOptimizer:
    """Trains `model`'s parameters through the job's servers.

    Every parameter that requires a gradient is a tensor on the servers, in named_parameters() order (the same
    names, shapes and order on every rank: a rank whose model differs gets a PshardError). Rank 0's initial values
    go to the servers and every rank starts from them. During backward() a hook per parameter pushes its gradient
    as soon as autograd has accumulated it (register_post_accumulate_grad_hook where torch has it, the gradient
    accumulator's hook on older torch); the same round trip brings back the parameter's weights of the next step.
    step() returns once every push is issued; each parameter's new weights are waited for and copied in just before
    they are needed: by a forward pre-hook of every module that holds the parameter, by the module's state_dict(),
    and by synchronize(), report() and shutdown(). A parameter without a gradient in a step (an unused branch)
    pushes zeros, so a sync step never waits for it.

    batch_size: samples per step on this worker (default: the config's train.batch_size), used for the metrics
    and the linear scaling rule; steps_per_epoch: the run's length is train.epochs x steps_per_epoch, which a
    cosine schedule needs (a clear error at start when it is needed and missing).

    grad_scaler (a torch GradScaler), backward_passes_per_step (k backward() calls per step(): their summed
    gradient is pushed) and clip_grad_norm (clip_grad_norm_ of this worker's whole gradient before the push) push
    a step whole from step() instead of from the hooks: unscaled by the scaler's scale, skipped on every worker when
    some worker's gradients are not finite (step() returns False), then clipped (docs/PYTHON.md, "Mixed precision,
    accumulation, clipping"). The job's first step is always pushed from step().
    """

    def __init__(self, model, steps_per_epoch=None, batch_size=None, name=None, grad_scaler=None,
                 backward_passes_per_step=1, clip_grad_norm=None):
        if not is_initialized():
            raise PshardError("pshard: call ps.init() before DistributedOptimizer(model)")
        if _state.optimizer is not None:
            raise PshardError("pshard: one DistributedOptimizer per job (this process already made one)")
        self.model = model
        self.params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not self.params:
            raise PshardError("pshard: the model has no trainable parameters (none requires a gradient)",
                              "PSHARD_ERR_ARGUMENT")
        for n, p in self.params:
            if p.dtype != torch.float32:
                raise PshardError("pshard: parameter '%s' is %s; the servers hold float32 parameters (model.float())"
                                  % (n, p.dtype), "PSHARD_ERR_ARGUMENT")
        self._whole_options(grad_scaler, backward_passes_per_step, clip_grad_norm)
        refuse_grad_scaler(grad_scaler)
        self.batch_size = int(batch_size if batch_size is not None else config("train.batch_size"))
        self.steps_per_epoch = int(steps_per_epoch or 0)
        c = self.client = client()
        for n, p in self.params:
            shape = (ctypes.c_int64 * p.dim())(*p.shape)
            check(lib().pshard_add_tensor(c, n.encode(), p.dim(), shape, FLOAT32), "DistributedOptimizer")
        check(lib().pshard_start(c, (name or type(model).__name__).encode(), self.batch_size, self.steps_per_epoch),
              "DistributedOptimizer")
        start = ctypes.c_int64()
        check(lib().pshard_start_step(c, ctypes.byref(start)), "DistributedOptimizer")
        self.start_step = start.value  # 0, or where a resumed run / a restarted worker continues (start_step())
        joining = ctypes.c_int64()
        check(lib().pshard_joining_epoch(c, ctypes.byref(joining)), "DistributedOptimizer")
        self.joining_epoch = joining.value  # elastic jobs: the epoch (1-based) a joining worker starts with; 0: none
        self.reported_place = 0  # the place in the run (1-based) of the last epoch report() sent; 0: none yet
        self.cuda = any(p.is_cuda for _, p in self.params)
        # Host buffers the servers read gradients from and write weights into (pinned for CUDA parameters, so that
        # the copies run asynchronously on the GPU's copy engine).
        pin = self.cuda and torch.cuda.is_available()
        self.grads = [torch.zeros(p.shape, dtype=torch.float32, pin_memory=pin) for _, p in self.params]
        self.weights = [torch.empty(p.shape, dtype=torch.float32, pin_memory=pin) for _, p in self.params]
        self.grad_ptrs = [g.data_ptr() for g in self.grads]
        self.weight_ptrs = [w.data_ptr() for w in self.weights]
        self.request = ctypes.c_uint64()
        self.request_ref = ctypes.byref(self.request)
        self.push_pull, self.wait = lib().pshard_push_pull, lib().pshard_wait  # looked up once: called every step
        self.step_count = self.start_step
        # checkpoint.on_sigterm = checkpoint: a SIGTERM flags the next step's pushes; every rank then ends at the
        # boundary the servers checkpointed (_check_stop), with exit status 75.
        # (ps.init() installed the SIGTERM handler, which sets _state.sigterm.)
        self.stop_on_sigterm = config("checkpoint.on_sigterm") == "checkpoint"
        self.stop_asked = False
        self.epoch_steps = 0  # steps since the last report()
        # Where a step's time goes (docs/METRICS.md), from three marks: the step's first forward (a forward pre-hook
        # on the model), its first gradient (the first gradient hook), and step(). Before the forward: data. The
        # time spent completing weights (`outside_ns`) is the library's comm_wait_s and other_s, taken out of the
        # phase it fell in.
        self.phase_s = {"data": 0.0, "forward": 0.0, "backward": 0.0}
        self.forward_at = None
        self.backward_at = None
        self.outside_ns = 0
        self._forward_hook = model.register_forward_pre_hook(lambda module, inputs: self._forward_started())
        # Per parameter: the request whose weights are not loaded yet (None: loaded), and the step whose gradient
        # it took (a second gradient in one step is an error).
        self.pending = [None] * len(self.params)
        self.outstanding = 0  # parameters with pending weights
        self.taken = [-1] * len(self.params)
        self.pushed = 0  # gradients taken this step
        self.copying = []  # CUDA: (index, event) of gradients on their way to the host
        self.uploaded = [None] * len(self.params)  # CUDA: event of the last upload from weights[i]
        self.tracing = False  # this step is in the trace window
        # The ranks' start-up (import torch, loading data) ends at different times; the first epoch's clock starts
        # when every rank is ready, as DDP's constructor (a broadcast) does: a rank that is ready first would
        # otherwise count its wait for the others' start-up as training time (and as comm_wait_s).
        # A worker restarted by the launcher (PSHARD_REJOIN=1) skips it: the running ranks passed it long ago.
        # So does a worker that joins a running elastic job.
        if os.environ.get("PSHARD_REJOIN") != "1" and not self.joining_epoch:
            self._start_barrier()
        self.epoch_started = time.perf_counter()
        self._start_weights()
        self._hooks = [self._hook(i) for i in range(len(self.params))]
        self._module_hooks = self._hook_modules(model)
        self.step_started = time.monotonic_ns()
        self.tracing = lib().pshard_traces(c, 0) == 1
        _state.optimizer = self

    def _whole_options(self, scaler, passes, max_norm):
        """The options that need the whole gradient of a step before anything is pushed (docs/PYTHON.md, "Mixed
        precision, accumulation, clipping"): a loss scaler, several backward passes per step, clipping by norm."""
        if isinstance(passes, bool) or not isinstance(passes, int) or passes < 1:
            raise PshardError("pshard: backward_passes_per_step=%r: give the number of backward() calls per step() "
                              "(an int >= 1)" % (passes,), "PSHARD_ERR_ARGUMENT")
        if max_norm is not None and not (isinstance(max_norm, (int, float)) and not isinstance(max_norm, bool)
                                         and math.isfinite(max_norm) and max_norm > 0):
            raise PshardError("pshard: clip_grad_norm=%r: give the largest total norm of a step's gradient (a finite "
                              "number > 0), or None for no clipping" % (max_norm,), "PSHARD_ERR_ARGUMENT")
        if scaler is not None:
            missing = [m for m in _SCALER_METHODS if not callable(getattr(scaler, m, None))]
            if missing:
                raise PshardError("pshard: grad_scaler=%s lacks %s: give a torch.cuda.amp.GradScaler or "
                                  "torch.amp.GradScaler (or an object with its methods %s)"
                                  % (type(scaler).__name__, ", ".join(missing), ", ".join(_SCALER_METHODS)),
                                  "PSHARD_ERR_ARGUMENT")
            if elastic():
                raise PshardError("pshard: grad_scaler is not supported in an elastic job (pshard launch --workers "
                                  "MIN:MAX) yet: the workers' vote on a step to skip assumes a fixed membership",
                                  "PSHARD_ERR_ARGUMENT")
        self.scaler = scaler
        self.passes_per_step = passes
        self.max_norm = None if max_norm is None else float(max_norm)
        self.whole = scaler is not None or passes > 1 or max_norm is not None
        self.seen = [0] * len(self.params)  # whole-gradient steps: the gradients each parameter got this step
        self.growth_tracker = 0  # steps applied since the scale last changed
        self.skipped_steps = 0
        self.epoch_skipped = 0  # of skipped_steps, this epoch's (report() records them)
        self.skipped_in_a_row = 0
        self.last_grad_norm = None  # clip_grad_norm: the total norm of the last step's gradient, before clipping

    @property
    def param_groups(self):
        """torch.optim's param_groups, which a GradScaler reads in scaler.unscale_(opt) and scaler.step(opt): refused,
        because a scaled gradient must never reach the servers."""
        raise PshardError("pshard: DistributedOptimizer has no param_groups: a GradScaler cannot unscale_() or step() "
                          "it. Give the scaler to the optimizer, DistributedOptimizer(model, grad_scaler=scaler), and "
                          "call opt.step() instead of scaler.unscale_(opt), scaler.step(opt) and scaler.update(): "
                          "opt.step() unscales, skips a step whose gradients are not finite on any worker, and "
                          "updates the scale (clip with clip_grad_norm=)", "PSHARD_ERR_ARGUMENT")

    # ---- start ---------------------------------------------------------------------------------------------------
    def _start_barrier(self):
        limit_ms = config("cluster.request_timeout_ms")  # what a sync step would wait for a missing rank
        try:
            barrier("pshard.torch: DistributedOptimizer on every rank", timeout_s=limit_ms / 1000.0)
        except PshardError as e:
            if e.status != "PSHARD_ERR_TIMEOUT":
                raise
            raise PshardError("pshard: not every rank created its DistributedOptimizer within "
                              "cluster.request_timeout_ms = %d ms (every rank must call DistributedOptimizer(model)): "
                              "%s" % (limit_ms, e), e.status) from None

    def _initialiser(self):
        out = ctypes.c_int()
        check(lib().pshard_initialiser(self.client, ctypes.byref(out)), "DistributedOptimizer")
        return out.value == 1

    def _send_initial_weights(self, weights):
        requests = []
        for i, w in enumerate(weights):
            r = ctypes.c_uint64()
            check(lib().pshard_init_tensor(self.client, i, _ptr(w), ctypes.byref(r)), "DistributedOptimizer")
            requests.append(r.value)
        for r in requests:
            _wait(r, "DistributedOptimizer: initial weights")

    def _start_weights(self):
        c = self.client
        fresh = self.start_step == 0
        # Rank 0 sends its weights; another rank keeps a copy of its own, which it sends instead if every lower rank
        # dies before the servers have them (failure_policy = continue; the pulls below overwrite self.weights).
        own = [p.detach().clone() for _, p in self.params] if fresh and rank() != 0 else None
        if rank() == 0 and fresh:
            for i, (_, p) in enumerate(self.params):
                self.weights[i].copy_(p.detach())
            self._send_initial_weights(self.weights)
        requests = []
        for i in range(len(self.params)):
            r = ctypes.c_uint64()
            check(lib().pshard_pull(c, i, _ptr(self.weights[i]), self.start_step, ctypes.byref(r)),
                  "DistributedOptimizer")
            requests.append(r.value)
        what = "DistributedOptimizer: weights of step %d" % self.start_step
        try:
            for r in requests:
                while own is not None:
                    status = lib().pshard_wait(c, r, 200)
                    if status != ERR_TIMEOUT:
                        check(status, what)
                        break
                    if self._initialiser():  # every lower rank died before sending the weights
                        self._send_initial_weights(own)
                        own = None
                else:
                    _wait(r, what)
        except PshardError as e:
            if "fingerprint" in str(e):
                raise PshardError(
                    "pshard: the model on rank %d differs from rank 0's: the parameters (names, shapes, order) that "
                    "require a gradient must be the same on every rank; this rank has %s (%s)"
                    % (rank(), _describe(self.params), e), e.status) from None
            raise
        with torch.no_grad():
            for (_, p), w in zip(self.params, self.weights):
                p.copy_(w)
        if self.start_step > 0:
            _load_latest_buffers(self.model)

    def _hook_modules(self, model):
        """Hooks of every module that holds parameters (a tied parameter: every module that holds it): before its
        forward and at its state_dict(), the new weights of its own parameters are waited for and loaded."""
        index = {id(p): i for i, (_, p) in enumerate(self.params)}
        handles = []
        for module in model.modules():
            mine = sorted({index[id(p)] for p in module._parameters.values() if p is not None and id(p) in index})
            if not mine:
                continue
            handles.append(module.register_forward_pre_hook(lambda m, inputs, mine=mine: self._complete(mine)))
            # Runs after the module's entries were put into the state dict: they share the parameters' storage
            # (detach()), so loading the weights now updates them too (torch 1.13 has no public pre-hook).
            handles.append(module._register_state_dict_hook(lambda *unused, mine=mine: self._complete(mine)))
        return handles

    # ---- gradients -----------------------------------------------------------------------------------------------
    def _hook(self, i):
        p = self.params[i][1]
        if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1
            return p.register_post_accumulate_grad_hook(lambda param: self._grad_ready(i))
        # torch 1.13: the AccumulateGrad node of the parameter runs after its gradient was accumulated.
        accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
        handle = accumulator.register_hook(lambda *unused: self._grad_ready(i))
        return (accumulator, handle)  # the node must stay alive for its hook to stay registered

    def _check_stop(self):
        """checkpoint.on_sigterm: before a step's first forward, whether the servers stopped the job at this step
        (the replies that bring its weights say so: the first one is waited for here). If so, the rank leaves with
        exit status 75 (SystemExit): the run continues there with --resume or a requeue."""
        first = next((i for i, r in enumerate(self.pending) if r is not None), None)
        if first is not None:
            self._complete((first,))
        at = ctypes.c_int64()
        check(lib().pshard_stop_at(self.client, ctypes.byref(at)), "DistributedOptimizer")
        if at.value > 0 and self.step_count >= at.value:
            self.synchronize()
            from . import shutdown
            why = "stopped at step %d on SIGTERM (checkpoint.on_sigterm = checkpoint)" % self.step_count
            sys.stderr.write("pshard: %s\n" % why)
            shutdown(STOPPED, why)
            raise SystemExit(STOPPED)

    def _forward_started(self):
        if self.forward_at is None and torch.is_grad_enabled() and self.stop_on_sigterm:
            self._check_stop()
        if self.forward_at is None and torch.is_grad_enabled():  # an evaluation's forward is not a step's
            self.forward_at = time.monotonic_ns()
            self.phase_s["data"] += (self.forward_at - self.step_started - self.outside_ns) * 1e-9
            self.outside_ns = 0

    def _grad_ready(self, i):
        if self.backward_at is None:
            self.backward_at = time.monotonic_ns()
            if self.forward_at is not None:
                self.phase_s["forward"] += (self.backward_at - self.forward_at - self.outside_ns) * 1e-9
            self.outside_ns = 0
        if self.whole or self.step_count == 0:
            self._grad_seen(i)
            return
        if self.taken[i] == self.step_count:
            raise PshardError("pshard: parameter '%s' got a second gradient before step(): pshard pushes one "
                              "gradient per parameter per step (no accumulation over several backward())"
                              % self.params[i][0])
        if self.pending[i] is not None:
            raise PshardError("pshard: parameter '%s' was used before its new weights were loaded: it is read "
                              "outside the forward of the modules that hold it (call opt.synchronize() after "
                              "step() when a model does that)" % self.params[i][0])
        grad = self.params[i][1].grad
        if grad is None:
            return
        self.taken[i] = self.step_count
        self.pushed += 1
        if grad.is_cuda:
            # Gradients still on their way from the GPU are pushed once they are on the host; earlier ones first.
            self._push_copied(block=False)
            self.grads[i].copy_(grad.detach(), non_blocking=True)
            event = torch.cuda.Event()
            event.record()
            self.copying.append((i, event))
        else:
            # CPU: copied into a buffer of ours. The push is in flight until the module's next forward loads the
            # weights, and p.grad may be written before that: torch 1.13's Module.zero_grad() zeroes it in place.
            self.grads[i].copy_(grad.detach())
            self._push(i)

    def _grad_seen(self, i):
        """A gradient of a step that is pushed whole, from step(): counted here, read from p.grad in step(). The first
        step of every job is such a step, so that a misuse found at its step() (a GradScaler's unscale_()) stops the
        job before any gradient reached the servers."""
        if self.pending[i] is not None:
            raise PshardError("pshard: parameter '%s' was used before its new weights were loaded: it is read "
                              "outside the forward of the modules that hold it (call opt.synchronize() after "
                              "step() when a model does that)" % self.params[i][0])
        if self.params[i][1].grad is None:
            return
        if self.seen[i] >= self.passes_per_step:
            raise PshardError("pshard: parameter '%s' got a gradient from backward pass %d before step(), with "
                              "backward_passes_per_step = %d (accumulate k passes with "
                              "DistributedOptimizer(model, backward_passes_per_step=k))"
                              % (self.params[i][0], self.seen[i] + 1, self.passes_per_step))
        self.seen[i] += 1
        self.pushed += 1

    def _push(self, i):
        """Issues parameter i's push_pull of this step: grads[i] in, its weights of the next step out into weights[i]
        (both untouched until the request is waited for)."""
        if self.uploaded[i] is not None:  # CUDA: the pull writes weights[i] once its last upload has read it
            self.uploaded[i].synchronize()
            self.uploaded[i] = None
        status = self.push_pull(self.client, i, self.grad_ptrs[i], self.weight_ptrs[i], self.step_count,
                                self.request_ref)
        if status != 0:
            check(status, "backward: push of '%s'" % self.params[i][0])
        self.pending[i] = self.request.value
        self.outstanding += 1

    def _push_copied(self, block):
        while self.copying:
            i, event = self.copying[0]
            if not block and not event.query():
                return
            event.synchronize()
            self.copying.pop(0)
            self._push(i)

    # ---- weights -------------------------------------------------------------------------------------------------
    def _complete(self, indices):
        """Waits for the new weights of parameters `indices` (those still pending) and copies them in."""
        if not self.outstanding:
            return
        ready = [i for i in indices if self.pending[i] is not None]
        if not ready:
            return
        started = time.monotonic_ns()
        with torch.no_grad():
            for i in ready:
                status = self.wait(self.client, self.pending[i], -1)
                if status != 0:
                    check(status, "step %d: weights of '%s'" % (self.step_count, self.params[i][0]))
                self.pending[i] = None
                self.outstanding -= 1
                p = self.params[i][1]
                p.copy_(self.weights[i], non_blocking=p.is_cuda)
                if p.is_cuda:
                    # weights[i] receives the next pull once this upload has read it (_push waits for the event).
                    event = torch.cuda.Event()
                    event.record()
                    self.uploaded[i] = event
        done = time.monotonic_ns()
        self.outside_ns += done - started
        if self.tracing:
            check(lib().pshard_trace_span(self.client, b"comm_wait + load weights", b"phase", self.step_count, started,
                                          done), "timeline")

    def synchronize(self):
        """Waits for every parameter's new weights and copies them in. step() leaves them to the modules' next
        forward; call this before reading parameters in any other way (p.data, p.norm(), a functional use of
        another module's parameter). report(), shutdown() and state_dict() call it themselves."""
        self._complete(range(len(self.params)))
        finish_pushes()

    def pending_weights(self):
        """The names of the parameters whose new weights are not loaded yet (after step(): all of them, until the
        forward of their module)."""
        return [self.params[i][0] for i, r in enumerate(self.pending) if r is not None]

    # ---- the step ------------------------------------------------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        """As torch.optim's. It does not load weights: loops that call it before the forward keep the waits lazy."""
        for _, p in self.params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.detach_()
                p.grad.zero_()

    def step(self):
        """Ends the step: every gradient is pushed (zeros for a parameter without one), and returns. The new weights
        are loaded lazily, each just before its module's next forward. Returns True; False when a grad_scaler's step
        was skipped because some worker's gradients were not finite (nothing was pushed, on any worker)."""
        if self.whole or self.step_count == 0:
            return self._step_whole()
        self._push_copied(block=True)
        if self.pushed == 0:
            raise PshardError("pshard: step() without backward(): no parameter got a gradient since the last step "
                              "(call loss.backward() first)")
        # A parameter without a gradient this step (an unused branch) takes part with zeros; its last weights were
        # not loaded if its module did not run, and its buffers are reused now.
        step = self.step_count
        for i, t in enumerate(self.taken):
            if t != step:
                self._complete((i,))
                self.grads[i].zero_()
                self._push(i)
        self._step_done()
        return True

    def _step_whole(self):
        """step() of a step pushed whole: the gradients autograd accumulated over backward_passes_per_step passes,
        unscaled by the grad_scaler's scale (a step whose gradients are not finite on some worker is skipped on
        every worker, and the scale changes by the scaler's rule), clipped to clip_grad_norm, then pushed."""
        passes = max(self.seen)
        if passes == 0:
            raise PshardError("pshard: step() without backward(): no parameter got a gradient since the last step "
                              "(call loss.backward() first)")
        if passes != self.passes_per_step:
            raise PshardError("pshard: step() after %d backward passes; this DistributedOptimizer takes "
                              "backward_passes_per_step = %d (every step the same number, on every worker)"
                              % (passes, self.passes_per_step))
        self._complete(range(len(self.params)))  # the buffers of the last push are free once its weights are in
        for i, (_, p) in enumerate(self.params):
            if self.seen[i] == 0 or p.grad is None:  # no gradient this step (an unused branch): zeros
                self.grads[i].zero_()
            else:
                self.grads[i].copy_(p.grad.detach())
        applied = True
        if self.scaler is not None:
            scale = float(self.scaler.get_scale())
            inv = torch.tensor(1.0 / scale, dtype=torch.float64).float()  # as GradScaler.unscale_: float32 1/scale
            finite = True
            for g in self.grads:
                g.mul_(inv)
                finite = finite and bool(torch.isfinite(g).all())
            applied = self._agree_finite(finite)
            self._update_scale(applied)
            self._check_diverged(applied)
        if not applied:
            discard_tables()
            self.skipped_steps += 1
            self.epoch_skipped += 1
            self.seen = [0] * len(self.params)
            self.pushed = 0
            self.forward_at = self.backward_at = None
            self.outside_ns = 0
            self.epoch_steps += 1  # its samples were trained on (and count in the metrics); the servers' step stays
            self.step_started = time.monotonic_ns()
            return False
        if self.max_norm is not None:
            # torch.nn.utils.clip_grad_norm_'s arithmetic on the step's whole gradient (of this worker).
            norm = torch.norm(torch.stack([torch.norm(g, 2.0) for g in self.grads]), 2.0)
            self.last_grad_norm = float(norm)
            coef = torch.clamp(self.max_norm / (norm + 1e-6), max=1.0)
            for g in self.grads:
                g.mul_(coef)
        for i in range(len(self.params)):
            self._push(i)
        self.seen = [0] * len(self.params)
        self._step_done()
        return True

    def _agree_finite(self, finite):
        """Whether every worker's unscaled gradients of this step are finite, the same answer on every worker: a vote
        in a coordinator barrier, where a worker whose gradients are not finite raises its flag."""
        if size() == 1:
            return finite
        return not barrier_vote(not finite, "pshard.torch: finite gradients")

    def _check_diverged(self, applied):
        """Ends a job whose every step is being skipped: the same answer on every worker (the vote is job-wide), so
        every rank raises at the same step and the job ends as failed, naming why."""
        self.skipped_in_a_row = 0 if applied else self.skipped_in_a_row + 1
        scale = float(self.scaler.get_scale())
        if not applied and (self.skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW or scale < MIN_SCALE):
            raise PshardError("pshard: training diverged: %d steps in a row were skipped, their gradients not finite "
                              "on some worker, at loss scale down to %g (grad_scaler); lower the learning rate, or "
                              "check the data and the model for NaN and infinities" % (self.skipped_in_a_row, scale),
                              "PSHARD_ERR_STATE")

    def _update_scale(self, applied):
        """GradScaler.update()'s rule, from the job-wide answer: a skipped step multiplies the scale by the backoff
        factor; growth_interval applied steps in a row multiply it by the growth factor."""
        s = self.scaler
        if not _scaler_enabled(s):
            return
        scale = float(s.get_scale())
        if not applied:
            scale *= float(s.get_backoff_factor())
            self.growth_tracker = 0
        else:
            self.growth_tracker += 1
            if self.growth_tracker >= int(s.get_growth_interval()):
                scale *= float(s.get_growth_factor())
                self.growth_tracker = 0
        s.update(scale)

    def _step_done(self):
        step = self.step_count
        now = time.monotonic_ns()
        marks = None
        if self.forward_at is not None and self.backward_at is not None:
            marks = (self.step_started, self.forward_at, self.backward_at, now)
            self.phase_s["backward"] += (now - self.backward_at - self.outside_ns) * 1e-9
        self.outside_ns = 0
        self.forward_at = self.backward_at = None
        if marks is not None and self.tracing:
            self._trace_step(step, marks)
        self.pushed = 0
        push_tables(step)  # the rows each embedding table's lookups used this step (docs/SPARSE.md)
        self.step_count += 1
        if _state.sigterm and not self.stop_asked:
            check(lib().pshard_request_stop(self.client, self.step_count), "DistributedOptimizer")
            self.stop_asked = True
        self.epoch_steps += 1
        self.tracing = lib().pshard_traces(self.client, self.step_count) == 1
        self.step_started = time.monotonic_ns()

    def _trace_step(self, step, marks):
        """The step's spans on the timeline (trace.steps): data, forward, backward (until every push is issued); the
        waits for its weights are "comm_wait + load weights" spans inside the forward."""
        start, forward, backward, done = marks
        for name, cat, a, b in (("step %d" % step, b"step", start, done), ("data", b"phase", start, forward),
                                ("forward", b"phase", forward, backward), ("backward", b"phase", backward, done)):
            check(lib().pshard_trace_span(self.client, name.encode(), cat, step, a, b), "timeline")


def _scaler_enabled(scaler):
    """False for a disabled GradScaler (torch 1.13's without CUDA: scale 1, never changed)."""
    return not (callable(getattr(scaler, "is_enabled", None)) and not scaler.is_enabled())


def _describe(params, limit=4):
    text = ", ".join("%s %s" % (n, list(p.shape)) for n, p in params[:limit])
    return text + (", ... (%d in all)" % len(params) if len(params) > limit else "")


def report(epoch, train_loss=None, train_acc=None, test_loss=None, test_acc=None, samples=None, test_samples=None,
           eval_s=0.0, loss=None):
    """Reports this worker's figures of epoch `epoch`, numbered as the script numbers its epochs (from 0 or 1, or
    any increasing integers; recorded as given; in an elastic job, the plans' numbering from start_epoch()), then
    makes the model's floating-point buffers (BatchNorm running statistics) the mean over the
    workers (evaluate after report() to use them). Every rank calls it; the coordinator combines the ranks' reports into the epoch's line:
    weighted by `samples` (default: this rank's steps in the epoch x batch size) and `test_samples` (default:
    equal weights), so pass them when the ranks' shares differ. Bytes on the wire and the time blocked on the
    servers are measured by the library. Only the figures given reach metrics.jsonl (the others are null there, not
    zero); a NaN or infinite loss is recorded as "nan", "inf" or "-inf". A PshardError for an epoch number that
    does not increase from this rank's last report or an accuracy outside [0, 1]."""
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


def _disk_full_note(path):
    """ ": the disk holding it is full" when the file system of `path` has no block left for this user, else ""."""
    try:
        st = os.statvfs(os.path.dirname(path) or ".")
        return ": the disk holding it is full" if st.f_bavail == 0 else ""
    except OSError:
        return ""


def _write_file(path, obj):
    """torch.save of `obj` to PATH.tmp, then renamed to PATH. torch.save given a path does not check its writes (a full
    disk leaves an empty or cut file behind, found only when read back): the bytes go through Python's own file
    calls, so a full disk is an error here, naming the file."""
    data = io.BytesIO()
    torch.save(obj, data)
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data.getbuffer())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
        why = "the disk is full" if e.errno in (errno.ENOSPC, errno.EDQUOT) else e.strerror
        raise PshardError("pshard: cannot write %s (%d bytes): %s" % (tmp, len(data.getbuffer()), why),
                          "PSHARD_ERR_ENVIRONMENT") from e


def _read_file(path):
    """torch.load of a file _write_file wrote; an empty or cut file is an error naming it (not "EOFError: Ran out of
    input")."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        if not data:
            raise EOFError("the file is empty")
        # Tensors, numbers and dicts only: a file in the run directory must not run code when read.
        return torch.load(io.BytesIO(data), weights_only=True)
    except (OSError, EOFError, RuntimeError, pickle.UnpicklingError) as e:
        raise PshardError("pshard: cannot read %s (%d bytes): %s%s" % (
            path, os.path.getsize(path) if os.path.exists(path) else 0, e, _disk_full_note(path)),
            "PSHARD_ERR_ENVIRONMENT") from e


def _average_buffers(model, epoch):
    """Floating-point buffers that are not parameters (BatchNorm running statistics) become the mean over the
    workers: each rank writes its buffers into the run directory (shared by all nodes, as `pshard task` requires),
    all wait at a barrier, each reads every rank's file and averages. Integer buffers (num_batches_tracked) stay.
    Rank 0 then keeps the result as RUN_DIR/buffers/latest.pt, which a resumed run or a restarted worker loads."""
    buffers = [(n, b) for n, b in model.named_buffers() if b.dtype.is_floating_point]
    run_dir = os.environ.get("PSHARD_RUN_DIR", "")
    if not buffers or not run_dir:
        return
    folder = os.path.join(run_dir, "buffers")
    os.makedirs(folder, exist_ok=True)
    if size() > 1:
        mine = os.path.join(folder, "epoch%d-rank%d.pt" % (epoch, rank()))
        _write_file(mine, {n: b.detach().cpu() for n, b in buffers})
        barrier("buffers of epoch %d written" % epoch)
        # The ranks alive now (a worker lost under failure_policy = continue wrote nothing).
        states = [_read_file(f) for f in sorted(glob.glob(os.path.join(folder, "epoch%d-rank*.pt" % epoch)))]
        with torch.no_grad():
            for n, b in buffers:
                b.copy_(sum(st[n] for st in states) / len(states))
        barrier("buffers of epoch %d read" % epoch)
        os.remove(mine)
    if rank() == 0:
        kept = {n: b.detach().cpu() for n, b in buffers}
        _write_file(os.path.join(folder, "latest.pt"), {"epoch": epoch, "buffers": kept})


def _load_latest_buffers(model):
    """The buffers rank 0 kept at the last report() (RUN_DIR/buffers/latest.pt), into `model`: a worker that starts
    mid-run gets the job's BatchNorm statistics with the servers' weights. None kept yet: the model's own stay."""
    path = os.path.join(os.environ.get("PSHARD_RUN_DIR", ""), "buffers", "latest.pt")
    if not os.environ.get("PSHARD_RUN_DIR") or not os.path.exists(path):
        return
    kept = _read_file(path)["buffers"]
    with torch.no_grad():
        for n, b in model.named_buffers():
            if n in kept and kept[n].shape == b.shape:
                b.copy_(kept[n])


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
