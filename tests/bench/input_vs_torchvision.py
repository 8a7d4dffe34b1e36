#!/usr/bin/env python3
"""Image input pipeline: pshard's loader against torchvision's DataLoader on the same JPEGs (bench label).

Both sides read JPEGs of an image folder, decode them, take a RandomResizedCrop to --size, flip with probability
1/2 and normalise (ImageNet mean/std) into float CHW batches: `pshard bench input` with --threads decode threads,
and torchvision's ImageFolder + DataLoader (PIL, --threads worker processes, same transforms). The folder is made
by scripts/make_image_folder.py from Fashion-MNIST's images (--image-px pixels square, nothing downloaded) unless
--dir is given. The two sides alternate for --rounds rounds, each keeping its best (the machine may be shared);
prints images/s of both and the ratio pshard / torchvision. Reports only: exits 0 whatever the ratio, and skips with
a message when torchvision or the data set is missing.

  tests/bench/input_vs_torchvision.py --pshard build/bin/pshard --threads 2 --size 224 --rounds 3
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def torchvision_or_reexec():
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        return True
    except ImportError:
        system = "/usr/bin/python3"
        if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system) \
                and not os.environ.get("PSHARD_BENCH_REEXEC"):
            os.environ["PSHARD_BENCH_REEXEC"] = "1"
            os.execv(system, [system] + sys.argv)
        return False


def torchvision_rate(folder, size, threads, batch, batches):
    import torch
    from torchvision import datasets, transforms
    torch.set_num_threads(1)
    tf = transforms.Compose([transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(),
                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = datasets.ImageFolder(folder, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=threads, drop_last=True,
                                         persistent_workers=True, prefetch_factor=2)
    it = iter(loader)

    def next_batch():
        nonlocal it
        try:
            return next(it)
        except StopIteration:
            it = iter(loader)
            return next(it)

    next_batch()  # warm-up: starts the worker processes
    t0 = time.perf_counter()
    for _ in range(batches):
        x, _ = next_batch()
        assert x.shape == (batch, 3, size, size)
    return batches * batch / (time.perf_counter() - t0)


def pshard_rate(pshard, folder, size, threads, batch, batches):
    out = subprocess.run([pshard, "bench", "input", "--dir", folder, "--image-size", str(size), "--threads",
                          str(threads), "--batch", str(batch), "--batches", str(batches), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["images_per_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pshard", required=True)
    p.add_argument("--dir", help="image folder to read (default: one made from Fashion-MNIST)")
    p.add_argument("--image-px", type=int, default=400, help="side of the generated JPEGs")
    p.add_argument("--per-class", type=int, default=40, help="generated images per class (10 classes)")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    if not torchvision_or_reexec():
        print("input_vs_torchvision: skipped (torchvision is not installed)")
        return
    tmp = None
    folder = a.dir
    if folder is None:
        if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
            print("input_vs_torchvision: skipped (dataset-fashion-mnist is not installed)")
            return
        tmp = tempfile.mkdtemp(prefix="pshard-input-bench-")
        folder = os.path.join(tmp, "folder")
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "make_image_folder.py")
        subprocess.run([sys.executable, script, "--out", folder, "--per-class", str(a.per_class), "--size",
                        str(a.image_px)], check=True, stdout=subprocess.DEVNULL)
    try:
        best_p = best_t = 0.0
        for r in range(a.rounds):
            rp = pshard_rate(a.pshard, folder, a.size, a.threads, a.batch, a.batches)
            rt = torchvision_rate(folder, a.size, a.threads, a.batch, a.batches)
            print(f"round {r + 1}: pshard {rp:.1f} images/s, torchvision {rt:.1f} images/s")
            best_p, best_t = max(best_p, rp), max(best_t, rt)
        print(f"input pipeline ({a.threads} threads / worker processes, crop {a.size}, batch {a.batch}, "
              f"{a.batches} batches, best of {a.rounds}): pshard {best_p:.1f} images/s, torchvision DataLoader "
              f"{best_t:.1f} images/s, ratio {best_p / best_t:.2f}")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
