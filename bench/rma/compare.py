#!/usr/bin/env python3
"""Side-by-side table of shmem_perf runs (gpuverbs' NVSHMEM face vs NVSHMEM) and gv_rma rows.

    python3 bench/rma/compare.py gv_shmem_perf.json nvshmem_perf.json [gv_rma.json] > table.md

Each input is a benchmark's --json output (a metadata object, then one object per row). Rows
are matched on (test, scope or variant, bytes); the ratio is gpuverbs over NVSHMEM for
latencies (lower is better: < 1 means gpuverbs is faster) and for rates (higher is better).
A rate row that carries its spread within the run (`lo`, `hi`: its slowest and fastest launch)
shows it in brackets, and the last column but one says whether the two ranges are apart: "slower"
or "faster" only where the face's whole range lies beyond NVSHMEM's.
"""
import json
import sys


def load(path):
    meta, rows = None, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            o = json.loads(line)
            if o.get("bench") == "metadata":
                meta = meta or o
            else:
                rows.append(o)
    return meta, rows


def key(r):
    return (r.get("test"), r.get("scope") or r.get("variant"), r.get("bytes"))


def value(r):
    if "t_typical" in r:
        return r["t_typical"], "us (typical)"
    if r.get("test") in ("rate", "rate_self"):
        return r["mmsgs"], "Mmsg/s"
    return r["bw_gbs"], "GB/s"


def cell(r):
    v = value(r)[0]
    return f"{v:.2f} ({r['lo']:.2f}-{r['hi']:.2f})" if "lo" in r else f"{v:.2f}"


def apart(g, n):
    """Rates: whether the face's range lies wholly below or above NVSHMEM's."""
    if "lo" not in g or "lo" not in n:
        return "—"
    if g["hi"] < n["lo"]:
        return "slower"
    if g["lo"] > n["hi"]:
        return "faster"
    return "within"


def main(argv):
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) > 1 and argv[1] in ("-h", "--help") else 2
    gm, g = load(argv[1])
    nm, n = load(argv[2])
    extra = load(argv[3])[1] if len(argv) > 3 else []
    core = {(r.get("test"), r.get("scope") or r.get("variant"), r.get("bytes")): r for r in extra if r.get("transport") in (None, "p2p")}
    print(f"device: {gm and gm.get('device')}; gpuverbs commit {gm and gm.get('commit')}; "
          f"date {gm and gm.get('date')}")
    print(f"commands: `{gm and gm.get('command')}` / `{nm and nm.get('command')}`\n")
    print("| test | scope | bytes | unit | gpuverbs face | NVSHMEM | face / NVSHMEM | ranges | gv_rma core |")
    print("|---|---|---|---|---|---|---|---|---|")
    nvs = {key(r): r for r in n}
    for r in g:
        k = key(r)
        v, unit = value(r)
        other = nvs.get(k)
        ov = value(other)[0] if other else None
        ratio = f"{v / ov:.2f}" if ov else "—"
        c = core.get(k)
        cv = f"{value(c)[0]:.2f}" if c else "—"
        print(f"| {k[0]} | {k[1]} | {k[2]} | {unit} | {cell(r)} | {cell(other) if other else '—'} | {ratio} | "
              f"{apart(r, other) if other else '—'} | {cv} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
