#!/usr/bin/env python3
"""test_components.py - each component's README map holds for every file and every include.

The sibling of test_layers.py (which checks hccl/src by its layer table), for the components
outside the library: ddp/, launcher/ and torch_hccl/ (COMPONENTS below). Each has a README.md
whose map is one table with "may use" as its last column:

  | file | what it is | may use |
  | --- | --- | --- |
  | `src/half.c` | fp32/fp16 conversion ... | `hccl.h`, `hccl/src/base/half.h` |
  | `main.c` | the order of things ... | nothing |

  file      in backticks, the component's file, relative to its folder (`src/half.c`); a glob
            names several (`csrc/work.[ch]pp`). One row per file: every source file of the
            component (.c .h .cc .cpp .hpp .py, below its folder) must be named by exactly one
            row, and every name must match a file.
  may use   the headers outside the component that the file may include with quotes
            (`#include "x.h"`), each in backticks, comma-separated, as a path from the
            repository's top (`hccl/src/topo/topo.h`), or `hccl.h` for libhccl's public header
            (hccl/include/hccl.h); or "nothing". A permission, not an inventory: a listed
            header the file does not include is fine (-v lists them).
  Not listed, always allowed: the component's own headers (any of its folders), and every
  include with <> (system and third-party headers: torch, pybind11, libuv ...). Python files
  have rows, for the map, and "nothing": their imports are not checked.

Fails, naming the file, the line and the rule, when:
  - a quoted include is not the component's own header and its row does not allow it (the
    message says where the header lives, and what the row allows);
  - an include in angle brackets names a private header of the project outside the component
    (one not in an include/ folder: a project header is one however it is written), unless
    the system has one of that name;
  - a row names a file that does not exist, or a source file has no row, or two rows;
  - a "may use" entry is not a file of the repository, or is the component's own header, or
    is a header of hccl/src: the components reach libhccl's sources only through its internal
    interface, hccl/iface/hccl_iface.h (CMake target hccl_iface; nothing else of hccl/src is on
    their include path);
  - anywhere else in the tree outside hccl/ and tests/ (perf/, bench/, examples/, whatever
    comes), a C or C++ file includes a header of hccl/src, quoted or in angle brackets;
  - in the whole tree outside hccl/src (which test_layers.py checks by its own, stricter
    rules), C and C++ files make a circle: headers that include each other, or files that use
    each other's functions (test_layers.py's C reader: a non-static name defined in a .c or
    .cpp file and used in another, directly or through a header's inline function or macro;
    it reads file-scope C, so C++ inside a namespace adds no uses, only its includes).

Usage: test_components.py [--root DIR] [-v] [COMPONENT ...]
  --root      the repository (default: two folders above this script)
  COMPONENT   check only these (default: all of COMPONENTS)
  -v          also print each file's external includes and its unused permissions
Exit 0 when every component keeps to its map, 1 when one does not, 2 on a malformed README.
"""
import argparse
import glob
import os
import re
import sys

COMPONENTS = ("ddp", "launcher", "torch_hccl")
SOURCE_EXT = (".c", ".h", ".cc", ".cpp", ".hpp", ".py")
HEADER_EXT = (".h", ".hpp")
C_EXT = (".c", ".h", ".cc", ".cpp", ".hpp")
PUBLIC = {"hccl.h": "hccl/include/hccl.h"}  # the short names a "may use" cell may use
PRIVATE_TREE = "hccl/src/"  # reached from outside hccl/ only through IFACE
IFACE = "hccl/iface/hccl_iface.h"
IFACE_HINT = f"; libhccl's sources are reached only through {IFACE}"
SYSTEM_DIRS = ("/usr/include", "/usr/local/include")
TREE_SKIP = ("hccl", "tests")  # hccl/ has test_layers.py; tests/ are white-box
SKIP_DIRS = ("__pycache__",)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ANGLE = re.compile(r'^\s*#\s*include\s+<([^>]+)>')

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_layers  # noqa: E402  (its C reader and find_cycle)


class Malformed(Exception):
    pass


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_map(readme, label):
    """[(line, [globs], [headers])] from the README's `| file | ... | may use |` table; label
    names the README in messages."""
    rows, in_table, found = [], False, False
    with open(readme, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.lstrip().startswith("|"):
                in_table = False
                continue
            row = cells(line)
            head = [c.lower() for c in row]
            if head[0] == "file" and head[-1] == "may use" and len(head) >= 2:
                in_table = found = True
                continue
            if not in_table or set("".join(row)) <= set("-: "):
                continue
            names = re.findall(r"`([^`]+)`", row[0])
            if not names:
                raise Malformed(f"{label}:{n}: a row's first cell names its file in backticks")
            may = row[-1]
            if may.lower() == "nothing":
                uses = []
            else:
                uses = re.findall(r"`([^`]+)`", may)
                rest = re.sub(r"`[^`]+`", "", may).replace(",", "").strip()
                if not uses or rest:
                    raise Malformed(f"{label}:{n}: \"may use\" is headers in backticks, "
                                    f"comma-separated, or \"nothing\"; found: {may}")
            rows.append((n, names, uses))
    if not found:
        raise Malformed(f"{label}: no map table (| file | what it is | may use |)")
    return rows


def walk_files(top, exts, skip_tests=False):
    """Files under top with one of exts, as paths relative to top (build and hidden folders,
    and with skip_tests the tests/ folder, left out)."""
    out = []
    for dirpath, dirnames, files in os.walk(top):
        rel_dir = os.path.relpath(dirpath, top)
        dirnames[:] = sorted(d for d in dirnames
                             if not d.startswith((".", "build")) and d not in SKIP_DIRS
                             and not d.endswith(".egg-info")
                             and not (skip_tests and rel_dir == "." and d == "tests"))
        for name in sorted(files):
            if name.endswith(exts):
                out.append(os.path.normpath(os.path.join(rel_dir, name)))
    return out


def angle_private(line, where, comp):
    """(name, home) when line includes in angle brackets a header of the project outside comp
    that the system does not have; else None."""
    m = ANGLE.match(line)
    if not m:
        return None
    inc = m.group(1)
    homes = [h for h in where.get(os.path.basename(inc), [])
             if h.endswith(inc) and not h.startswith(comp + "/") and "/include/" not in h]
    if not homes or any(os.path.exists(os.path.join(d, inc)) for d in SYSTEM_DIRS):
        return None
    return inc, ", ".join(homes)


def tree_files(root):
    """The C and C++ files of the tree outside TREE_SKIP, relative to root."""
    return [f for f in walk_files(root, C_EXT)
            if f.split(os.sep)[0] not in TREE_SKIP and os.sep in f]


def tree_private(root, where):
    """Problems: a file outside hccl/ and tests/ including a header of hccl/src."""
    problems = []
    for f in tree_files(root):
        if f.split(os.sep)[0] in COMPONENTS:
            continue  # their maps' rule says it (and names hccl_iface.h)
        with open(os.path.join(root, f), encoding="utf-8") as src:
            for k, line in enumerate(src, 1):
                m = INCLUDE.match(line) or ANGLE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                homes = [h for h in where.get(os.path.basename(inc), [])
                         if h.startswith(PRIVATE_TREE) and h.endswith(inc)]
                if homes and not (line.lstrip("# \t").startswith("include <") and any(
                        os.path.exists(os.path.join(d, inc)) for d in SYSTEM_DIRS)):
                    problems.append(f"{f}:{k}: includes \"{inc}\" ({homes[0]}), a private "
                                    f"header of libhccl: outside hccl/ and tests/, its sources "
                                    f"are reached only through {IFACE} (target hccl_iface)")
    return problems


def tree_circles(root):
    """Problems: circles of files in the tree outside hccl/src (its own check is
    test_layers.py): headers including each other, or files using each other's names."""
    files = [f for f in walk_files(root, C_EXT, skip_tests=True)
             if not f.startswith(os.path.join("hccl", "src") + os.sep)]
    by_name = {}
    for f in files:
        by_name.setdefault(os.path.basename(f), []).append(f)

    def resolve(f, inc):
        # the header a quoted include of f means: beside f, else the only one of that name in
        # f's top folder, else the only one in the tree
        near = os.path.normpath(os.path.join(os.path.dirname(f), inc))
        if near in by_name.get(os.path.basename(inc), []):
            return near
        cands = [h for h in by_name.get(os.path.basename(inc), []) if h.endswith(inc)]
        top = [h for h in cands if h.split(os.sep)[0] == f.split(os.sep)[0]]
        pick = top if len(top) == 1 else cands
        return pick[0] if len(pick) == 1 else None

    inc_edges, scans = {}, {}
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8") as src:
            for line in src:
                m = INCLUDE.match(line)
                h = m and resolve(f, m.group(1))
                if h and h != f:
                    inc_edges.setdefault(f, set()).add(h)
        scans[f] = test_layers.scan(os.path.join(root, f))
    problems = []
    headers = {f: {h for h in t if h.endswith(HEADER_EXT)}
               for f, t in inc_edges.items() if f.endswith(HEADER_EXT)}
    cycle = test_layers.find_cycle(headers)
    if cycle:
        problems.append("headers include each other in a circle: " + " -> ".join(cycle))

    # name -> the files defining it (non-static, in a .c or .cpp file), per top folder
    defined, inline = {}, {}
    for f, (defs, protos, bodies, macros) in scans.items():
        if f.endswith(HEADER_EXT):
            for nm, refs in list(bodies.items()) + list(macros.items()):
                inline.setdefault(nm, refs)
            continue
        for nm, (ln, static, _) in defs.items():
            if not static and nm != "main":
                defined.setdefault(nm, []).append(f)
    uses = {}
    for f, (defs, protos, bodies, macros) in scans.items():
        if f.endswith(HEADER_EXT):
            continue
        seen, _ = test_layers.names_used(defs, bodies, macros, inline, defined)
        for x in seen:
            homes = defined.get(x, [])
            top = [h for h in homes if h.split(os.sep)[0] == f.split(os.sep)[0]]
            pick = top if len(top) == 1 else homes
            if len(pick) == 1 and pick[0] != f:
                uses.setdefault(f, {}).setdefault(pick[0], []).append(x)
    graph = {f: set(t) for f, t in uses.items()}
    while True:
        cycle = test_layers.find_cycle(graph)
        if not cycle:
            break
        steps = [f"{x} -({', '.join(sorted(uses[x][y])[:2])})-> "
                 for x, y in zip(cycle, cycle[1:])]
        problems.append("files use each other in a circle: " + "".join(steps) + cycle[-1]
                        + " (rule: no circle of files, in hccl/src or anywhere; move what both "
                        "need to a file of its own)")
        graph[cycle[-2]].discard(cycle[-1])
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.join(here, "..", ".."))
    ap.add_argument("-v", action="store_true")
    ap.add_argument("components", nargs="*")
    a = ap.parse_args()
    root = os.path.normpath(a.root)
    problems = []

    # Where every header of the project lives, by name, for the messages.
    where = {}
    for rel in walk_files(root, HEADER_EXT, skip_tests=True):
        where.setdefault(os.path.basename(rel), []).append(rel)

    for comp in a.components or COMPONENTS:
        top = os.path.join(root, comp)
        readme_rel = f"{comp}/README.md"
        try:
            rows = read_map(os.path.join(top, "README.md"), readme_rel)
        except Malformed as e:
            print(e)
            return 2
        except OSError as e:
            print(f"{readme_rel}: cannot read it ({e.strerror}): every component has a map")
            return 2
        files = walk_files(top, SOURCE_EXT)
        own = [f for f in files if f.endswith(HEADER_EXT)]

        row_of = {}
        for n, names, uses in rows:
            for name in names:
                hits = [os.path.relpath(p, top)
                        for p in sorted(glob.glob(os.path.join(top, name))) if os.path.isfile(p)]
                if not hits:
                    problems.append(f"{readme_rel}:{n}: the row names `{name}`, which is no "
                                    f"file of {comp}/: take the row off, or fix the name")
                for h in hits:
                    if h in row_of and row_of[h][0] != n:
                        problems.append(f"{readme_rel}:{n}: `{h}` has a row already "
                                        f"(line {row_of[h][0]}): one row per file")
                    row_of[h] = (n, uses)
            for u in uses:
                path = PUBLIC.get(u, u)
                if not os.path.isfile(os.path.join(root, path)):
                    problems.append(f"{readme_rel}:{n}: may use `{u}`, which is not a file of "
                                    "the repository (a path from its top, or `hccl.h`)")
                elif path.startswith(comp + "/"):
                    problems.append(f"{readme_rel}:{n}: may use `{u}`, {comp}/'s own header: "
                                    "own headers are always allowed, list only the others")
                elif path.startswith(PRIVATE_TREE):
                    problems.append(f"{readme_rel}:{n}: may use `{u}`, a private header of "
                                    f"libhccl: outside hccl/ its sources are reached only "
                                    f"through `{IFACE}` (add the header there, with its user)")

        for f in files:
            if f not in row_of:
                problems.append(f"{comp}/{f}: has no row in {readme_rel}'s map: add one "
                                "(| `file` | what it is | may use |)")
                continue
            if not f.endswith(C_EXT):
                continue
            n, uses = row_of[f]
            used = set()
            with open(os.path.join(top, f), encoding="utf-8") as src:
                for k, line in enumerate(src, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        bad = angle_private(line, where, comp)
                        if bad:
                            problems.append(f"{comp}/{f}:{k}: includes <{bad[0]}> ({bad[1]}): a "
                                            "header of the project is one however it is "
                                            "written; quote it, and its row must allow it")
                        continue
                    inc = m.group(1)
                    if any(h == inc or h.endswith("/" + inc) for h in own):
                        continue
                    ok = [u for u in uses
                          if PUBLIC.get(u, u) == inc or PUBLIC.get(u, u).endswith("/" + inc)]
                    if ok:
                        used.update(ok)
                        if a.v:
                            print(f"{comp}/{f}:{k}: \"{inc}\" allowed ({readme_rel}:{n})")
                        continue
                    homes = where.get(os.path.basename(inc), [])
                    home = (f" ({', '.join(homes)}{IFACE_HINT if any(h.startswith(PRIVATE_TREE) for h in homes) else ''})" if homes else
                            ", which is no header of the project (system and third-party "
                            "headers are included with <>)")
                    may = ("only " + ", ".join(f"`{u}`" for u in uses)) if uses else "nothing"
                    problems.append(f"{comp}/{f}:{k}: includes \"{inc}\"{home}, but its row "
                                    f"({readme_rel}:{n}) allows {may} outside {comp}/ "
                                    "(\"may use\")")
            if a.v:
                for u in uses:
                    if u not in used:
                        print(f"{comp}/{f}: may use `{u}` ({readme_rel}:{n}), does not")

    if not a.components:
        problems += tree_private(root, where) + tree_circles(root)

    for p in problems:
        print(p)
    print(f"{len(problems)} problem(s) in {', '.join(a.components or COMPONENTS)}",
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
