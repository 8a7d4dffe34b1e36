#!/usr/bin/python3
"""Converts a PyTorch state_dict file into a pshard model file (the format of worker/trainer/model_file.h), which
`train.init_from` reads: transfer learning from a model trained with PyTorch, e.g. torchvision's ResNet-18/50.

Every floating-point tensor is written as float32 under its state_dict key (conv1.weight, bn1.running_mean,
layer1.0.downsample.0.weight, fc.bias); integer tensors (BatchNorm's num_batches_tracked) are left out. pshard's
resnet18 and resnet50 name their parameters and BatchNorm running statistics as torchvision does, so the keys load
by name; a checkpoint that wraps its state_dict ({"state_dict": ...}, {"model": ...}) or a whole pickled module is
unwrapped, and a "module." prefix (DistributedDataParallel) is dropped.

  /usr/bin/python3 scripts/torch_to_pshard.py resnet18-f37072fd.pth resnet18.bin
  pshard train --config job.toml --set train.init_from=resnet18.bin
  # torchvision's architecture with its own random initialisation (no file needed):
  /usr/bin/python3 scripts/torch_to_pshard.py --torchvision resnet50 --classes 10 --seed 1 resnet50-init.bin

Needs torch (Debian: python3-torch; --torchvision also python3-torchvision). Nothing is downloaded.
"""
import argparse
import os
import struct
import sys

MAGIC = b"PSHMODEL"
VERSION = 1


def write_model_file(path, tensors):
    """Writes [(name, numpy float array)] as a pshard model file, atomically (a temporary file, then a rename)."""
    import numpy as np
    out = bytearray(MAGIC)
    out += struct.pack("<II", VERSION, len(tensors))
    for name, array in tensors:
        a = np.ascontiguousarray(array, dtype="<f4")
        encoded = name.encode("utf-8")
        out += struct.pack("<I", len(encoded)) + encoded
        out += struct.pack("<I", a.ndim) + b"".join(struct.pack("<q", d) for d in a.shape)
        out += struct.pack("<Q", a.size) + a.tobytes()
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_model_file(path):
    """The [(name, numpy float32 array)] of a pshard model file (for checks and tests)."""
    import numpy as np
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        raise ValueError("%s: not a pshard model file (bad magic)" % path)
    version, count = struct.unpack_from("<II", data, 8)
    if version != VERSION:
        raise ValueError("%s: unsupported version %d" % (path, version))
    at, tensors = 16, []
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, at)
        name = data[at + 4:at + 4 + n].decode("utf-8")
        at += 4 + n
        (ndims,) = struct.unpack_from("<I", data, at)
        shape = struct.unpack_from("<%dq" % ndims, data, at + 4)
        at += 4 + 8 * ndims
        (numel,) = struct.unpack_from("<Q", data, at)
        at += 8
        tensors.append((name, np.frombuffer(data, "<f4", numel, at).reshape(shape).copy()))
        at += 4 * numel
    return tensors


def state_dict_tensors(state):
    """[(name, numpy float32)] of a state_dict (floating-point tensors only, in the state_dict's order)."""
    out = []
    for key, value in state.items():
        if not hasattr(value, "is_floating_point") or not value.is_floating_point():
            continue  # num_batches_tracked and other integer bookkeeping
        name = key[len("module."):] if key.startswith("module.") else key
        out.append((name, value.detach().cpu().float().numpy()))
    return out


def load_state_dict(torch, path):
    try:
        obj = torch.load(path, map_location="cpu")
    except Exception as e:  # pickle, zip and torch's own errors: all mean the same to the user
        raise SystemExit("%s: not a file torch.load can read (%s: %s)" % (path, type(e).__name__, e))
    if hasattr(obj, "state_dict") and callable(obj.state_dict):
        return obj.state_dict()
    if isinstance(obj, dict):
        for wrapper in ("state_dict", "model", "model_state_dict"):
            if wrapper in obj and isinstance(obj[wrapper], dict):
                return obj[wrapper]
        return obj
    raise SystemExit("%s: neither a state_dict nor a module (a %s)" % (path, type(obj).__name__))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", nargs="?", help="a file written by torch.save (a state_dict or a module)")
    ap.add_argument("out", help="the pshard model file to write")
    ap.add_argument("--torchvision", metavar="MODEL", help="instead of a file: torchvision.models.MODEL, initialised")
    ap.add_argument("--classes", type=int, default=1000, help="--torchvision: num_classes (default 1000)")
    ap.add_argument("--seed", type=int, default=0, help="--torchvision: torch.manual_seed before building")
    args = ap.parse_args()
    if (args.source is None) == (args.torchvision is None):
        ap.error("give either a state_dict file or --torchvision MODEL")
    try:
        import torch
    except ImportError:
        print("torch_to_pshard.py needs torch (apt-get install python3-torch)", file=sys.stderr)
        return 2
    if args.torchvision:
        import torchvision
        torch.manual_seed(args.seed)
        state = getattr(torchvision.models, args.torchvision)(num_classes=args.classes).state_dict()
    else:
        if not os.path.isfile(args.source):
            raise SystemExit("%s: no such file" % args.source)
        state = load_state_dict(torch, args.source)
    tensors = state_dict_tensors(state)
    if not tensors:
        raise SystemExit("%s: no floating-point tensors to write" % (args.source or args.torchvision))
    write_model_file(args.out, tensors)
    print("wrote %d tensors (%d floats) to %s" % (len(tensors), sum(a.size for _, a in tensors), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
