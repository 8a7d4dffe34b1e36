"""examples/torch/imagefolder_resnet.py runs: torchvision's ResNet-18 on a folder of JPEGs written here with PIL
(3 classes x 16 training and 4 test images, 40x40, each class its own colour), 2 workers + 1 server, one epoch at
32x32 crops on the CPU; then again from that run's weights as a state_dict (transfer learning) with all but fc
frozen: only fc is on the servers."""
import json
import os

import support

CLASSES = ["apple", "banana", "cherry"]
COLOURS = [(200, 40, 40), (220, 200, 60), (120, 20, 60)]


def write_folder(root, per_class, seed):
    import random
    from PIL import Image
    rng = random.Random(seed)
    for name, colour in zip(CLASSES, COLOURS):
        os.makedirs(os.path.join(root, name))
        for i in range(per_class):
            img = Image.new("RGB", (40, 40), tuple(max(0, min(255, c + rng.randint(-30, 30))) for c in colour))
            for _ in range(20):  # some texture, so that crops differ
                x, y = rng.randrange(40), rng.randrange(40)
                img.putpixel((x, y), (rng.randrange(256), rng.randrange(256), rng.randrange(256)))
            img.save(os.path.join(root, name, "%03d.jpg" % i), quality=90)


def events(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def main():
    try:
        import torchvision  # noqa: F401
        import PIL  # noqa: F401
    except ImportError:
        print("skipped: torchvision or PIL is not installed (Debian: python3-torchvision, python3-pil)")
        return
    data = support.fresh_dir("imagefolder-data")
    write_folder(os.path.join(data, "train"), 16, 1)
    write_folder(os.path.join(data, "test"), 4, 2)
    with open(os.path.join(support.SOURCE_DIR, "configs", "torch_imagefolder_resnet18.toml")) as f:
        config = f.read()
    script = os.path.join(support.SOURCE_DIR, "examples", "torch", "imagefolder_resnet.py")
    common = ["--train", os.path.join(data, "train"), "--test", os.path.join(data, "test"), "--image-size", "32",
              "--device", "cpu", "--loader-workers", "1"]
    extra = ["--set", "train.epochs=1", "--set", "train.batch_size=8", "--set", "lr_schedule.warmup_steps=0"]
    status, output, run_dir = support.launch(config, 2, 1, [script] + common, 240, "imagefolder", extra=extra)
    support.expect(status == 0, "the job failed (status %d)" % status, output)
    ev = events(run_dir)
    start, summary = ev[0], ev[-1]
    # 48 images, 24 per worker, batches of 8: 3 steps. ResNet-18 with 3 classes: 11,178,051 float32 parameters.
    support.expect(start["event"] == "start" and start["model"] == "resnet18" and start["steps_per_epoch"] == 3,
                   "start line: %s" % start, output)
    support.expect(start["model_bytes"] == 11178051 * 4, "model_bytes %s" % start["model_bytes"], output)
    support.expect(summary["event"] == "summary" and summary["steps"] == 3 and summary["workers_finished"] == [0, 1],
                   "summary: %s" % summary, output)
    epoch = [e for e in ev if e.get("event") == "epoch"][-1]
    # The accuracy over the 12 test images (4 per class, sharded over the 2 workers) is a multiple of 1/12.
    acc = epoch.get("test_acc")
    support.expect(acc is not None and abs(acc * 12 - round(acc * 12)) < 1e-6, "test accuracy %s" % acc, output)
    support.expect("3 classes, 48 training images (24 per worker and epoch)" in output, "rank 0's summary", output)

    # Transfer: a state_dict of torchvision's resnet18 for 1000 classes; fc is replaced (3 classes) and everything
    # else frozen, so only fc.weight and fc.bias are on the servers.
    import torch
    torch.manual_seed(5)
    init = os.path.join(data, "resnet18-1000.pt")
    torch.save(torchvision.models.resnet18(num_classes=1000).state_dict(), init)
    frozen = "conv1,bn1,layer1,layer2,layer3,layer4"
    status, output, run_dir = support.launch(config, 2, 1, [script] + common + ["--init", init, "--freeze", frozen],
                                             240, "imagefolder-transfer", extra=extra)
    support.expect(status == 0, "the transfer job failed (status %d)" % status, output)
    support.expect("reinitialised (shape differs): fc.weight, fc.bias" in output, "fc was not replaced", output)
    start = events(run_dir)[0]
    support.expect(start["model_bytes"] == (512 * 3 + 3) * 4, "model_bytes with all but fc frozen: %s"
                   % start["model_bytes"], output)
    print("imagefolder_resnet.py: 3 steps of 2 x 8 JPEG crops through 1 server; transfer with all but fc frozen")


if __name__ == "__main__":
    main()
    support.passed()
