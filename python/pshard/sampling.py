"""This rank's share of a data set in a pshard.torch job: ShardSampler (reshuffled each epoch), shard() (a fixed
block), and an elastic job's epoch_plan() that decides both. Used as pshard.torch's names (docs/PYTHON.md)."""
import ctypes

import torch

from . import _state
from ._lib import PshardError, check, lib
from . import client, config, elastic, rank, size


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
