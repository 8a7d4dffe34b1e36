"""scripts/torch_to_pshard.py: a state_dict saved by torch (wrapped in {"state_dict": ...} with DDP's "module." prefix)
becomes a pshard model file with the same names and values, integer tensors left out; `pshard train
--set model.name=resnet18 --set train.init_from=FILE` loads it by name with the 1000-class fc replaced and the rest
frozen; a file that is not a torch file is refused naming it."""
import os
import sys

import support

sys.path.insert(0, os.path.join(support.SOURCE_DIR, "scripts"))
import torch_to_pshard  # noqa: E402

SCRIPT = os.path.join(support.SOURCE_DIR, "scripts", "torch_to_pshard.py")


def main():
    try:
        import torch
        import torchvision
    except ImportError:
        print("skipped: torch or torchvision is not installed (Debian: python3-torch, python3-torchvision)")
        return
    d = support.fresh_dir("torch-to-pshard")
    torch.manual_seed(4)
    state = torchvision.models.resnet18(num_classes=1000).state_dict()
    wrapped = os.path.join(d, "checkpoint.pth")
    torch.save({"epoch": 3, "state_dict": {"module." + k: v for k, v in state.items()}}, wrapped)
    out = os.path.join(d, "resnet18.bin")
    status, output = support.run([support.PYTHON, SCRIPT, wrapped, out], 120)
    support.expect(status == 0, "the conversion failed (status %d)" % status, output)
    tensors = torch_to_pshard.read_model_file(out)
    floats = [(k, v) for k, v in state.items() if v.is_floating_point()]
    names = [n for n, _ in tensors]
    support.expect(names == [k for k, _ in floats], "names differ: %s" % names[:5])
    support.expect(all(n != "bn1.num_batches_tracked" for n, _ in tensors), "num_batches_tracked was written")
    for (name, array), (_, value) in zip(tensors, floats):
        support.expect(array.shape == tuple(value.shape) and (array == value.numpy()).all(), "%s differs" % name)

    # pshard's resnet18 on 10 synthetic classes from it: fc replaced, everything else frozen.
    run_dir = os.path.join(d, "run")
    status, output = support.run([
        support.PSHARD_BIN, "train", "--config", os.path.join(support.SOURCE_DIR, "configs", "cifar_resnet20.toml"),
        "--set", "model.name=resnet18", "--set", "data.train_size=32", "--set", "data.test_size=16", "--set",
        "train.epochs=1", "--set", "train.batch_size=16", "--set", "lr_schedule.warmup_steps=0", "--set",
        "train.init_from=" + out, "--set", "train.freeze=conv1,bn1,layer1,layer2,layer3,layer4", "--run-dir",
        run_dir], 120)
    support.expect(status == 0, "pshard train failed (status %d)" % status, output)
    support.expect("loaded 100 tensors; reinitialised (shape differs): fc.weight [10, 512] (file [1000, 512]), "
                   "fc.bias [10] (file [1000])" in output, "the init line", output)
    trained = dict(torch_to_pshard.read_model_file(os.path.join(run_dir, "model.bin")))
    support.expect((trained["layer4.1.conv2.weight"] == state["layer4.1.conv2.weight"].numpy()).all(),
                   "a frozen tensor moved", output)
    support.expect(trained["fc.weight"].shape == (10, 512), "fc's shape: %s" % (trained["fc.weight"].shape,))

    text = os.path.join(d, "notes.pth")
    with open(text, "w") as f:
        f.write("not a checkpoint\n")
    status, output = support.run([support.PYTHON, SCRIPT, text, os.path.join(d, "x.bin")], 60)
    support.expect(status != 0 and "notes.pth" in output, "a text file was not refused naming it", output)
    support.expect(not os.path.exists(os.path.join(d, "x.bin")), "a model file was written from a text file")
    print("torch_to_pshard.py: 102 tensors by name; pshard's resnet18 loaded 100 of them, fc replaced")


if __name__ == "__main__":
    main()
    support.passed()
