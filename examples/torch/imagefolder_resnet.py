"""torchvision's ResNet-18 (or -50) on a folder of images, one sub-folder per class, trained through pshard's servers.

    pshard launch --servers 1 --workers 2 --config configs/torch_imagefolder_resnet18.toml \
        -- python3 examples/torch/imagefolder_resnet.py --train DIR/train [--test DIR/test]

The layout of Caltech-256, fruits-360 and ImageNet's train/val folders (JPEG, PNG, anything PIL opens), read by
torchvision's ImageFolder with the usual transforms: training RandomResizedCrop(--image-size) + horizontal flip +
ImageNet normalisation, evaluation Resize(8/7 of it) + CenterCrop. pshard.torch's ShardSampler gives each worker its
share of the images every epoch; DistributedOptimizer pushes the gradients to the servers, which apply [optimizer].

Transfer learning (--init STATE_DICT): starts from a torch.save'd state_dict (e.g. torchvision's pretrained
resnet18-f37072fd.pth, copied in by hand: nothing is downloaded); a classifier for another number of classes is
replaced by a fresh one. --freeze conv1,bn1,layer1 keeps those parameters fixed (requires_grad False): they are not
on the servers and never pushed or pulled. BatchNorm running statistics are not parameters: each rank updates its
own, and ps.report() averages them over the workers (docs/PYTHON.md).
"""
import argparse
import time

import torch
import torch.nn.functional as F

import pshard.torch as ps

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def imports():
    try:
        import torchvision
        from torchvision import transforms
    except ImportError:
        raise SystemExit("imagefolder_resnet.py needs torchvision (Debian: python3-torchvision)")
    return torchvision, transforms


def model_for(torchvision, arch, classes, init):
    model = getattr(torchvision.models, arch)(num_classes=classes)
    if init:
        state = torch.load(init, map_location="cpu")
        state = state.get("state_dict", state) if isinstance(state, dict) else state.state_dict()
        state = {k[len("module."):] if k.startswith("module.") else k: v for k, v in state.items()}
        own = model.state_dict()
        fresh = [k for k, v in state.items() if k in own and own[k].shape != v.shape]
        missing, unused = model.load_state_dict({k: v for k, v in state.items() if k not in fresh}, strict=False)
        missing = [k for k in missing if k not in fresh]
        if missing:
            raise SystemExit("%s does not fit %s: no %s" % (init, arch, ", ".join(missing[:5])))
        if ps.rank() == 0:
            print("%s: loaded %d tensors; reinitialised (shape differs): %s%s" % (
                init, len(state) - len(fresh) - len(unused), ", ".join(fresh) or "none",
                "; not in the model: " + ", ".join(unused) if unused else ""), flush=True)
    return model


def freeze(model, prefixes):
    frozen = 0
    for prefix in prefixes:
        hits = [p for n, p in model.named_parameters() if n == prefix or n.startswith(prefix + ".")]
        if not hits:
            raise SystemExit("--freeze: no parameter under '%s'" % prefix)
        for p in hits:
            p.requires_grad_(False)
        frozen += len(hits)
    return frozen


def evaluate(model, test, batch, device):
    share = ps.shard(test)
    model.eval()
    loss, hits = 0.0, 0
    with torch.no_grad():
        for x, y in torch.utils.data.DataLoader(share, batch_size=batch):
            out = model(x.to(device))
            loss += float(F.cross_entropy(out, y.to(device), reduction="sum"))
            hits += int((out.argmax(1).cpu() == y).sum())
    model.train()
    return loss / max(len(share), 1), hits / max(len(share), 1), len(share)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", required=True, help="folder of class sub-folders to train on")
    p.add_argument("--test", default="", help="folder of the same class sub-folders to evaluate on each epoch")
    p.add_argument("--arch", default="resnet18", help="a torchvision.models name (default resnet18)")
    p.add_argument("--image-size", type=int, default=224, help="training crop and evaluation size (default 224)")
    p.add_argument("--init", default="", help="a torch.save'd state_dict to start from (transfer learning)")
    p.add_argument("--freeze", default="", help="comma-separated parameter prefixes to keep fixed (conv1,layer1)")
    p.add_argument("--loader-workers", type=int, default=2, help="DataLoader decode processes per worker")
    p.add_argument("--device", default="", help="cuda or cpu (default: cuda when available)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    torchvision, transforms = imports()

    ps.init()
    torch.manual_seed(args.seed)
    use_cuda = args.device == "cuda" or (not args.device and torch.cuda.is_available())
    device = torch.device("cuda", ps.local_rank() % torch.cuda.device_count()) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    size = args.image_size
    train = torchvision.datasets.ImageFolder(args.train, transforms.Compose([
        transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize(MEAN, STD)]))
    test = None
    if args.test:
        test = torchvision.datasets.ImageFolder(args.test, transforms.Compose([
            transforms.Resize(size * 8 // 7), transforms.CenterCrop(size), transforms.ToTensor(),
            transforms.Normalize(MEAN, STD)]))
        if test.classes != train.classes:
            raise SystemExit("--test has classes %s, --train %s" % (test.classes, train.classes))
    batch, epochs = ps.config("train.batch_size"), ps.config("train.epochs")
    sampler = ps.ShardSampler(train, shuffle=True, seed=args.seed)
    loader = torch.utils.data.DataLoader(train, batch_size=batch, sampler=sampler, drop_last=True,
                                         num_workers=args.loader_workers, pin_memory=use_cuda)
    if len(loader) == 0:
        raise SystemExit("%s: %d images make no full batch of %d on each of %d workers" % (
            args.train, len(train), batch, ps.size()))
    model = model_for(torchvision, args.arch, len(train.classes), args.init)
    frozen = freeze(model, [s.strip() for s in args.freeze.split(",") if s.strip()])
    model = model.to(device)
    opt = ps.DistributedOptimizer(model, steps_per_epoch=len(loader), name=args.arch)
    if ps.rank() == 0:
        print("%s: %d classes, %d training images (%d per worker and epoch), %d parameter tensors frozen" % (
            args.arch, len(train.classes), len(train), len(sampler), frozen), flush=True)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        loss_sum, correct, n = 0.0, 0, 0
        t0 = time.perf_counter()
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            out = model(x)
            loss = F.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ps.report_step(float(loss))
            loss_sum += float(loss) * len(y)
            correct += int((out.argmax(1) == y).sum())
            n += len(y)
        train_s = time.perf_counter() - t0
        test_loss = test_acc = test_n = None
        if test is not None:
            test_loss, test_acc, test_n = evaluate(model, test, batch, device)
        ps.report(epoch=epoch, train_loss=loss_sum / n, train_acc=correct / n, samples=n, test_loss=test_loss,
                  test_acc=test_acc, test_samples=test_n, eval_s=time.perf_counter() - t0 - train_s)
        if ps.rank() == 0:
            print("epoch %d: %.1f images/s on this worker (%s), train loss %.4f" % (epoch + 1, n / train_s, device,
                                                                                    loss_sum / n), flush=True)
    ps.shutdown()


if __name__ == "__main__":
    main()
