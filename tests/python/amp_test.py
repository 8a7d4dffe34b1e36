"""Mixed precision, gradient accumulation and clipping through pshard.torch (docs/PYTHON.md, "Mixed precision,
accumulation, clipping"):
- torch.autocast (bf16 on the CPU) trains unchanged: the loss decreases;
- a loss scaled by 2^16 with DistributedOptimizer(grad_scaler=) gives the same weights as unscaled training (1e-6),
  and the scale grows by the scaler's rule;
- an Inf in one worker's gradient skips the step on every worker of a sync job: its pushes say so and no server
  applies any of it (the run equals one without that step, momentum included), the scale backs off, and the job
  goes on; the epoch line records the steps skipped and the scale. In an async job only that worker skips it;
- a worker whose gradients are never finite: every step is skipped, and the job ends as diverged once the scale
  falls below 2^-24 (or 100 steps in a row were skipped), failed, naming why, as pshard's own workers end; the
  epochs before record their skipped steps;
- backward_passes_per_step=4 with the loss divided by 4 equals single-process PyTorch with 4x the batch (1e-5);
- clip_grad_norm= equals torch.nn.utils.clip_grad_norm_ before single-process SGD (1 worker, 1e-6);
- wrong options and another count of backward() calls per step() are refused, and a GradScaler's step(opt)
  without grad_scaler= stops the job in its first step, before any gradient reached the servers."""
import json
import os
import sys

import torch
import torch.nn.functional as F

import support

STEPS, BATCH, LR, MOMENTUM = 8, 16, 0.1, 0.9
INF_STEP = 3  # the inf case: rank 1's gradient of this step holds an Inf
ALWAYS_INF_STEPS = 20  # the always-inf case: steps per epoch (the scale 2^16 halves 41 times to fall below 2^-24)
CONFIG = """
[optimizer]
name = "momentum"
lr = %g
momentum = %g

[train]
batch_size = %d
epochs = 1

[cluster]
mode = "sync"
slice_bytes = 256
""" % (LR, MOMENTUM, BATCH)


def model():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def data(n):
    g = torch.Generator()
    g.manual_seed(11)
    x = torch.randn(n, 10, generator=g)
    return x, (x @ torch.randn(10, 4, generator=g)).argmax(1)  # labels a linear model can learn


class ScaleRule:
    """What torch.amp.GradScaler("cpu") is on a torch that has it; torch 1.13's GradScaler is CUDA only (on the CPU
    it disables itself and its scale is 1). The methods DistributedOptimizer(grad_scaler=) uses, with GradScaler's
    meaning: the scale, and its growth and backoff."""

    def __init__(self, init_scale, growth_interval):
        self.value, self.interval = float(init_scale), growth_interval

    def get_scale(self):
        return self.value

    def update(self, new_scale=None):
        self.value = float(new_scale)

    def get_growth_factor(self):
        return 2.0

    def get_backoff_factor(self):
        return 0.5

    def get_growth_interval(self):
        return self.interval


def scaler(init_scale, growth_interval):
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    return ScaleRule(init_scale, growth_interval)


def real_scaler():
    """A torch GradScaler that scales: torch.amp.GradScaler("cpu"), or torch 1.13's CUDA one made to act enabled
    on the CPU (it disables itself without CUDA), for what it does to an optimizer in unscale_() and step()."""
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    available = torch.cuda.is_available
    torch.cuda.is_available = lambda: True
    try:
        s = torch.cuda.amp.GradScaler(init_scale=2.0 ** 16)
    finally:
        torch.cuda.is_available = available
    s._scale, s._growth_tracker = torch.full((1,), 2.0 ** 16), torch.zeros(1, dtype=torch.int32)
    module = sys.modules[type(s).__module__]

    class Replicator(module._MultiDeviceReplicator):  # its per-device copies of the scale, without the CUDA check
        def __init__(self, master):
            self.master, self._per_device_tensors = master, {}
    module._MultiDeviceReplicator = Replicator
    return s


def scale_loss(s, loss):
    return s.scale(loss) if hasattr(s, "scale") else loss * s.get_scale()


def refused(ps, call, words):
    try:
        call()
    except ps.PshardError as e:
        if words not in str(e):
            raise AssertionError("refused with %r, not naming %r" % (str(e), words))
        return
    raise AssertionError("not refused: expected a PshardError naming %r" % words)


def worker(case, out_dir):
    import pshard.torch as ps
    ps.init()
    r, w = ps.rank(), ps.size()
    net = model()
    if case == "autocast":
        refused(ps, lambda: ps.DistributedOptimizer(net, backward_passes_per_step=0), "backward_passes_per_step=0")
        refused(ps, lambda: ps.DistributedOptimizer(net, clip_grad_norm=-1.0), "clip_grad_norm=-1.0")
        refused(ps, lambda: ps.DistributedOptimizer(net, grad_scaler=object()), "lacks get_scale")
    s = None
    kwargs = {}
    if case in ("scaled", "inf", "always-inf", "inf-async"):
        s = scaler(2.0 ** 16, 3)
        kwargs["grad_scaler"] = s
    if case == "always-inf":  # 3 epochs of ALWAYS_INF_STEPS, rank 1's gradients never finite
        opt = ps.DistributedOptimizer(net, steps_per_epoch=ALWAYS_INF_STEPS, **kwargs)
        net[0].weight.register_hook(lambda g: g * float("inf") if r == 1 else g)
        x, y = data(ALWAYS_INF_STEPS * BATCH * w)
        for epoch in range(3):
            for t in range(ALWAYS_INF_STEPS):
                lo = (t * w + r) * BATCH
                loss = F.cross_entropy(net(x[lo:lo + BATCH]), y[lo:lo + BATCH])
                opt.zero_grad()
                scale_loss(s, loss).backward()
                assert opt.step() is False, "a step with an infinite gradient was applied"
            ps.report(epoch=epoch, train_loss=float(loss))
        raise AssertionError("every step was skipped and the job went on")
    if case in ("accum", "passes"):
        kwargs["backward_passes_per_step"] = 4 if case == "accum" else 2
    if case == "clip":
        kwargs["clip_grad_norm"] = 0.5
    steps = STEPS - 1 if case == "without-inf-step" else 4 * STEPS if case == "autocast" else STEPS
    opt = ps.DistributedOptimizer(net, steps_per_epoch=None if case == "passes" else steps, **kwargs)
    if case == "autocast":
        refused(ps, lambda: opt.param_groups, "grad_scaler=scaler")
    x, y = data(STEPS * 4 * BATCH * w)
    if case == "passes":  # backward_passes_per_step = 2: another count of backward() calls per step() is refused
        def backward(t):
            F.cross_entropy(net(x[t * BATCH:(t + 1) * BATCH]), y[t * BATCH:(t + 1) * BATCH]).backward()
        backward(0)
        refused(ps, opt.step, "step() after 1 backward passes; this DistributedOptimizer takes "
                "backward_passes_per_step = 2")
        backward(1)
        assert opt.step() is True
        for t in range(2, 4):
            backward(t)
        try:
            backward(4)
        except Exception as e:  # raised by the gradient hook, through autograd
            assert "got a gradient from backward pass 3 before step(), with backward_passes_per_step = 2" in str(e), e
        else:
            raise AssertionError("a third backward() of a step was not refused")
        ps.shutdown()
        return
    if case == "misuse":  # a GradScaler not given to the optimizer: its step() stops the job in the first step
        s = real_scaler()
        F.cross_entropy(net(x[:BATCH]), y[:BATCH]).mul(2.0 ** 16).backward()
        s.step(opt)
        raise AssertionError("scaler.step(opt) was not refused")
    poison = []

    def inf_in(grad):
        if poison:
            grad = grad.clone()
            grad[0, 0] = float("inf")
        return grad
    net[0].weight.register_hook(inf_in)
    losses, results, norms = [], [], []
    for t in range(steps if case == "autocast" else STEPS):
        if case == "autocast":  # 4 epochs over its data
            t %= STEPS
        if case == "without-inf-step" and t == INF_STEP:
            continue
        if case == "accum":
            opt.zero_grad()
            for k in range(4):
                lo = (t * w * 4 + r * 4 + k) * BATCH
                loss = F.cross_entropy(net(x[lo:lo + BATCH]), y[lo:lo + BATCH]) / 4
                loss.backward()
            results.append(opt.step())
            continue
        lo = (t * w + r) * BATCH
        if case == "autocast":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = net(x[lo:lo + BATCH])
                loss = F.cross_entropy(out, y[lo:lo + BATCH])
            assert out.dtype == torch.bfloat16, out.dtype
        else:
            loss = F.cross_entropy(net(x[lo:lo + BATCH]), y[lo:lo + BATCH])
        losses.append(float(loss))
        opt.zero_grad()
        poison[:] = [1] if case in ("inf", "inf-async") and r == 1 and t == INF_STEP else []
        if case == "inf" and t == INF_STEP:
            before = {n: v.clone() for n, v in net.state_dict().items()}
        (scale_loss(s, loss) if s is not None else loss).backward()
        results.append(opt.step())
        if case == "inf" and t == INF_STEP:
            opt.synchronize()
            after = net.state_dict()
            assert all(torch.equal(before[n], after[n]) for n in before), "a skipped step changed the weights"
        if case == "clip":
            norms.append(opt.last_grad_norm)
    if case == "autocast":
        # The same batches again, after training: the loss is lower.
        again = []
        for t in range(STEPS):
            lo = (t * w + r) * BATCH
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                again.append(float(F.cross_entropy(net(x[lo:lo + BATCH]), y[lo:lo + BATCH])))
        first = losses[:STEPS]
        assert sum(again) < 0.8 * sum(first), "autocast: the loss did not decrease: %s -> %s" % (first, again)
    ps.report(epoch=0, train_loss=losses[-1] if losses else 0.0)
    torch.save({"state": net.state_dict(), "results": results, "skipped": opt.skipped_steps, "norms": norms,
                "scale": s.get_scale() if s is not None else None},
               os.path.join(out_dir, "%s-rank%d.pt" % (case, r)))
    ps.shutdown()


RUNS = {}  # case: its run directory


def job(case, workers, servers, out):
    status, output, RUNS[case] = support.launch(CONFIG, workers, servers,
                                                [os.path.abspath(__file__), "worker", case, out], 120, case)
    support.expect(status == 0, "%s: the job failed (status %d)" % (case, status), output)
    return [torch.load(os.path.join(out, "%s-rank%d.pt" % (case, r))) for r in range(workers)]


def epoch_events(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [e for e in map(json.loads, f) if e.get("event") == "epoch"]


def max_diff(a, b):
    return max(float((a[n] - b[n]).abs().max()) for n in a)


def main():
    out = support.fresh_dir("amp")
    job("autocast", 2, 1, out)
    print("autocast bf16 on the CPU: trains through DistributedOptimizer unchanged (the loss decreases); wrong "
          "options and param_groups refused")

    status, output, _ = support.launch(CONFIG, 1, 1, [os.path.abspath(__file__), "worker", "misuse", out], 60,
                                       "misuse")
    support.expect(status != 0 and "a GradScaler cannot unscale_() or step() it" in output and
                   "DistributedOptimizer(model, grad_scaler=scaler)" in output, "misuse: not refused", output)
    support.expect(" 0 updates" in output and "scaler.step(opt) was not refused" not in output,
                   "misuse: a gradient reached the server", output)
    print("a GradScaler's step(opt) without grad_scaler=: refused in the first step, before any gradient was pushed")

    status, output, _ = support.launch(CONFIG, 1, 1, [os.path.abspath(__file__), "worker", "passes", out], 60,
                                       "passes")
    support.expect(status == 0, "passes: the job failed (status %d)" % status, output)
    print("backward_passes_per_step=2: step() after 1 pass and a third backward() refused")

    plain, scaled = job("plain", 2, 2, out), job("scaled", 2, 2, out)
    for r in range(2):
        d = max_diff(plain[r]["state"], scaled[r]["state"])
        support.expect(d <= 1e-6, "rank %d: loss x 2^16 with grad_scaler differs from unscaled training by %.3g"
                       % (r, d))
        support.expect(max_diff(plain[0]["state"], model().state_dict()) > 1e-3, "the model did not train")
        # growth_interval 3: 8 applied steps double the scale twice.
        support.expect(scaled[r]["scale"] == 2.0 ** 18 and scaled[r]["skipped"] == 0,
                       "rank %d: scale %s, skipped %d" % (r, scaled[r]["scale"], scaled[r]["skipped"]))
    print("grad_scaler: a loss scaled by 2^16 trains to the same weights as unscaled training; the scale grows")

    inf, without = job("inf", 2, 2, out), job("without-inf-step", 2, 2, out)
    for r in range(2):
        want = [t != INF_STEP for t in range(STEPS)]
        support.expect(inf[r]["results"] == want and inf[r]["skipped"] == 1,
                       "rank %d: step() returned %s, skipped %d" % (r, inf[r]["results"], inf[r]["skipped"]))
        d = max_diff(inf[r]["state"], without[r]["state"])
        support.expect(d <= 1e-6, "rank %d: a run with a skipped step differs from one without it by %.3g" % (r, d))
        # 3 applied steps: x2; the skip: x0.5 (tracker reset); 4 applied steps: x2.
        support.expect(inf[r]["scale"] == 2.0 ** 17, "rank %d: scale %s after the skip" % (r, inf[r]["scale"]))
    epochs = epoch_events(RUNS["inf"])
    support.expect(len(epochs) == 1 and epochs[0].get("skipped_steps") == 1 and epochs[0].get("loss_scale") == 2.0 ** 17,
                   "inf: the epoch line's skipped_steps and loss_scale: %s" % epochs)
    print("an Inf in rank 1's gradient: the step skipped on every worker and server, the job went on; the epoch line "
          "says 1 step skipped, scale 2^17")

    status, output, _ = support.launch(CONFIG.replace('mode = "sync"', 'mode = "async"'), 2, 2,
                                       [os.path.abspath(__file__), "worker", "inf-async", out], 120, "inf-async")
    support.expect(status == 0, "inf-async: the job failed (status %d)" % status, output)
    ranks = [torch.load(os.path.join(out, "inf-async-rank%d.pt" % r)) for r in range(2)]
    support.expect(ranks[0]["results"] == [True] * STEPS and ranks[0]["skipped"] == 0 and
                   ranks[0]["scale"] == 2.0 ** 18, "inf-async: rank 0 returned %s, skipped %d, scale %s"
                   % (ranks[0]["results"], ranks[0]["skipped"], ranks[0]["scale"]))
    support.expect(ranks[1]["results"] == [t != INF_STEP for t in range(STEPS)] and ranks[1]["skipped"] == 1 and
                   ranks[1]["scale"] == 2.0 ** 17, "inf-async: rank 1 returned %s, skipped %d, scale %s"
                   % (ranks[1]["results"], ranks[1]["skipped"], ranks[1]["scale"]))
    print("the same Inf in an async job: rank 1 skipped that step alone (scale 2^17), rank 0 applied every step")

    status, output, run = support.launch(CONFIG.replace("epochs = 1", "epochs = 3"), 2, 1,
                                         [os.path.abspath(__file__), "worker", "always-inf", out], 120, "always-inf")
    support.expect(status != 0 and "training diverged: 41 steps in a row were skipped" in output and
                   "every step was skipped and the job went on" not in output,
                   "always-inf: the job did not end as diverged (status %d)" % status, output)
    epochs = epoch_events(run)
    got = [(e.get("skipped_steps"), e.get("loss_scale")) for e in epochs]  # the JSON has 9 significant digits
    support.expect(len(got) == 2 and all(n == ALWAYS_INF_STEPS and abs(scale / want - 1) < 1e-7
                                         for (n, scale), want in zip(got, (2.0 ** -4, 2.0 ** -24))),
                   "always-inf: (skipped_steps, loss_scale) of the epoch lines: %s" % got, output)
    print("a worker whose gradients are never finite: every step skipped, the job failed as diverged at scale 2^-25 "
          "(the epochs before: 20 skipped steps each)")

    accum = job("accum", 2, 2, out)
    ref = model()
    sgd = torch.optim.SGD(ref.parameters(), lr=LR, momentum=MOMENTUM)
    x, y = data(STEPS * 4 * BATCH * 2)
    for t in range(STEPS):
        lo, n = t * 2 * 4 * BATCH, 2 * 4 * BATCH
        sgd.zero_grad()
        F.cross_entropy(ref(x[lo:lo + n]), y[lo:lo + n]).backward()
        sgd.step()
    for r in range(2):
        support.expect(accum[r]["results"] == [True] * STEPS, "accum: step() returned %s" % accum[r]["results"])
        for n, want in ref.state_dict().items():
            err = float((accum[r]["state"][n] - want).abs().max() / want.abs().max())
            support.expect(err <= 1e-5, "accum rank %d %s: relative difference %.3g > 1e-5" % (r, n, err))
    print("backward_passes_per_step=4, loss / 4: equal to one step of 4x the batch")

    clip = job("clip", 1, 1, out)[0]
    ref = model()
    sgd = torch.optim.SGD(ref.parameters(), lr=LR, momentum=MOMENTUM)
    x, y = data(STEPS * 4 * BATCH)
    norms = []
    for t in range(STEPS):
        lo = t * BATCH
        sgd.zero_grad()
        F.cross_entropy(ref(x[lo:lo + BATCH]), y[lo:lo + BATCH]).backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)))
        sgd.step()
    support.expect(min(norms) > 0.5, "clip: the reference was not clipped at every step (norms %s)" % norms)
    support.expect(all(abs(a - b) <= 1e-6 * b for a, b in zip(clip["norms"], norms)) and len(clip["norms"]) == STEPS,
                   "clip: norms %s, reference %s" % (clip["norms"], norms))
    d = max_diff(clip["state"], ref.state_dict())
    support.expect(d <= 1e-6, "clip: differs from clip_grad_norm_ + SGD by %.3g" % d)
    print("clip_grad_norm=0.5: equal to torch.nn.utils.clip_grad_norm_ before the step")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
        support.passed()
