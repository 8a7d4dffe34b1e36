#!/usr/bin/python3
"""Writes a torchvision ResNet's weights and one training step's results, for tests/models/resnet*_test.cc.

  torchvision_reference.py MODEL CLASSES SIZE BATCH OUT_DIR

OUT_DIR/weights.bin: the model's state_dict (scripts/torch_to_pshard.py's conversion), with BatchNorm's weights,
biases and running statistics drawn at random so that they matter. OUT_DIR/reference.bin (the same file format):
input [BATCH, 3, SIZE, SIZE], labels [BATCH] (as floats), logits of a train-mode forward, loss (mean cross-entropy),
grad.NAME for every parameter, running.NAME for every running statistic after that forward, and eval_logits of an
eval-mode forward after it, all computed in float64; noise.KEY [1] for each: how far torch's float32 result is from
it (relative L2 distance), the scale of float32 rounding a float32 implementation is held to. Exits 77 when torch or
torchvision is missing.
"""
import copy
import os
import sys

try:
    import numpy
    import torch
    import torchvision
except ImportError:
    print("SKIP: torch or torchvision is not installed")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import torch_to_pshard  # noqa: E402


def main():
    name, classes, size, batch, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    torch.manual_seed(3)
    torch.set_num_threads(1)
    model = getattr(torchvision.models, name)(num_classes=classes)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    torch_to_pshard.write_model_file(os.path.join(out, "weights.bin"),
                                     torch_to_pshard.state_dict_tensors(model.state_dict()))
    x = torch.randn(batch, 3, size, size)
    labels = torch.arange(batch) % classes
    # The reference is computed in float64. Some gradients of a deep BatchNorm network are sums that nearly cancel
    # (ResNet-50's batch-norm biases: torch's own float32 result is 2-4 % away from float64's at batch 2), so each
    # compared tensor also gets noise.NAME: the relative distance of torch's float32 result to the float64 one.
    results = {}
    for dtype in (torch.float64, torch.float32):
        m = copy.deepcopy(model).to(dtype)
        m.train()
        logits = m(x.to(dtype))
        loss = torch.nn.functional.cross_entropy(logits, labels)
        loss.backward()
        r = {"logits": logits.detach(), "loss": loss.detach().reshape(1)}
        r.update({"grad." + n: p.grad for n, p in m.named_parameters()})
        r.update({"running." + n: b.clone() for n, b in m.named_buffers() if b.is_floating_point()})
        m.eval()
        with torch.no_grad():
            r["eval_logits"] = m(x.to(dtype))
        results[dtype] = r
    exact, single = results[torch.float64], results[torch.float32]
    ref = [("input", x.numpy()), ("labels", labels.float().numpy())]
    for key, value in exact.items():
        noise = ((single[key].double() - value).norm() / value.norm().clamp_min(1e-30)).item()
        ref += [(key, value.float().numpy()), ("noise." + key, numpy.array([noise]))]
    torch_to_pshard.write_model_file(os.path.join(out, "reference.bin"), ref)
    return 0


if __name__ == "__main__":
    sys.exit(main())
