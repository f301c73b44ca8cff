#!/usr/bin/env python3
"""The SASS instructions that stall most, from ncu's source page in CSV.

    ncu_top.py SOURCE.csv [N]

SOURCE.csv: `ncu --section SourceCounters --page source --print-source sass --csv ...` (other
lines in the file, the program's own output, are skipped). Prints the columns found, then the N
(default 30) instructions with the most warp stall samples, with their share of all samples.
"""
import csv
import sys


def main():
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with open(path, newline="", errors="replace") as f:
        lines = [l for l in f if l.startswith('"')]
    rows = list(csv.reader(lines))
    head = next((i for i, r in enumerate(rows) if "Source" in r), None)
    if head is None:
        print("ncu_top: no source table (a header with a 'Source' column) in", path)
        return 1
    cols = rows[head]
    print("columns:", " | ".join(cols))
    key = next((c for c in cols if "Stall Sampling (All" in c), None) or next((c for c in cols if "Sampl" in c), None)
    if key is None:
        print("ncu_top: no stall-sampling column")
        return 1
    k, src = cols.index(key), cols.index("Source")
    addr = cols.index("Address") if "Address" in cols else None

    def num(s):
        try:
            return float(s.replace(",", ""))
        except ValueError:
            return 0.0

    body = [r for r in rows[head + 1:] if len(r) == len(cols)]
    total = sum(num(r[k]) for r in body) or 1.0
    print("instructions: %d, %s: %.0f samples" % (len(body), key, total))
    for r in sorted(body, key=lambda r: -num(r[k]))[:n]:
        print("%6.2f%%  %8.0f  %s  %s" % (100 * num(r[k]) / total, num(r[k]), r[addr] if addr is not None else "", r[src]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
