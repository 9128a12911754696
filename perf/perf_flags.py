#!/usr/bin/python3
"""perf_flags.py - perf_flags.h's flag table for Python: the one list of the benchmark programs'
flags, which perf_args.c compiles in (an X-macro list) and bench/torch_allreduce_perf.py reads
through this module, so both take the same letters with the same kinds, ranges, defaults and
usage texts (perf_flags.h says what each field means).

    import perf_flags
    flags = perf_flags.for_program("torch")      # the rows one program takes, its texts
    lines = perf_flags.usage_lines(flags, 76)    # the usage's flag lines, "default" at 76

Run as a program it prints one program's flags, one a line: the letter, the kind, a value the
flag accepts (its default, else the least value its kind takes) and its usage column; for
tests/perf/test_perf_flags.sh:

    perf_flags.py [hccl|mpi|ccl|torch]     (default hccl)
    perf_flags.py -h | --help

A row it cannot read (a PERF_FLAG line of the wrong shape, an unknown kind or program) raises
ValueError naming the line: the table is never read in part.
"""
import os
import re
import sys

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "perf_flags.h")
PROGRAMS = ("hccl", "mpi", "ccl", "torch")  # PERF_BY_HCCL ... PERF_BY_TORCH
KINDS = ("SIZE", "INT", "TYPE", "OP", "ONE", "HELP")
FIELDS = ("letter", "field", "kind", "lo", "hi", "shown", "default", "by", "help")
# one argument: a string or character literal (adjacent strings join), or anything but a comma
ARG = re.compile(r"""\s*((?:"(?:\\.|[^"\\])*"\s*)+|'(?:\\.|[^'\\])'|[^,"']+)\s*(,|$)""")
ESCAPES = {"n": "\n", "t": "\t", '"': '"', "'": "'", "\\": "\\"}


def _literal(s, where):
    """The value of a C string (adjacent ones joined) or character literal."""
    out = []
    for part in re.findall(r'"((?:\\.|[^"\\])*)"', s) if s.startswith('"') else [s[1:-1]]:
        out.append(re.sub(r"\\(.)", lambda m: ESCAPES.get(m.group(1)) or _bad(where, m.group(0)),
                          part))
    return "".join(out)


def _bad(where, what):
    raise ValueError("%s: cannot read %s" % (where, what))


def _args(text, where):
    args, pos = [], 0
    while pos < len(text):
        m = ARG.match(text, pos)
        if not m:
            _bad(where, "the arguments from %r" % text[pos:])
        args.append(m.group(1).strip())
        pos = m.end()
    return args


def _by(expr, where):
    progs = set()
    for name in (t.strip() for t in expr.split("|")):
        if name == "PERF_BY_ALL":
            progs.update(PROGRAMS)
        elif name.startswith("PERF_BY_") and name[8:].lower() in PROGRAMS:
            progs.add(name[8:].lower())
        else:
            _bad(where, "the program %r (expected PERF_BY_HCCL, _MPI, _CCL, _TORCH or _ALL)"
                 % name)
    return progs


def read(path=TABLE):
    """(flags, helps): the PERF_FLAG rows as dicts of FIELDS, in the table's order, and the
    PERF_FLAG_HELP rows as dicts of letter, by, help."""
    flags, helps = [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            where = "%s:%d" % (path, n)
            m = re.match(r"(PERF_FLAG|PERF_FLAG_HELP)\((.*)\)\s*$", line)
            if not m:
                if line.startswith("PERF_FLAG"):
                    _bad(where, "a row that does not end its line with ')'")
                continue
            a = _args(m.group(2), where)
            if m.group(1) == "PERF_FLAG_HELP":
                if len(a) != 3:
                    _bad(where, "PERF_FLAG_HELP with %d arguments, not 3" % len(a))
                helps.append(dict(letter=_literal(a[0], where), by=_by(a[1], where),
                                  help=_literal(a[2], where)))
                continue
            if len(a) != len(FIELDS):
                _bad(where, "PERF_FLAG with %d arguments, not %d" % (len(a), len(FIELDS)))
            row = dict(zip(FIELDS, a))
            if row["kind"] not in KINDS:
                _bad(where, "the kind %r (expected one of %s)" % (row["kind"], ", ".join(KINDS)))
            for k in ("letter", "shown", "default", "help"):
                row[k] = _literal(row[k], where)
            row["lo"], row["hi"] = int(row["lo"]), int(row["hi"])
            row["by"] = _by(row["by"], where)
            flags.append(row)
    if not flags:
        _bad(path, "any PERF_FLAG row")
    return flags, helps


def for_program(program, path=TABLE):
    """The rows program takes (one of PROGRAMS), each with that program's usage text."""
    if program not in PROGRAMS:
        raise ValueError("unknown program %r (expected %s)" % (program, ", ".join(PROGRAMS)))
    flags, helps = read(path)
    mine = []
    for f in flags:
        if program in f["by"]:
            f = dict(f)
            for h in helps:
                if h["letter"] == f["letter"] and program in h["by"]:
                    f["help"] = h["help"]
            mine.append(f)
    return mine


def usage_lines(flags, col):
    """The usage's flag lines, as perf_args.c's usage() prints them: "  -b <bytes>  text", the
    help's further lines under the first, "default X" at column col on the last line (at least
    2 spaces after the text; 3 after one that reaches past col)."""
    lines = []
    for f in flags:
        if not f["shown"]:
            continue
        shown = f["shown"]
        for k, text in enumerate(f["help"].split("\n")):
            line = "  %-10s  %s" % (shown, text)
            shown = ""
            if k == f["help"].count("\n") and f["default"]:
                line += " " * (col - len(line) if len(line) <= col - 2 else 3)
                line += "default " + f["default"]
            lines.append(line)
    return lines


def sample(f):
    """A value flag f accepts: its default, else the least its kind takes."""
    if f["default"]:
        return f["default"]
    return {"SIZE": "1", "INT": str(f["lo"]), "ONE": "1", "HELP": ""}.get(f["kind"], "all")


def main(argv):
    if argv[:1] in (["-h"], ["--help"]):
        sys.stdout.write(__doc__)
        return 0
    if len(argv) > 1 or (argv and argv[0] not in PROGRAMS):
        sys.stderr.write("perf_flags.py: unknown argument '%s': expected one of %s\n"
                         % (" ".join(argv), ", ".join(PROGRAMS)))
        return 2
    for f in for_program(argv[0] if argv else "hccl"):
        print("%s %s %s %s" % (f["letter"], f["kind"], sample(f) or "-", f["shown"] or "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
