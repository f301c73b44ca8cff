#!/usr/bin/env python3
"""A markdown summary of gv_scope runs on one machine: each family's plateau beside the plain
measurement of the same transfer in the same run and beside the physical limit, the targets,
latencies, launch costs, the Atomic-RMW corners and what gpuverbs chooses from them.

    summarize.py --smi nvidia-smi-q.txt --command "..." --commit C --date D RUN.json [RUN.json...] > OUT.md
"""
import argparse
import collections
import sys

from scope_json import merge, pcie_limit

HOST_COPY = ["Pinned", "Registered", "Host", "WC"]


def median_gbs(r):
    """A method row's rate from its median round where it reports one (as the plain row
    does), else Google Benchmark's mean."""
    med = r.get("round_median_us")
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}.get(r.get("time_unit"), 1.0)
    if med and r.get("real_time"):
        return r.gbs * r.get("real_time") * scale / med  # the mean round's rate × mean / median
    return r.gbs


def fmt(x, d=1):
    return "—" if x is None else f"{x:.{d}f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--smi")
    ap.add_argument("--command", default="")
    ap.add_argument("--commit", default="")
    ap.add_argument("--date", default="")
    ap.add_argument("--device", default="")
    a = ap.parse_args()
    ctx, rows = merge(a.runs)
    smi = open(a.smi).read() if a.smi else ""
    link = pcie_limit(smi)
    out = []
    p = out.append
    gpu_ctx = [f"{k}: {v}" for k, v in ctx.items() if k.startswith("cuda")]
    p(f"# gv_scope on {a.device or ', '.join(gpu_ctx) or 'this machine'}\n")
    p(f"- date: {a.date or ctx.get('date', '')}")
    p(f"- commit: {a.commit}")
    p(f"- command: `{a.command}`")
    for g in gpu_ctx:
        p(f"- {g}")
    p(f"- host: {ctx.get('host_name', '')}, {ctx.get('num_cpus', '')} CPUs")
    if link:
        p(f"- PCIe link: Gen{link[0]} x{link[1]} → {link[2]:.1f} GB/s raw per direction (nvidia-smi -q)")
    errs = [r for r in rows if r.error]
    p(f"- rows: {len(rows)} ({len(errs)} with an error)\n")

    method = {r.key(): r for r in rows if not r.plain and not r.error}
    plain = [r for r in rows if r.plain and not r.error]
    raw = link[2] if link else None
    d2d = [r for r in method.values() if r.family == "cudaMemcpyAsync_GPUToGPU"]
    hbm_copy = max((r.gbs for r in d2d), default=None)
    local_read = max((r.gbs for r in method.values() if r.family == "ZeroCopy_GPUToGPU_Read_Local"), default=None)

    p("## Limits measured or named\n")
    p(f"- PCIe raw per direction: {fmt(raw)} GB/s" + ("" if raw else " (link not read)"))
    p(f"- HBM copy rate (cudaMemcpyAsync GPU→GPU on one device, bytes copied per second; each byte is read and "
      f"written): {fmt(hbm_copy)} GB/s; a read kernel over device memory: {fmt(local_read)} GB/s")
    nvl = [r for r in method.values() if r.family.startswith("cudaMemcpyPeerAsync_GPUToGPUPeer")]
    p(f"- GPU↔GPU peer copy: {fmt(max((r.gbs for r in nvl), default=None))} GB/s" if nvl else
      "- GPU↔GPU peer families: not run (one GPU)")
    p("")

    p("## Each family beside the plain measurement and the limit\n")
    p("Method: Google Benchmark rows, the stream held behind a spinning kernel until the timed region is enqueued "
      "(nvbandwidth), several enqueues per region below 4 MiB. Plain: the same transfer with CUDA events right around "
      "one enqueue, median of 11, outside Google Benchmark. Both at the family's largest size, on the same buffers; "
      "the method's figure is its median round where the row reports one (round_median_us; over at least 11 rounds "
      "where the row counts them), else Google Benchmark's mean. Rounds: how many the method's median is over, and "
      "whether they were held (pageable copies cannot be: the copy call stages through the host, so their method is "
      "the plain measurement repeated and the ratio shows only how well it reproduces).\n")
    p("| family | size | method GB/s | plain GB/s | method/plain | limit GB/s | of limit | rounds |")
    p("|---|---|---|---|---|---|---|---|")
    worst = []
    for pr in sorted(plain, key=lambda r: r.family):
        m = method.get(pr.key())
        if m is None:
            continue
        if pr.family.startswith("AtomicRMW"):
            k = "reservations_per_us" if "SharedQueue" in pr.family else "ops_per_us"
            mv, pv = m.get(k), pr.get(k)
            unit = "ops/µs"
        elif "latency_ns" in pr.raw:
            mv, pv = 1.0 / m.get("latency_ns"), 1.0 / pr.get("latency_ns")
            unit = "1/latency"
        elif "per_launch_ns" in pr.raw:
            mv, pv = 1.0 / m.get("per_launch_ns"), 1.0 / pr.get("per_launch_ns")
            unit = "launches"
        else:
            mv, pv, unit = median_gbs(m), pr.gbs, "GB/s"
        ratio = mv / pv if pv else None
        lim = None
        fam = pr.family
        host_path = any(f"_{h}ToGPU" in fam or f"GPUTo{h}" in fam for h in HOST_COPY) or fam.startswith("UM_Demand_") \
            or fam.startswith("UM_Prefetch_") or ("Duplex" in fam and "GPUGPU" not in fam)
        if host_path and "Latency" not in fam:
            lim = raw * (2 if "Duplex" in fam else 1) if raw else None
        elif fam == "cudaMemcpyAsync_GPUToGPU":
            lim = hbm_copy
        size = (f"2^{pr.log2} B" if pr.log2 is not None else
                ", ".join(f"{k} {v}" for k, v in pr.args.items()) or "—")
        n = m.get("rounds")
        rounds = (f"{n:.0f}" if n else "—") + ("" if m.get("held") is None else " held" if m.get("held") else " not held")
        if unit == "GB/s":
            p(f"| {fam} | {size} | {mv:.2f} | {pv:.2f} | {fmt(ratio, 3)} | {fmt(lim)} | "
              f"{fmt(mv / lim if lim else None, 2)} | {rounds} |")
        elif unit == "ops/µs":
            p(f"| {fam} | {size} | {mv:.0f} ops/µs | {pv:.0f} ops/µs | {fmt(ratio, 3)} | — | — | {rounds} |")
        elif unit == "1/latency":
            p(f"| {fam} | {size} | {m.get('latency_ns'):.0f} ns | {pr.get('latency_ns'):.0f} ns | {fmt(ratio, 3)} | — | — | "
              f"{rounds} |")
        else:
            p(f"| {fam} | — | {m.get('per_launch_ns'):.0f} ns/launch | {pr.get('per_launch_ns'):.0f} ns/launch | "
              f"{fmt(ratio, 3)} | — | — | {rounds} |")
        if ratio is not None:
            worst.append((ratio, fam, size))
    p("")

    p("## Targets\n")
    # The median round, as in the table; the _flush rows start every copy with the buffer out of the
    # CPU's caches (Comm|Scope's controlled state), the others from whatever the last round left.
    for fam in ["cudaMemcpyAsync_PinnedToGPU", "cudaMemcpyAsync_PinnedToGPU_flush", "cudaMemcpyAsync_GPUToPinned",
                "cudaMemcpyAsync_GPUToPinned_flush"]:
        r = [x for x in method.values() if x.family == fam and x.log2 == 28]
        if r and raw:
            v = median_gbs(r[0])
            p(f"- {fam} at 256 MiB: {v:.2f} GB/s = {v / raw:.3f} of {raw:.1f} GB/s raw "
              f"({'meets' if v / raw >= 0.85 else 'misses'} ≥ 0.85)")
        else:
            p(f"- {fam} at 256 MiB: not measured in this run" + ("" if raw else " or the link not read"))
    if worst:
        worst.sort()
        below = [w for w in worst if w[0] < 0.97]
        p(f"- method vs plain: lowest ratio {worst[0][0]:.3f} ({worst[0][1]}, {worst[0][2]}); "
          f"{len(below)} of {len(worst)} families below plain by more than 3 %" +
          ("" if not below else ": " + "; ".join(f"{f} {r:.3f}" for r, f, _ in below)))
    p("")

    p("## Latency and launch cost\n")
    p("| row | figure |")
    p("|---|---|")
    for r in sorted(method.values(), key=lambda r: (r.family, r.log2 or 0)):
        if "latency_ns" in r.raw:
            p(f"| {r.family} {'2^%d B' % r.log2 if r.log2 else ''} | {r.get('latency_ns'):.0f} ns per dependent load |")
        elif "per_launch_ns" in r.raw:
            how = ("from the device, each grid tail-launching the next" if "TailLaunch" in r.family else
                   "from the device, fired and forgotten by one thread" if "FireAndForget" in r.family else
                   "on the GPU, back to back")
            p(f"| {r.family} | {r.get('per_launch_ns'):.0f} ns per launch {how} |")
        elif r.family.startswith("cudart_"):
            t = r.get("real_time")
            p(f"| {r.family} | {t:.2f} {r.get('time_unit')} host time per call |")
    p("")

    p("## Atomic-RMW (atomic operations per µs; 65536 threads × 16 each)\n")
    corners = collections.defaultdict(dict)
    for r in method.values():
        if r.family.startswith("AtomicRMW_") and "contention" in r.args and "SharedQueue" not in r.family:
            corners[r.family][(r.args["contention"], r.args["padding"])] = r
    p("| op_pattern_scope_memory | c1 p1 | c32 p1 | c1 p32 | c32 p32 | exact |")
    p("|---|---|---|---|---|---|")
    for fam in sorted(corners):
        cells = corners[fam]
        vals = [cells.get(k) for k in [(1, 1), (32, 1), (1, 32), (32, 32)]]
        exact = all(c.get("exact", 1) == 1 for c in cells.values())
        p(f"| {fam[len('AtomicRMW_'):]} | " + " | ".join(fmt(v.get("ops_per_us") if v else None, 0) for v in vals) +
          f" | {'yes' if exact else 'NO (block scope across blocks)'} |")
    p("")
    sq = {(r.family, r.args.get("posters")): r for r in method.values() if "SharedQueue" in r.family}
    if sq:
        p("Slot reservation, the library's pattern (reservations per µs):\n")
        p("| posters | shared counter (kShared) | kShared's longest wait for one slot | own queue each (kExclusive) | "
          "exclusive / shared |")
        p("|---|---|---|---|---|")
        for n in sorted({k[1] for k in sq}):
            s = sq.get(("AtomicRMW_SharedQueue_Shared", n))
            e = sq.get(("AtomicRMW_SharedQueue_Exclusive", n))
            sv = s.get("reservations_per_us") if s else None
            ev = e.get("reservations_per_us") if e else None
            wait = s.get("max_wait_us") if s and "max_wait_us" in s.raw else None
            p(f"| {n} | {fmt(sv, 1)} | {fmt(wait, 0) + ' µs' if wait is not None else '—'} | {fmt(ev, 1)} | "
              f"{fmt(ev / sv if sv and ev else None, 1)} |")
        p("")

    p("## What gpuverbs chooses, from these figures\n")
    lat = {r.family: r.get("latency_ns") for r in method.values() if "latency_ns" in r.raw and r.log2 in (16, 20)}
    if "Latency_GPU" in lat and "Latency_Pinned" in lat:
        p(f"- Ring placement: a dependent load from GPU memory takes {lat['Latency_GPU']:.0f} ns, one from pinned host "
          f"memory {lat['Latency_Pinned']:.0f} ns. The GPU posts and polls on every message, so rings and records stay in "
          f"GPU memory by default; host rings (NUMA-local) are for NICs that cannot read GPU memory.")
    zc = {r.family: r.gbs for r in method.values() if r.family.startswith("ZeroCopy_") and r.log2 == 20}
    if "ZeroCopy_GPUToWC" in zc and "ZeroCopy_GPUToPinned" in zc:
        p(f"- WC or coherent host rings: GPU stores into write-combined memory reach {zc['ZeroCopy_GPUToWC']:.1f} GB/s, into "
          f"coherent pinned memory {zc['ZeroCopy_GPUToPinned']:.1f} GB/s (1 MiB). The CPU engine and the NIC read what the "
          f"GPU writes, and CPU reads of WC memory are uncached, so host rings are coherent unless the GPU only writes them.")
    s1 = sq.get(("AtomicRMW_SharedQueue_Shared", 1024))
    e1 = sq.get(("AtomicRMW_SharedQueue_Exclusive", 1024))
    if s1 and e1:
        p(f"- Shared vs exclusive posting: 1024 posters reserve {s1.get('reservations_per_us'):.1f} slots/µs on one shared "
          f"counter and {e1.get('reservations_per_us'):.1f} slots/µs on their own queues. Ownership::kExclusive is the fast "
          f"path whenever a warp or block can own its QP; kShared is for many posters on few queues.")
    if errs:
        p("\n## Rows with an error\n")
        for r in errs:
            p(f"- {r.raw['name']}: {r.error}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
