#!/usr/bin/env python3
"""PNGs from gv_scope's JSON: bandwidth against size per family group (one line per memory
kind and direction), the Atomic-RMW heatmaps (contention × padding, one per pattern, op, scope
and memory with a full sweep), latency and launch-cost bars.

    plot.py OUTDIR RUN.json [RUN.json...]
"""
import collections
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from scope_json import merge  # noqa: E402

GROUPS = {
    "copies": lambda f: f.startswith("cudaMemcpy"),
    "zerocopy": lambda f: f.startswith("ZeroCopy_"),
    "unified": lambda f: f.startswith("UM_") and "Latency" not in f,
}


def save(fig, outdir, name):
    """Writes the figure as OUTDIR/NAME and closes it; returns the path."""
    fig.tight_layout()
    path = os.path.join(outdir, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def bandwidth(rows, outdir, title):
    made = []
    for group, want in GROUPS.items():
        lines = collections.defaultdict(list)
        for r in rows:
            if r.plain or r.error or r.log2 is None or not want(r.family):
                continue
            label = r.family + (f" ({r.args['threads']} threads)" if "threads" in r.args else "")
            lines[label].append((r.log2, r.gbs))
        if not lines:
            continue
        fig, ax = plt.subplots(figsize=(10, 6))
        for label in sorted(lines):
            pts = sorted(lines[label])
            style = "--" if "flush" in label else "-"
            ax.plot([2 ** k for k, _ in pts], [v for _, v in pts], style, marker=".", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("transfer size (bytes)")
        ax.set_ylabel("GB/s (1e9 B/s)")
        ax.set_title(f"{title}: {group}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        made.append(save(fig, outdir, f"scope-{group}.png"))
    return made


def heatmaps(rows, outdir, title):
    sweeps = collections.defaultdict(dict)
    for r in rows:
        if r.plain or r.error or "contention" not in r.args or "SharedQueue" in r.family:
            continue
        sweeps[r.family][(r.args["contention"], r.args["padding"])] = r.get("ops_per_us")
    full = {f: v for f, v in sweeps.items() if len(v) >= 121}
    if not full:
        return []
    fams = sorted(full)
    cols = min(4, len(fams))
    rws = math.ceil(len(fams) / cols)
    fig, axes = plt.subplots(rws, cols, figsize=(4.2 * cols, 3.8 * rws), squeeze=False)
    ticks = [2 ** i for i in range(11)]
    for ax, fam in zip(axes.flat, fams):
        grid = [[full[fam].get((c, p), float("nan")) for p in ticks] for c in ticks]
        im = ax.imshow(grid, origin="lower", cmap="viridis", aspect="auto")
        ax.set_xticks(range(11), [str(t) for t in ticks], fontsize=6)
        ax.set_yticks(range(11), [str(t) for t in ticks], fontsize=6)
        ax.set_xlabel("padding (words)", fontsize=7)
        ax.set_ylabel("contention (threads/word)", fontsize=7)
        ax.set_title(fam.replace("AtomicRMW_", ""), fontsize=8)
        fig.colorbar(im, ax=ax).set_label("atomic ops/µs", fontsize=7)
    for ax in list(axes.flat)[len(fams):]:
        ax.axis("off")
    fig.suptitle(f"{title}: Atomic-RMW")
    return [save(fig, outdir, "scope-atomics.png")]


def latency(rows, outdir, title):
    bars = []
    for r in rows:
        if r.plain or r.error:
            continue
        if "latency_ns" in r.raw:
            bars.append((f"{r.family} 2^{r.log2}", r.get("latency_ns")))
        elif "per_launch_ns" in r.raw:
            bars.append((r.family, r.get("per_launch_ns")))
        elif r.family.startswith("cudart_") and r.get("time_unit") == "us":
            bars.append((r.family + " (host)", r.get("real_time") * 1e3))
    if not bars:
        return []
    bars.sort()
    fig, ax = plt.subplots(figsize=(10, 0.3 * len(bars) + 1.5))
    ax.barh([b[0] for b in bars], [b[1] for b in bars])
    ax.set_xscale("log")
    ax.set_xlabel("ns")
    ax.tick_params(axis="y", labelsize=7)
    ax.set_title(f"{title}: latency and launch cost")
    return [save(fig, outdir, "scope-latency.png")]


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    ctx, rows = merge(sys.argv[2:])
    title = next((v.split(",")[0] for k, v in ctx.items() if k.startswith("cuda")), "gv_scope")
    for p in bandwidth(rows, outdir, title) + heatmaps(rows, outdir, title) + latency(rows, outdir, title):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
