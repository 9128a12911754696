#!/usr/bin/env python3
"""ddp_timeline.py - draws a DDP step's Chrome trace (ddp_train --trace FILE) as a PNG.

    python3 scripts/ddp_timeline.py trace.json timeline.png

One pair of rows per rank: backward (one span per gradient, coloured by layer, from the
previous ready mark to its own) and allreduce (one lane per bucket, from its allreduce call to
its completion as the layer saw it), plus ddp_finish (the wait after backward). Needs matplotlib (Debian: apt-get install python3-matplotlib, then run
it with /usr/bin/python3).
"""
import argparse
import json
import sys


def layer_of(name):
    # "grad fc3.weight" -> "fc3"
    return name.split(" ", 1)[-1].split(".")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="Chrome trace written by ddp_train --trace FILE")
    ap.add_argument("out", help="the PNG to write")
    args = ap.parse_args()
    # Imported after the flags, so that --help works without matplotlib.
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        sys.exit("ddp_timeline.py needs matplotlib: apt-get install python3-matplotlib "
                 "(and run it with /usr/bin/python3)")
    trace = json.load(open(args.trace))
    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    ranks = sorted({e["pid"] for e in spans})
    layers = sorted({layer_of(e["name"]) for e in spans if e["name"].startswith("grad ")})
    cmap = plt.get_cmap("tab10")
    colour = {name: cmap(k % 10) for k, name in enumerate(layers)}
    nb = 1 + max([int(e["name"].split()[1]) for e in spans if e["name"].startswith("bucket ")]
                 or [0])
    bcmap = plt.get_cmap("Set2")

    fig, ax = plt.subplots(figsize=(11, 0.9 + 0.75 * len(ranks)))
    yticks, ylabels = [], []
    for k, r in enumerate(ranks):
        y_bwd = (len(ranks) - 1 - k) * 2.6 + 1.2
        y_ar = y_bwd - 1.1
        for e in spans:
            if e["pid"] != r:
                continue
            x0, w = e["ts"] / 1000.0, e["dur"] / 1000.0
            if e["name"].startswith("grad "):
                ax.broken_barh([(x0, w)], (y_bwd, 0.9), facecolors=colour[layer_of(e["name"])],
                               edgecolor="white", linewidth=0.3)
            elif e["name"] == "ddp_finish":
                ax.broken_barh([(x0, w)], (y_bwd, 0.9), facecolors="none", edgecolor="grey",
                               hatch="///", linewidth=0.5)
            elif e["name"].startswith("bucket "):
                # one lane per bucket: a bucket queued behind another overlaps it in time
                b = int(e["name"].split()[1])
                lane = 0.9 / nb
                ax.broken_barh([(x0, w)], (y_ar + 0.9 - (b + 1) * lane, lane * 0.9),
                               facecolors=bcmap(b % 8), edgecolor="black", linewidth=0.4)
        yticks += [y_bwd + 0.45, y_ar + 0.45]
        ylabels += ["rank %d backward" % r, "rank %d allreduce" % r]
    ax.set_yticks(yticks)
    ax.set_yticklabels(ylabels, fontsize=8)
    ax.set_xlabel("ms since the first rank began backward")
    other = trace.get("otherData", {})
    ax.set_title("DDP step %s on %s ranks: gradient buckets (allreduce) against backward layers"
                 % (other.get("step", "?"), other.get("ranks", len(ranks))), fontsize=10)
    handles = [Patch(facecolor=colour[n], label="backward producing %s" % n) for n in layers]
    handles.append(Patch(facecolor="none", edgecolor="grey", hatch="///",
                         label="ddp_finish (waiting)"))
    handles += [Patch(facecolor=bcmap(b % 8), edgecolor="black", label="bucket %d" % b)
                for b in range(nb)]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
