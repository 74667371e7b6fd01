"""tests/python/gen_pyline_tables.py - writes tests/pyline_tables.h: the
co_linetable of every code object of a few standard modules, as each
CPython 3.10-3.13 found compiles them, for tests/check_pyline.c to hold
the runtime's one-walk path (ml_pyline_plan) to the general one.  Run with
each interpreter, appending:

    for py in python3.10 python3.11 python3.12 python3.13; do
        $py tests/python/gen_pyline_tables.py; done > tests/pyline_tables.h

(the file is committed: the unit test needs no Python)."""

import importlib.util
import sys

# Module bodies of up to 250 runs over hundreds of lines (opcode, token),
# and functions and classes of every kind (json.decoder, textwrap).
MODULES = ("opcode", "token", "json.decoder", "textwrap")


def codes(co, prefix):
    name = prefix + co.co_name
    yield name, co
    for c in co.co_consts:
        if hasattr(c, "co_code"):
            yield from codes(c, name + ".")


def literal(data):
    """data as C string literal lines, octal escapes outside printable ASCII."""
    out, line = [], ""
    for b in data:
        ch = chr(b)
        if 32 <= b < 127 and ch not in '\\"?':
            line += ch
        else:
            line += "\\%03o" % b
        if len(line) >= 90:
            out.append('"%s"' % line)
            line = ""
    if line or not out:
        out.append('"%s"' % line)
    return "\n    ".join(out)


def main():
    v = sys.version_info
    fmt = 310 if v < (3, 11) else 311
    print("/* CPython %d.%d.%d */" % v[:3])
    for module in MODULES:
        path = importlib.util.find_spec(module).origin
        with open(path, "rb") as f:
            top = compile(f.read(), module, "exec")
        for name, co in codes(top, module + ":"):
            print("{ %d, \"%d.%d %s\", %d, %d,\n    %s }," %
                  (fmt, v[0], v[1], name, co.co_firstlineno, len(co.co_linetable),
                   literal(co.co_linetable)))


main()
