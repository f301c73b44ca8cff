"""Reading gv_scope's Google Benchmark JSON: rows by family, arguments and counters; shared by
summarize.py and plot.py. A run cut off by its time limit leaves a truncated JSON file: its
complete rows are kept, and rows that reached only the console log beside it (<same stem>.log,
Google Benchmark's console table) are read from there at the table's precision."""
import json
import os
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
                # Arguments only: not Google Benchmark's own min_time / iterations / repeats.
                if k not in ("min_time", "iterations", "repeats") and v.lstrip("-").isdigit():
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



def console_rows(path):
    """Rows of a Google Benchmark console table (bytes_per_second is printed 1024-based)."""
    rows = []
    if not os.path.exists(path):
        return rows
    for line in open(path, errors="replace"):
        if not line.startswith("Comm_"):
            continue
        t = line.split()
        if "ERROR" in line:
            rows.append({"name": t[0], "error_occurred": True, "error_message": line.split("ERROR OCCURRED:", 1)[-1].strip(" '\n"),
                         "run_type": "iteration", "from_console": True})
            continue
        r = {"name": t[0], "real_time": float(t[1]), "time_unit": t[2], "cpu_time": float(t[3]), "iterations": int(t[5]),
             "run_type": "iteration", "from_console": True}
        for kv in t[6:]:
            k, _, v = kv.partition("=")
            m = re.fullmatch(r"([-0-9.eE+]+)([kMGT]?)(/s)?", v)
            if not m:
                continue
            base = 1024.0 if k == "bytes_per_second" else 1000.0
            r[k] = float(m.group(1)) * (base ** ("kMGT".index(m.group(2)) + 1) if m.group(2) else 1.0)
        rows.append(r)
    return rows


def read_json(path):
    """The JSON of a run; a file cut off mid-write keeps its complete rows."""
    text = open(path).read()
    try:
        return json.loads(text), False
    except json.JSONDecodeError:
        cut = text.rfind("\n    },")
        if cut < 0:
            return {"context": {}, "benchmarks": []}, True
        return json.loads(text[:cut] + "\n    }\n  ]\n}\n"), True


def load(path):
    """(context, rows): one row per benchmark instance, the median aggregate where repetitions
    ran, else the single run."""
    d, truncated = read_json(path)
    benches = d.get("benchmarks", [])
    if truncated:
        have = {b["name"] for b in benches}
        benches += [r for r in console_rows(os.path.splitext(path)[0] + ".log") if r["name"] not in have]
    chosen = {}
    for r in benches:
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
