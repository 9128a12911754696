#!/usr/bin/python3
"""trace.py - the per-rank files HCCL_TRACE_FILE writes (Chrome trace JSON), joined or drawn.

    HCCL_TRACE_FILE=/tmp/t.%r.json npu-launch --device-list 0-3 -- build/bin/allreduce_perf ...
    python3 scripts/trace.py merge /tmp/t.json /tmp/t.*.json    # one file for Perfetto / chrome://tracing
    python3 scripts/trace.py plot /tmp/t.png /tmp/t.*.json [--from-ms A --to-ms B]

merge keeps every event (each rank is its own process row, named "rank N (device D)").
plot draws one row per rank: collective calls as bars labelled with their name, and the waits
that slept inside them (the peer waited for) in red, on a common time axis in milliseconds
from the first event; --from-ms/--to-ms cut a window (the default is the last 5 calls of rank
0's file).
"""
import argparse
import json
import sys


def load(paths):
    events, meta = [], []
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        for e in d["traceEvents"]:
            (meta if e.get("ph") == "M" else events).append(e)
    return events, meta


def merge(out, paths):
    events, meta = load(paths)
    events.sort(key=lambda e: e["ts"])
    with open(out, "w") as f:
        json.dump({"traceEvents": meta + events, "displayTimeUnit": "ms"}, f)
    print("%s: %d events from %d files" % (out, len(events), len(paths)))


def plot(out, paths, t_from, t_to):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    events, _ = load(paths)
    if not events:
        sys.exit("no events in " + " ".join(paths))
    t0 = min(e["ts"] for e in events)
    calls = sorted((e for e in events if e["cat"] == "collective"), key=lambda e: e["ts"])
    if t_from is None:
        r0 = [e for e in calls if e["pid"] == 0] or calls
        tail = r0[-5:]
        t_from = (tail[0]["ts"] - t0) / 1e3
        t_to = (tail[-1]["ts"] + tail[-1]["dur"] - t0) / 1e3
    ranks = sorted({e["pid"] for e in events})
    fig, ax = plt.subplots(figsize=(11, 0.6 * len(ranks) + 1.4))
    for e in events:
        s, d = (e["ts"] - t0) / 1e3, e["dur"] / 1e3
        if s + d < t_from or s > t_to:
            continue
        y = ranks.index(e["pid"])
        if e["cat"] == "collective":
            ax.broken_barh([(s, d)], (y - 0.35, 0.7), color="#4c72b0", edgecolor="white",
                           linewidth=0.5, zorder=1)
            if d > (t_to - t_from) / 40:
                ax.text(s + d / 2, y - 0.2, e["name"], ha="center", va="center", color="white",
                        fontsize=7, clip_on=True, zorder=3)
        else:
            ax.broken_barh([(s, d)], (y - 0.12, 0.24), color="#c44e52", zorder=2)
    ax.set_xlim(t_from, t_to)
    ax.set_yticks(range(len(ranks)))
    ax.set_yticklabels(["rank %d" % r for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("ms (blue: collective calls; red: waits that slept, for a peer)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("%s: ranks %s, %.3f-%.3f ms" % (out, ranks, t_from, t_to))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["merge", "plot"])
    ap.add_argument("out", help="the merged JSON (merge) or the PNG (plot) to write")
    ap.add_argument("inputs", nargs="+", help="the per-rank trace files")
    ap.add_argument("--from-ms", type=float, help="plot: start of the window")
    ap.add_argument("--to-ms", type=float, help="plot: end of the window")
    a = ap.parse_args()
    if a.cmd == "merge":
        merge(a.out, a.inputs)
    else:
        plot(a.out, a.inputs, a.from_ms, a.to_ms)


if __name__ == "__main__":
    main()
