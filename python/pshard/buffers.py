"""A pshard.torch model's floating-point buffers (BatchNorm running statistics) across the workers: averaged at
each report() through files in the run directory, and kept by rank 0 for a worker that starts mid-run. The files are
written so that a full disk is an error naming them, and read without unpickling code."""
import errno
import glob
import io
import os
import pickle

import torch

from ._lib import PshardError
from . import barrier, rank, size


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
