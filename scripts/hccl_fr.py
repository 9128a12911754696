#!/usr/bin/env python3
"""hccl-fr - reads the flight recorder's files (HCCL_FLIGHT_RECORDER_DIR, one per rank and
communicator: hccl-fr-<comm>-<rank>.jsonl, docs/flight-recorder.md) and says, for each
communicator: which ranks wrote no file, the first call whose fingerprint differs between ranks,
the ranks that are behind (their last call started is older than the others'), and what each
rank waits for, with the reasons the ranks gave.

Usage: hccl-fr DIR [--json]

Exit 0 when the files were read (whatever they say), 2 when none could be.
"""
import collections
import glob
import json
import os
import sys


def load(path):
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if not lines or lines[0].get("format") != "hccl-flight-recorder":
        raise ValueError("not a flight recorder file")
    return lines[0], lines[1:]


def call_name(e):
    s = "call %d (%s" % (e["seq"], e["kind"])
    if e["kind"] in ("send", "recv"):
        s = "%s (%s" % (e["kind"], "peer %d" % e["peer"] if e["peer"] >= 0 else "any peer")
    if e.get("count") is not None:
        s += ", %d x %s" % (e["count"], e["dtype"])
    if e.get("op"):
        s += " " + e["op"]
    if e.get("root", -1) >= 0:
        s += ", root %d" % e["root"]
    return s + ")"


def analyse(comm, ranks):
    """ranks: {rank: (header, entries)}. Returns (lines of text, summary dict)."""
    out = []
    nranks = max(h["nranks"] for h, _ in ranks.values())
    missing = [r for r in range(nranks) if r not in ranks]
    out.append("communicator %s: %d ranks, files from %d" % (comm, nranks, len(ranks)))
    if missing:
        out.append("  no file from rank%s %s: a rank writes one when it fails or gets SIGUSR1, so "
                   "it did not fail, or it was stopped or killed, or it never ran" %
                   ("s" if len(missing) > 1 else "", ", ".join(map(str, missing))))
    # Collectives by sequence number on each rank.
    by_seq = collections.defaultdict(dict)
    last_started = {}
    for r, (h, entries) in ranks.items():
        coll = [e for e in entries if e["seq"] > 0]
        for e in coll:
            by_seq[e["seq"]][r] = e
        last_started[r] = max([e["seq"] for e in coll], default=h.get("calls_started", 0))
    diverged = None
    for seq in sorted(by_seq):
        fps = {}
        for r, e in by_seq[seq].items():
            fps.setdefault((e["kind"], e["count"], e["dtype"], e["op"], e["root"]), []).append(r)
        if len(fps) > 1:
            diverged = seq
            out.append("  first diverging call: %d" % seq)
            for _, rs in sorted(fps.items(), key=lambda kv: kv[1]):
                out.append("    rank%s %s: %s" % ("s" if len(rs) > 1 else "",
                                                  ",".join(map(str, sorted(rs))),
                                                  call_name(by_seq[seq][rs[0]])))
            break
    if diverged is None:
        out.append("  no call differs between the ranks' records")
    top = max(last_started.values(), default=0)
    # Who waits for whom (each file's header, read when it was written): follow each rank's
    # waits to where they end: a rank with no file, a rank inside no wait, or a cycle.
    waits = {r: h["waiting_for"] for r, (h, _) in ranks.items()
             if h.get("in_call") and h.get("waiting_for", -1) >= 0}
    ends = collections.Counter()
    cycles = 0
    for r in ranks:
        seen, p = [], r
        while p in waits and p not in seen:
            seen.append(p)
            p = waits[p]
        if p in seen:
            cycles += 1
        elif p != r or p not in ranks:
            ends[p] += 1
    behind = sorted(r for r, s in last_started.items() if s < top and r not in waits)
    for r in behind:
        out.append("  rank %d is behind: its last call started is %d, others reached %d, and it "
                   "waits for no rank" % (r, last_started[r], top))
    for r in sorted(ranks):
        h, entries = ranks[r]
        open_calls = [e for e in entries if e["state"] in ("started", "failed", "enqueued")]
        cur = open_calls[-1] if open_calls else None
        line = "  rank %d: %s" % (r, call_name(cur) + " " + cur["state"] if cur else "no call open")
        if r in waits:
            line += ", waiting for rank %d" % waits[r]
        out.append(line)
        if h.get("error"):
            out.append("    said: %s" % h["error"])
    if cycles:
        out.append("  the waits of %d ranks go round in a cycle (their calls differ?)" % cycles)
    suspects = []
    for r, n in ends.most_common():
        why = ("it wrote no file (stopped, killed, or never started)" if r not in ranks else
               "it waits for no rank (outside the library, or busy)")
        out.append("  the waits of %d rank%s lead to rank %d: %s" % (n, "s" if n > 1 else "", r,
                                                                      why))
        suspects.append(r)
    for r in missing + behind:
        if r not in suspects:
            suspects.append(r)
    if suspects:
        out.append("  => look at rank%s %s" % ("s" if len(suspects) > 1 else "",
                                               ", ".join(map(str, suspects))))
    return out, {"comm": comm, "nranks": nranks, "missing": missing, "diverged": diverged,
                 "behind": behind, "wait_ends": dict(ends), "cycles": cycles,
                 "suspects": suspects}


def main():
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__)
        return
    unknown = [a for a in sys.argv[1:] if a.startswith("-") and a != "--json"]
    if unknown:
        sys.exit("hccl-fr: unknown option %s\n\n%s" % (unknown[0], __doc__))
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    files = sorted(glob.glob(os.path.join(args[0], "hccl-fr-*.jsonl")))
    comms = collections.defaultdict(dict)
    for f in files:
        try:
            h, entries = load(f)
        except (OSError, ValueError) as e:
            print("hccl-fr: skipping %s: %s" % (f, e), file=sys.stderr)
            continue
        comms[h["comm"]][h["rank"]] = (h, entries)
    if not comms:
        print("hccl-fr: no flight recorder files in %s" % args[0], file=sys.stderr)
        sys.exit(2)
    summaries = []
    for comm in sorted(comms):
        text, summary = analyse(comm, comms[comm])
        summaries.append(summary)
        if "--json" not in sys.argv:
            print("\n".join(text))
    if "--json" in sys.argv:
        print(json.dumps(summaries, indent=1))


if __name__ == "__main__":
    main()
