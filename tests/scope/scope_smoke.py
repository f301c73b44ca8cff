#!/usr/bin/env python3
"""gv_scope on a GPU, every family at one size (1 MiB; latency chains and atomics at one
point each), under a time limit: every row must run (each verifies its data: copy checksums,
zero-copy words, page touches, the pointer chase's end, every grid a device-side launch made,
every atomic word against the host) and
report sane figures. Exit 77 (skip) without a GPU.

    scope_smoke.py <gv_scope> <gv_has_gpu> [OUT.json]
"""
import json
import os
import subprocess
import sys
import tempfile

FAMILIES = ["cudaMemcpyAsync_", "ZeroCopy_", "UM_Demand_", "UM_Prefetch_", "UM_Latency_", "Latency_GPU",
            "Latency_Pinned", "cudart_kernel", "cudart_cudaGraphLaunch", "cudart_cudaStreamSynchronize",
            "cudart_kernel_TailLaunch_Device", "cudart_kernel_FireAndForget_Device",
            "cudart_cudaGraphLaunch_TailLaunch_Device", "cudart_cudaGraphLaunch_FireAndForget_Device",
            "AtomicRMW_FetchAdd_", "AtomicRMW_FetchAddUsed_", "AtomicRMW_CAS_", "AtomicRMW_Exch_", "AtomicRMW_Min_",
            "AtomicRMW_Max_", "AtomicRMW_SharedQueue_Shared", "AtomicRMW_SharedQueue_Exclusive"]
# Sized families at 2^20 B, plain rows included; atomics: every op and pattern at device and
# system scope on device memory and block scope on host memory, at contention 32, padding 1.
FILTER = ("^Comm_(Plain_)?(cudaMemcpy|ZeroCopy|UM_|Latency|cudart)"
          "|^Comm_AtomicRMW_[A-Za-z]+_[A-Za-z]+_(Device|System)_GPU/[0-9]+/0/contention:32/padding:1/"
          "|^Comm_AtomicRMW_[A-Za-z]+_Contiguous_Block_Pinned/[0-9]+/0/contention:32/padding:1/"
          "|^Comm_Plain_AtomicRMW_FetchAdd_Contiguous_Device_GPU"
          "|^Comm_AtomicRMW_SharedQueue_[A-Za-z]+/[0-9]+/0/posters:(1|1024)/")


def main():
    gv_scope, has_gpu = sys.argv[1], sys.argv[2]
    probe = subprocess.run([has_gpu], capture_output=True, text=True)
    if probe.returncode != 0:
        print(probe.stdout.strip() or "skipped: no GPU")
        return 77
    out = sys.argv[3] if len(sys.argv) > 3 else os.path.join(tempfile.mkdtemp(), "smoke.json")
    cmd = [gv_scope, "--cuda", "0", "--sizes", "20:20", "--benchmark_min_time=0.01", "--benchmark_filter=" + FILTER,
           "--benchmark_out=" + out, "--benchmark_out_format=json"]
    print(" ".join(cmd), flush=True)
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    sys.stdout.write(run.stderr[-4000:])
    if run.returncode != 0:
        print(run.stdout[-4000:])
        print(f"FAIL: gv_scope exited {run.returncode}")
        return 1
    rows = json.load(open(out))["benchmarks"]
    bad = []
    seen = {f: 0 for f in FAMILIES}
    for r in rows:
        name = r["name"]
        for f in FAMILIES:
            if f in name:
                seen[f] += 1
        if r.get("error_occurred"):
            bad.append(f"{name}: {r.get('error_message')}")
            continue
        bps = r.get("bytes_per_second", 0)
        if "AtomicRMW" not in name and "cudart" not in name and "Latency" not in name and not 1e6 < bps < 2e13:
            bad.append(f"{name}: {bps:.3g} B/s is not a rate this machine can have")
        if "latency_ns" in r and not 50 < r["latency_ns"] < 1e6:
            bad.append(f"{name}: latency {r['latency_ns']:.1f} ns")
        if "ops_per_us" in r and not 1 < r["ops_per_us"] < 1e8:
            bad.append(f"{name}: {r['ops_per_us']:.3g} atomic ops/us")
        # Fire-and-forget launches overlap (one thread issues, the children run as they come).
        if "per_launch_ns" in r and not (10 if "FireAndForget" in name else 100) < r["per_launch_ns"] < 1e6:
            bad.append(f"{name}: {r['per_launch_ns']:.1f} ns per launch")
    missing = [f for f, n in seen.items() if n == 0]
    print(f"{len(rows)} rows; families: " + ", ".join(f"{f}{n}" for f, n in seen.items()))
    for b in bad:
        print("FAIL:", b)
    for m in missing:
        print("FAIL: no row of family", m)
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main())
