"""The `npu-launch` and `hccl-fr` commands of a pip-installed torch_hccl: each runs the program
the package carries in torch_hccl/bin, in place of this Python process (signals, exit codes and
the process tree are the program's own)."""
import os
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def npu_launch():
    exe = os.path.join(_BIN, "npu-launch")
    os.execv(exe, [exe] + sys.argv[1:])


def hccl_fr():
    script = os.path.join(_BIN, "hccl_fr.py")
    os.execv(sys.executable, [sys.executable, script] + sys.argv[1:])
