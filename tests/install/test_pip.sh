#!/usr/bin/env bash
# test_pip.sh PYTHON BUILD_DIR - the pip install of docs/pytorch.md ("Installing"), run as
# written, in a default venv (with pip) over PYTHON and its torch, then used as a user would:
#   1. the documented lines (the shell block under the "tests/install/test_pip.sh" marker),
#      with the venv activated, from the source tree; README.md shows the same lines;
#   2. npu-launch and hccl-fr on the venv's PATH; a 2-rank DDP training run by a script that
#      never imports torch_hccl (torch 2.x: the "torch.backends" entry point), or that does
#      (torch 1.13, which has no entry points), ranks' losses equal;
#   3. `pip wheel` gives a wheel tagged for this Python and platform that asks for the torch it
#      was built for; it installs into a second venv over the same torch, pip keeping that torch;
#   4. (torch 2.x) the entry point never breaks `import torch`: a build for another torch, a
#      missing libhccl and a broken file each give one "torch_hccl:" line and torch imports;
#      TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns it off; `import torch_hccl` after it registers
#      nothing twice; a stand-in torch_npu, or another package that registered "hccl" first,
#      keeps the name ("hccl" is theirs, `import torch_hccl` warns once).
# The wheel is built in BUILD_DIR/pip-build/<python>-torch<version> (SKBUILD_BUILD_DIR), kept
# between runs so that a second run rebuilds only what changed; the venvs are temporary.
set -euo pipefail
py=$1
build=$(cd "$2" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
step() { echo "== $*"; }
port() { "$py" -c 'import sys; sys.path.insert(0, sys.argv[1]); import docblocks; print(docblocks.free_port())' "$src/tests/docs"; }
export SKBUILD_BUILD_DIR=$build/pip-build/$("$py" -c 'import sys, torch; print(sys.implementation.cache_tag + "-torch" + torch.__version__)')

# The documented block: the ```sh block after the marker line naming this script.
awk '/<!-- no-run:.*tests\/install\/test_pip.sh/ {m = 1; next}
     m && /^```sh/ {b = 1; next}
     b && /^```/ {exit}
     b {print}' "$src/docs/pytorch.md" >"$tmp/lines.sh"
grep -q 'pip install' "$tmp/lines.sh" || { echo "no pip block under the test_pip.sh marker in docs/pytorch.md"; exit 1; }
while IFS= read -r line; do
  line=${line%%#*}
  line=${line%"${line##*[![:space:]]}"}
  grep -qF -- "$line" "$src/README.md" || { echo "README.md does not show '$line' (docs/pytorch.md does)"; exit 1; }
done <"$tmp/lines.sh"

step "venv over $py, then docs/pytorch.md's lines:"
sed 's/^/   /' "$tmp/lines.sh"
"$py" -m venv --system-site-packages "$tmp/v"
(cd "$src" && . "$tmp/v/bin/activate" && bash -e "$tmp/lines.sh" >"$tmp/pip.log" 2>&1) ||
  { tail -60 "$tmp/pip.log"; exit 1; }
for c in npu-launch hccl-fr; do test -x "$tmp/v/bin/$c" || { echo "pip put no $c in the venv's bin"; exit 1; }; done
PATH=$tmp/v/bin:$PATH hccl-fr --help >/dev/null
"$tmp/v/bin/pip" show torch-hccl >"$tmp/show"
grep -qx 'Requires: torch' "$tmp/show" || { echo "torch-hccl does not require torch:"; cat "$tmp/show"; exit 1; }

autoload=$("$tmp/v/bin/python" -c 'import torch; print(int(hasattr(torch, "_import_device_backends")))')
if [ "$autoload" = 1 ]; then imp=""; else imp="import torch_hccl"; fi
cat >"$tmp/train.py" <<EOF
import os, sys, torch, torch.distributed as dist
$imp
dist.init_process_group("hccl")
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(dist.get_rank())
for step in range(3):
    x = torch.randn(16, 8, generator=g)
    loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
w = model.module.weight.detach().clone()
ws = [torch.zeros_like(w) for _ in range(dist.get_world_size())]
dist.all_gather(ws, w)
assert all(torch.equal(w, o) for o in ws), "ranks' weights differ"
print("rank %d: trained on %s, weights equal on every rank, torch_hccl from %s" % (
    dist.get_rank(), dist.get_backend(), os.path.dirname(sys.modules["torch_hccl"].__file__)))
dist.destroy_process_group()
EOF
step "2 ranks of DDP under the venv's npu-launch, ${imp:-no import torch_hccl}"
(cd "$tmp" && PATH=$tmp/v/bin:$PATH npu-launch --master-port "$(port)" --device-list 0,1 -- python train.py)

step "pip wheel, and the wheel into a second venv"
(cd "$src" && "$tmp/v/bin/pip" wheel -q --no-build-isolation --no-deps -w "$tmp/wheels" . >"$tmp/wheel.log" 2>&1) ||
  { tail -40 "$tmp/wheel.log"; exit 1; }
whl=$(ls "$tmp/wheels"/torch_hccl-*.whl)
tag=$("$tmp/v/bin/python" -c 'import sys, sysconfig; t = "cp%d%d" % sys.version_info[:2]; print("%s-%s-%s" % (t, t, sysconfig.get_platform().replace("-", "_").replace(".", "_")))')
case $(basename "$whl") in *-"$tag".whl) echo "$(basename "$whl")" ;;
  *) echo "$(basename "$whl") is not tagged $tag"; exit 1 ;; esac
need=$("$tmp/v/bin/python" -c 'import importlib.metadata as m; print("torch==" + m.version("torch").split("+")[0])')
meta=$("$py" -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); print(z.read([n for n in z.namelist() if n.endswith(".dist-info/METADATA")][0]).decode())' "$whl")
grep -qx "Requires-Dist: $need" <<<"$meta" || { echo "the wheel's METADATA does not say Requires-Dist: $need"; echo "$meta" | head -20; exit 1; }
echo "Requires-Dist: $need"
"$py" -m venv --system-site-packages "$tmp/w"
"$tmp/w/bin/pip" install "$whl" >"$tmp/w.log" 2>&1 || { cat "$tmp/w.log"; exit 1; }
grep -q "Requirement already satisfied: $need" "$tmp/w.log" || { echo "pip did not keep the installed torch:"; cat "$tmp/w.log"; exit 1; }
(cd "$tmp" && PATH=$tmp/w/bin:$PATH npu-launch --master-port "$(port)" --device-list 0,1 -- python train.py)

if [ "$autoload" != 1 ]; then
  echo "(this torch calls no \"torch.backends\" entry points: the autoload cases are skipped)"
  echo "pip test passed"
  exit 0
fi

wpy=$tmp/w/bin/python
pkg=$("$wpy" -c 'import importlib.util as u; print(u.find_spec("torch_hccl").submodule_search_locations[0])')
# one_line CASE: `import torch` exits 0 and prints exactly one line, starting "torch_hccl:";
# "hccl" is then unregistered.
one_line() {
  "$wpy" -c 'import torch.distributed as d; assert "HCCL" not in d.Backend._plugins' 2>"$tmp/err" ||
    { echo "$1: import torch failed or registered hccl:"; cat "$tmp/err"; exit 1; }
  [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q '^torch_hccl: ' "$tmp/err" ||
    { echo "$1: expected one 'torch_hccl:' line, got:"; cat "$tmp/err"; exit 1; }
  echo "$1: $(cat "$tmp/err")"
}
step "import torch never fails on torch_hccl's account"
cp "$pkg/_build.py" "$tmp/_build.py"
sed -i 's/^TORCH_VERSION = .*/TORCH_VERSION = "1.0.0"/' "$pkg/_build.py"
one_line "built for another torch"
echo 'TORCH_VERSION = (' >"$pkg/_build.py"
one_line "a broken _build.py"
cp "$tmp/_build.py" "$pkg/_build.py"
mv "$pkg/lib/libhccl.so.0" "$tmp/"
one_line "libhccl.so.0 missing"
mv "$tmp/libhccl.so.0" "$pkg/lib/"

step "lazy registration, no second one, TORCH_DEVICE_BACKEND_AUTOLOAD=0"
"$wpy" -W error -c '
import sys, torch, torch.distributed as d
p = d.Backend._plugins["HCCL"]
assert getattr(p.creator_fn, "torch_hccl_autoload", False), p
assert "torch_hccl" not in sys.modules and "torch_hccl._C" not in sys.modules, "not lazy"
import torch_hccl                       # -W error: a warning here fails
assert d.Backend._plugins["HCCL"] is p, "registered twice"
print("registered at import torch, torch_hccl not loaded; import torch_hccl kept it")'
TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$wpy" -c '
import torch, torch.distributed as d
assert "HCCL" not in d.Backend._plugins
import torch_hccl
assert d.Backend._plugins["HCCL"].creator_fn is torch_hccl._create
print("autoload off: nothing at import torch; import torch_hccl registers")'

# Stand-ins that register "hccl" from their own "torch.backends" entry point, as Ascend's
# torch_npu does at its import; on PYTHONPATH, so their entry point runs before ours.
standin() {  # standin DIR NAME
  mkdir -p "$1/$2" "$1/$2-1.0.dist-info"
  printf 'import torch.distributed as d\ndef create(*a):\n    raise RuntimeError("%s")\ndef _autoload():\n    d.Backend.register_backend("hccl", create, devices=["cpu"])\n' "$2" >"$1/$2/__init__.py"
  printf 'Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n' "$2" >"$1/$2-1.0.dist-info/METADATA"
  printf '[torch.backends]\n%s = %s:_autoload\n' "$2" "$2" >"$1/$2-1.0.dist-info/entry_points.txt"
}
step "another package's \"hccl\": a stand-in torch_npu, and one that registered first"
for name in torch_npu other_hccl; do
  standin "$tmp/$name" "$name"
  PYTHONPATH=$tmp/$name "$wpy" -c '
import sys, warnings, torch, torch.distributed as d
name = sys.argv[1]
assert d.Backend._plugins["HCCL"].creator_fn.__module__ == name, d.Backend._plugins["HCCL"]
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    import torch_hccl
assert d.Backend._plugins["HCCL"].creator_fn.__module__ == name, "torch_hccl took the name"
assert len(w) == 1 and "already registered by " + name in str(w[0].message), [str(x.message) for x in w]
print("%s: \"hccl\" stays %s'"'"'s; import torch_hccl: %s" % (name, name, w[0].message))' "$name" 2>"$tmp/err" ||
    { cat "$tmp/err"; exit 1; }
  [ ! -s "$tmp/err" ] || { echo "$name: import torch printed:"; cat "$tmp/err"; exit 1; }
done
echo "pip test passed"
