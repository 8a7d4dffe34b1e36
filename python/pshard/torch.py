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
import math
import os
import sys
import time

import torch

from . import _state
from ._lib import ERR_TIMEOUT, FLOAT32, JOB_ENDED, PshardError, check, lib
from . import init, is_initialized, shutdown, rank, size, local_rank, config, barrier, barrier_vote, client  # noqa: F401
from . import elastic
from .embedding import Embedding, EmbeddingBag, discard_tables, finish_pushes, push_tables, refuse_grad_scaler
from .buffers import _load_latest_buffers
from .reporting import _scaler_enabled, report, report_step, start_epoch, start_step  # noqa: F401
from .sampling import ShardSampler, epoch_plan, shard  # noqa: F401

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
    (the linear scaling rule's global batch is the workers x train.batch_size, on the servers and in the learning
    rate reported); steps_per_epoch: the run's length is train.epochs x steps_per_epoch, which a
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
        # A sync job's steps some worker's gradients overflowed are skipped by the servers for every worker, each push
        # saying whether its worker's were finite (so they are its own, never its host's sum); async and SSP workers
        # skip theirs alone, by not pushing them.
        self.servers_skip = grad_scaler is not None and size() > 1 and config("cluster.mode") == "sync"
        if grad_scaler is not None:
            check(lib().pshard_scale_loss(c), "DistributedOptimizer")
        started = check(lib().pshard_start(c, (name or type(model).__name__).encode(), self.batch_size,
                                           self.steps_per_epoch), "DistributedOptimizer")
        if started == JOB_ENDED:
            # A worker that joined an elastic job (pshard join) which ended before another epoch began: it has nothing
            # to train and leaves with status 0, as a C++ worker does (the library logged why).
            shutdown(0, "joined too late to train: the job ended before another epoch began")
            raise SystemExit(0)
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
                                  "MIN:MAX) yet: a worker joining it would start from a loss scale of its own",
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
    def _complete(self, indices, skipped=None):
        """Waits for the new weights of parameters `indices` (those still pending) and copies them in. `skipped` (a
        ctypes.c_int): the first of them is waited for with pshard_wait_skipped, which sets it."""
        if not self.outstanding:
            return
        ready = [i for i in indices if self.pending[i] is not None]
        if not ready:
            return
        started = time.monotonic_ns()
        with torch.no_grad():
            for i in ready:
                if skipped is not None and i == ready[0]:
                    status = lib().pshard_wait_skipped(self.client, self.pending[i], -1, ctypes.byref(skipped))
                else:
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
        every worker of a sync job, on that worker alone in an async or SSP job, and the scale changes by the
        scaler's rule), clipped to clip_grad_norm, then pushed."""
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
            if self.servers_skip:
                if finite:
                    self._clip()
                check(lib().pshard_request_skip(self.client, -1 if finite else self.step_count), "step")
                for i in range(len(self.params)):
                    self._push(i)
                applied = not self._skipped_by_servers()
            else:
                applied = finite
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
        if not self.servers_skip or self.scaler is None:  # else clipped and pushed above
            self._clip()
            for i in range(len(self.params)):
                self._push(i)
        self.seen = [0] * len(self.params)
        self._step_done()
        return True

    def _clip(self):
        """clip_grad_norm: torch.nn.utils.clip_grad_norm_'s arithmetic on the step's whole gradient (of this worker)."""
        if self.max_norm is None:
            return
        norm = torch.norm(torch.stack([torch.norm(g, 2.0) for g in self.grads]), 2.0)
        self.last_grad_norm = float(norm)
        coef = torch.clamp(self.max_norm / (norm + 1e-6), max=1.0)
        for g in self.grads:
            g.mul_(coef)

    def _skipped_by_servers(self):
        """Whether the servers skipped the step just pushed, some worker's gradients not being finite: every slice
        saw every worker's flag, so every reply of the step says the same, and the first parameter's tells (its
        weights are loaded meanwhile: the step's, or those it began with)."""
        skipped = ctypes.c_int(0)
        first = next(i for i, r in enumerate(self.pending) if r is not None)
        self._complete((first,), skipped)
        return skipped.value == 1

    def _check_diverged(self, applied):
        """Ends a job whose every step is being skipped: in a sync job the same answer on every worker (the servers
        skip a step for all), so every rank raises at the same step and the job ends as failed, naming why."""
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


def _describe(params, limit=4):
    text = ", ".join("%s %s" % (n, list(p.shape)) for n, p in params[:limit])
    return text + (", ... (%d in all)" % len(params) if len(params) > limit else "")
