"""torch_requirement.py - the wheel's dependency on torch, a dynamic-metadata provider for
scikit-build-core (pyproject.toml, [[tool.dynamic-metadata]]).

The extension in the wheel works with the one torch it was compiled against, so the wheel says
so: `torch==<that version>`, without the local label (2.13.0+cpu gives torch==2.13.0, Debian's
1.13.0a0+gitunknown gives torch==1.13.0a0; PEP 440 ignores a candidate's local label when the
specifier has none). That torch is the one installed, so pip keeps it; a second environment
with another torch gets pip's refusal or pip's torch of that version, never a silent mismatch.

The torch asked for is the one of the Python running the build, which is the one CMake builds
against (HCCL_TORCH_PYTHON is set from scikit-build-core's Python_EXECUTABLE). Without torch,
as in an isolated build, it fails saying what to run instead.
"""
import importlib.metadata


def dynamic_metadata(settings, project):
    """The provider hook: returns the [project] fragment {"dependencies": ["torch==X"]}."""
    if settings:
        raise RuntimeError("torch_requirement takes no settings, got %s" % sorted(settings))
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        import sys
        raise RuntimeError(
            "torch_hccl is built against the torch of the Python that installs it, and %s has "
            "none here. An isolated build hides it: run `pip install scikit-build-core==1.1.2` "
            "then `pip install --no-build-isolation .`; without torch, install it first "
            "(pip install torch==2.13.0)" % sys.executable) from None
    return {"dependencies": ["torch==" + version.split("+")[0]]}
