"""_torch_hccl_autoload.py - backend "hccl" without `import torch_hccl`, on torch 2.x.

A pip-installed torch_hccl declares `autoload` below as an entry point of the group
"torch.backends" (pyproject.toml), which torch calls near the end of `import torch`
(torch/__init__.py, _import_device_backends; TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns the calls
off). It is a top-level module, not part of the package, so that loading it does not run
torch_hccl/__init__.py (which loads the extension and installs the allocator).

What it does, cheaply (no extension is loaded): registers the name "hccl" for CPU tensors with
a creator that imports torch_hccl the first time a group is made, and then hands over to
torch_hccl's own creator. `import torch_hccl` later finds this registration and keeps it.

Contract:
  - It never raises: torch turns an exception here into a failed `import torch`. Whatever
    stops it (a torch_hccl built for another torch, its library missing, anything else) is one
    line on stderr starting "torch_hccl:", and torch imports without backend "hccl".
  - It yields the name to any other owner: when "hccl" is already registered (by a package
    whose entry point ran first), or when torch_npu (Ascend's backend, which registers "hccl"
    for its NPUs at its import) is installed, it registers nothing and says nothing;
    `import torch_hccl` then says, in one warning, that "hccl" is another package's.
"""
import os
import sys

_PKG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_hccl")


def _why_not():
    """A reason the installed torch_hccl cannot serve this torch, or None. Reads files only."""
    import torch

    build = {}
    try:
        with open(os.path.join(_PKG, "_build.py")) as f:
            exec(f.read(), build)  # two assignments, written by CMake
    except OSError as e:
        return "no %s (%s)" % (os.path.join(_PKG, "_build.py"), e.strerror)
    have = torch.__version__.split("+")[0]
    if build.get("TORCH_VERSION") != have:
        return ("%s was built for torch %s, but this is torch %s: reinstall it for this torch "
                "(pip install --no-build-isolation <its source tree>)"
                % (_PKG, build.get("TORCH_VERSION"), have))
    lib = os.path.join(_PKG, "lib", "libhccl.so.0")
    if not os.path.exists(lib):
        return "%s is missing: reinstall torch_hccl" % lib
    return None


def _create(opts, pg_options=None):
    """The creator torch calls for each "hccl" group: the real one, loaded on first use."""
    import torch_hccl

    return torch_hccl._create(opts, pg_options)


_create.torch_hccl_autoload = True  # how torch_hccl/__init__.py knows this registration


def _register():
    import importlib.util

    import torch.distributed as dist

    if not dist.is_available():
        return
    if "HCCL" in dist.Backend._plugins or importlib.util.find_spec("torch_npu") is not None:
        return  # "hccl" is another package's
    why = _why_not()
    if why:
        sys.stderr.write('torch_hccl: backend "hccl" not registered at import torch: %s\n' % why)
        return
    dist.Backend.register_backend("hccl", _create, extended_api=True, devices=["cpu"])


def autoload():
    """The "torch.backends" entry point: registers "hccl" lazily; never raises."""
    try:
        _register()
    except Exception as e:  # noqa: BLE001 - torch would fail its own import on it
        sys.stderr.write('torch_hccl: backend "hccl" not registered at import torch: %s: %s\n'
                         % (type(e).__name__, e))
