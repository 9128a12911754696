#!/usr/bin/python3
"""test_shrink.py - dist.shrink_group on torch_hccl (HcclCommShrink): examples/torch_shrink.py
with 4 ranks, rank 2 SIGKILLed in step 3; the other three catch the failed all_reduce, shrink,
and finish on the 3-rank group, in the same processes, within 10 s of the kill; their final
parameters equal an unbroken run's (float64, to 1e-12; the example's result does not depend on
the group's size). The unbroken run has 4 ranks: 3 from the start is refused on one server (1, 2,
4 or 8 ranks per server); only a shrink's survivors may be 3. The run with the kill is
docs/reliability.md's command, as a reader runs it: npu-launch --on-failure continue (which
reports rank 2's death and leaves the others running) with --tag-output; each rank's exit code
is read from npu-launch's summary, and the job must exit 0. The unbroken run's processes are
started with torchrun's variables by hand. Skipped on a torch without shrink_group (1.13).

test_two_servers: the same across two pretend servers (network namespaces on a bridge,
tests/multi/netns.sh) of 2 ranks each, started as a user starts them: docs/reliability.md's two
commands, one npu-launch --on-failure continue per server (--nnodes 2, its --node-rank, server 0's
address), with HCCL_EXEC_TIMEOUT=5: rank 2, on the second server (1), is SIGKILLed in step 3;
server 1's launcher reports it and lets rank 3 go on, server 0's sees nothing die, and both exit
0 (each rank's exit code from its launcher's summary, or 0 when a launcher that exits 0 printed
none); the survivors are 2 + 1 (ranks 0, 1 on server 0, rank 3 alone on
server 1), a count per server only a shrink may have (topo/place.h: such a group runs its
allreduces through each server's leader, algo/hier.c, which each survivor's trace of the shrunk
communicator must name). Rank 3's final parameters equal the unbroken run's only if the shrunk
group's allreduces crossed the veth between the servers, and server 1's link counters show bytes
both ways after the kill. Its error must name rank 2 as dead, not a network fault or a cut-off
server.
It shares the unbroken run with test_killed_rank_survivors_shrink (placement does not change the
result). Skipped where network namespaces cannot be made (not root).
"""
import json
import os
import re
import signal
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "docs"))
import docblocks  # noqa: E402
from docblocks import free_port  # noqa: E402  (one port chooser for every test)
EXAMPLE = os.path.join(ROOT, "examples", "torch_shrink.py")
NETNS = os.path.join(ROOT, "tests", "multi", "netns.sh")

# Two servers: docs/reliability.md's command for server k in $2/cmd.k (10.0.0.1 and 29688, the
# page's address and port, stand for server 0's and a free one), run in namespace k3<pid>_k from
# a tree whose build/ is the build (docblocks.make_tree: ROOT, BIN on PATH). Server 1's link
# counters (rx tx bytes, with the time) every 0.1 s while the launchers run. Each launcher's
# output in OUT/launch.<k>, its exit code in OUT/rc.<k>, its ranks' communicators' traces in
# OUT/trace.s<k>.<c>.<rank in it>.json (c: the communicator's number in its process). Exit 77:
# no namespaces.
TWO_SERVERS = r"""
set -u
netns=$1 out=$2 port=$3 root=$4 bin=$5
NETNS_PREFIX=k3$$
NETNS_VETH=k3$$
. "$netns"
netns_up_or_exit 2
sample() {
  echo "$EPOCHREALTIME $(netns_exec 1 cat /sys/class/net/eth0/statistics/rx_bytes \
    /sys/class/net/eth0/statistics/tx_bytes | paste -sd' ')" >>"$out/counters"
}
pids=()
for k in 0 1; do
  cmd=$(cat "$out/cmd.$k")
  cmd=${cmd//10.0.0.1/$(netns_addr 0)}
  netns_exec $k env PATH="$bin:$PATH" HCCL_EXEC_TIMEOUT=5 OMP_NUM_THREADS=1 \
    HCCL_TRACE_FILE="$out/trace.s$k.%c.%r.json" \
    timeout -k 5 90 bash -c "cd '$root' && ${cmd//29688/$port}" >"$out/launch.$k" 2>&1 &
  pids+=($!)
done
while [ -n "$(jobs -rp)" ]; do
  sample
  sleep 0.1
done
sample
for k in 0 1; do
  wait "${pids[$k]}"
  echo $? >"$out/rc.$k"
done
"""


def run(nranks, *args, timeout=60):
    """The example in nranks processes; [(exit code, output)] in rank order."""
    port = free_port()
    procs = []
    for r in range(nranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(nranks), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(nranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   OMP_NUM_THREADS="1",
                   PYTHONPATH=os.environ.get("TORCH_HCCL_PYTHONPATH", ""))
        procs.append(subprocess.Popen([sys.executable, EXAMPLE] + list(args), env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    out = []
    for p in procs:
        try:
            text, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        out.append((p.returncode, text))
    return out


def run_launched():
    """docs/reliability.md's npu-launch command (4 ranks, rank 2 killed in step 3), run and
    checked as test_docs.py would (exit 0, its texts, its sample): [(exit code, output)] in rank
    order, each rank's lines by their [rank N] tag, its exit code from npu-launch's summary
    table (-N for signal N)."""
    body, args, samples = docblocks.block_by(ROOT, "docs/reliability.md",
                                             "tests/torch/test_shrink.py#npu-launch")
    out = docblocks.run_block(ROOT, build_dir(), sys.executable, docblocks.with_free_port(body),
                              args, samples, dict(os.environ, OMP_NUM_THREADS="1"), timeout=60)
    return launched_ranks(out, range(4), 0)


def build_dir():
    return os.path.dirname(os.environ.get("TORCH_HCCL_PYTHONPATH", "")) or \
        os.path.join(ROOT, "build")


def launched_ranks(out, ranks, launcher_rc):
    """[(exit code, output)] of RANKS from one npu-launch --tag-output's OUT: each rank's lines
    by their [rank N] tag, its exit code from the summary table (-N for signal N); with no
    summary (printed after any failure), 0 when the launcher exited 0 (every rank did)."""
    got = []
    for r in ranks:
        text = "\n".join(re.findall(r"^\[rank %d\] (.*)$" % r, out, re.M))
        row = re.search(r"^npu-launch: %d +\d+ +\d+ +(?:exit code (\d+)|SIG(\w+))" % r, out,
                        re.M)
        if row:
            code = int(row.group(1)) if row.group(1) else -getattr(signal, "SIG" + row.group(2))
        elif launcher_rc == 0 and "npu-launch: rank   device" not in out:
            code = 0
        else:
            raise AssertionError("no summary row for rank %d:\n%s" % (r, out))
        got.append((code, text))
    return got


def two_server_commands():
    """docs/reliability.md's two npu-launch commands (no-run block marked
    tests/torch/test_shrink.py#two-servers): [server 0's, server 1's]."""
    found = [b for _l, _lang, kind, args, b in docblocks.blocks(os.path.join(ROOT, "docs",
                                                                         "reliability.md"))
             if kind == "no-run" and "tests/torch/test_shrink.py#two-servers" in args]
    if len(found) != 1:
        raise AssertionError("docs/reliability.md has %d blocks for #two-servers, not one" %
                             len(found))
    cmds = docblocks.commands(found[0])
    if len(cmds) != 2 or not all("--node-rank %d " % k in c for k, c in enumerate(cmds)):
        raise AssertionError("not one command per server, --node-rank 0 then 1: %s" % cmds)
    return cmds


def run_two_servers(timeout=120):
    """docs/reliability.md's two-server commands on 2 pretend servers x 2 ranks: ([(exit
    code, output)] in rank order, [(time, rx bytes, tx bytes)] of server 1's link, the
    allreduce algorithms, [each launcher's (exit code, output)]), or None where namespaces
    cannot be made."""
    with tempfile.TemporaryDirectory() as out:
        for k, cmd in enumerate(two_server_commands()):
            with open(os.path.join(out, "cmd.%d" % k), "w") as f:
                f.write(cmd)
        root, bind = docblocks.make_tree(ROOT, build_dir(), sys.executable)
        try:
            p = subprocess.run(["bash", "-c", TWO_SERVERS, "two_servers", NETNS, out,
                                str(random.randint(30000, 60000)), root, bind],
                               env=docblocks.reader_env(os.environ), text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if p.returncode == 77:
            return None
        if p.returncode != 0:
            raise AssertionError("the two-server driver failed (%d):\n%s" %
                                 (p.returncode, p.stdout))
        launchers, ranks = [], []
        for k in (0, 1):
            with open(os.path.join(out, "rc.%d" % k)) as f:
                code = int(f.read())
            with open(os.path.join(out, "launch.%d" % k)) as f:
                text = f.read()
            print("server %d's npu-launch (exit %d):\n%s" % (k, code, text))
            launchers.append((code, text))
            ranks += launched_ranks(text, (2 * k, 2 * k + 1), code)
        with open(os.path.join(out, "counters")) as f:
            counters = [tuple(float(v) for v in line.split()) for line in f if line.strip()]
        return ranks, counters, allreduce_algos(out), launchers


def allreduce_algos(out):
    """{(rank, communicator number): the algorithms its allreduces ran} from the traces. A
    trace names its server and the rank in its communicator; server 1's are all rank 3's (rank
    2, SIGKILLed, destroys no communicator, so it writes none), and a rank of server 0 has the
    same number in every communicator (0 and 1 stay 0 and 1 in the shrunk group)."""
    algos = {}
    for name in os.listdir(out):
        m = re.match(r"trace\.s(\d)\.(\d+)\.(\d+)\.json$", name)
        if not m:
            continue
        with open(os.path.join(out, name)) as f:
            text = f.read()
        if not text:
            continue  # a communicator never destroyed (the aborted parent) writes nothing
        events = json.loads(text)
        events = events["traceEvents"] if isinstance(events, dict) else events
        rank = 3 if m.group(1) == "1" else int(m.group(3))
        algos[(rank, int(m.group(2)))] = {
            e["args"]["algo"] for e in events
            if e.get("cat") == "collective" and "allreduce" in e.get("name", "").lower()}
    return algos


def final(text):
    m = re.search(r"^final (.*)$", text, re.M)
    return json.loads(m.group(1)) if m else None


@unittest.skipUnless(hasattr(dist, "shrink_group"), "this torch has no dist.shrink_group")
class TestShrink(unittest.TestCase):
    _want = None

    def want(self):
        """The unbroken 4-rank run's final parameters (one run, shared by the tests)."""
        if TestShrink._want is None:
            ref = run(4)
            for code, text in ref:
                self.assertEqual(code, 0, text)
            TestShrink._want = final(ref[0][1])
        return TestShrink._want

    def check_survivors(self, got):
        """Rank 2 died by SIGKILL; 0, 1, 3 caught the error, shrank to 3 and ended equal to the
        unbroken run within 10 s of the kill. Returns (the kill's time, the last done's)."""
        want = self.want()
        self.assertEqual(got[2][0], -9, "rank 2 should have died by SIGKILL:\n" + got[2][1])
        killed = float(re.search(r"killed at ([0-9.]+)", got[2][1]).group(1))
        last = killed
        for r in (0, 1, 3):
            code, text = got[r]
            print("rank %d:\n%s" % (r, text))
            self.assertEqual(code, 0, text)
            self.assertRegex(text, r"step 3 failed")
            self.assertRegex(text, r"shrunk: rank %d of 3" % (r if r < 2 else 2))
            params = final(text)
            self.assertEqual(len(params), len(want))
            for a, b in zip(params, want):
                self.assertAlmostEqual(a, b, delta=1e-12 * max(1.0, abs(b)))
            done = float(re.search(r"done at ([0-9.]+)", text).group(1))
            self.assertLess(done - killed, 10.0, "rank %d finished %.1f s after the kill" %
                            (r, done - killed))
            last = max(last, done)
        return killed, last

    def test_killed_rank_survivors_shrink(self):
        """Under npu-launch --on-failure continue: docs/reliability.md's command."""
        self.check_survivors(run_launched())

    def test_two_servers(self):
        """The module's paragraph: 2 + 1 survivors across two pretend servers."""
        want = self.want()
        t0 = time.time()
        got = run_two_servers()
        if got is None:
            self.skipTest("network namespaces cannot be made here (needs root and iproute2)")
        ranks, counters, algos, launchers = got
        print("two servers: %.1f s" % (time.time() - t0))
        # Each launcher decided for its own ranks: server 1's let rank 2 go and rank 3 on, server
        # 0's saw nothing die; both exit 0 once the survivors finish.
        for k, (code, text) in enumerate(launchers):
            self.assertEqual(code, 0, "server %d's npu-launch:\n%s" % (k, text))
        self.assertRegex(launchers[1][1], r"rank 2 \(device 0, pid \d+\) failed: killed by "
                         r"SIGKILL, at .*; the other ranks go on \(--on-failure continue\)")
        self.assertRegex(launchers[1][1], r"npu-launch: 2 +0 +\d+ +SIGKILL \(went on without it\)")
        self.assertNotRegex(launchers[0][1], r"(?m)^npu-launch: .*(failed|SIG[A-Z])")
        # The shrunk group (each survivor's last communicator; the aborted parent writes no
        # trace) ran its allreduces through the servers' leaders (algo/hier.c), as every rank
        # planned alike.
        print("allreduce algorithms by (rank, communicator):", algos)
        for r in (0, 1, 3):
            mine = sorted(k for k in algos if k[0] == r)
            self.assertTrue(mine, "rank %d wrote no trace: %s" % (r, algos))
            self.assertEqual(algos[mine[-1]],
                             {"two-level through leaders, halving-doubling between servers"},
                             "rank %d: %s" % (r, algos))
        killed, last = self.check_survivors(ranks)
        self.assertEqual(len(want), len(final(ranks[3][1])))
        # The dead rank is named as dead (its process, seen by its peers' links), not as a
        # network fault or a server cut off: rank 3 lost its only server-mate, and ranks 0 and
        # 1 their peer on server 1.
        for r in (0, 1, 3):
            line = re.search(r"^step 3 failed.*$", ranks[r][1], re.M).group(0)
            self.assertRegex(line, r"\brank 2\b", "rank %d: %s" % (r, line))
            self.assertNotRegex(line, r"cut off|network fault|unreachable|stopped or frozen",
                                "rank %d: %s" % (r, line))
        # Bytes both ways on server 1's link between the kill and the survivors' end, with
        # rank 2 dead: the survivors' (the shrink's meeting and the shrunk group's allreduces).
        before = [c for c in counters if c[0] <= killed]
        after = [c for c in counters if c[0] >= last]
        self.assertTrue(before and after, "no link counters around the kill: %s" % counters)
        rx, tx = after[0][1] - before[-1][1], after[0][2] - before[-1][2]
        print("server 1's link after the kill: %d bytes in, %d out" % (rx, tx))
        self.assertGreater(rx, 1000)
        self.assertGreater(tx, 1000)

    def test_bad_lists(self):
        """The checks before the backend (torch's) and the backend's own refusal."""
        code = ("import sys, torch.distributed as d, torch_hccl\n"
                "d.init_process_group('hccl')\n"
                "try:\n"
                "    d.shrink_group([d.get_rank()])\n"
                "except RuntimeError as e:\n"
                "    print('refused:', e)\n"
                "pg = d.shrink_group([1])\n"
                "print('left', pg.size())\n")
        port = free_port()
        procs = [subprocess.Popen([sys.executable, "-c", code], text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  env=dict(os.environ, RANK=str(r), WORLD_SIZE="2",
                                           MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                                           PYTHONPATH=os.environ.get("TORCH_HCCL_PYTHONPATH", "")))
                 for r in range(2)]
        outs = [p.communicate(timeout=60)[0] for p in procs]
        self.assertIn("refused:", outs[0])
        self.assertIn("left 1", outs[0], outs[0])


if __name__ == "__main__":
    unittest.main()
