"""Embedding tables that only the servers hold (docs/SPARSE.md): ps.Embedding and ps.EmbeddingBag.

    import pshard.torch as ps
    ps.init()
    users = ps.EmbeddingBag(10_000_000, 16, mode="sum")    # rows live on the servers, row r on server r mod S
    model = Ranker(users)                                  # the dense rest: an ordinary nn.Module
    opt = ps.DistributedOptimizer(model)                   # trains the dense part; step() also pushes the rows
    for ids, offsets, y in loader:
        loss = F.binary_cross_entropy_with_logits(model(ids, offsets), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

A forward pulls the unique rows of its batch for the step being computed (a sync job: after the previous step
closed on every server), backward collects their gradients, and the optimizer's step() pushes each table's rows
once (with no rows when the step did not touch the table, so that a sync step never waits for it). The servers
update the rows with embedding.optimizer (lazily: a row's state changes only in the steps that touch it).
"""
import ctypes

import torch
import torch.nn.functional as F

from . import _state, client
from ._lib import PshardError, check, lib

INITS = {"normal": 0, "uniform": 1, "zeros": 2}


class _Table(torch.nn.Module):
    """What Embedding and EmbeddingBag share: the table's declaration, its row pulls, and the gradients of the rows
    a step used, pushed by DistributedOptimizer.step()."""

    def __init__(self, num_embeddings, embedding_dim, name, init, init_scale, hashed=False, admit_after=0,
                 expire_after=0):
        super().__init__()
        if _state.optimizer is not None:
            raise PshardError("pshard: embedding table '%s' made after DistributedOptimizer: make the model's tables "
                              "first (they are declared to the servers when the optimizer starts)" % name,
                              "PSHARD_ERR_STATE")
        if init not in INITS:
            raise PshardError("pshard: init=%r: give one of %s" % (init, ", ".join(INITS)), "PSHARD_ERR_ARGUMENT")
        if name is None:
            name = "table%d" % len(_state.tables)
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        self.table_name = name
        self.hashed = bool(hashed)
        if self.hashed:
            self.index = check(lib().pshard_add_hashed_table(client(), name.encode(), self.num_embeddings,
                                                             self.embedding_dim, INITS[init], float(init_scale),
                                                             int(admit_after), int(expire_after)), "ps.Embedding")
        else:
            self.index = check(lib().pshard_add_table(client(), name.encode(), self.num_embeddings,
                                                      self.embedding_dim, INITS[init], float(init_scale)),
                               "ps.Embedding")
        self.pending = []  # (unique ids, their rows' gradient) of each lookup of this step
        self.push_request = None  # the last push, not waited for yet (its buffers were copied)
        _state.tables.append(self)

    def extra_repr(self):
        return "%s, %d, %d (on the servers)" % (self.table_name, self.num_embeddings, self.embedding_dim)

    def _step(self):
        opt = _state.optimizer
        if opt is None:
            raise PshardError("pshard: a forward of embedding table '%s' before DistributedOptimizer(model): the "
                              "tables' rows come from the servers once the optimizer started" % self.table_name,
                              "PSHARD_ERR_STATE")
        return opt.step_count

    def pull(self, ids):
        """The current rows `ids` (a 1-D tensor of distinct ids) as a (len(ids), dim) float32 tensor: what a forward
        of the step being computed reads. No gradient flows back through it."""
        ids = self._ids(ids)
        self._finish_push()
        out = torch.empty((ids.numel(), self.embedding_dim), dtype=torch.float32)
        request = ctypes.c_uint64()
        check(lib().pshard_pull_rows(client(), self.index, ctypes.c_void_p(ids.data_ptr()), ids.numel(),
                                     ctypes.c_void_p(out.data_ptr()), self._step(), ctypes.byref(request)),
              "ps.Embedding '%s'" % self.table_name)
        check(lib().pshard_wait(client(), request.value, -1), "ps.Embedding '%s'" % self.table_name)
        return out

    def _ids(self, ids):
        ids = torch.as_tensor(ids).reshape(-1).to(torch.int64).contiguous().cpu()
        if self.hashed:  # any 64-bit id: a negative int64 stands for its unsigned bits
            return ids
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.num_embeddings):
            bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
            raise PshardError("pshard: id %d is outside embedding table '%s' (%d rows)"
                              % (bad, self.table_name, self.num_embeddings), "PSHARD_ERR_ARGUMENT")
        return ids

    def _lookup_rows(self, input):
        """The unique rows of `input` as a leaf tensor whose gradient is kept for the step's push, and each input
        position's index into them."""
        flat = self._ids(input)
        unique, inverse = torch.unique(flat, sorted=True, return_inverse=True)
        rows = self.pull(unique)
        if torch.is_grad_enabled() and self.training:
            rows.requires_grad_(True)
            rows.register_hook(lambda grad, ids=unique: self.pending.append((ids, grad.detach().clone())))
        return rows, inverse.reshape(torch.as_tensor(input).shape)

    def _push(self, step):
        """DistributedOptimizer.step(): this step's gradient of every row the step used (the lookups' gradients of a
        row summed), in one push per table, with no rows when the table was not used."""
        if self.pending:
            ids = torch.cat([i for i, _ in self.pending])
            grads = torch.cat([g for _, g in self.pending]).to(torch.float32)
            unique, inverse = torch.unique(ids, sorted=True, return_inverse=True)
            summed = torch.zeros((unique.numel(), self.embedding_dim), dtype=torch.float32)
            summed.index_add_(0, inverse, grads)
            ids, grads = unique.contiguous(), summed.contiguous()
        else:
            ids = torch.empty(0, dtype=torch.int64)
            grads = torch.empty((0, self.embedding_dim), dtype=torch.float32)
        self.pending = []
        self._finish_push()
        request = ctypes.c_uint64()
        check(lib().pshard_push_rows(client(), self.index, ctypes.c_void_p(ids.data_ptr()), ids.numel(),
                                     ctypes.c_void_p(grads.data_ptr()), step, ctypes.byref(request)),
              "ps.Embedding '%s'" % self.table_name)
        self.push_request = request.value  # the library copied ids and grads: waited for at the next pull or push

    def _finish_push(self):
        """Waits for the last push (its answer carries a refusal, if any)."""
        if self.push_request is not None:
            request, self.push_request = self.push_request, None
            check(lib().pshard_wait(client(), request, -1), "ps.Embedding '%s'" % self.table_name)

    def _discard(self):
        self.pending = []


class Embedding(_Table):
    """torch.nn.Embedding whose rows only the servers hold: num_embeddings x embedding_dim float32 values, row r on
    server r mod S, each value made there from run.seed, the name and its place (init "normal" with standard
    deviation init_scale, nn.Embedding's default; "uniform" on [-init_scale, init_scale]; "zeros"). `name` (default
    "table0", "table1", ... in the order of construction) must be the same on every rank.

    hashed=True: the ids are any 64-bit values (hashed feature ids; a negative int64 stands for its unsigned bits)
    and num_embeddings is the most rows the table holds; a row is made from its id once pushes held it in
    admit_after steps (0, 1: the first) and dropped when no push held it for expire_after steps (0: never)."""

    def __init__(self, num_embeddings, embedding_dim, name=None, init="normal", init_scale=1.0, hashed=False,
                 admit_after=0, expire_after=0):
        super().__init__(num_embeddings, embedding_dim, name, init, init_scale, hashed, admit_after, expire_after)

    def forward(self, input):
        rows, inverse = self._lookup_rows(input)
        return F.embedding(inverse, rows)


class EmbeddingBag(_Table):
    """torch.nn.EmbeddingBag (mode "sum" or "mean") whose rows only the servers hold (see Embedding, also for
    hashed=True). forward(input, offsets=None): a 2-D input is one bag per row; a 1-D input with offsets is bags
    starting at those offsets."""

    def __init__(self, num_embeddings, embedding_dim, mode="mean", name=None, init="normal", init_scale=1.0,
                 hashed=False, admit_after=0, expire_after=0):
        if mode not in ("sum", "mean"):
            raise PshardError("pshard: EmbeddingBag mode=%r: give \"sum\" or \"mean\"" % (mode,), "PSHARD_ERR_ARGUMENT")
        super().__init__(num_embeddings, embedding_dim, name, init, init_scale, hashed, admit_after, expire_after)
        self.mode = mode

    def forward(self, input, offsets=None):
        rows, inverse = self._lookup_rows(input)
        return F.embedding_bag(inverse, rows, offsets, mode=self.mode)


def refuse_grad_scaler(scaler):
    """DistributedOptimizer(grad_scaler=) beside tables: refused, their rows' gradients would reach the servers scaled."""
    if scaler is not None and _state.tables:
        raise PshardError("pshard: grad_scaler with embedding tables (ps.Embedding, ps.EmbeddingBag) is not "
                          "supported: their rows' gradients would reach the servers scaled", "PSHARD_ERR_ARGUMENT")


def push_tables(step):
    """Every table's push of `step` (DistributedOptimizer.step())."""
    for t in _state.tables:
        t._push(step)


def finish_pushes():
    """Every table's last push answered (DistributedOptimizer.synchronize())."""
    for t in _state.tables:
        t._finish_push()


def discard_tables():
    """A step skipped on every worker (grad_scaler): the tables' gradients of it are dropped, as the dense ones."""
    for t in _state.tables:
        t._discard()
