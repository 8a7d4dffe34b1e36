"""step() leaves each parameter's new weights to its module's next forward, and nothing is read stale: 2 Python workers,
sync, a model with a branch that rank 1 skips on odd steps and both skip on every third step (an unused branch pushes
zeros, the step does not stall), end with the weights of single-process SGD on the same per-rank batches (relative
1e-5), a tied parameter loaded by the one of its two modules that runs, although Module.zero_grad() zeroes the
gradients in place before each forward; after step() every parameter is pending until the forward of its module (a
module's call loads only its own), state_dict() loads what is still pending, and a parameter read outside the modules
that hold it raises instead of training on old weights."""
import os
import sys

import torch
import torch.nn.functional as F

import support

STEPS, BATCH, LR = 12, 8, 0.1
CONFIG = """
[optimizer]
name = "sgd"
lr = %g
momentum = 0.0

[train]
batch_size = %d
epochs = 1

[cluster]
mode = "sync"
""" % (LR, BATCH)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 3)
        self.branch = torch.nn.Linear(4, 3)
        # A tied parameter: held by two modules, of which only the second runs, twice per forward.
        self.tied = torch.nn.Linear(3, 3, bias=False)
        self.tied_again = torch.nn.Linear(3, 3, bias=False)
        self.tied_again.weight = self.tied.weight
        self.head = torch.nn.Linear(3, 2)

    def forward(self, x, use_branch):
        h = self.a(x)
        if use_branch:
            h = h + self.branch(x)
        h = self.tied_again(torch.tanh(self.tied_again(h)))
        return self.head(torch.tanh(h))


def uses_branch(step, rank):
    return step % 3 != 2 and not (rank == 1 and step % 2 == 1)


def data():
    g = torch.Generator()
    g.manual_seed(3)
    return torch.randn(STEPS, 2, BATCH, 4, generator=g), torch.randint(0, 2, (STEPS, 2, BATCH), generator=g)


def worker(out_dir):
    import pshard.torch as ps
    ps.init()
    torch.manual_seed(1)
    net = Net()
    opt = ps.DistributedOptimizer(net, steps_per_epoch=STEPS)
    names = [n for n, _ in net.named_parameters()]
    x, y = data()
    r = ps.rank()
    seen = {}
    for t in range(STEPS):
        if t > 0:
            # Nothing was waited for in step(): every parameter's weights are pending until its module runs.
            pending = opt.pending_weights()
            if t == 1:
                seen["after_step"] = pending
                net.a(x[t, r])  # loads a's weights only
                seen["after_a"] = opt.pending_weights()
        # torch 1.13's Module.zero_grad() zeroes p.grad in place while the last step's pushes are still in flight
        # (until each module's forward waits for them): the pushed gradients must not change.
        net.zero_grad()
        out = net(x[t, r], uses_branch(t, r))
        if t == 1:
            seen["after_forward_with_branch"] = opt.pending_weights()
        if t == 2:
            seen["after_forward_without_branch"] = opt.pending_weights()
        loss = F.cross_entropy(out, y[t, r])
        loss.backward()
        opt.step()
    seen["before_state_dict"] = opt.pending_weights()
    state = {k: v.clone() for k, v in net.state_dict().items()}  # the last step's weights: state_dict() loads them
    seen["after_state_dict"] = opt.pending_weights()
    # A parameter used outside the modules that hold it (a's weight by a functional call, a not called) would be
    # read before its new weights arrive: the gradient hook refuses it.
    loss = F.cross_entropy(net(x[0, r], True), y[0, r])
    opt.zero_grad()
    loss.backward()
    opt.step()
    h = F.linear(x[0, r], net.a.weight) + net.branch(x[0, r])
    try:
        F.cross_entropy(net.head(h), y[0, r]).backward()
        seen["stale_use"] = "no error"
    except ps.PshardError as e:
        seen["stale_use"] = str(e)
    torch.save({"state": state, "seen": seen, "names": names}, os.path.join(out_dir, "rank%d.pt" % r))
    ps.shutdown()


def main():
    out = support.fresh_dir("lazy")
    status, output, _ = support.launch(CONFIG, 2, 1, [os.path.abspath(__file__), "worker", out], 120, "lazy")
    support.expect(status == 0, "the job failed (status %d)" % status, output)
    # Single-process SGD on the same batches: the mean of the two ranks' gradients (a skipped branch adds zero).
    torch.manual_seed(1)
    ref = Net()
    x, y = data()
    for t in range(STEPS):
        loss = sum(F.cross_entropy(ref(x[t, r], uses_branch(t, r)), y[t, r]) for r in range(2)) / 2
        ref.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in ref.parameters():
                if p.grad is not None:
                    p -= LR * p.grad
    for r in range(2):
        got = torch.load(os.path.join(out, "rank%d.pt" % r))
        seen, names = got["seen"], got["names"]
        for name, want in ref.state_dict().items():
            err = float((got["state"][name] - want).abs().max() / want.abs().max())
            support.expect(err <= 1e-5, "rank %d %s: relative difference %.3g > 1e-5" % (r, name, err), output)
        support.expect(seen["after_step"] == names, "rank %d: after step() pending %s, not every parameter"
                       % (r, seen["after_step"]), output)
        support.expect(seen["after_a"] == ["branch.weight", "branch.bias", "tied.weight", "head.weight", "head.bias"],
                       "rank %d: net.a(x) left %s pending" % (r, seen["after_a"]), output)
        support.expect(seen["after_forward_without_branch"] == ["branch.weight", "branch.bias"],
                       "rank %d: a forward without the branch left %s pending"
                       % (r, seen["after_forward_without_branch"]), output)
        if r == 0:
            support.expect(seen["after_forward_with_branch"] == [], "rank 0: a full forward left %s pending"
                           % seen["after_forward_with_branch"], output)
        support.expect(seen["before_state_dict"] == names and seen["after_state_dict"] == [],
                       "rank %d: pending before/after state_dict(): %s / %s"
                       % (r, seen["before_state_dict"], seen["after_state_dict"]), output)
        support.expect("'a.weight' was used before its new weights were loaded" in seen["stale_use"],
                       "rank %d: a stale read gave: %s" % (r, seen["stale_use"]), output)
    print("lazy weights: pending until each module's forward, unused branches under sync, state_dict() loads, "
          "a stale read raises; %d steps == single-process SGD" % STEPS)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2])
    else:
        main()
        support.passed()
