#!/usr/bin/env python3
"""Writes a small JPEG image folder (OUT/CLASS/NNNN.jpg) from Fashion-MNIST's real images: no download.

Each 28x28 grey image of the Debian package dataset-fashion-mnist is upscaled
(bicubic) to --size pixels and colourised with a tint drawn per image (so colour
carries no label), then saved as a JPEG in its class folder. With --split the
folder gets train/ and test/ sub-folders (from the package's train and t10k files).

    /usr/bin/python3 scripts/make_image_folder.py --out /tmp/fm-folder --per-class 40 --size 40
"""
import argparse
import gzip
import os
import struct
import sys

CLASSES = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle-boot"]


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndims = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndims, data[4:4 + 4 * ndims])
    return dims, data[4 + 4 * ndims:]


def find(dir_, stem):
    for name in (stem + ".gz", stem):
        if os.path.exists(os.path.join(dir_, name)):
            return os.path.join(dir_, name)
    sys.exit(f"make_image_folder: {dir_} has no {stem}[.gz] (install dataset-fashion-mnist or pass --source)")


def write_split(source, prefix, out, per_class, size, quality, seed, classes):
    from PIL import Image  # python3-pil
    import random
    dims, pixels = read_idx(find(source, prefix + "-images-idx3-ubyte"))
    _, labels = read_idx(find(source, prefix + "-labels-idx1-ubyte"))
    n, h, w = dims
    rng = random.Random(seed)
    counts = [0] * len(CLASSES)
    for i in range(n):
        c = labels[i]
        if c >= classes or counts[c] >= per_class:
            continue
        grey = Image.frombytes("L", (w, h), pixels[i * h * w:(i + 1) * h * w]).resize((size, size), Image.BICUBIC)
        tint = [rng.randint(120, 255) for _ in range(3)]
        rgb = Image.merge("RGB", [grey.point(lambda v, t=t: v * t // 255) for t in tint])
        folder = os.path.join(out, CLASSES[c])
        os.makedirs(folder, exist_ok=True)
        rgb.save(os.path.join(folder, f"{counts[c]:04d}.jpg"), quality=quality)
        counts[c] += 1
        if min(counts[:classes]) >= per_class:
            break
    return sum(counts)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder to write (created)")
    p.add_argument("--source", default="/usr/share/datasets/fashion-mnist", help="folder of the IDX files")
    p.add_argument("--per-class", type=int, default=40, help="images per class (per split with --split)")
    p.add_argument("--classes", type=int, default=10, help="first N of the 10 classes")
    p.add_argument("--size", type=int, default=40, help="side of the written images in pixels")
    p.add_argument("--quality", type=int, default=90, help="JPEG quality")
    p.add_argument("--split", action="store_true", help="write OUT/train and OUT/test")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if not 2 <= a.classes <= 10:
        sys.exit("make_image_folder: --classes must be 2..10")
    if a.split:
        n = write_split(a.source, "train", os.path.join(a.out, "train"), a.per_class, a.size, a.quality, a.seed,
                        a.classes)
        n += write_split(a.source, "t10k", os.path.join(a.out, "test"), a.per_class, a.size, a.quality, a.seed + 1,
                         a.classes)
    else:
        n = write_split(a.source, "train", a.out, a.per_class, a.size, a.quality, a.seed, a.classes)
    print(f"make_image_folder: wrote {n} JPEGs of {a.size}x{a.size} in {a.classes} class folders under {a.out}")


if __name__ == "__main__":
    main()
