#!/usr/bin/env python3
"""test_docs.py - every command README.md and docs/ show runs as written, and their sample
outputs are what the programs print.

Each fenced block of shell (```sh) in README.md, docs/*.md and the folder READMEs carries a
marker on the line above it, an HTML comment a reader of the rendered page does not see:

  <!-- run -->                      the block runs as written (bash, from the top of the tree,
                                    with build/ meaning this build) and must exit 0
  <!-- run: exit 2 expect "text" "more" timeout 300 -->
                                    ... must exit 2 and print each text (stdout and stderr)
  <!-- run: needs build/deepspeed-venv -->
                                    ... only where that path (from the top of the tree) exists,
                                    else counted as skipped (the client libraries' venv, which
                                    quickstart.sh test makes for pip's torch only)
  <!-- run: by tests/torch/test_x.py#name -->
                                    ... run, as written, by that test and not here: the test
                                    runs the same command, and once is enough (docblocks.py);
                                    here: the file exists and names "docs/page.md" and the key
  <!-- run: same docs/page.md -->    ... not run here: each of its commands is a command of a run
                                    block of that page, which runs there (the README's quick
                                    tour repeats the guides' commands; once is enough)
  <!-- no-run: why -->              not run here (several servers, Slurm, installs ...)
  <!-- output -->, <!-- output: exact -->, <!-- output: host vm -->
                                    on a ```text block: a sample of the last run block's output;
                                    its lines must appear in that output in order, "..." matching
                                    anything, numbers matching any number (exact: numbers too;
                                    host vm: the word vm stands for this machine's host name)
  <!-- check: diff A B -->          on a ```diff block: it is `diff -u A B` without its header

A shell block without a marker fails the test, so a new command is either run or says why not.
Every block must name its language (```text for outputs), so no command hides unlabelled.

    test_docs.py SOURCE_DIR BUILD_DIR [PYTHON]     (ctest `docs`; PYTHON: the torch build's)
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from docblocks import blocks, commands, doc_files, make_tree, parse_run_args, reader_env, \
    sample_missing  # noqa: E402

SHELL = ("sh", "bash", "shell", "console")


def main():
    src, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    python = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else ""
    root, bind = make_tree(src, build, python)
    env = dict(reader_env(os.environ), PATH=bind + ":" + os.environ["PATH"])
    SKIPPED = object()  # what `last` holds after a run block that was skipped
    failures = []
    counts = {"run": 0, "no-run": 0, "output": 0, "diff": 0, "skipped": 0, "by": 0, "same": 0}
    try:
        for path in doc_files(src):
            rel = os.path.relpath(path, src)
            last = None  # the last run block's output in this file
            for line, lang, kind, args, body in blocks(path):
                where = "%s:%d" % (rel, line)
                if not lang:
                    failures.append("%s: a block without a language (```text for outputs)" % where)
                    continue
                if lang in SHELL and kind not in ("run", "no-run"):
                    failures.append("%s: a shell block without <!-- run --> or <!-- no-run: why -->"
                                    % where)
                    continue
                if kind == "no-run":
                    if not args:
                        failures.append("%s: <!-- no-run --> without a reason" % where)
                    counts["no-run"] += 1
                elif kind == "run":
                    a = parse_run_args(args)
                    if a["by"]:
                        test = os.path.join(src, a["by"].split("#")[0])
                        text = open(test).read() if os.path.isfile(test) else ""
                        if '"%s"' % rel not in text or '"%s"' % a["by"] not in text:
                            failures.append("%s: run by %s, which does not name \"%s\" and "
                                            "\"%s\"" % (where, a["by"], rel, a["by"]))
                        counts["by"] += 1
                        last = SKIPPED  # its sample is checked where it runs
                        continue
                    if a["same"]:
                        page = os.path.join(src, a["same"])
                        there = [c for _l, _g, k, ar, b in (blocks(page) if os.path.isfile(page)
                                                            else []) if k == "run"
                                 and not parse_run_args(ar)["same"] for c in commands(b)]
                        for c in commands(body):
                            if c not in there:
                                failures.append("%s: same as %s, which runs no command %r"
                                                % (where, a["same"], c))
                        counts["same"] += 1
                        last = SKIPPED
                        continue
                    if ("python3" in body and "build/python" in body and not python) or \
                            not all(os.path.exists(os.path.join(root, n)) for n in a["needs"]):
                        counts["skipped"] += 1
                        last = SKIPPED
                        continue
                    t0 = time.time()
                    try:
                        p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", body], cwd=root,
                                           env=env, timeout=a["timeout"], text=True,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                        out, rc = p.stdout, p.returncode
                    except subprocess.TimeoutExpired as e:
                        out, rc = (e.stdout or b"").decode(errors="replace"), "timeout"
                    counts["run"] += 1
                    last = out
                    print("%-32s exit %-3s %5.1f s" % (where, rc, time.time() - t0), flush=True)
                    if rc != a["exit"]:
                        failures.append("%s: exit %s, the page expects %d:\n%s\n--- output:\n%s"
                                        % (where, rc, a["exit"], body, out[-3000:]))
                    for want in a["expect"]:
                        if want not in out:
                            failures.append("%s: the output lacks %r:\n%s" % (where, want,
                                                                              out[-3000:]))
                elif kind == "output":
                    counts["output"] += 1
                    if last is SKIPPED:  # the run block above was skipped: so is its sample
                        continue
                    if last is None:
                        failures.append("%s: <!-- output --> with no run block above it" % where)
                        continue
                    miss = sample_missing(args, body, last)
                    if miss is not None:
                        failures.append("%s: the sample's line %r is not in what the command "
                                        "printed:\n%s" % (where, miss, last[-3000:]))
                elif kind == "check":
                    words = args.split()
                    if words[:1] != ["diff"] or len(words) != 3:
                        failures.append("%s: unknown check %r" % (where, args))
                        continue
                    counts["diff"] += 1
                    d = subprocess.run(["diff", "-u", words[1], words[2]], cwd=src, text=True,
                                       stdout=subprocess.PIPE).stdout
                    d = "\n".join(d.split("\n")[2:]).rstrip("\n")
                    if d != body.rstrip("\n"):
                        failures.append("%s: the diff shown is not `diff -u %s %s`; paste:\n%s"
                                        % (where, words[1], words[2], d))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("docs: %(run)d commands run, %(output)d sample outputs and %(diff)d diffs checked, "
          "%(by)d commands run by the tests they name, %(same)d blocks run on the pages they name, "
          "%(no-run)d blocks not run (each says why), %(skipped)d skipped (no torch, or no "
          "path the block needs)" % counts)
    for f in failures:
        print("FAIL " + f + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
