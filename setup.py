"""setup.py - builds torch_hccl for `pip install --no-build-isolation .` (see pyproject.toml).

CMake builds libhccl, npu-launch and the torch_hccl extension for this very interpreter
(HCCL_TORCH_PYTHON=sys.executable) in build/pip-<python tag>; the package then carries
_C.so, libhccl.so.0 (in torch_hccl/lib, found through the extension's $ORIGIN/lib RPATH),
npu-launch and hccl_fr.py (in torch_hccl/bin, started by the `npu-launch` and `hccl-fr`
commands pip puts on PATH), and the topologies under <prefix>/share/hccl/topologies, where the
library looks for named ones.
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


class BuildWithCMake(build_py):
    def run(self):
        super().run()
        # HCCL_BUILD_DIR: an existing build of this tree for this interpreter, reused as it is
        # (tests/install/test_pip.sh: no second build of the same sources).
        build = os.environ.get("HCCL_BUILD_DIR") or os.path.join(
            ROOT, "build", "pip-" + sys.implementation.cache_tag)
        jobs = str(os.cpu_count() or 2)
        if not os.environ.get("HCCL_BUILD_DIR"):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DHCCL_TORCH_PYTHON=" + sys.executable,
                                   "-DCMAKE_INSTALL_PREFIX=" + sys.prefix,
                                   "-DHCCL_BUILD_TESTS=OFF", "-DHCCL_FUZZ=OFF"])
        subprocess.check_call(["cmake", "--build", build, "-j", jobs, "--target", "torch_hccl_C",
                               "npu-launch"])
        pkg = os.path.join(self.build_lib, "torch_hccl")
        ext = glob.glob(os.path.join(build, "python", "torch_hccl", "_C*.so"))
        if not ext:
            sys.exit("torch_hccl was not built (no torch for %s?): see CMake's output above"
                     % sys.executable)
        os.makedirs(os.path.join(pkg, "lib"), exist_ok=True)
        os.makedirs(os.path.join(pkg, "bin"), exist_ok=True)
        shutil.copy2(ext[0], pkg)
        shutil.copy2(os.path.join(build, "python", "torch_hccl", "_build.py"), pkg)
        shutil.copy2(os.path.join(build, "lib", "libhccl.so.0"), os.path.join(pkg, "lib"))
        shutil.copy2(os.path.join(build, "bin", "npu-launch"), os.path.join(pkg, "bin"))
        shutil.copy2(os.path.join(ROOT, "scripts", "hccl_fr.py"), os.path.join(pkg, "bin"))


setup(
    packages=["torch_hccl"],
    package_dir={"torch_hccl": "torch_hccl/torch_hccl"},
    data_files=[("share/hccl/topologies", sorted(glob.glob("topologies/*.json")))],
    cmdclass={"build_py": BuildWithCMake},
    zip_safe=False,
)
