"""docblocks.py - reading the docs' fenced blocks and their markers, and running a block as a
reader would: what tests/docs/test_docs.py (every block of every page) and the tests that run
a page's block themselves share.

A run block whose marker says `by TEST#NAME` (for example `<!-- run: by
tests/torch/test_hf_trainer.py#hccl -->`) is run by that ctest test instead of by test_docs.py:
the test runs the same command, as written, once, where it would otherwise run a command of
its own just like it (docs/pytorch.md's recipe blocks against the recipe tests). The test gets
the block with block_by() and runs it with run_block(), which checks what test_docs.py would
(the exit code, the expected texts, the output sample under it) and returns the output;
test_docs.py checks that TEST exists and names the key, so the page's command cannot go
unrun.
"""
import os
import random
import re
import shlex
import shutil
import socket
import subprocess
import tempfile

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
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
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
    args = {"exit": 0, "expect": [], "timeout": 240, "needs": [], "by": None, "same": None}
    toks = shlex.split(text)
    k = 0
    while k < len(toks):
        if toks[k] in ("exit", "timeout"):
            args[toks[k]] = int(toks[k + 1])
            k += 2
        elif toks[k] in ("by", "same"):
            args[toks[k]] = toks[k + 1]
            k += 2
        elif toks[k] in ("expect", "needs"):
            key, k = toks[k], k + 1
            while k < len(toks) and toks[k] not in ("exit", "timeout", "expect", "needs", "by",
                                                          "same"):
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


def commands(body):
    """BODY's commands, one a line: continued lines joined, comments and spacing dropped."""
    text = re.sub(r"\\\n", " ", body)
    out = (" ".join(re.sub(r"(^|\s)#.*$", "", line).split()) for line in text.split("\n"))
    return [c for c in out if c]


def sample_missing(args, sample, output):
    """The first line of an <!-- output ARGS --> SAMPLE not in OUTPUT, or None."""
    words = args.split()
    if words[:1] == ["host"] and len(words) == 2:
        output = re.sub(r"\b%s\b" % re.escape(socket.gethostname()), words[1], output)
    return sample_matches(sample, output, words == ["exact"])


def block_by(src, doc, key):
    """(body, run args, [(output args, sample)]) of the one run block of SRC/DOC marked
    `by KEY`, with the output samples right under it. Raises if there is not exactly one."""
    found, cur = [], None
    for _line, _lang, kind, args, body in blocks(os.path.join(src, doc)):
        if kind == "run":
            a = parse_run_args(args)
            cur = [body, a, []] if a["by"] == key else None
            if cur:
                found.append(cur)
        elif kind == "output" and cur:
            cur[2].append((args, body))
    if len(found) != 1:
        raise AssertionError("%s has %d run blocks marked 'by %s', not one" % (doc, len(found), key))
    return tuple(found[0])


def free_port():
    """A TCP port that no socket of this machine holds, on any address, and that no outgoing
    connection will take a moment later: drawn below the kernel's ephemeral range (where
    connect() picks local ports), away from torch's and npu-launch's defaults, and checked by a
    bind to the wildcard address, as torch's TCPStore and npu-launch bind. A port chosen by
    binding 127.0.0.1:0 came from the ephemeral range and could be held on another address:
    rank 0's store then failed with "Address already in use" (CI, 2026-11-28). Every test in
    tests/ takes its ports here; tests/launcher/test_launcher.c's fresh_port is its C twin."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.SystemRandom()
    for _ in range(100):
        port = rng.randrange(20000, max(low, 20001))
        if 29400 <= port < 29800:  # torch's 29500 and npu-launch's 29688 defaults
            continue
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def with_free_port(body):
    """BODY with a free --master-port given to its first npu-launch: a test machine is shared,
    so a test never uses the default port (the page's command is otherwise as written)."""
    return body.replace("build/bin/npu-launch ", "build/bin/npu-launch --master-port %d "
                        % free_port(), 1)


def reader_env(env):
    """ENV as a reader's shell has it: no rank variables, no PYTHONPATH (the blocks set theirs),
    no flight recorder; C messages. Open MPI refuses root without its two variables; the suite
    runs as root, a reader usually not."""
    env = dict(env, LC_ALL="C", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH",
              "HCCL_FLIGHT_RECORDER_DIR"):
        env.pop(k, None)
    return env


def run_block(src, build, python, body, args, samples, env, timeout=None):
    """Runs BODY as test_docs.py runs a block (bash -e -o pipefail, from a tree whose build/ is
    BUILD and with PYTHON as python3, under reader_env(ENV)), then checks the marker's exit code and texts
    and the output SAMPLES. Returns the output; raises AssertionError naming what differs."""
    root, bind = make_tree(src, build, python)
    env = dict(reader_env(env), PATH=bind + ":" + env.get("PATH", os.environ["PATH"]))
    try:
        p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", body], cwd=root, env=env,
                           timeout=timeout or args["timeout"], text=True, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if p.returncode != args["exit"]:
        raise AssertionError("exit %d, the page expects %d:\n%s\n--- output:\n%s"
                             % (p.returncode, args["exit"], body, p.stdout[-6000:]))
    for want in args["expect"]:
        if want not in p.stdout:
            raise AssertionError("the output lacks %r:\n%s" % (want, p.stdout[-6000:]))
    for sargs, sample in samples:
        miss = sample_missing(sargs, sample, p.stdout)
        if miss is not None:
            raise AssertionError("the page's sample line %r is not in what the block printed:\n%s"
                                 % (miss, p.stdout[-6000:]))
    return p.stdout
