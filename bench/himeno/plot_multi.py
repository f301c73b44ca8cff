#!/usr/bin/env python3
"""Speedup over the one-GPU run against grid size, one line per synchronisation mode.

    plot_multi.py OUT.png BENCH.json [BENCH.json ...]

Reads the --json output of `himeno_bench --ranks N` (per run a metadata object, then one object
per row) and draws, per run, the speedup of every mode at every size it measured; a row whose
mode could not run is left out. Prints the series it plots. Without matplotlib it prints them and
says so, writing no PNG (exit status 0: the plot is an extra, the numbers are in the JSON).
"""
import json
import sys

SIZE_ORDER = ["XS", "S", "M", "L", "XL", "custom"]


def load(path):
    """[(title, {mode: [(size, speedup)]})], one per run in the file (a metadata object opens each)."""
    runs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            if row.get("bench") == "metadata":
                title = "%s rank(s), %s, transport %s\n%s" % (row.get("ranks", "?"), row.get("device", "?"),
                                                             row.get("transport", "?"), row.get("date", "?"))
                runs.append((title, {}))
            elif runs and row.get("bench") == "himeno_multi" and row.get("mode") != "one-gpu" and "speedup" in row:
                runs[-1][1].setdefault(row["mode"], []).append((row["size"], row["speedup"]))
    for _, series in runs:
        for points in series.values():
            points.sort(key=lambda p: SIZE_ORDER.index(p[0]) if p[0] in SIZE_ORDER else len(SIZE_ORDER))
    return [r for r in runs if r[1]]


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out, paths = argv[1], argv[2:]
    loaded = [run for p in paths for run in load(p)]
    if not loaded:
        print("plot_multi.py: no multi-GPU rows in", " ".join(paths))
        return 1
    for title, series in loaded:
        print(title)
        for mode, points in sorted(series.items()):
            print("  %-14s %s" % (mode, "  ".join("%s %.3f" % p for p in points)))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_multi.py: matplotlib is not installed here; no plot written (the numbers are above)")
        return 0
    fig, axes = plt.subplots(1, len(loaded), figsize=(6.5 * len(loaded), 4.5), squeeze=False)
    for ax, (title, series) in zip(axes[0], loaded):
        for mode, points in sorted(series.items()):
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=mode)
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xlabel("grid size")
        ax.set_ylabel("speedup over one GPU (same invocation)")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
