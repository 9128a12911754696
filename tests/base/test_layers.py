#!/usr/bin/env python3
"""test_layers.py - the layer map of hccl/src/README.md holds for every include.

Reads two tables from hccl/src/README.md, so the map and the check cannot drift apart:

  the layer table   | folder | layer | may include |   one row per folder of hccl/src; the third
                    column names, in backticks, the folders whose headers that folder's files
                    may include (its own always; "nothing" for none).
  the exceptions    | file | includes | why |          upward includes not removed yet, each a
                    file (folder/name) and a header (folder/name.h), with the reason.

Then parses every `#include "x.h"` in hccl/src/*/*.c and *.h, finds the folder of x.h (headers
are found by name, so a name must be unique across the folders), and fails, naming the file,
the line and the rule, when:
  - a file includes a header of a folder its own folder may not use, and the pair is not a
    named exception;
  - a named exception no longer happens (the list only shrinks, and says what is true);
  - the layer table has a circle (folder A may include B, and B, through others, A), or the
    includes that are not exceptions make one between folders, or headers include each other
    in a circle;
  - a header name is in two folders, or an included header is in none (hccl.h, the public
    header, is allowed everywhere).

The components outside hccl/src (ddp/, launcher/, torch_hccl/) are checked the same way, by
their READMEs' "may use" column, in test_components.py (ctest `components`).

Usage: test_layers.py [--root DIR] [--readme FILE] [-v]
  --root    the repository (default: two folders above this script)
  --readme  the map to check against (default: ROOT/hccl/src/README.md); with an older tree as
            --root and today's README, it counts the violations that tree had
  -v        also list the named exceptions that matched
Exit 0 when the includes keep to the map, 1 when they do not, 2 on a malformed README.
"""
import argparse
import os
import re
import sys

PUBLIC = {"hccl.h"}


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_tables(readme):
    """The layer table {folder: set(may include)} and the exceptions {(file, header): why}."""
    layers, exceptions = {}, {}
    mode = None
    with open(readme, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.lstrip().startswith("|"):
                mode = None
                continue
            row = cells(line)
            head = [c.lower() for c in row]
            if head[:1] == ["folder"] and len(head) >= 3 and head[2] == "may include":
                mode = "layers"
                continue
            if head[:3] == ["file", "includes", "why"]:
                mode = "exceptions"
                continue
            if set("".join(row)) <= set("-: "):
                continue
            if mode == "layers":
                folder = row[0].strip("`").rstrip("/")
                uses = {u.rstrip("/") for u in re.findall(r"`([a-z_]+)/`", row[2])}
                layers[folder] = uses
            elif mode == "exceptions":
                src = row[0].strip("`")
                hdr = row[1].strip("`")
                if "/" not in src or "/" not in hdr or len(row) < 3 or not row[2]:
                    sys.exit(f"{readme}:{n}: an exception is "
                             "`folder/file` | `folder/header.h` | why")
                exceptions[(src, hdr)] = row[2]
    if not layers:
        sys.exit(f"{readme}: no layer table (| folder | layer | may include |)")
    return layers, exceptions


def find_cycle(graph):
    """One circle in {node: set(nodes)} as a list, or None."""
    state, stack = {}, []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if not state.get(v):
                c = visit(v)
                if c:
                    return c
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(graph):
        if not state.get(u):
            c = visit(u)
            if c:
                return c
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.join(here, "..", ".."))
    ap.add_argument("--readme")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    src = os.path.join(a.root, "hccl", "src")
    readme = a.readme or os.path.join(src, "README.md")
    layers, exceptions = read_tables(readme)
    problems = []

    cycle = find_cycle({f: u - {f} for f, u in layers.items()})
    if cycle:
        problems.append(f"{readme}: the layer table has a circle: "
                        + " -> ".join(c + "/" for c in cycle))

    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for d in folders:
        if d not in layers:
            problems.append(f"{readme}: folder {d}/ has no row in the layer table")
    home = {}
    for d in folders:
        for name in sorted(os.listdir(os.path.join(src, d))):
            if name.endswith(".h"):
                if name in home:
                    problems.append(f"hccl/src/{d}/{name}: the name is also "
                                    f"hccl/src/{home[name]}/{name} (headers are found by name)")
                home[name] = d

    seen_exc, folder_edges, header_edges = set(), {}, {}
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
    for d in folders:
        for name in sorted(os.listdir(os.path.join(src, d))):
            if not name.endswith((".c", ".h")):
                continue
            rel = f"{d}/{name}"
            with open(os.path.join(src, d, name), encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    m = inc.match(line)
                    if not m:
                        continue
                    hdr = os.path.basename(m.group(1))
                    if hdr in PUBLIC:
                        continue
                    if hdr not in home:
                        problems.append(f"hccl/src/{rel}:{n}: includes \"{hdr}\", "
                                        "which is in no folder of hccl/src")
                        continue
                    to = home[hdr]
                    if name.endswith(".h"):
                        header_edges.setdefault(rel, set()).add(f"{to}/{hdr}")
                    if to == d:
                        continue
                    if (rel, f"{to}/{hdr}") in exceptions:
                        seen_exc.add((rel, f"{to}/{hdr}"))
                        if a.v:
                            print(f"exception: hccl/src/{rel}:{n}: \"{hdr}\" ({to}/): "
                                  f"{exceptions[(rel, to + '/' + hdr)]}")
                        continue
                    folder_edges.setdefault(d, set()).add(to)
                    if to not in layers.get(d, set()):
                        may = ", ".join(sorted(u + "/" for u in layers.get(d, ()))) or "nothing"
                        problems.append(f"hccl/src/{rel}:{n}: includes \"{hdr}\" of {to}/, "
                                        f"but {d}/ may include {may} "
                                        "(layer table, hccl/src/README.md)")

    for (f, h), why in sorted(exceptions.items()):
        if (f, h) not in seen_exc:
            problems.append(f"{readme}: exception {f} -> {h} no longer happens: "
                            "take it off the list")

    cycle = find_cycle(folder_edges)
    if cycle:
        problems.append("the includes make a circle between folders: "
                        + " -> ".join(c + "/" for c in cycle))
    cycle = find_cycle(header_edges)
    if cycle:
        problems.append("headers include each other in a circle: " + " -> ".join(cycle))

    for p in problems:
        print(p)
    print(f"{len(problems)} problem(s); {len(seen_exc)} named exception(s) in use",
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
