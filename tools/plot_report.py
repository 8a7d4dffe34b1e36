#!/usr/bin/env python3
"""Draws the PNG charts of a `pshard report` from the CSV tables it wrote.

The C++ command computes every number; this script only draws. It reads a
manifest (JSON) that lists, per chart, the PNG to write, its size in pixels
and its panels; each panel names CSV columns to plot:

  {"charts": [{"png": "loss_vs_step.png", "width": 1000, "height": 600, "title": "...",
               "panels": [{"title": "...", "xlabel": "step", "ylabel": "loss", "kind": "line",
                           "logx": false, "logy": false, "integer_x": false, "data_xticks": false,
                           "layers": [{"csv": "convergence_steps.csv", "x": "step", "y": "loss",
                                       "group": "label", "label": "", "style": "-", "marker": "",
                                       "where": {"group": "..."}}]}]}]}

kind "line": one line per value of the layer's `group` column (or one line
labelled `label`); layers sharing a group value share a colour. logx: base-2
log axis; integer_x: whole-number ticks; data_xticks: ticks at the x values.
kind "bars": grouped bars, one bar per layer at each x category.
kind "stacked": stacked bars, one segment per layer at each x category.
kind "timeline": spans as horizontal bars, one CSV row per span: `x` is its start column, `y` its
duration column, `group` its lane column (one lane per value, top to bottom in order of first
appearance), and the layer's `label` names the column whose value picks the colour.

usage: plot_report.py MANIFEST.json      (paths in the manifest are relative to its folder)
"""
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as ticker  # noqa: E402

DPI = 100


def read_rows(folder, layer, cache):
    path = os.path.join(folder, layer["csv"])
    if path not in cache:
        with open(path, newline="") as f:
            cache[path] = list(csv.DictReader(f))
    rows = cache[path]
    where = layer.get("where") or {}
    return [r for r in rows if all(r.get(k) == v for k, v in where.items())]


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def draw_line(ax, folder, panel, cache):
    colors = {}
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    xs_seen = set()
    for index, layer in enumerate(panel["layers"]):
        rows = read_rows(folder, layer, cache)
        series = {}
        for r in rows:
            key = r.get(layer["group"], "") if layer.get("group") else ""
            x, y = number(r.get(layer["x"])), number(r.get(layer["y"]))
            if x is None or y is None:
                continue
            series.setdefault(key, []).append((x, y))
            xs_seen.add(x)
        for key, points in series.items():
            color_key = key if layer.get("group") else "layer %d" % index
            if color_key not in colors:
                colors[color_key] = palette[len(colors) % len(palette)]
            points.sort()
            name = " ".join(part for part in (key, layer.get("label", "")) if part)
            ax.plot([p[0] for p in points], [p[1] for p in points], layer.get("style", "-"),
                    marker=layer.get("marker") or None, color=colors[color_key],
                    label=name or None, linewidth=1.5, markersize=5)
    return sorted(xs_seen)


def categories(folder, panel, cache):
    cats = []
    for layer in panel["layers"]:
        for r in read_rows(folder, layer, cache):
            if r.get(layer["x"]) not in cats:
                cats.append(r.get(layer["x"]))
    return cats


def draw_bars(ax, folder, panel, cache, stacked):
    cats = categories(folder, panel, cache)
    n = len(panel["layers"])
    width = 0.8 if stacked else 0.8 / max(n, 1)
    bottoms = [0.0] * len(cats)
    for i, layer in enumerate(panel["layers"]):
        values = {r.get(layer["x"]): number(r.get(layer["y"])) for r in read_rows(folder, layer, cache)}
        ys = [values.get(c) or 0.0 for c in cats]
        xs = [j if stacked else j - 0.4 + width * (i + 0.5) for j in range(len(cats))]
        ax.bar(xs, ys, width, bottom=bottoms if stacked else None, label=layer.get("label") or layer["y"])
        if stacked:
            bottoms = [b + y for b, y in zip(bottoms, ys)]
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels(cats)


def draw_timeline(ax, folder, panel, cache):
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"] + ["#444444", "#bbbb00", "#00bbbb", "#bb00bb"]
    lanes, colors = [], {}
    for layer in panel["layers"]:
        for r in read_rows(folder, layer, cache):
            lane, key = r.get(layer["group"]), r.get(layer["label"])
            start, dur = number(r.get(layer["x"])), number(r.get(layer["y"]))
            if start is None or dur is None:
                continue
            if lane not in lanes:
                lanes.append(lane)
            if key not in colors:
                colors[key] = palette[len(colors) % len(palette)]
                ax.barh(0, 0, color=colors[key], label=key)  # one legend entry per colour
            ax.barh(lanes.index(lane), max(dur, 1e-3), left=start, height=0.7, color=colors[key])
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(lanes, fontsize=7)
    ax.invert_yaxis()


def draw_chart(folder, chart):
    panels = chart["panels"]
    cols = 2 if len(panels) > 1 else 1
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(chart["width"] / DPI, chart["height"] / DPI), dpi=DPI,
                             squeeze=False)
    cache = {}
    for ax, panel in zip([a for row in axes for a in row], panels):
        kind = panel.get("kind", "line")
        xs = []
        if kind == "line":
            xs = draw_line(ax, folder, panel, cache)
        elif kind == "timeline":
            draw_timeline(ax, folder, panel, cache)
        else:
            draw_bars(ax, folder, panel, cache, stacked=(kind == "stacked"))
        if panel.get("logx"):
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: "%g" % v))
            ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        if panel.get("integer_x"):
            ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        if panel.get("data_xticks") and xs:
            ax.set_xticks(xs)
        if panel.get("logy"):
            ax.set_yscale("log")
        ax.set_title(panel.get("title", ""), fontsize=10)
        ax.set_xlabel(panel.get("xlabel", ""))
        ax.set_ylabel(panel.get("ylabel", ""))
        ax.grid(True, alpha=0.3)
        handles = ax.get_legend_handles_labels()[0]
        if len(handles) > 6:  # many runs: the legend goes beside the plot, not over the curves
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        elif handles:
            ax.legend(fontsize=8)
    for ax in [a for row in axes for a in row][len(panels):]:
        ax.set_visible(False)
    fig.suptitle(chart.get("title", ""), fontsize=12)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, chart["png"]), dpi=DPI)
    plt.close(fig)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    manifest_path = argv[1]
    folder = os.path.dirname(os.path.abspath(manifest_path))
    with open(manifest_path) as f:
        manifest = json.load(f)
    for chart in manifest["charts"]:
        draw_chart(folder, chart)
        print("wrote", os.path.join(folder, chart["png"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
