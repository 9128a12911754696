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
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SHELL = ("sh", "bash", "shell", "console")
MARK = re.compile(r"^<!--\s*(run|no-run|output|check)\b:?\s*(.*?)\s*-->\s*$")
NUM = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def doc_files(src):
    out = [os.path.join(src, "README.md")]
    out += sorted(os.path.join(src, "docs", f) for f in os.listdir(os.path.join(src, "docs"))
                  if f.endswith(".md"))
    for top in sorted(os.listdir(src)):
        if top.startswith(".") or top.startswith("build"):
            continue
        for dirpath, dirnames, files in os.walk(os.path.join(src, top)):
            dirnames[:] = [d for d in dirnames if not d.startswith("build")]
            if "README.md" in files and dirpath != src:
                out.append(os.path.join(dirpath, "README.md"))
    return [f for f in dict.fromkeys(out) if os.path.exists(f)]


def blocks(path):
    """Yields (line, lang, marker kind, marker args, body) for each fenced block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        body = "\n".join(l[len(indent):] if l.startswith(indent) else l
                         for l in lines[i + 1:j])
        mk = MARK.match(lines[start - 1].strip()) if start > 0 else None
        yield start + 1, lang, mk.group(1) if mk else None, mk.group(2) if mk else "", body
        i = j + 1


def parse_run_args(text):
    args = {"exit": 0, "expect": [], "timeout": 240, "needs": []}
    toks = shlex.split(text)
    k = 0
    while k < len(toks):
        if toks[k] in ("exit", "timeout"):
            args[toks[k]] = int(toks[k + 1])
            k += 2
        elif toks[k] in ("expect", "needs"):
            key, k = toks[k], k + 1
            while k < len(toks) and toks[k] not in ("exit", "timeout", "expect", "needs"):
                args[key].append(toks[k])
                k += 1
        else:
            raise ValueError("unknown word %r in the marker" % toks[k])
    return args


def norm(line, exact):
    line = " ".join(line.split())
    return line if exact else NUM.sub("#", line)


def sample_matches(sample, output, exact):
    """Each sample line, in order, matches a later output line; '...' inside a line matches
    anything, a line of '...' alone is skipped. Returns None or the first line not found."""
    out = [norm(l, exact) for l in output.split("\n")]
    k = 0
    for raw in sample.split("\n"):
        s = norm(raw, exact)
        if not s or s in ("...", "#"):
            continue
        pat = re.compile("^" + ".*".join(re.escape(p) for p in s.split("...")) + "$")
        while k < len(out) and not pat.match(out[k]):
            k += 1
        if k == len(out):
            return raw
        k += 1
    return None


def make_tree(src, build, python):
    """A folder that looks like the source tree, whose build/ is this build, and a bin folder
    put first on PATH: npu-launch and hccl-fr as installed; python3, python and torchrun of
    the Python torch_hccl was built for."""
    root = tempfile.mkdtemp(prefix="hccl-docs-")
    for e in os.listdir(src):
        if e != "build":
            os.symlink(os.path.join(src, e), os.path.join(root, e))
    os.symlink(os.path.abspath(build), os.path.join(root, "build"))
    bind = os.path.join(root, ".bin")
    os.mkdir(bind)
    for prog in ("npu-launch", "hccl-fr"):
        if os.path.exists(os.path.join(build, "bin", prog)):
            os.symlink(os.path.join(os.path.abspath(build), "bin", prog),
                       os.path.join(bind, prog))
    if python:
        for name in ("python3", "python"):
            os.symlink(python, os.path.join(bind, name))
        with open(os.path.join(bind, "torchrun"), "w") as f:  # that Python's own torchrun
            f.write('#!/bin/sh\nexec "%s" -m torch.distributed.run "$@"\n' % python)
        os.chmod(os.path.join(bind, "torchrun"), 0o755)
    return root, bind


def main():
    src, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    python = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else ""
    root, bind = make_tree(src, build, python)
    # Open MPI refuses root without these; the suite runs as root, a reader usually not.
    env = dict(os.environ, PATH=bind + ":" + os.environ["PATH"], LC_ALL="C",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH",
              "HCCL_FLIGHT_RECORDER_DIR"):
        env.pop(k, None)
    SKIPPED = object()  # what `last` holds after a run block that was skipped
    failures, counts = [], {"run": 0, "no-run": 0, "output": 0, "diff": 0, "skipped": 0}
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
                    words = args.split()
                    out = last
                    if words[:1] == ["host"] and len(words) == 2:
                        out = re.sub(r"\b%s\b" % re.escape(socket.gethostname()), words[1], out)
                    miss = sample_matches(body, out, words == ["exact"])
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
          "%(no-run)d blocks not run (each says why), %(skipped)d skipped (no torch, or no "
          "path the block needs)" % counts)
    for f in failures:
        print("FAIL " + f + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
