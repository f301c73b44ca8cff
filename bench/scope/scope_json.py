"""Reading gv_scope's Google Benchmark JSON: rows by family, arguments and counters; shared by
summarize.py and plot.py."""
import json
import re


class Row:
    def __init__(self, r):
        self.raw = r
        parts = r["name"].split("/")
        fam = parts[0][len("Comm_"):] if parts[0].startswith("Comm_") else parts[0]
        self.plain = fam.startswith("Plain_")
        self.family = fam[len("Plain_"):] if self.plain else fam
        self.ids = [int(p) for p in parts[1:3] if p.isdigit()]
        self.args = {}
        for p in parts[3:]:
            if ":" in p:
                k, v = p.split(":", 1)
                self.args[k] = int(v)
        self.error = r.get("error_message") if r.get("error_occurred") else None

    def get(self, key, default=None):
        return self.raw.get(key, default)

    @property
    def log2(self):
        return self.args.get("log2(N)")

    @property
    def gbs(self):
        return self.raw.get("bytes_per_second", 0.0) / 1e9

    def key(self):
        return (self.family, tuple(self.ids), tuple(sorted(self.args.items())))


def load(path):
    """(context, rows): one row per benchmark instance, the median aggregate where repetitions
    ran, else the single run."""
    d = json.load(open(path))
    chosen = {}
    for r in d.get("benchmarks", []):
        if r.get("run_type") == "aggregate" and r.get("aggregate_name") != "median":
            continue
        row = Row(r)
        if r.get("run_type") == "aggregate" or row.key() + (row.plain,) not in chosen:
            chosen[row.key() + (row.plain,)] = row
    return d.get("context", {}), list(chosen.values())


def merge(paths):
    ctx, rows = {}, []
    for p in paths:
        c, r = load(p)
        ctx = ctx or c
        rows += r
    return ctx, rows


def pcie_limit(smi_text):
    """(generation, width, raw GB/s per direction) from `nvidia-smi -q`, or None."""
    if not smi_text:
        return None
    gen = re.search(r"PCIe Generation\s*\n\s*Max\s*:\s*(\d+)\s*\n\s*Current\s*:\s*(\d+)", smi_text)
    width = re.search(r"Link Width\s*\n\s*Max\s*:\s*(\d+)x\s*\n\s*Current\s*:\s*(\d+)x", smi_text)
    if not gen or not width:
        return None
    g, w = int(gen.group(1)), int(width.group(1))
    gts = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}.get(g)
    if gts is None:
        return None
    enc = 0.8 if g <= 2 else 128.0 / 130.0
    return g, w, gts * enc * w / 8.0
