#!/bin/bash
# Runs pshard's GPU checks on the GPU machine from the bundle scripts/gpu-bundle.sh made (.gpubundle/, copied along).
# Every log, every run directory and one summary.json go to OUTDIR. Each step runs under its own timeout and all of
# them within CHECK_BUDGET_S (470 s: a 10-minute limit per command leaves room for the start and a rerun).
#
#   scripts/gpu-check.sh OUTDIR [BUNDLE_DIR]      # BUNDLE_DIR: default .gpubundle
#
# Where only 8 files (16 MiB each) come back from the GPU machine's output folder $OUT, run it as
#   scripts/gpu-check.sh /tmp/gc; rc=$?; cp /tmp/gc/summary.json /tmp/gc/precision-*.json $OUT/
#   for f in /tmp/gc/*.log; do echo "=== $f"; tail -200 "$f"; done > $OUT/logs.txt; exit $rc
# (a tar of OUTDIR passed 16 MiB on 2026-11-28 even without the runs' model.bin files, and came back empty-handed).
#
# CHECK_ONLY=REGEX runs only the steps whose names match (a rerun of those that failed); CHECK_BUDGET_S sets the budget.
#
# Exit status: 0 every step passed; 1 a step failed (summary.json says which); 2 no usable GPU (nothing measured);
# 3 the bundle is missing or incomplete (a library that neither the bundle nor the machine has, linked or dlopened: named).
set -u
[ $# -ge 1 ] || { echo "usage: scripts/gpu-check.sh OUTDIR [BUNDLE_DIR]" >&2; exit 3; }
OUT=$(mkdir -p "$1" && cd "$1" && pwd) || { echo "gpu-check: cannot create $1" >&2; exit 3; }
BUNDLE=$(cd "${2:-$(dirname "$0")/../.gpubundle}" 2>/dev/null && pwd) ||
  { echo "gpu-check: no bundle folder ${2:-.gpubundle} (make it with scripts/gpu-bundle.sh and carry it)" >&2; exit 3; }
BUDGET_S=${CHECK_BUDGET_S:-470}
START=$SECONDS
STEPS="$OUT/steps.tsv"  # name, exit status, seconds, log
: > "$STEPS"

say() { echo "gpu-check: $*" | tee -a "$OUT/check.log"; }

# ---- unpack ----
# Outside OUTDIR: OUTDIR comes back from the GPU machine, 16 MiB a file at most; the unpacked bundle is 94 MB.
UNPACK=$(mktemp -d /tmp/pshard-gpu.XXXXXX) || { echo "gpu-check: mktemp failed" >&2; exit 3; }
trap 'rm -rf "$UNPACK"' EXIT
if command -v xz > /dev/null; then
  tar -C "$UNPACK" -xJf "$BUNDLE/pshard-gpu.tar.xz"
else  # Python's tarfile reads xz without the xz tool
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$BUNDLE/pshard-gpu.tar.xz" "$UNPACK"
fi || { say "cannot unpack $BUNDLE/pshard-gpu.tar.xz"; exit 3; }
B="$UNPACK/pshard-gpu"
DATA="$BUNDLE/fashion-mnist"
[ -d "$DATA" ] || { say "no Fashion-MNIST folder $DATA in the bundle"; exit 3; }
say "bundle of commit $(cat "$B/COMMIT"), GPU code $(cat "$B/CUDA_ARCHS")"

# ---- libraries: the bundle, pip's CUDA wheels (PyTorch's cuDNN, cuBLAS, runtime), the toolkit ----
NV=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]) + "/nvidia")' 2>/dev/null)
PIP_DIRS=$([ -n "$NV" ] && ls -d "$NV"/*/lib 2>/dev/null | paste -sd:)
TOOLKIT_DIRS=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/lib 2>/dev/null | paste -sd:)
export LD_LIBRARY_PATH="$B/lib${PIP_DIRS:+:$PIP_DIRS}${TOOLKIT_DIRS:+:$TOOLKIT_DIRS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
missing=$(for f in "$B"/bin/*; do ldd "$f" | awk -v b="$(basename "$f")" '/not found/{print b ": " $1}'; done | sort -u)
if [ -n "$missing" ]; then
  say "missing libraries (neither in the bundle nor on this machine): $(echo "$missing" | paste -sd, -)"
  exit 3
fi
ldd "$B/bin/pshard" | grep -E 'cudart|cublas|cudnn' | sed 's/^/  /' | tee -a "$OUT/check.log"
# cuBLAS and cuDNN are dlopened by the CUDA backend (ldd does not list them): open each with this LD_LIBRARY_PATH, as
# pshard will, and say where it was found.
[ -s "$B/DLOPENED" ] || { say "the bundle has no DLOPENED list (made by an older scripts/gpu-bundle.sh)"; exit 3; }
for so in $(cat "$B/DLOPENED"); do
  where=$(python3 -c 'import ctypes, sys
ctypes.CDLL(sys.argv[1])
print(next(l.split()[-1] for l in open("/proc/self/maps") if "/" + sys.argv[1] in l))' "$so" 2>&1) ||
    { say "missing library $so (dlopened by the CUDA backend): $(echo "$where" | tail -1)"; exit 3; }
  echo "  $so => $where (dlopened)" | tee -a "$OUT/check.log"
done

# ---- is there a GPU pshard can use? ----
GPU=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
probe=$(timeout 60 "$B/bin/pshard" bench compute --model mlp --device cuda --iters 1 --warmup 0 2>&1)
if [ -z "$GPU" ] || echo "$probe" | grep -q 'no usable GPU'; then
  reason=$(echo "$probe" | grep -o 'no usable GPU.*' | head -1)
  [ -n "$reason" ] || reason="nvidia-smi finds no GPU"
  python3 -c 'import json, sys; json.dump({"gpu": None, "result": "no GPU", "reason": sys.argv[1],
              "steps": []}, open(sys.argv[2], "w"), indent=1)' "$reason" "$OUT/summary.json"
  say "NO GPU: $reason; nothing was measured (exit 2)"
  exit 2
fi
say "GPU: $GPU"
nvidia-smi > "$OUT/nvidia-smi.log" 2>&1

# ---- the steps ----
# step NAME TIMEOUT_S COMMAND...: runs within what is left of the budget, output to OUTDIR/NAME.log.
step() {
  local name=$1 limit=$2
  shift 2
  if [ -n "${CHECK_ONLY:-}" ] && ! [[ $name =~ $CHECK_ONLY ]]; then return; fi
  local left=$((BUDGET_S - (SECONDS - START)))
  [ "$limit" -le "$left" ] || limit=$left
  if [ "$limit" -le 5 ]; then
    printf '%s\t%s\t%s\t%s\n' "$name" "budget" 0 "$name.log" >> "$STEPS"
    say "$name: not run, the ${BUDGET_S} s budget is spent"
    return
  fi
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" $((SECONDS - t0)) "$name.log" >> "$STEPS"
  say "$name: exit $rc after $((SECONDS - t0)) s$([ "$rc" = 124 ] && echo " (timed out at $limit s)")"
}

CFG="$B/share/configs/fmnist_lenet_sync.toml"
LENET=(--config "$CFG" --set data.dir="$DATA")
TRAIN=(--config "$B/share/configs/fmnist_lenet.toml" --set data.dir="$DATA")
BENCH="$B/share/bench"

# 1. Every gpu-labelled test binary (a "no CUDA device" skip means it did not see the GPU: summary.json fails it).
for t in "$B"/bin/*_test; do step "test-$(basename "$t")" 120 "$t"; done

# 2. LeNet one epoch on CUDA and on the CPU, same seed: the epoch losses must agree within 3 x the spread of four
# other deterministic summation orders of the same epoch measured here (the CPU at 16 threads, at 1 thread and with
# its reference kernels; CUDA with cuDNN's weight gradient instead of the GEMM one), and within 1e-3 when that spread
# is smaller: one epoch is 938 SGD steps, and any change of summation order moves its final loss.
step train-cuda 120 "$B/bin/pshard" train "${LENET[@]}" --set train.epochs=1 --set train.device=cuda \
  --run-dir "$OUT/run-train-cuda"
step train-cpu 150 "$B/bin/pshard" train "${LENET[@]}" --set train.epochs=1 --set train.threads=0 \
  --run-dir "$OUT/run-train-cpu"
for v in "cpu-1thread:--set train.threads=1" "cpu-reference:--set train.threads=0 --set train.cpu_kernels=reference" \
  "cuda-wgrad-cudnn:--set train.device=cuda --set train.cuda_conv_wgrad=cudnn"; do
  # shellcheck disable=SC2086  # the settings are words
  step "loss-order-${v%%:*}" 150 "$B/bin/pshard" train "${LENET[@]}" --set train.epochs=1 ${v#*:} \
    --run-dir "$OUT/run-loss-order-${v%%:*}"
done

# 3. Mixed precision on the GPU: images/s of ResNet-50 (batch 32-256) and ResNet-20 (batch 128) in fp32, bf16 and
# fp16, pshard next to PyTorch autocast (channels_last) on this GPU.
step precision-resnet50 300 python3 "$BENCH/gpu_precision_vs_pytorch.py" --model resnet50 --batch 32,64,128,256 \
  --fp32-batch 128 --host-batch 128 --iters 15 --warmup 3 --pshard "$B/bin/pshard" \
  --throughput-bin "$B/bin/models_cuda_throughput" --json-out "$OUT/precision-resnet50.json"
step precision-resnet20 120 python3 "$BENCH/gpu_precision_vs_pytorch.py" --model resnet20 --batch 128 \
  --fp32-batch 128 --host-batch 128 --iters 50 --warmup 5 --pshard "$B/bin/pshard" \
  --throughput-bin "$B/bin/models_cuda_throughput" --json-out "$OUT/precision-resnet20.json"

# 4. Accuracy: LeNet (5 epochs) and ResNet-20 (3 epochs) on Fashion-MNIST, `pshard train` on the GPU in fp32, bf16
# and fp16 (dynamic loss scaling), same seed: bf16 and fp16 within 0.5 points of fp32.
for model in lenet:5 resnet20:3; do
  for p in fp32 bf16 fp16; do
    step "accuracy-${model%%:*}-$p" 150 "$B/bin/pshard" train "${TRAIN[@]}" --set model.name="${model%%:*}" \
      --set train.epochs="${model#*:}" --set train.device=cuda --set train.precision=$p \
      --run-dir "$OUT/run-accuracy-${model%%:*}-$p"
  done
done

# 5. An fp16 job of 1 server + 2 CUDA workers sharing the GPU: gradients unscaled and checked on the device, and a
# step skipped for all when a push says its gradients overflowed (the servers decide, loss scaling).
step launch-fp16 120 "$B/bin/pshard" launch --servers 1 --workers 2 --timeout 110 "${LENET[@]}" \
  --set train.epochs=2 --set train.device=cuda --set train.precision=fp16 --run-dir "$OUT/run-launch-fp16"

# 6. 1 server + 2 CUDA workers sharing the GPU, LeNet sync (10 epochs): test accuracy >= 90.5 %.
step launch-2workers 240 "$B/bin/pshard" launch --servers 1 --workers 2 --timeout 230 "${LENET[@]}" \
  --set train.device=cuda --run-dir "$OUT/run-launch-2workers"

# 7. PS overhead: 1 CUDA worker + 1 server against `pshard train` on the GPU, LeNet, 3 epochs each; and the same job
# with bf16 gradients and weights on the wire (the compression codecs).
step overhead-train 60 "$B/bin/pshard" train "${LENET[@]}" --set train.epochs=3 --set train.device=cuda \
  --run-dir "$OUT/run-overhead-train"
step overhead-1w1s 90 "$B/bin/pshard" launch --servers 1 --workers 1 --timeout 80 "${LENET[@]}" \
  --set train.epochs=3 --set train.device=cuda --run-dir "$OUT/run-overhead-1w1s"
step overhead-1w1s-bf16 90 "$B/bin/pshard" launch --servers 1 --workers 1 --timeout 80 "${LENET[@]}" \
  --set train.epochs=3 --set train.device=cuda --set cluster.compression=bf16 --set cluster.pull_precision=bf16 \
  --run-dir "$OUT/run-overhead-1w1s-bf16"

# 8. ResNet-20 fp32 training images/s, pshard (bench compute, and the GPU-SGD throughput tool) next to PyTorch eager.
step resnet20-b128 90 env PSHARD_BIN="$B/bin/pshard" python3 "$BENCH/resnet20_gpu_vs_pytorch.py" \
  --batch 128 --iters 100 --warmup 10 --json --throughput-bin "$B/bin/models_cuda_throughput"

# 9. The Python package: a PyTorch model through pshard on CUDA with this machine's torch: examples/torch/cifar_resnet18.py
# (torchvision's ResNet-18, 11.2 M parameters), 1 server + 2 workers sharing the GPU, synthetic CIFAR-shaped images;
# in fp32, and under autocast fp16 with a GradScaler (channels_last).
SRC=$(cd "$(dirname "$0")/.." && pwd)
PYENV=(env PYTHONPATH="$SRC/python" PSHARD_LIBRARY="$B/lib/libpshard_c.so" PSHARD_PYTHON="$(command -v python3)")
step cifar-cuda 120 "${PYENV[@]}" "$B/bin/pshard" launch --servers 1 --workers 2 --timeout 110 \
  --config "$SRC/configs/torch_cifar_resnet18.toml" --set train.epochs=2 --run-dir "$OUT/run-cifar-cuda" \
  -- python3 "$SRC/examples/torch/cifar_resnet18.py" --device cuda --synthetic-size 8192
step cifar-cuda-amp 120 "${PYENV[@]}" "$B/bin/pshard" launch --servers 1 --workers 2 --timeout 110 \
  --config "$SRC/configs/torch_cifar_resnet18.toml" --set train.epochs=2 --run-dir "$OUT/run-cifar-cuda-amp" \
  -- python3 "$SRC/examples/torch/cifar_resnet18.py" --device cuda --synthetic-size 8192 --amp fp16 --channels-last

# 10. The Python package on this machine's torch (2.x: register_post_accumulate_grad_hook, which Debian's 1.13 lacks),
# CPU tensors: the 1e-5 equivalence with single-process SGD and the lazy per-module weight loading.
for t in equivalence lazy_weights; do
  step "python-$t" 90 "${PYENV[@]}" PSHARD_BIN="$B/bin/pshard" PSHARD_SOURCE_DIR="$SRC" python3 "$SRC/tests/python/${t}_test.py"
done

# 11. ResNet-50 (ImageNet layout, 224 x 224 synthetic images, batch 64) as jobs on the GPU: `pshard train` against 1
# worker + 1 server in fp32 and bf16, and 2 bf16 workers sharing the GPU (one push per host); 2 epochs of 30 steps, the
# second epoch's samples/s compared (the first holds cuDNN's warm-up).
R50=(--config "$SRC/configs/cifar_resnet20.toml" --set model.name=resnet50 --set 'data.image_shape=[3,224,224]'
  --set data.classes=1000 --set data.train_size=1920 --set data.test_size=128 --set train.epochs=2
  --set train.batch_size=64 --set optimizer.lr=0.01 --set lr_schedule.warmup_steps=0 --set train.device=cuda)
for p in fp32 bf16; do
  step "resnet50-train-$p" 120 "$B/bin/pshard" train "${R50[@]}" --set train.precision=$p --run-dir "$OUT/run-resnet50-train-$p"
  step "resnet50-1w1s-$p" 120 "$B/bin/pshard" launch --servers 1 --workers 1 --timeout 110 "${R50[@]}" \
    --set train.precision=$p --run-dir "$OUT/run-resnet50-1w1s-$p"
done
step resnet50-2w1s-bf16 150 "$B/bin/pshard" launch --servers 1 --workers 2 --timeout 140 "${R50[@]}" \
  --set train.precision=bf16 --set data.train_size=3840 --run-dir "$OUT/run-resnet50-2w1s-bf16"

# 12. Scaling on this machine's cores (a diagnosis, outside the pass/fail): the ResNet-50 profile (real tensors, the
# layers' compute replaced by waits, as while a GPU computes) at 1, 2, 4 and 8 workers with 2 servers, pshard next to
# PyTorch DDP (gloo) over the same tensors; the development VM's 2 cores cannot run 8 workers for real.
step diag-scaling-resnet50-profile 150 python3 "$SRC/tests/bench/ddp_profile.py" --profile "$SRC/profiles/resnet50.json" \
  --workers 1,2,4,8 --servers 2 --steps 10 --timeout 60 --pshard "$B/bin/pshard" --json

# 13. Async with a straggler on this machine's cores (a diagnosis): pshard's DLRM on synthetic clicks, 2 workers + 2
# servers, worker 1 slowed 2x; sync, async with static shards, and async with cluster.batch_assignment = dynamic, two
# rounds (tests/bench/dlrm_bench.py --async).
for round in 1 2; do
  step "diag-async-dlrm-$round" 150 python3 "$SRC/tests/bench/dlrm_bench.py" --pshard "$B/bin/pshard" --skip-speed \
    --skip-scaling --async --async-samples 1024000 --out "$OUT/diag-async-dlrm-$round.json"
done

# ---- summary.json ----
python3 - "$OUT" "$GPU" "$BUDGET_S" <<'PY'
import json, os, re, sys

out, gpu, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
steps = {}
for line in open(os.path.join(out, "steps.tsv")):
    name, rc, secs, log = line.rstrip("\n").split("\t")
    steps[name] = {"name": name, "exit": None if rc == "budget" else int(rc), "seconds": int(secs), "log": log,
                   "pass": rc == "0"}
    if rc == "budget":
        steps[name]["why"] = f"not run: the {budget} s budget was spent"


def text(name):
    if name not in steps:  # not run (CHECK_ONLY)
        return ""
    try:
        return open(os.path.join(out, steps[name]["log"]), errors="replace").read()
    except OSError:
        return ""


def epochs(run):
    try:
        lines = [json.loads(l) for l in open(os.path.join(out, run, "metrics.jsonl"))]
    except (OSError, ValueError):
        return [], {}
    return [l for l in lines if l.get("event") == "epoch"], next((l for l in lines if l.get("event") == "summary"), {})


def fail(name, why):
    steps[name]["pass"] = False
    steps[name]["why"] = why


for name, s in steps.items():
    if name.startswith("test-") and s["exit"] is not None:
        log = text(name)
        for key, tag in (("passed", "PASSED  "), ("failed", "FAILED  "), ("skipped", "SKIPPED ")):
            m = re.search(r"^\[  " + tag + r"\] (\d+) tests?", log, re.M)  # gtest's closing counts
            s[key] = int(m.group(1)) if m else 0
        if "no CUDA device" in log:  # PSHARD_REQUIRE_GPU's skip (a test that needs no GPU may skip with a GPU)
            fail(name, "tests skipped: they did not see the GPU")

if "train-cuda" in steps and "train-cpu" in steps:
    cuda, _ = epochs("run-train-cuda")
    cpu, _ = epochs("run-train-cpu")
    # Four other deterministic summation orders (the CPU at 16 and 1 threads and with the reference kernels, CUDA
    # with cuDNN's weight gradient) give the spread that order alone gives this epoch loss; CUDA must lie within
    # 3 x that spread of the 16-thread CPU run, or within 1e-3.
    orders = [r[0]["train_loss"] for r in (cpu, epochs("run-loss-order-cpu-1thread")[0],
                                           epochs("run-loss-order-cpu-reference")[0],
                                           epochs("run-loss-order-cuda-wgrad-cudnn")[0]) if r]
    spread = max(orders) - min(orders) if len(orders) == 4 else None
    tolerance = max(1e-3, 3 * spread) if spread is not None else 1e-3
    pairs = [{"epoch": a["epoch"], "cuda": a["train_loss"], "cpu": b["train_loss"],
              "diff": abs(a["train_loss"] - b["train_loss"])} for a, b in zip(cuda, cpu)]
    steps["train-cuda"]["losses"] = pairs
    steps["train-cuda"]["cpu_order_losses"] = orders
    steps["train-cuda"]["cpu_order_spread"] = spread
    steps["train-cuda"]["tolerance"] = tolerance
    if not pairs:
        fail("train-cuda", "no epoch of both runs to compare")
    elif max(p["diff"] for p in pairs) > tolerance:
        fail("train-cuda", f"CUDA and CPU losses differ by more than {tolerance:.3g} (3 x the other orders' spread "
                           f"{spread}, at least 1e-3)")

accuracy = {}
for name in list(steps):
    if name.startswith("accuracy-"):
        _, summ = epochs("run-" + name)
        ep, _ = epochs("run-" + name)
        _, model, prec = name.split("-")
        steps[name]["test_acc"] = summ.get("test_acc")
        steps[name]["samples_per_s"] = summ.get("samples_per_s")
        steps[name]["skipped_steps"] = sum(e.get("skipped_steps", 0) or 0 for e in ep)
        accuracy.setdefault(model, {})[prec] = summ.get("test_acc")
for model, accs in accuracy.items():
    base = accs.get("fp32")
    for prec in ("bf16", "fp16"):
        name = f"accuracy-{model}-{prec}"
        if name in steps and steps[name]["exit"] == 0:
            acc = accs.get(prec)
            if base is None or acc is None:
                fail(name, "no test accuracy to compare with fp32's")
            elif abs(acc - base) > 0.005:
                fail(name, f"test accuracy {acc:.4f} is {100 * (acc - base):+.2f} points from fp32's {base:.4f} "
                           "(target: within 0.5)")

precision = {}
for name in ("precision-resnet50", "precision-resnet20"):
    if name in steps:
        try:
            precision[name[len("precision-"):]] = json.load(open(os.path.join(out, name + ".json")))
        except (OSError, ValueError):
            if steps[name]["exit"] == 0:
                fail(name, "no measurement (skipped: " + text(name).strip()[-200:] + ")")


def row(model, prec, batch):
    for r in precision.get(model, {}).get("rows", []):
        if r["precision"] == prec and r["batch"] == batch:
            return r
    return {}


targets = []
for prec in ("bf16", "fp16"):
    r = row("resnet50", prec, 128)
    targets.append({"what": f"ResNet-50 b128 {prec} / pshard fp32", "value": r.get("vs_pshard_fp32"), "target": 2.0})
    targets.append({"what": f"ResNet-50 b128 {prec} / PyTorch autocast", "value": r.get("vs_pytorch"), "target": 0.9})
    low = [x.get("vs_pytorch") for x in precision.get("resnet50", {}).get("rows", []) if x["precision"] == prec]
    low = [v for v in low if v is not None]
    targets.append({"what": f"ResNet-50 b32-256 {prec} / PyTorch autocast, lowest", "value": min(low) if low else None,
                    "target": 0.8})
r = row("resnet20", "fp16", 128)
targets.append({"what": "ResNet-20 b128 fp16 / pshard fp32", "value": r.get("vs_pshard_fp32"), "target": 1.5})
for t in targets:
    t["met"] = t["value"] is not None and t["value"] >= t["target"]

def step_phases(run):
    """Medians of the sampled steps' phases in ms (step 0, cuDNN's warm-up, left out)."""
    try:
        rows = [json.loads(l) for l in open(os.path.join(out, run, "metrics.jsonl"))]
    except (OSError, ValueError):
        return None
    rows = [r for r in rows if r.get("event") == "step" and r.get("step", 0) > 0]
    if not rows:
        return None
    med = lambda k: sorted(r.get(k, 0.0) for r in rows)[len(rows) // 2] * 1e3
    return {k[:-2] + "_ms": round(med(k), 4) for k in ("step_s", "data_s", "forward_s", "backward_s", "comm_wait_s",
                                                       "other_s")} | {"sampled_steps": len(rows)}


for name in ("launch-fp16", "launch-2workers", "overhead-train", "overhead-1w1s", "overhead-1w1s-bf16"):
    if name in steps:
        _, summ = epochs("run-" + name)
        steps[name]["test_acc"] = summ.get("test_acc")
        steps[name]["samples_per_s"] = summ.get("samples_per_s")
        steps[name]["phases"] = step_phases("run-" + name)
if "launch-2workers" in steps and steps["launch-2workers"]["exit"] == 0:
    acc = steps["launch-2workers"].get("test_acc")
    if acc is None or acc < 0.905:
        fail("launch-2workers", f"test accuracy {acc} < 0.905")

ps_overhead = None
local = steps.get("overhead-train", {}).get("samples_per_s")
if local:
    ps_overhead = {"train_samples_per_s": local, "target": 0.8}
    for name, key in (("overhead-1w1s", "fp32"), ("overhead-1w1s-bf16", "bf16")):
        ps = steps.get(name, {}).get("samples_per_s")
        if ps:
            ps_overhead[key] = {"launch_1w1s_samples_per_s": ps, "ratio": ps / local, "met": ps / local >= 0.8}

resnet = []
for name, s in steps.items():
    if name.startswith("resnet20-"):
        rows = [l for l in text(name).splitlines() if l.startswith("{")]
        if rows:
            r = json.loads(rows[-1])
            resnet.append(r)
            s["images_per_s"] = {"pytorch": r["pytorch_images_per_s"],
                                 **{p["run"]: p["images_per_s"] for p in r["pshard"]}}
        elif s["exit"] == 0:
            fail(name, "no measurement (skipped: " + text(name).strip()[-200:] + ")")

for name in ("cifar-cuda", "cifar-cuda-amp"):
    if name in steps:
        rates = [float(m) for m in re.findall(r"epoch \d+: ([0-9.]+) images/s on this worker \(cuda", text(name))]
        steps[name]["images_per_s_per_worker"] = rates  # rank 0's, per epoch (the first includes cuDNN's warm-up)
        if steps[name]["exit"] == 0 and not rates:
            fail(name, "rank 0 printed no images/s on cuda")

resnet50_jobs = {}
for name in [n for n in steps if n.startswith("resnet50-")]:
    ep, summ = epochs("run-" + name)
    rate = ep[-1].get("samples_per_s") if len(ep) >= 2 else None
    steps[name]["samples_per_s_last_epoch"] = rate
    resnet50_jobs[name[len("resnet50-"):]] = rate
    if steps[name]["exit"] == 0 and rate is None:
        fail(name, "no second epoch's samples/s in its metrics")
for p in ("fp32", "bf16"):
    local, job = resnet50_jobs.get(f"train-{p}"), resnet50_jobs.get(f"1w1s-{p}")
    if local and job:
        resnet50_jobs[f"ps_overhead_{p}"] = job / local

scaling = []
if "diag-scaling-resnet50-profile" in steps:
    scaling = [json.loads(l) for l in text("diag-scaling-resnet50-profile").splitlines() if l.startswith("{")]
    steps["diag-scaling-resnet50-profile"]["rows"] = len(scaling)

async_dlrm = []
for name in [n for n in steps if n.startswith("diag-async-dlrm-")]:
    try:
        a = json.load(open(os.path.join(out, name + ".json")))["async"]
    except (OSError, ValueError, KeyError):
        continue
    async_dlrm.append({k: a.get(k) for k in ("samples_per_s_ratio", "dynamic_samples_per_s_ratio", "auc_difference",
                                             "dynamic_auc_difference")} |
                      {k + "_samples_per_s": a[k]["samples_per_s"] for k in ("sync", "async", "dynamic")} |
                      {k + "_worker_samples_per_s": a[k]["worker_samples_per_s"] for k in ("sync", "async", "dynamic")})

versions = {}
try:
    import torch
    versions = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "torch_cudnn": torch.backends.cudnn.version()}
except ImportError:
    pass
for line in text("train-cuda").splitlines():  # pshard's backend line: "cuda:0 (NAME, cuBLAS, cuDNN 9.x.y, ...)"
    m = re.search(r"cuDNN ([0-9.]+)", line)
    if m:
        versions["pshard_cudnn"] = m.group(1)
        break
for key, cmd in (("nvcc", "nvcc --version"), ("driver", "nvidia-smi --query-gpu=driver_version --format=csv,noheader")):
    try:
        import subprocess
        o = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
        versions[key] = o.splitlines()[-1] if o else None
    except Exception:  # noqa: BLE001
        versions[key] = None
checks = [s for name, s in steps.items() if not name.startswith("diag-")]
summary = {"gpu": gpu, "torch": versions.get("torch"), "versions": versions,
           "result": "pass" if all(s["pass"] for s in checks) else "fail",
           "seconds": sum(s["seconds"] for s in steps.values()), "steps": list(steps.values()),
           "resnet20": resnet, "ps_overhead": ps_overhead, "scaling": scaling, "resnet50_jobs": resnet50_jobs, "async_dlrm": async_dlrm, "precision": precision, "targets": targets}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
for a in async_dlrm:
    print(f"gpu-check: DLRM async, worker 1 slowed 2x: static {a['samples_per_s_ratio']:.2f} x sync, dynamic "
          f"{a['dynamic_samples_per_s_ratio']:.2f} x sync (AUC {a['dynamic_auc_difference']:+.4f})")
for k, v in resnet50_jobs.items():
    print(f"gpu-check: ResNet-50 job {k}: {v if v is None else round(v, 2)}")
for r in scaling:
    print(f"gpu-check: scaling {r['workers']} workers: pshard {r.get('pshard_samples_per_s', 0):.1f} samples/s "
          f"(efficiency {r.get('pshard_efficiency', 0):.2f}), DDP {r['ddp_samples_per_s']:.1f} "
          f"({r['ddp_efficiency']:.2f})")
for t in targets:
    v = "-" if t["value"] is None else f"{t['value']:.2f}"
    print(f"gpu-check: target {t['what']}: {v} (>= {t['target']}: {'met' if t['met'] else 'NOT met'})")
print(f"gpu-check: {summary['result']}: " + ", ".join(f"{s['name']} {'ok' if s['pass'] else 'FAIL'}"
                                                       for s in summary["steps"]))
sys.exit(0 if summary["result"] == "pass" else 1)
PY
rc=$?
say "done in $((SECONDS - START)) s; logs and summary.json in $OUT"
exit $rc
