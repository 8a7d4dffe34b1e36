#!/usr/bin/python3
"""Writes the shipped profile files, profiles/*.json, for profile models (model.name = profile, models/zoo/profile.h).

A profile is a real architecture's parameter tensors, layer by layer in forward order, with each layer's forward and
backward time at a batch. The tensors come from the architecture itself; the times are modelled, not measured:

  - forward time proportional to the layer's forward FLOPs. For torchvision's models the FLOPs are counted by
    forward hooks on a real forward pass of one sample (conv 2 x K x outputs, linear 2 x in x outputs, + outputs for
    a bias; batch norm 4 per element; ReLU and dropout 1 per element; max pooling k x k per output; average pooling
    1 per input element; residual additions are not modules and are not counted). BERT's are computed from its
    shapes (below);
  - backward time = 2 x forward;
  - scaled so that the whole step (all forwards + backwards) takes the stated total at the stated batch.

Parameter-free ops (ReLU, pooling, dropout) go into the layer with parameters that ran just before them (the first
one when none did). A layer is a module that owns parameters (torchvision: conv1, bn1, layer1.0.conv1, ... in the
order of the forward pass), named by its module path, so the tensors are named as in the model's state_dict.

  /usr/bin/python3 scripts/make_profiles.py            # writes profiles/*.json
  /usr/bin/python3 scripts/make_profiles.py --check    # exits 1 when a file differs from what it would write

Needs torch and torchvision (Debian: python3-torch, python3-torchvision); --check exits 77 without them.
"""
import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "profiles")

# name -> (batch, step_ms, why that total)
TOTALS = {
    "resnet50": (64, 250.0, "250 ms at batch 64: about a V100-class GPU's ResNet-50 step at fp32"),
    "vgg16": (64, 400.0, "400 ms at batch 64: about a V100-class GPU's VGG-16 step at fp32 (VGG-16 trains about 1.6x "
                         "slower per image than ResNet-50 there, though it has 3.8x the FLOPs)"),
    "resnet18_cifar": (128, 40.0, "40 ms at batch 128: about a V100-class GPU's CIFAR ResNet-18 step at fp32 "
                                  "(about 3,200 images/s)"),
    "bert_base": (32, 200.0, "200 ms at batch 32 of 128-token sequences: about a V100-class GPU's BERT-base step at "
                             "fp32 (about 160 sequences/s)"),
}
# The parameter counts of the architectures, to check the tensor lists against.
KNOWN_PARAMS = {"resnet50": 25557032, "vgg16": 138357544, "resnet18_cifar": 11173962, "bert_base": 109482240}


def leaf_flops(module, inputs, output):
    """Forward FLOPs of one call of a leaf module, per the rules in this file's docstring."""
    import torch.nn as nn
    out = output.numel()
    if isinstance(module, nn.Conv2d):
        k = module.in_channels // module.groups * module.kernel_size[0] * module.kernel_size[1]
        return 2 * k * out + (out if module.bias is not None else 0)
    if isinstance(module, nn.Linear):
        return 2 * module.in_features * out + (out if module.bias is not None else 0)
    if isinstance(module, nn.BatchNorm2d):
        return 4 * out
    if isinstance(module, (nn.ReLU, nn.Dropout)):
        return out
    if isinstance(module, nn.MaxPool2d):
        k = module.kernel_size
        return out * (k * k if isinstance(k, int) else k[0] * k[1])
    if isinstance(module, nn.AdaptiveAvgPool2d):
        return inputs[0].numel()
    if isinstance(module, nn.Identity):
        return 0
    raise SystemExit("make_profiles: no FLOP rule for %s" % type(module).__name__)


def torchvision_layers(model, input_shape):
    """[(layer name, forward FLOPs per sample, [(param name, shape)])] in forward order, from hooks on a forward pass."""
    import torch
    layers, index, pending = [], {}, [0]  # pending: FLOPs of parameter-free ops before the first layer

    def hook(name):
        def record(module, inputs, output):
            flops = leaf_flops(module, inputs, output)
            own = list(module.named_parameters(recurse=False))
            if own:
                if name not in index:
                    index[name] = len(layers)
                    layers.append([name, pending[0], [(p, list(t.shape)) for p, t in own]])
                    pending[0] = 0
                layers[index[name]][1] += flops
            elif layers:
                layers[-1][1] += flops  # the layer with parameters that ran just before
            else:
                pending[0] += flops
        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if not list(m.children())]
    model.train()
    with torch.no_grad():
        model(torch.zeros([1] + list(input_shape)))
    for h in handles:
        h.remove()
    named = {n for n, _ in model.named_parameters()}
    seen = {"%s.%s" % (l[0], p) for l in layers for p, _ in l[2]}
    if named != seen:
        raise SystemExit("make_profiles: the forward pass did not reach %s" % sorted(named - seen))
    return [tuple(l) for l in layers]


def bert_base_layers(seq=128, hidden=768, ffn=3072, heads=12, vocab=30522, positions=512, types=2, layers=12):
    """BERT-base (BertModel with pooler) by hand: HuggingFace's tensor names, FLOPs per sequence of `seq` tokens.

    FLOPs: a dense layer 2 x in x out per token + out for its bias; attention scores and their product with the
    values 2 x seq x seq x hidden each; softmax 5 per score; LayerNorm 5 per element; a residual addition, GELU,
    tanh and the embeddings' additions 1 per element; lookups 0."""
    L, H, F = seq, hidden, ffn

    def dense(i, o, tokens=L):
        return tokens * (2 * i * o + o)

    def linear(prefix, i, o):
        return [(prefix + ".weight", [o, i]), (prefix + ".bias", [o])]

    norm = [("LayerNorm.weight", [H]), ("LayerNorm.bias", [H])]
    out = [("embeddings", 2 * L * H + 5 * L * H,
            [("word_embeddings.weight", [vocab, H]), ("position_embeddings.weight", [positions, H]),
             ("token_type_embeddings.weight", [types, H])] + norm)]
    for i in range(layers):
        p = "encoder.layer.%d." % i
        attention = 3 * dense(H, H) + 2 * (2 * L * L * H) + 5 * heads * L * L
        out.append((p + "attention.self", attention,
                    linear("query", H, H) + linear("key", H, H) + linear("value", H, H)))
        out.append((p + "attention.output", dense(H, H) + L * H + 5 * L * H, linear("dense", H, H) + norm))
        out.append((p + "intermediate", dense(H, F) + L * F, linear("dense", H, F)))
        out.append((p + "output", dense(F, H) + L * H + 5 * L * H, linear("dense", F, H) + norm))
    out.append(("pooler", dense(H, H, tokens=1) + H, linear("dense", H, H)))
    return out


def architectures():
    """name -> (layers, input_shape, classes, how the FLOPs were counted)."""
    import torch
    import torchvision
    hooks = "forward FLOPs counted by hooks on a forward pass of one sample of torchvision %s's %s" % (
        torchvision.__version__, "%s")
    resnet18 = torchvision.models.resnet18(num_classes=10)
    resnet18.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)  # CIFAR: 3x3 stem, no max pool
    resnet18.maxpool = torch.nn.Identity()
    return {
        "resnet50": (torchvision_layers(torchvision.models.resnet50(), [3, 224, 224]), [3, 224, 224], 1000,
                     hooks % "resnet50() (ImageNet, 224x224)"),
        "vgg16": (torchvision_layers(torchvision.models.vgg16(), [3, 224, 224]), [3, 224, 224], 1000,
                  hooks % "vgg16() (ImageNet, 224x224, no batch norm)"),
        "resnet18_cifar": (torchvision_layers(resnet18, [3, 32, 32]), [3, 32, 32], 10,
                           hooks % "resnet18(num_classes=10) with the CIFAR layout of examples/torch/cifar_resnet18.py "
                                   "(3x3 stride-1 stem, no max pool; 32x32)"),
        "bert_base": (bert_base_layers(), [128], 2,
                      "forward FLOPs computed from BERT-base's shapes for 128-token sequences (tensors written by "
                      "hand from the architecture as in HuggingFace's BertModel with pooler, no task head: the "
                      "pooler's placeholder output is the 2 class logits)"),
    }


def profile(name, layers, input_shape, classes, flops_how):
    batch, step_ms, total_why = TOTALS[name]
    total_flops = sum(f for _, f, _ in layers)
    forward_total = step_ms / 3.0  # backward = 2 x forward
    rows = []
    for layer, flops, params in layers:
        forward = round(forward_total * flops / total_flops, 6)
        rows.append({"name": layer, "forward_ms": forward, "backward_ms": round(2 * forward, 6),
                     "params": [{"name": p, "shape": shape} for p, shape in params]})
    count = sum(_numel(p["shape"]) for r in rows for p in r["params"])
    if count != KNOWN_PARAMS[name]:
        raise SystemExit("make_profiles: %s has %d parameters, the architecture %d" % (name, count, KNOWN_PARAMS[name]))
    source = ("modelled, not measured: %s (%.4g GFLOPs per sample); each layer's forward time proportional to its "
              "FLOPs, backward = 2 x forward, scaled so that forward + backward of all layers take %s; "
              "parameter-free ops counted in the layer with parameters that runs before them; written by "
              "scripts/make_profiles.py" % (flops_how, total_flops / 1e9, total_why))
    return {"name": name, "source": source, "batch": batch, "precision": "fp32", "step_ms": step_ms,
            "input_shape": input_shape, "classes": classes, "layers": rows}, count


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def dump(p):
    """JSON with one layer per line: small diffs, greppable."""
    head = ",\n".join(" %s: %s" % (json.dumps(k), json.dumps(v)) for k, v in p.items() if k != "layers")
    text = "{\n" + head + ',\n "layers": [\n'
    text += ",\n".join("  " + json.dumps(r) for r in p["layers"])
    return text + "\n ]\n}\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the files in profiles/ instead of writing")
    ap.add_argument("--out", default=OUT, help="folder of the profile files (default: profiles/)")
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as e:
        print("SKIP: make_profiles.py needs torch and torchvision (%s)" % e)
        return 77 if args.check else 1
    stale = []
    for name, (layers, input_shape, classes, how) in architectures().items():
        p, count = profile(name, layers, input_shape, classes, how)
        path = os.path.join(args.out, name + ".json")
        text = dump(p)
        if args.check:
            old = open(path).read() if os.path.exists(path) else None
            if old != text:
                stale.append(path)
            continue
        os.makedirs(args.out, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        print("%s: %d layers, %d parameters, %.0f ms per step at batch %d" % (path, len(layers), count, p["step_ms"],
                                                                              p["batch"]))
    if stale:
        print("out of date (run scripts/make_profiles.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
