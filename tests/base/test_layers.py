#!/usr/bin/env python3
"""test_layers.py - the layer map of hccl/src/README.md holds for every include.

Reads two tables from hccl/src/README.md, so the map and the check cannot drift apart:

  the layer table   | folder | layer | may include |   one row per folder of hccl/src; the third
                    column names, in backticks, the folders whose headers that folder's files
                    may include (its own always; "nothing" for none).
  the exceptions    | file | includes | why |          upward includes not removed yet, each a
                    file (folder/name) and a header (folder/name.h), with the reason.

Then reads every include of hccl/src/*/*.c and *.h and of the rooms below (*/*/*.c, *.h),
quoted or in angle brackets (a name that is a header of hccl/src is one however it is written:
every layer's folder and room is on the include path),
finds the folder of the header (headers are found by name, so a name must be unique across the
folders), follows it through the headers it includes, and reads, with a small C reader, what
each .c file defines, declares and uses by name. It fails, naming the file, the line and the
rule, when:
  - a file includes a header of a folder its own folder may not use, directly or through
    another header, and the pair is not a named exception;
  - a file includes a header of a room (a sub-folder of a layer's folder: transport/shm/,
    transport/tcp/) that it is not in, directly or through another header: a room's headers
    are private to its files (the room rule); of tests/, only tests/<layer>/ of that room
    (tests/transport/) and tests/fuzz/ may include them; and a file outside a room uses a
    name a room's file defines only where a header outside the room declares it (the ops
    table of transport.h: hccl__transport_tcp);
  - a file includes a header of a folder its own may use only in part (the table's "(only
    `x.h`)" after a folder, as transport/'s of bootstrap/) other than the ones named;
  - a file includes a header of hccl/src in angle brackets;
  - a .c file declares a function it does not define (a prototype written by hand reaches any
    layer without an include);
  - a .c file uses (calls or names) a function or variable defined in a .c file of a folder its
    own may not use, or, where the use is limited to named headers, one not declared in them;
    uses through a header's inline functions and macros count;
  - a named exception no longer happens (the list only shrinks, and says what is true);
  - the layer table has a circle (folder A may include B, and B, through others, A), or the
    includes that are not exceptions make one between folders, or headers include each other
    in a circle, or .c files use each other in a circle (inside one folder or across);
  - a header name is in two folders, an included header is in none (hccl.h, the public
    header, is allowed everywhere), or two .c files define one name.

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

# --- a small C reader: enough of C to see what a file defines, declares and uses by name ---
TOK = re.compile(r'[A-Za-z_]\w*|->|\d[\w.]*|\S')
KEYWORDS = set("""auto break case char const continue default do double else enum extern float for goto if
inline int long register restrict return short signed sizeof static struct switch typedef union
unsigned void volatile while _Bool _Atomic _Thread_local __attribute__ __typeof__ typeof bool
_Alignof _Static_assert __inline__ __restrict""".split())


def strip(text):
    """(code, directives): comments, strings and chars blanked (newlines kept); each
    preprocessor line (with its continuations) blanked from code and returned as (line, text)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    code = "".join(out)
    lines = code.split("\n")
    directives, k = [], 0
    while k < len(lines):
        if lines[k].lstrip().startswith("#"):
            start, body = k, [lines[k]]
            while lines[k].rstrip().endswith("\\") and k + 1 < len(lines):
                lines[k] = ""
                k += 1
                body.append(lines[k])
            lines[k] = ""
            lines[start] = ""
            directives.append((start + 1, " ".join(b.rstrip("\\") for b in body)))
        k += 1
    return "\n".join(lines), directives


def tokens(code):
    line = 1
    pos = 0
    for m in TOK.finditer(code):
        line += code.count("\n", pos, m.start())
        pos = m.start()
        yield m.group(), line


def refs_of(toks):
    """Identifiers used (not members, not keywords) in a token list [(tok, line)]."""
    out = {}
    for k, (t, ln) in enumerate(toks):
        if not (t[0].isalpha() or t[0] == "_") or t in KEYWORDS:
            continue
        if k and toks[k - 1][0] in (".", "->"):
            continue
        out.setdefault(t, ln)
    return out


def scan(path):
    """What one file defines, declares and uses at file scope:
    defs {name: (line, static, kind)} for functions with a body ('fn') and variables ('var');
    protos {name: (line, static)}: functions declared without a body;
    bodies {name: {ident: line}}: what each function body or initializer uses;
    macros {name: {ident: line}}: what each function-like or object-like macro uses."""
    with open(path, encoding="utf-8") as f:
        code, directives = strip(f.read())
    macros = {}
    for ln, d in directives:
        m = re.match(r"\s*#\s*define\s+(\w+)(\([^)]*\))?(.*)", d)
        if m:
            params = set(re.findall(r"\w+", m.group(2) or ""))
            body = [(t, ln) for t, _ in tokens(m.group(3))]
            macros[m.group(1)] = {k: v for k, v in refs_of(body).items() if k not in params}
    toks = list(tokens(code))
    defs, protos, bodies = {}, {}, {}
    stmt, k = [], 0
    while k < len(toks):
        t, ln = toks[k]
        if t == ";" and not paren_open(stmt):
            note_decl(stmt, defs, protos)
            stmt = []
        elif t == "{" and not paren_open(stmt):
            body, k = block(toks, k)
            words = [s for s, _ in stmt]
            if words and words[-1] == ")" or "__attribute__" in words[-6:] and ")" in words:
                name = fn_name(words)
                if name:
                    defs[name] = (stmt_line(stmt, name), "static" in words, "fn")
                    bodies[name] = refs_of(body)
                stmt = []
            elif "=" in words:
                name = var_name(words)
                if name and "typedef" not in words and "extern" not in words:
                    defs[name] = (stmt_line(stmt, name), "static" in words, "var")
                    bodies[name] = refs_of(body)
                stmt = []
            else:
                stmt.append(("{}", ln))  # struct/union/enum body: skip it, keep the declarator
        else:
            stmt.append((t, ln))
        k += 1
    return defs, protos, bodies, macros


def paren_open(stmt):
    d = 0
    for t, _ in stmt:
        d += (t == "(") - (t == ")")
    return d > 0


def block(toks, k):
    depth, body = 0, []
    while k < len(toks):
        t = toks[k][0]
        depth += (t == "{") - (t == "}")
        body.append(toks[k])
        if depth == 0:
            return body[1:-1], k
        k += 1
    return body, k


def fn_name(words):
    for i, w in enumerate(words):
        if w == "(" and i and re.match(r"[A-Za-z_]\w*$", words[i - 1]) and \
                words[i - 1] not in KEYWORDS:
            return words[i - 1]
    return None


def var_name(words):
    cut = len(words)
    for stop in ("=", "["):
        if stop in words:
            cut = min(cut, words.index(stop))
    for w in reversed(words[:cut]):
        if re.match(r"[A-Za-z_]\w*$", w) and w not in KEYWORDS:
            return w
    return None


def stmt_line(stmt, name):
    for t, ln in stmt:
        if t == name:
            return ln
    return stmt[0][1] if stmt else 0


def note_decl(stmt, defs, protos):
    words = [s for s, _ in stmt]
    if not words or words[0] in ("typedef", "_Static_assert"):
        return
    if "(" in words:
        first = words.index("(")
        # `int (*fp)(void);` or `T x = f(y);` are variables; `T f(args);` a prototype
        if "=" in words and words.index("=") < first:
            name = var_name(words)
            if name and "extern" not in words:
                defs[name] = (stmt_line(stmt, name), "static" in words, "var")
            return
        if words[first + 1:first + 2] == ["*"]:
            return
        name = fn_name(words)
        if name:
            protos[name] = (stmt_line(stmt, name), "static" in words)
        return
    if "extern" in words or words[0] in ("struct", "union", "enum") and \
            len([w for w in words if w != "{}"]) <= 2:
        return
    name = var_name(words)
    if name and name not in ("struct", "union", "enum"):
        defs[name] = (stmt_line(stmt, name), "static" in words, "var")



def externs_of(path):
    """The variables a header declares extern (`extern const struct x name;`, `extern T a[];`)."""
    with open(path, encoding="utf-8") as f:
        code, _ = strip(f.read())
    return re.findall(r"\bextern\b[^;(){}]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*;", code)


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_tables(readme):
    """The layer table {folder: set(may include)} and the exceptions {(file, header): why}."""
    layers, exceptions, only = {}, {}, {}
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
                uses = set()
                for m in re.finditer(r"`([a-z_]+)/`(\s*\(only ([^:)]*))?", row[2]):
                    uses.add(m.group(1))
                    if m.group(3):
                        only[(folder, m.group(1))] = set(re.findall(r"`([\w.]+\.h)`", m.group(3)))
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
    return layers, exceptions, only


def names_used(defs, bodies, macros, inline, defined):
    """(seen, refs): the names one .c file uses that it does not define static, directly or
    through the inline functions and macros of headers (inline: {name: {ident: line}}) that
    no .c file defines; refs gives each name's first line in the file."""
    own = {nm for nm, v in defs.items() if v[1]} | set(macros)
    refs = {}
    for r in list(bodies.values()) + list(macros.values()):
        for k, ln in r.items():
            refs.setdefault(k, ln)
    todo, seen = sorted(refs), set()
    while todo:
        x = todo.pop()
        if x in seen or x in own:
            continue
        seen.add(x)
        if x in inline and x not in defined:
            for k in inline[x]:
                refs.setdefault(k, refs[x])
                todo.append(k)
    return seen, refs


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
    ap.add_argument("--stats", action="store_true",
                    help="also print the include graph's counts (files, includes, circles)")
    a = ap.parse_args()
    src = os.path.join(a.root, "hccl", "src")
    readme = a.readme or os.path.join(src, "README.md")
    layers, exceptions, only = read_tables(readme)
    problems = []

    cycle = find_cycle({f: u - {f} for f, u in layers.items()})
    if cycle:
        problems.append(f"{readme}: the layer table has a circle: "
                        + " -> ".join(c + "/" for c in cycle))

    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for d in folders:
        if d not in layers:
            problems.append(f"{readme}: folder {d}/ has no row in the layer table")
    # Every folder of a layer and its rooms (sub-folders: transport/tcp), as paths below src.
    dirs = []
    for d in folders:
        for dirpath, dirnames, _ in os.walk(os.path.join(src, d)):
            dirnames.sort()
            dirs.append(os.path.relpath(dirpath, src).replace(os.sep, "/"))
    home = {}  # header name -> the folder or room holding it ("base", "transport/tcp")
    for d in dirs:
        for name in sorted(os.listdir(os.path.join(src, d))):
            if name.endswith(".h"):
                if name in home:
                    problems.append(f"hccl/src/{d}/{name}: the name is also "
                                    f"hccl/src/{home[name]}/{name} (headers are found by name)")
                home[name] = d

    def layer(path):
        return path.split("/")[0]

    def room(path):
        """The room (a sub-folder of a layer's folder: "transport/tcp") a folder is or is in, or
        None for a layer's own folder."""
        parts = path.split("/")
        return "/".join(parts[:2]) if len(parts) > 1 else None

    def room_breaks(where, hdr):
        """Why a file of folder `where` (below hccl/src; "tests/..." for a test) may not include
        header hdr, which is private to its room, or None."""
        r = room(home[hdr])
        if r is None or room(where) == r:
            return None
        if where.startswith("tests/"):
            t = where[len("tests/"):]
            if t == "fuzz" or t.startswith("fuzz/") or r == t or r.startswith(t + "/"):
                return None
        return room_rule(r)

    def room_rule(r):
        door = ", ".join(sorted(h for h, d in home.items() if d == layer(r)))
        return (f"{r}/ is a room of its own: its headers are private to its files (and its tests "
                f"under tests/{layer(r)}/, and tests/fuzz/); the rest of the library reaches it "
                f"only through the headers at the top of {layer(r)}/ ({door}) (room rule, "
                "hccl/src/README.md)")

    def may_text(d):
        return ", ".join(sorted(u + "/" + (" (only " + ", ".join(sorted(only[(d, u)])) + ")"
                                            if (d, u) in only else "")
                                for u in layers.get(d, ()))) or "nothing"

    def rule_breaks(d, to, hdr):
        """Why folder d's files may not include header hdr of folder to, or None."""
        if to == d:
            return None
        if to not in layers.get(d, set()):
            return f"{d}/ may include {may_text(d)} (layer table, hccl/src/README.md)"
        if (d, to) in only and hdr not in only[(d, to)]:
            return (f"{d}/ may include of {to}/ only {', '.join(sorted(only[(d, to)]))} "
                    "(layer table, hccl/src/README.md)")
        return None

    # Every include, quoted or in angle brackets: a name that is a header of hccl/src is one,
    # however it is written (every layer's folder is on the include path).
    seen_exc, folder_edges, header_edges = set(), {}, {}
    includes = {}  # rel -> [(line, header, angle)]
    inc = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
    for dd in dirs:
        d = layer(dd)
        for name in sorted(os.listdir(os.path.join(src, dd))):
            if not name.endswith((".c", ".h")):
                continue
            rel = f"{dd}/{name}"
            includes[rel] = []
            with open(os.path.join(src, dd, name), encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    m = inc.match(line)
                    if not m:
                        continue
                    angle, path = m.group(1) == "<", m.group(2)
                    hdr = os.path.basename(path)
                    if angle and ("/" in path or hdr not in home):
                        continue  # a system header
                    if hdr in PUBLIC:
                        continue
                    if angle:
                        problems.append(f"hccl/src/{rel}:{n}: includes <{hdr}> in angle brackets, "
                                        f"but it is {home[hdr]}/{hdr} of hccl/src: write "
                                        f"#include \"{hdr}\" (rule: the library's headers are "
                                        "included in quotes)")
                    if hdr not in home:
                        problems.append(f"hccl/src/{rel}:{n}: includes \"{hdr}\", "
                                        "which is in no folder of hccl/src")
                        continue
                    to = layer(home[hdr])
                    includes[rel].append((n, hdr, angle))
                    if name.endswith(".h"):
                        header_edges.setdefault(rel, set()).add(f"{home[hdr]}/{hdr}")
                    why = room_breaks(dd, hdr)
                    if why:
                        problems.append(f"hccl/src/{rel}:{n}: includes \"{hdr}\" of "
                                        f"{home[hdr]}/, but {why}")
                        continue
                    if to == d:
                        continue
                    if (rel, f"{home[hdr]}/{hdr}") in exceptions:
                        seen_exc.add((rel, f"{home[hdr]}/{hdr}"))
                        if a.v:
                            print(f"exception: hccl/src/{rel}:{n}: \"{hdr}\" ({home[hdr]}/): "
                                  f"{exceptions[(rel, home[hdr] + '/' + hdr)]}")
                        continue
                    folder_edges.setdefault(d, set()).add(to)
                    why = rule_breaks(d, to, hdr)
                    if why:
                        problems.append(f"hccl/src/{rel}:{n}: includes \"{hdr}\" of {to}/, "
                                        f"but {why}")

    # Includes through other headers: what a file gets from a header it includes counts as
    # included by the file (a header of a folder that may not be used does not become usable
    # by being included from one that may).
    for rel, direct in sorted(includes.items()):
        d = layer(rel)
        told = set()
        for n, hdr, _ in direct:
            if (rel, f"{home[hdr]}/{hdr}") in exceptions:
                continue
            if room_breaks(os.path.dirname(rel), hdr):
                continue  # the include itself failed, naming the room
            stack = [(hdr, [hdr])]
            seen = {hdr}
            while stack:
                h, chain = stack.pop()
                for _, h2, _ in includes.get(f"{home[h]}/{h}", []):
                    if h2 in seen:
                        continue
                    seen.add(h2)
                    stack.append((h2, chain + [h2]))
                    why = room_breaks(os.path.dirname(rel), h2) or \
                        rule_breaks(d, layer(home[h2]), h2)
                    if why and h2 not in told:
                        told.add(h2)
                        problems.append(f"hccl/src/{rel}:{n}: includes \"{hdr}\", which brings "
                                        f"in {home[h2]}/{h2} ({' -> '.join(chain + [h2])}), "
                                        f"but {why}")

    # What each file uses by name: a function or variable defined (not static) in another .c
    # file, called or named, directly or through a header's inline function or macro. Uses
    # follow the layer table as includes do (however the name was declared), and no .c file
    # declares a function it does not define: a prototype written in a .c file would reach
    # any layer without an include.
    scans = {rel: scan(os.path.join(src, rel)) for rel in includes}
    defined, declared_in, inline = {}, {}, {}
    for rel, (defs, protos, bodies, macros) in sorted(scans.items()):
        if rel.endswith(".c"):
            for nm, (ln, static, _) in defs.items():
                if not static:
                    if nm in defined:
                        problems.append(f"hccl/src/{rel}:{ln}: defines {nm}, as "
                                        f"hccl/src/{defined[nm]} does")
                    defined[nm] = rel
        else:
            for nm in list(protos) + list(defs) + externs_of(os.path.join(src, rel)):
                declared_in.setdefault(nm, os.path.basename(rel))
            for nm, refs in list(bodies.items()) + list(macros.items()):
                inline[nm] = refs
    for rel, (defs, protos, bodies, macros) in sorted(scans.items()):
        if not rel.endswith(".c"):
            continue
        for nm, (ln, static) in sorted(protos.items()):
            if not static and nm not in defs:
                where = f"defined in hccl/src/{defined[nm]}" if nm in defined else "defined nowhere in hccl/src"
                problems.append(f"hccl/src/{rel}:{ln}: declares {nm}() ({where}) by hand: "
                                "a .c file declares only functions it defines; include the "
                                "header made for it (rule: no prototypes written in .c files)")
    uses = {}  # rel -> {file: [names]}
    for rel, (defs, protos, bodies, macros) in sorted(scans.items()):
        if not rel.endswith(".c"):
            continue
        d = layer(rel)
        seen, refs = names_used(defs, bodies, macros, inline, defined)
        for x in sorted(seen, key=lambda x: refs[x]):
            to_file = defined.get(x)
            if not to_file or to_file == rel:
                continue
            uses.setdefault(rel, {}).setdefault(to_file, []).append(x)
            to = layer(to_file)
            hdr = declared_in.get(x, "")
            r = room(os.path.dirname(to_file))
            if r and room(os.path.dirname(rel)) != r and (not hdr or room(home[hdr]) == r):
                where = f"declared in {hdr}, a header of {r}/" if hdr else \
                    f"declared in no header outside {r}/"
                problems.append(f"hccl/src/{rel}:{refs[x]}: uses {x} of hccl/src/{to_file} "
                                f"({where}), but {room_rule(r)}")
                continue
            if to == d or (rel, f"{to}/{hdr}") in exceptions:
                continue
            why = rule_breaks(d, to, hdr)
            if why:
                problems.append(f"hccl/src/{rel}:{refs[x]}: uses {x} of hccl/src/{to_file}"
                                f"{' (declared in ' + hdr + ')' if hdr else ''}, but "
                                + why.replace("may include", "may use"))

    # The tests may include a room's headers only from the room's layer's folder of tests/
    # (tests/transport/ for transport/tcp/) and from tests/fuzz/: the rest of tests/ reaches a
    # transport as the library does.
    tests = os.path.join(a.root, "tests")
    for dirpath, dirnames, files in os.walk(tests):
        dirnames.sort()
        where = os.path.relpath(dirpath, a.root).replace(os.sep, "/")
        for name in sorted(files):
            if not name.endswith((".c", ".h", ".cc", ".cpp", ".hpp")):
                continue
            with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = inc.match(line)
                    if not m or m.group(1) != '"':
                        continue
                    hdr = os.path.basename(m.group(2))
                    why = room_breaks(where, hdr) if hdr in home else None
                    if why:
                        problems.append(f"{where}/{name}:{n}: includes \"{hdr}\" of "
                                        f"hccl/src/{home[hdr]}/, but {why}")

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
    # Circles of files, inside a folder or across: file A uses a name of B and B, through
    # others, one of A's. Each is a pair of files that can only be understood together.
    graph = {f: set(t) for f, t in uses.items()}
    while True:
        cycle = find_cycle(graph)
        if not cycle:
            break
        steps = [f"{x} -({', '.join(uses[x][y][:2])})-> " for x, y in zip(cycle, cycle[1:])]
        problems.append("files use each other in a circle: " + "".join(steps) + cycle[-1]
                        + " (rule: no circle of files; move what both need to a file of "
                        "its own, or let the lower one be handed a function pointer)")
        graph[cycle[-2]].discard(cycle[-1])

    for p in problems:
        print(p)
    if a.stats:
        circles = sum(1 for p in problems if "circle" in p)
        def count(prefix):
            files = [r for r in includes if r.startswith(prefix)]
            edges = [(r, h) for r in files for _, h, _ in includes[r]]
            up = [(r, h) for r, h in edges
                  if rule_breaks(layer(r), layer(home[h]), h) or room_breaks(r.rsplit("/", 1)[0], h)]
            return len(files), len(edges), len(up)
        for prefix in ("", "transport", "core"):
            f, e, u = count(prefix)
            print(f"stats hccl/src/{prefix}: {f} files, {e} includes of the library's headers, "
                  f"{u} against the layer table")
        core_t = sorted({f"{r} -> {home[h]}/{h}" for r in includes if r.startswith("core/")
                         for _, h, _ in includes[r] if home[h].startswith("transport")})
        print(f"stats core/ -> transport/: {len(core_t)} includes: " + "; ".join(core_t))
        print(f"stats circles: {circles}")
    print(f"{len(problems)} problem(s); {len(seen_exc)} named exception(s) in use",
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
