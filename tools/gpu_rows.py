#!/usr/bin/python3
"""The GPU rows of docs/PERFORMANCE.md's headline table from a GPU check's results (docs/results/gpu-check.json,
the summary.json that scripts/gpu-check.sh writes, as recorded).

A CPU machine's benchmark report (scripts/bench-report.sh) cannot measure them and carries them over from the
report before it; this writes them into the newest report (docs/results/bench-report-*.json) as carried rows with
the GPU run's own date, commit and GPU, then renders the table again (tools/bench_table.py).

  tools/gpu_rows.py --commit 0b5926c                       # rows of docs/results/gpu-check.json
  tools/gpu_rows.py --summary OUT/summary.json --commit C --date "2026-11-28 ~21:47" --update docs/PERFORMANCE.md
"""
import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))
import bench_report  # noqa: E402
import bench_table  # noqa: E402

# The headline measures' names, as tools/bench_report.py lists them (its next report carries these rows over).
MEASURES = dict(bench_report.MEASURES)
REASON = "needs a GPU (scripts/gpu-check.sh; row written by tools/gpu_rows.py from docs/results/gpu-check.json)"


def fmt(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"


def rows_of(summary, commit, when):
    steps = {s["name"]: s for s in summary.get("steps", [])}
    gpu = (summary.get("gpu") or "GPU").split(",")[0].replace("NVIDIA ", "")
    rows = []

    def add(row_id, measure, pshard, anchor, ratio, command):
        rows.append({"measure": measure, "pshard": pshard, "anchor": anchor, "ratio": ratio, "command": command,
                     "when": when, "commit": commit, "machine_load": gpu, "id": row_id, "status": "carried",
                     "reason": REASON, "carried_from": "docs/results/gpu-check.json"})

    r20 = steps.get("resnet20-b128", {}).get("images_per_s", {})
    bench, torch = r20.get("pshard bench compute (host update)"), r20.get("pytorch")
    if bench and torch:
        add("gpu_resnet20", MEASURES["gpu_resnet20"], fmt(bench), f"PyTorch {summary.get('torch', '')} eager: {fmt(torch)}", f"**{bench / torch:.2f}**",
            "`scripts/gpu-check.sh OUTDIR` (step `resnet20-b128`: `tests/bench/resnet20_gpu_vs_pytorch.py --batch 128`)")
    resnet50 = {(r["precision"], r["batch"]): r for r in summary.get("precision", {}).get("resnet50", {}).get("rows", [])}
    for prec in ("bf16", "fp16"):
        r, base = resnet50.get((prec, 128)), resnet50.get(("fp32", 128))
        if r and r.get("pshard_gpu_sgd") and r.get("pytorch"):
            add(f"gpu_resnet50_{prec}", MEASURES[f"gpu_resnet50_{prec}"], fmt(r["pshard_gpu_sgd"]),
                f"PyTorch autocast, channels_last: {fmt(r['pytorch'])}; pshard fp32: "
                f"{fmt(base and base.get('pshard_gpu_sgd'))}", f"**{r['pshard_gpu_sgd'] / r['pytorch']:.2f}**",
                "`scripts/gpu-check.sh OUTDIR` (step `precision-resnet50`: `tests/bench/gpu_precision_vs_pytorch.py "
                "--model resnet50`)")
    resnet20 = {(r["precision"], r["batch"]): r for r in summary.get("precision", {}).get("resnet20", {}).get("rows", [])}
    r, base = resnet20.get(("fp16", 128)), resnet20.get(("fp32", 128))
    if r and base and r.get("pshard_gpu_sgd") and base.get("pshard_gpu_sgd"):
        add("gpu_resnet20_fp16", MEASURES["gpu_resnet20_fp16"],
            fmt(r["pshard_gpu_sgd"]), f"pshard fp32: {fmt(base['pshard_gpu_sgd'])}",
            f"**{r['pshard_gpu_sgd'] / base['pshard_gpu_sgd']:.2f}**", "same, step `precision-resnet20`")
    for model, epochs in (("lenet", 5), ("resnet20", 3)):
        accs = {p: steps.get(f"accuracy-{model}-{p}", {}).get("test_acc") for p in ("fp32", "bf16", "fp16")}
        if all(accs.values()):
            add(f"gpu_accuracy_{model}", MEASURES[f"gpu_accuracy_{model}"],
                f"{100 * accs['bf16']:.2f} / {100 * accs['fp16']:.2f} %",
                f"fp32: {100 * accs['fp32']:.2f} %",
                f"{100 * (accs['bf16'] - accs['fp32']):+.2f} / {100 * (accs['fp16'] - accs['fp32']):+.2f} points",
                f"`scripts/gpu-check.sh OUTDIR` (steps `accuracy-{model}-*`)")
    ps = summary.get("ps_overhead") or {}
    if ps.get("fp32"):
        add("gpu_ps_overhead", MEASURES["gpu_ps_overhead"], fmt(ps["fp32"]["launch_1w1s_samples_per_s"]), fmt(ps["train_samples_per_s"]),
            f"**{ps['fp32']['ratio']:.3f}**", "`scripts/gpu-check.sh OUTDIR` (PS overhead step)")
    return rows


def merge(report_rows, gpu_rows):
    """The report's rows with each GPU row replaced by id; new GPU rows after the last GPU row (or at the end)."""
    by_id = {r["id"]: r for r in gpu_rows}
    out = [by_id.pop(r.get("id"), r) for r in report_rows]
    last = max((i for i, r in enumerate(out) if str(r.get("id", "")).startswith("gpu_")), default=len(out) - 1)
    return out[:last + 1] + list(by_id.values()) + out[last + 1:]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--summary", default=os.path.join(REPO, "docs", "results", "gpu-check.json"))
    ap.add_argument("--commit", required=True, help="the commit the GPU run measured")
    ap.add_argument("--date", default=None, help="when it ran (UTC; default: the summary's date)")
    ap.add_argument("--update", default=os.path.join(REPO, "docs", "PERFORMANCE.md"))
    a = ap.parse_args()
    with open(a.summary) as f:
        summary = json.load(f)
    rows = rows_of(summary, a.commit, a.date or summary.get("date", ""))
    if not rows:
        raise SystemExit("gpu_rows: the summary has no GPU measurement to write")
    path = bench_table.latest_report(os.path.join(REPO, "docs", "results"))
    if not path:
        raise SystemExit("gpu_rows: no docs/results/bench-report-*.json to write the rows into")
    with open(path) as f:
        report = json.load(f)
    report["rows"] = merge(report["rows"], rows)
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    source = os.path.relpath(os.path.abspath(path), REPO)
    lines = bench_table.render(report, "[%s](%s)" % (os.path.basename(path), os.path.relpath(source, "docs")))
    bench_table.update(a.update, lines)
    print(f"gpu_rows: {len(rows)} GPU rows written into {source} and {os.path.relpath(a.update, REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
