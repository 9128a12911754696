#!/usr/bin/env python3
"""test_labels.py - the suite can be run in parts, and each test says what it is for.

Asks ctest itself (`ctest -N --show-only=json-v1` in the build) for every test and its labels,
and reads the table of tests/README.md (`| `name` | what it checks |`). Fails, naming the test,
when:
  - a test has not exactly one of the speed labels quick, medium, slow (tests/CMakeLists.txt,
    HCCL_QUICK_TESTS and HCCL_SLOW_TESTS, gives them);
  - a torch_* test lacks the label torch;
  - a test has no row in tests/README.md, or two, or its row says nothing;
  - a row names a test that neither this build nor tests/CMakeLists.txt knows;
  - a test source file (every .c .h .cpp .py .sh below tests/, the fuzz corpus aside) has no
    row in tests/README.md's file table (`| file | what it covers |`), or two, or a row that
    says nothing, or a row names no file;
  - a test has no row in tests/README.md's time table (between `<!-- suite-times: begin -->`
    and `<!-- suite-times: end -->`, written by scripts/suite_times.py from ctest's JUnit
    reports), or a row there names no test of this build or of tests/CMakeLists.txt;
  - README.md's count of the quick set ("the quick set (N tests") is not this build's.

    test_labels.py --build BUILD_DIR --root SOURCE_DIR [--ctest CTEST]
"""
import argparse
import json
import os
import re
import subprocess
import sys

SPEEDS = ("quick", "medium", "slow")
ROW = re.compile(r"^\|\s*`([A-Za-z0-9_]+)`\s*\|\s*(.*?)\s*\|\s*$")


def ctest_tests(ctest, build):
    out = subprocess.run([ctest, "--test-dir", build, "-N", "--show-only=json-v1"],
                         check=True, text=True, stdout=subprocess.PIPE).stdout
    tests = {}
    for t in json.loads(out)["tests"]:
        labels = []
        for p in t.get("properties", []):
            if p["name"] == "LABELS":
                labels = p["value"]
        tests[t["name"]] = labels
    return tests


def readme_rows(path):
    rows = {}
    dup = []
    in_tests = False  # the table of tests, after its "| test | ... |" header
    for line in open(path, encoding="utf-8"):
        if line.startswith("| test |"):
            in_tests = True
        elif in_tests and not line.startswith("|"):
            break  # the table ended (the time table further down has rows of its own)
        m = ROW.match(line.strip())
        if not in_tests or not m:
            continue
        if m.group(1) in rows:
            dup.append(m.group(1))
        rows[m.group(1)] = m.group(2)
    return rows, dup


FILE_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*(.*?)\s*\|\s*$")
SOURCE_EXT = (".c", ".h", ".cpp", ".py", ".sh")


def file_errors(root):
    """Problems with tests/README.md's file table against the files below tests/."""
    tests = os.path.join(root, "tests")
    have = set()
    for dirpath, dirnames, files in os.walk(tests):
        dirnames[:] = [d for d in dirnames if d not in ("corpus", "__pycache__")]
        for f in files:
            if f.endswith(SOURCE_EXT):
                have.add(os.path.relpath(os.path.join(dirpath, f), tests))
    rows, errors, in_files = {}, [], False
    for line in open(os.path.join(tests, "README.md"), encoding="utf-8"):
        if line.startswith("| file | what it covers |"):
            in_files = True
            continue
        if in_files and not line.startswith("|"):
            in_files = False
        m = FILE_ROW.match(line.strip()) if in_files else None
        if not m:
            continue
        name, what = m.groups()
        if name in rows:
            errors.append("tests/README.md: two rows for the file %s" % name)
        rows[name] = what
        if name not in have:
            errors.append("tests/README.md: row for the file %s, which is no file of tests/"
                          % name)
        elif len(what) < 10:
            errors.append("tests/README.md: the row of the file %s says too little" % name)
    for f in sorted(have - set(rows)):
        errors.append("tests/%s: no row in tests/README.md's file table saying what it covers "
                      "(| `%s` | ... |)" % (f, f))
    return errors


TIME_ROW = re.compile(r"^\|\s*`([A-Za-z0-9_]+)`\s*\|\s*([0-9.]+|-)\s*\|")


def time_rows(path):
    """The tests of tests/README.md's time table (None when the table is missing)."""
    text = open(path, encoding="utf-8").read()
    if "<!-- suite-times: begin -->" not in text or "<!-- suite-times: end -->" not in text:
        return None
    body = text.split("<!-- suite-times: begin -->", 1)[1].split("<!-- suite-times: end -->")[0]
    return [m.group(1) for m in map(TIME_ROW.match, body.splitlines()) if m]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--ctest", default="ctest")
    a = ap.parse_args()
    tests = ctest_tests(a.ctest, a.build)
    rows, dup = readme_rows(os.path.join(a.root, "tests", "README.md"))
    cmake = open(os.path.join(a.root, "tests", "CMakeLists.txt"), encoding="utf-8").read()
    errors = ["tests/README.md: two rows for %s" % n for n in dup] + file_errors(a.root)
    for name, labels in sorted(tests.items()):
        speeds = [l for l in labels if l in SPEEDS]
        if len(speeds) != 1:
            errors.append("%s: labels %s; it needs exactly one of quick, medium, slow "
                          "(tests/CMakeLists.txt, HCCL_QUICK_TESTS / HCCL_SLOW_TESTS)"
                          % (name, labels))
        if name.startswith("torch_") and "torch" not in labels:
            errors.append("%s: a torch_hccl test without the label torch" % name)
        if name not in rows:
            errors.append("%s: no row in tests/README.md saying what it checks "
                          "(| `%s` | ... |)" % (name, name))
        elif len(rows[name]) < 10:
            errors.append("tests/README.md: the row of %s says too little: '%s'"
                          % (name, rows[name]))
    times = time_rows(os.path.join(a.root, "tests", "README.md"))
    if times is None:
        errors.append("tests/README.md: no time table (<!-- suite-times: begin --> ... end)")
    else:
        for name in sorted(set(tests) - set(times)):
            errors.append("%s: no row in tests/README.md's time table; run the suite and "
                          "scripts/suite_times.py --main BUILD/ctest-main.xml" % name)
        for name in sorted(set(times) - set(tests)):
            if name not in cmake:
                errors.append("tests/README.md: time row for '%s', which is no test of this "
                              "build or of tests/CMakeLists.txt" % name)
    have_sources = set()
    for dirpath, _, files in os.walk(os.path.join(a.root, "tests")):
        for f in files:
            m = re.match(r"test_(\w+)\.(c|py|sh)$", f)
            if m:
                have_sources.add(m.group(1))
    for name in sorted(rows):
        if name in tests or name in cmake or name in have_sources or \
                name.replace("torch_", "", 1) in have_sources:
            continue
        errors.append("tests/README.md: row for '%s', which is no test of this build or of "
                      "tests/CMakeLists.txt" % name)
    counts = {s: sum(1 for l in tests.values() if s in l) for s in SPEEDS}
    said = re.findall(r"the quick set \((\d+) tests",
                      open(os.path.join(a.root, "README.md"), encoding="utf-8").read())
    if not said:
        errors.append("README.md: no count of the quick set ('the quick set (N tests')")
    for n in said:
        if int(n) != counts["quick"]:
            errors.append("README.md says the quick set has %s tests; this build has %d"
                          % (n, counts["quick"]))
    for e in errors:
        print("FAIL:", e)
    print("%d tests: %s" % (len(tests), ", ".join("%d %s" % (counts[s], s) for s in SPEEDS)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
