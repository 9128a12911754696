#!/usr/bin/env python3
"""hccl-fr - reads the flight recorder's files (HCCL_FLIGHT_RECORDER_DIR, one per rank and
communicator: hccl-fr-<run>-<comm>-<rank>.jsonl, docs/flight-recorder.md) of one job and says,
for each of its communicators: which ranks wrote no file, the first call whose fingerprint
differs between ranks, the ranks that are behind (their last call started is older than the
others'), and what each rank waits for, with the reasons the ranks gave.

Usage: hccl-fr DIR [--run ID] [--json]

Each start of a job (a restart too) has its own run id, which its files carry. When the folder
holds the files of several jobs (it was used again, or the job restarted), hccl-fr lists them,
one line each, and reads the newest; --run ID reads the one whose run id starts with ID. Files of
a libhccl older than run ids count as one job, run "none".

Exit 0 when the files were read (whatever they say), 2 when none could be or the arguments
are wrong.
"""
import collections
import glob
import json
import os
import sys
import time

OLD_RUN = "none"  # the run of files without one (format version 1)


def load(path):
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if not lines or lines[0].get("format") != "hccl-flight-recorder":
        raise ValueError("not a flight recorder file")
    if lines[0].get("version", 1) > 2:
        raise ValueError("format version %s, from a newer libhccl; this hccl-fr reads versions "
                         "1 and 2" % lines[0]["version"])
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


def when(us):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(us / 1e6)) if us else "?"


def plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def jobs_in(loaded):
    """loaded: [(header, entries)]. Returns the jobs, oldest first: dicts with the run, its
    start and last write (microseconds since 1970) and its files by communicator and rank."""
    jobs = {}
    for h, entries in loaded:
        run = h.get("run", OLD_RUN)
        j = jobs.setdefault(run, {"run": run, "start": h.get("run_start_us", 0), "last": 0,
                                  "first": h.get("time_us", 0), "files": 0, "nranks": 0,
                                  "comms": collections.defaultdict(dict)})
        j["comms"][h["comm"]][h["rank"]] = (h, entries)
        j["files"] += 1
        j["nranks"] = max(j["nranks"], h["nranks"])
        j["last"] = max(j["last"], h.get("time_us", 0))
        j["first"] = min(j["first"], h.get("time_us", 0))
    # Files without a run have no start either: their first write stands in for it.
    return sorted(jobs.values(), key=lambda j: j["start"] or j["first"])


def job_line(j):
    began = j["start"] or j["first"]
    started = ("started %s" % when(began) if j["start"] else
               "files of a libhccl without run ids, first written %s" % when(began))
    last = when(j["last"])
    if last[:10] == when(began)[:10]:
        last = last[11:]  # the same day
    return "run %s: %s, last written %s; %s, %s, %s" % (
        j["run"], started, last, plural(j["files"], "file"),
        plural(len(j["comms"]), "communicator"), plural(j["nranks"], "rank"))


def choose(jobs, want, folder):
    """The job to read: the newest, or the one whose run starts with want. Returns it and the
    lines that say what was chosen and what is ignored."""
    if want is None:
        job = jobs[-1]
    else:
        found = [j for j in jobs if j["run"].startswith(want.lower())]
        if len(found) != 1:
            print("hccl-fr: %s in %s has a run id starting with '%s'; the jobs there:\n  %s" %
                  ("no job" if not found else "more than one job", folder, want,
                   "\n  ".join(job_line(j) for j in jobs)), file=sys.stderr)
            sys.exit(2)
        job = found[0]
    if len(jobs) == 1:
        return job, [job_line(job)]
    lines = ["%d jobs in %s, oldest first:" % (len(jobs), folder)]
    lines += ["  " + job_line(j) for j in jobs]
    at = jobs.index(job)
    ignored = []
    for side, others in (("earlier", jobs[:at]), ("later", jobs[at + 1:])):
        if others:
            ignored.append("%s of %s" % (plural(sum(j["files"] for j in others), "file"),
                                         plural(len(others), side + " job")))
    lines.append("reading run %s (%s); ignoring %s" % (
        job["run"], "the newest; --run ID reads another" if want is None else "--run " + want,
        " and ".join(ignored)))
    return job, lines


def usage_error(what):
    """One line on stderr naming what is wrong, and exit 2 (as argparse does)."""
    print("hccl-fr: %s; usage: hccl-fr DIR [--run ID] [--json] (hccl-fr --help)" % what,
          file=sys.stderr)
    sys.exit(2)


def main():
    argv = sys.argv[1:]
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return
    args, want, i = [], None, 0
    while i < len(argv):
        a = argv[i]
        if a == "--run" and i + 1 < len(argv):
            want = argv[i + 1]
            i += 1
        elif a.startswith("--run="):
            want = a[len("--run="):]
        elif a == "--run":
            usage_error("--run needs a run id (or the start of one)")
        elif a.startswith("-") and a != "--json":
            usage_error("unknown option %s" % a)
        elif a != "--json":
            args.append(a)
        i += 1
    if len(args) != 1:
        usage_error("expected one folder, got %d arguments" % len(args))
    files = sorted(glob.glob(os.path.join(args[0], "hccl-fr-*.jsonl")))
    loaded = []
    for f in files:
        try:
            loaded.append(load(f))
        except (OSError, ValueError) as e:
            print("hccl-fr: skipping %s: %s" % (f, e), file=sys.stderr)
    if not loaded:
        print("hccl-fr: no flight recorder files in %s" % args[0], file=sys.stderr)
        sys.exit(2)
    as_json = "--json" in argv
    job, lines = choose(jobs_in(loaded), want, args[0])
    print("\n".join(lines), file=sys.stderr if as_json else sys.stdout)
    summaries = []
    for comm in sorted(job["comms"]):
        text, summary = analyse(comm, job["comms"][comm])
        summary["run"] = job["run"]
        summaries.append(summary)
        if not as_json:
            print("\n".join(text))
    if as_json:
        print(json.dumps(summaries, indent=1))


if __name__ == "__main__":
    main()
