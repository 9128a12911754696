#!/usr/bin/env python3
"""suite_times.py - writes each test's last measured time into tests/README.md's time table.

    python3 scripts/suite_times.py [--main FILE] [--debian FILE] [--asan FILE] [--note TEXT]
                                   [--readme tests/README.md]

Each FILE is the JUnit report a pass of the suite wrote (`ctest --output-junit FILE`, or that
pass's console output: what CI prints;
scripts/quickstart.sh test writes BUILD_DIR/ctest-main.xml and BUILD_DIR/ctest-debian.xml,
scripts/sanitize.sh build-asan/ctest.xml). The table between the markers
`<!-- suite-times: begin -->` and `<!-- suite-times: end -->` gets one row per test of the
main pass (or of any pass given), slowest first, with its seconds in each pass given ("-" where
that pass does not run it; a pass not given keeps the column it had); the last column, where the
time goes, is written by hand and kept. --note replaces the line above the table (when, where,
which commit, each pass's wall time). The `labels` test checks that every test has a row.
"""
import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

PASSES = ("main", "debian", "asan")
BEGIN, END = "<!-- suite-times: begin -->", "<!-- suite-times: end -->"
HEADER = ("| test | main pass s | Debian pass s | ASan pass s | where the time goes |\n"
          "| --- | ---: | ---: | ---: | --- |\n")
ROW = re.compile(r"^\|\s*`([A-Za-z0-9_]+)`\s*\|([^|]*)\|([^|]*)\|([^|]*)\|(.*)\|\s*$")


CONSOLE = re.compile(r"Test +#\d+: (\S+) \.+\**\s*(\S.*?)\s+([0-9.]+) sec")


def junit_times(path):
    """{test: seconds} of one ctest JUnit report, or of ctest's console output (what CI
    prints), skipped tests as None."""
    times = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if not text.lstrip().startswith("<"):
        for m in CONSOLE.finditer(text):
            times[m.group(1)] = None if "Skipped" in m.group(2) else float(m.group(3))
        return times
    for case in ET.parse(path).getroot().iter("testcase"):
        skipped = case.find("skipped") is not None or case.get("status") == "notrun"
        times[case.get("name")] = None if skipped else float(case.get("time", "0"))
    return times


def read_table(text):
    """(rows {test: [main, debian, asan, why]}, note line, text before, text after)."""
    if BEGIN not in text or END not in text:
        sys.exit("suite_times.py: tests/README.md has no %s ... %s block" % (BEGIN, END))
    head, rest = text.split(BEGIN, 1)
    body, tail = rest.split(END, 1)
    rows, note = {}, ""
    for line in body.splitlines():
        m = ROW.match(line.strip())
        if m:
            rows[m.group(1)] = [m.group(k).strip() for k in range(2, 6)]
        elif line.strip() and not line.startswith("|"):
            note = line.strip()
    return rows, note, head, tail


def seconds(v):
    try:
        return float(v)
    except ValueError:
        return -1.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for p in PASSES:
        ap.add_argument("--" + p, metavar="FILE", help="JUnit report of the %s pass" % p)
    ap.add_argument("--note", help="the line above the table")
    ap.add_argument("--readme", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                     "README.md"))
    a = ap.parse_args()
    text = open(a.readme, encoding="utf-8").read()
    rows, note, head, tail = read_table(text)
    given = {p: junit_times(getattr(a, p)) for p in PASSES if getattr(a, p)}
    if not given and a.note is None:
        sys.exit("suite_times.py: give at least one of --main, --debian, --asan (or --note)")
    # The rows are the main pass's tests (every other pass runs a subset of them); without a
    # main report, the rows the table has.
    names = set(given["main"]) if "main" in given else set(rows)
    for n in names:
        row = rows.setdefault(n, ["-", "-", "-", ""])
        for k, p in enumerate(PASSES):
            if p in given:
                t = given[p].get(n, "absent")
                row[k] = "-" if t in ("absent", None) else "%.1f" % t
    for n in list(rows):
        if n not in names:
            del rows[n]
    order = sorted(rows, key=lambda n: (-max(seconds(v) for v in rows[n][:3]), n))
    out = [BEGIN, "\n", (a.note if a.note is not None else note), "\n\n", HEADER]
    for n in order:
        r = rows[n]
        out.append("| `%s` | %s | %s | %s | %s |\n" % (n, r[0], r[1], r[2], r[3]))
    new = head + "".join(out) + END + tail
    with open(a.readme, "w", encoding="utf-8") as f:
        f.write(new)
    print("suite_times.py: %d rows written to %s" % (len(rows), a.readme))
    return 0


if __name__ == "__main__":
    sys.exit(main())
