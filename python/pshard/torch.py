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
import os
import pickle
import time

import torch

from . import _state
from ._lib import FLOAT32, TEST_ACC, TEST_LOSS, TRAIN_ACC, TRAIN_LOSS, PshardError, check, lib, EpochReport
from . import init, is_initialized, shutdown, rank, size, local_rank, config, barrier, client  # noqa: F401

__all__ = ["init", "is_initialized", "shutdown", "rank", "size", "local_rank", "config", "barrier",
           "DistributedOptimizer", "shard", "ShardSampler", "report", "PshardError"]


def _wait(request, what):
    check(lib().pshard_wait(client(), request, -1), what)


def _ptr(t):
    return ctypes.c_void_p(t.data_ptr())


class ShardSampler(torch.utils.data.Sampler):
    """This rank's share of a dataset, like DistributedSampler: every rank gets len(dataset) // size() samples
    (the rest are left out, so that every rank runs the same number of steps, which sync mode needs), reshuffled
    each epoch with `seed` when shuffle=True (call set_epoch(e) at each epoch)."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.n = len(dataset)
        self.rank, self.size = rank(), size()
        self.per_rank = self.n // self.size
        if self.per_rank == 0:
            raise PshardError("pshard: a dataset of %d samples cannot be shared by %d workers" % (self.n, self.size))
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.n, generator=g)
        else:
            order = torch.arange(self.n)
        return iter(order[self.rank * self.per_rank:(self.rank + 1) * self.per_rank].tolist())

    def __len__(self):
        return self.per_rank


def shard(dataset):
    """This rank's fixed share of `dataset` (a torch Dataset): the contiguous block rank() of size() equal
    blocks. For a per-epoch reshuffle use ShardSampler."""
    per = len(dataset) // size()
    if per == 0:
        raise PshardError("pshard: a dataset of %d samples cannot be shared by %d workers" % (len(dataset), size()))
    return torch.utils.data.Subset(dataset, range(rank() * per, (rank() + 1) * per))


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
    """

    def __init__(self, model, steps_per_epoch=None, batch_size=None, name=None):
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
        self.batch_size = int(batch_size if batch_size is not None else config("train.batch_size"))
        self.steps_per_epoch = int(steps_per_epoch or 0)
        c = self.client = client()
        for n, p in self.params:
            shape = (ctypes.c_int64 * p.dim())(*p.shape)
            check(lib().pshard_add_tensor(c, n.encode(), p.dim(), shape, FLOAT32), "DistributedOptimizer")
        check(lib().pshard_start(c, (name or type(model).__name__).encode(), self.batch_size, self.steps_per_epoch),
              "DistributedOptimizer")
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
        self.step_count = 0
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
        limit_ms = config("cluster.request_timeout_ms")  # what a sync step would wait for a missing rank
        try:
            barrier("pshard.torch: DistributedOptimizer on every rank", timeout_s=limit_ms / 1000.0)
        except PshardError as e:
            if e.status != "PSHARD_ERR_TIMEOUT":
                raise
            raise PshardError("pshard: not every rank created its DistributedOptimizer within "
                              "cluster.request_timeout_ms = %d ms (every rank must call DistributedOptimizer(model)): "
                              "%s" % (limit_ms, e), e.status) from None
        self.epoch_started = time.perf_counter()
        self._start_weights()
        self._hooks = [self._hook(i) for i in range(len(self.params))]
        self._module_hooks = self._hook_modules(model)
        self.step_started = time.monotonic_ns()
        self.tracing = lib().pshard_traces(c, 0) == 1
        _state.optimizer = self

    # ---- start ---------------------------------------------------------------------------------------------------
    def _start_weights(self):
        c = self.client
        if rank() == 0:
            requests = []
            for i, (_, p) in enumerate(self.params):
                self.weights[i].copy_(p.detach())
                r = ctypes.c_uint64()
                check(lib().pshard_init_tensor(c, i, _ptr(self.weights[i]), ctypes.byref(r)), "DistributedOptimizer")
                requests.append(r.value)
            for r in requests:
                _wait(r, "DistributedOptimizer: initial weights")
        requests = []
        for i in range(len(self.params)):
            r = ctypes.c_uint64()
            check(lib().pshard_pull(c, i, _ptr(self.weights[i]), 0, ctypes.byref(r)), "DistributedOptimizer")
            requests.append(r.value)
        try:
            for r in requests:
                _wait(r, "DistributedOptimizer: weights of step 0")
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

    def _forward_started(self):
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
        are loaded lazily, each just before its module's next forward."""
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
        self.step_count += 1
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


def report(epoch, train_loss=None, train_acc=None, test_loss=None, test_acc=None, samples=None, test_samples=None,
           eval_s=0.0, loss=None):
    """Reports this worker's figures of epoch `epoch` (0-based, as in `for epoch in range(epochs)`; metrics.jsonl
    counts from 1), then makes the model's floating-point buffers (BatchNorm running statistics) the mean over the
    workers (evaluate after report() to use them). Every rank calls it; the coordinator combines the ranks' reports into the epoch's line:
    weighted by `samples` (default: this rank's steps in the epoch x batch size) and `test_samples` (default:
    equal weights), so pass them when the ranks' shares differ. Bytes on the wire and the time blocked on the
    servers are measured by the library. Only the figures given reach metrics.jsonl (the others are null there, not
    zero); a NaN or infinite loss is recorded as "nan", "inf" or "-inf". A PshardError for an epoch outside
    0..train.epochs-1 or an accuracy outside [0, 1]."""
    opt = _state.optimizer
    if opt is None:
        raise PshardError("pshard: report() needs a DistributedOptimizer (and ps.init() before it)")
    epochs = config("train.epochs")
    if not 0 <= int(epoch) < epochs:
        raise PshardError("pshard.report: epoch=%d is out of range: epochs count from 0 to train.epochs - 1 = %d"
                          % (int(epoch), epochs - 1), "PSHARD_ERR_ARGUMENT")
    for name, acc in (("train_acc", train_acc), ("test_acc", test_acc)):
        if acc is not None and not 0.0 <= float(acc) <= 1.0:
            raise PshardError("pshard.report: %s=%r is not an accuracy (a fraction in [0, 1])" % (name, acc),
                              "PSHARD_ERR_ARGUMENT")
    opt.synchronize()  # the epoch's last weights are part of it
    now = time.perf_counter()
    n = int(samples if samples is not None else opt.epoch_steps * opt.batch_size)
    r = EpochReport()
    r.epoch = int(epoch) + 1
    r.step = opt.step_count
    r.samples = n
    if train_loss is None:
        train_loss = loss
    # Only the figures given are sent (the others are null in metrics.jsonl); a NaN or infinite loss is recorded.
    figures = 0
    if train_loss is not None:
        figures |= TRAIN_LOSS
        r.loss_sum = float(train_loss) * n
    if train_acc is not None:
        figures |= TRAIN_ACC
        r.correct = int(round(float(train_acc) * n))
    if test_acc is not None or test_loss is not None:
        # Equal weights without test_samples: a large count keeps the accuracy's rounding below 1e-6.
        tn = int(test_samples) if test_samples is not None else 1000000
        r.test_samples = tn
        if test_loss is not None:
            figures |= TEST_LOSS
            r.test_loss_sum = float(test_loss) * tn
        if test_acc is not None:
            figures |= TEST_ACC
            r.test_correct = int(round(float(test_acc) * tn))
    else:
        r.test_samples = -1
    r.figures = figures
    r.epoch_s = now - opt.epoch_started - float(eval_s)
    r.eval_s = float(eval_s)
    r.data_s = opt.phase_s["data"]
    r.forward_s = opt.phase_s["forward"]
    r.backward_s = opt.phase_s["backward"]
    check(lib().pshard_report_epoch(client(), ctypes.byref(r)), "pshard.report")
    _average_buffers(opt.model, r.epoch)
    opt.epoch_steps = 0
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
        return torch.load(io.BytesIO(data))
    except (OSError, EOFError, RuntimeError, pickle.UnpicklingError) as e:
        raise PshardError("pshard: cannot read %s (%d bytes): %s%s" % (
            path, os.path.getsize(path) if os.path.exists(path) else 0, e, _disk_full_note(path)),
            "PSHARD_ERR_ENVIRONMENT") from e


def _average_buffers(model, epoch):
    """Floating-point buffers that are not parameters (BatchNorm running statistics) become the mean over the
    workers: each rank writes its buffers into the run directory (shared by all nodes, as `pshard task` requires),
    all wait at a barrier, each reads every rank's file and averages. Integer buffers (num_batches_tracked) stay."""
    buffers = [(n, b) for n, b in model.named_buffers() if b.dtype.is_floating_point]
    run_dir = os.environ.get("PSHARD_RUN_DIR", "")
    if not buffers or size() == 1 or not run_dir:
        return
    folder = os.path.join(run_dir, "buffers")
    os.makedirs(folder, exist_ok=True)
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


def report_step(loss):
    """The loss of the step just taken; rank 0 writes a `step` line every train.log_every steps."""
    opt = _state.optimizer
    if opt is None:
        raise PshardError("pshard: report_step() needs a DistributedOptimizer")
    epoch = 1 + (opt.step_count - 1) // opt.steps_per_epoch if opt.steps_per_epoch else 1
    check(lib().pshard_report_step(client(), epoch, max(opt.step_count - 1, 0), float(loss)), "pshard.report_step")
