"""ResNet-18 (torchvision's) on CIFAR-10-shaped images, trained through pshard's servers, on GPUs or CPUs.

    pshard launch --servers 1 --workers 2 --config configs/torch_cifar_resnet18.toml \
        -- python3 examples/torch/cifar_resnet18.py [--data DIR/cifar-10-batches-bin]

Without --data it trains on synthetic CIFAR-shaped images (random pixels, random labels: a throughput run, the
accuracy means nothing). Each worker uses GPU local_rank() when CUDA is available (under `pshard task` the GPU is
chosen by CUDA_VISIBLE_DEVICES), else the CPU. BatchNorm running statistics are not parameters: each rank updates
its own during an epoch, evaluates with them, and ps.report() then averages them over the workers (docs/PYTHON.md).
"""
import argparse
import contextlib
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

import pshard.torch as ps


def resnet18():
    try:
        import torchvision
    except ImportError:
        raise SystemExit("cifar_resnet18.py needs torchvision (Debian: python3-torchvision)")
    model = torchvision.models.resnet18(num_classes=10)
    # 32x32 inputs: a 3x3 stem without the max pool, as usual for CIFAR.
    model.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
    model.maxpool = torch.nn.Identity()
    return model


def cifar_binary(folder, train):
    """The CIFAR-10 binary batches (data_batch_1..5.bin or test_batch.bin): 1 label byte + 3072 pixel bytes each."""
    names = ["data_batch_%d.bin" % i for i in range(1, 6)] if train else ["test_batch.bin"]
    raw = np.concatenate([np.fromfile(os.path.join(folder, n), dtype=np.uint8) for n in names])
    if raw.size % 3073:
        raise ValueError("%s: not CIFAR-10 binary batches (size %d is not a multiple of 3073)" % (folder, raw.size))
    raw = raw.reshape(-1, 3073)
    mean = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32).reshape(1, 3, 1, 1)
    std = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32).reshape(1, 3, 1, 1)
    x = (raw[:, 1:].reshape(-1, 3, 32, 32).astype(np.float32) / 255.0 - mean) / std
    return torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(raw[:, 0].astype(np.int64)))


def synthetic(n, seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return torch.utils.data.TensorDataset(torch.randn(n, 3, 32, 32, generator=g), torch.randint(0, 10, (n,),
                                                                                                generator=g))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="", help="cifar-10-batches-bin folder (default: synthetic images)")
    p.add_argument("--synthetic-size", type=int, default=2048, help="synthetic training images")
    p.add_argument("--device", default="", help="cuda or cpu (default: cuda when available)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--amp", default="", choices=["", "bf16", "fp16"],
                   help="mixed precision: torch.autocast in bf16 or fp16 (fp16 with a GradScaler given to pshard)")
    p.add_argument("--channels-last", action="store_true", help="model and images in channels_last (NHWC)")
    args = p.parse_args()

    ps.init()
    torch.manual_seed(args.seed)
    use_cuda = args.device == "cuda" or (not args.device and torch.cuda.is_available())
    device = torch.device("cuda", ps.local_rank() % torch.cuda.device_count()) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    train = cifar_binary(args.data, True) if args.data else synthetic(args.synthetic_size, args.seed)
    test = cifar_binary(args.data, False) if args.data else None
    batch, epochs = ps.config("train.batch_size"), ps.config("train.epochs")
    sampler = ps.ShardSampler(train, shuffle=True, seed=args.seed)
    loader = torch.utils.data.DataLoader(train, batch_size=batch, sampler=sampler, drop_last=True,
                                         pin_memory=use_cuda)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = resnet18().to(device, memory_format=memory_format)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    # fp16 needs loss scaling: the scaler goes to pshard's optimizer, which unscales and lets every worker agree on
    # a step to skip (docs/PYTHON.md, "Mixed precision").
    scaler = None
    if args.amp == "fp16":
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()
    opt = ps.DistributedOptimizer(model, steps_per_epoch=len(loader), name="resnet18", grad_scaler=scaler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        loss_sum, correct, n = 0.0, 0, 0
        t0 = time.perf_counter()
        for x, y in loader:
            x, y = x.to(device, non_blocking=True, memory_format=memory_format), y.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=amp_dtype) if amp_dtype else contextlib.nullcontext():
                out = model(x)
                loss = F.cross_entropy(out, y)
            opt.zero_grad()
            (scaler.scale(loss) if scaler else loss).backward()
            opt.step()
            ps.report_step(float(loss))
            loss_sum += float(loss) * len(y)
            correct += int((out.argmax(1) == y).sum())
            n += len(y)
        train_s = time.perf_counter() - t0
        test_loss = test_acc = test_n = None
        if test is not None:
            share = ps.shard(test)
            model.eval()
            test_loss, hits = 0.0, 0
            with torch.no_grad():
                for x, y in torch.utils.data.DataLoader(share, batch_size=256):
                    out = model(x.to(device))
                    test_loss += float(F.cross_entropy(out, y.to(device), reduction="sum"))
                    hits += int((out.argmax(1).cpu() == y).sum())
            model.train()
            test_n = len(share)
            test_loss, test_acc = test_loss / test_n, hits / test_n
        ps.report(epoch=epoch, train_loss=loss_sum / n, train_acc=correct / n, samples=n, test_loss=test_loss,
                  test_acc=test_acc, test_samples=test_n, eval_s=time.perf_counter() - t0 - train_s)
        if ps.rank() == 0:
            print("epoch %d: %.1f images/s on this worker (%s%s), train loss %.4f" % (
                epoch + 1, n / train_s, device, ", " + args.amp if args.amp else "", loss_sum / n), flush=True)
    ps.shutdown()


if __name__ == "__main__":
    main()
