#!/usr/bin/python3
"""medians.py - one Markdown table line per message size from several runs of a perf program
(perf/'s tables) done several ways, each way run several rounds: every forced way's median
time, the cost model's (HCCL_ALGO unset) median, the algorithm the model chose (from its runs'
traces, HCCL_TRACE_FILE, mapped to a forced way by --map), the fastest forced way, and the
chosen way's median over the fastest one's (1.00: the model chose the fastest; issue 58 asks
for at most 1.10). Where the choice maps to no forced way (staged cannot be forced) the
model's own median is the numerator. Medians of the forced ways, not the model's own runs,
because they are the same algorithm: on pretend servers the same job's time varied 1.8x from
run to run (2+1, allreduce of 4 KiB, 200 calls a run, 2026-12-07), so a comparison of the two
columns would judge the machine. bench/uneven.sh and bench/plan8.sh print their tables with it.

    python3 bench/medians.py --label "4+2+1 | allreduce" --column inplace \
        --way ring=OUT.0.* --way tree=OUT.1.* ... --chosen unset=OUT.3.* \
        --trace 'TRACE.*.json' --collective allreduce --map 'through leaders=leaders' ...

--column: outofplace or inplace, the time column (us) of the perf table used. --label: the
first cells of each line. --map SUBSTRING=WAY: an algorithm name containing SUBSTRING is WAY
(the first that matches). --collective: the trace's name of it (allreduce, reduce-scatter,
allgather, ...). --ranks N: the group's ranks, for allgather and reduce-scatter, whose trace
counts a rank's block where the table gives the whole buffer (1 unset). A way whose files are
missing or have no line of a size is n/a there.
"""
import argparse
import glob
import json
import statistics

DTYPE_BYTES = {"float": 4, "fp32": 4, "float32": 4}


def chosen_algos(pattern, collective, ranks):
    """{bytes: algorithm name} from the traces' calls of `collective` (the last name wins), a
    call's bytes times `ranks` (a rank's block in the trace, the whole in the table)."""
    out = {}
    for name in sorted(glob.glob(pattern)):
        try:
            with open(name) as f:
                d = json.load(f)
        except (OSError, ValueError):
            continue
        for e in d.get("traceEvents", []) if isinstance(d, dict) else d:
            a = e.get("args") or {}
            if e.get("name") == collective and "algo" in a and "count" in a:
                out[int(a["count"]) * DTYPE_BYTES.get(a.get("dtype"), 4) * ranks] = a["algo"]
    return out


def times(pattern, column):
    """{size: [time, ...]} over the files matching pattern."""
    out = {}
    for name in sorted(glob.glob(pattern)):
        with open(name) as f:
            for line in f:
                f_ = line.split()
                # size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
                if len(f_) >= 13 and f_[0].isdigit() and f_[2] in ("float", "fp32", "float32"):
                    t = f_[5] if column == "outofplace" else f_[9]
                    try:
                        out.setdefault(int(f_[0]), []).append(float(t))
                    except ValueError:
                        pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label")
    ap.add_argument("--column", choices=("outofplace", "inplace"), default="inplace")
    ap.add_argument("--way", action="append", default=[], metavar="NAME=GLOB")
    ap.add_argument("--chosen", metavar="NAME=GLOB")
    ap.add_argument("--trace", metavar="GLOB", help="the model's runs' trace files")
    ap.add_argument("--collective", default="allreduce")
    ap.add_argument("--map", action="append", default=[], metavar="SUBSTRING=WAY")
    ap.add_argument("--ranks", type=int, default=1)
    a = ap.parse_args()
    if a.label is None or a.chosen is None:  # checked here, so an unknown flag is named first
        ap.error("--label and --chosen are required")
    ways = [w.split("=", 1) for w in a.way]
    names = [w[0] for w in ways]
    chosen = a.chosen.split("=", 1)
    data = [times(g, a.column) for _, g in ways]
    mine = times(chosen[1], a.column)
    algos = chosen_algos(a.trace, a.collective, a.ranks) if a.trace else {}
    maps = [m.split("=", 1) for m in a.map]
    sizes = sorted(set(mine).union(*[set(d) for d in data]))
    for size in sizes:
        med = [statistics.median(d[size]) if size in d else None for d in data]
        m = statistics.median(mine[size]) if size in mine else None
        cells = " | ".join("n/a" if v is None else f"{v:.1f}" for v in med + [m])
        algo = algos.get(size)
        way = next((w for sub, w in maps if algo and sub in algo), None)
        num = med[names.index(way)] if way in names else m
        known = [(v, names[i]) for i, v in enumerate(med) if v is not None]
        best = min(known) if known else None
        ratio = "n/a" if best is None or num is None or best[0] <= 0 else f"{num / best[0]:.2f}"
        said = f"{way} ({algo})" if way else (algo or "n/a")
        print(f"| {a.label} | {size} | {cells} | {said} | {best[1] if best else 'n/a'} | {ratio} |")


if __name__ == "__main__":
    main()
