"""tests/python/gen_pyline_vectors.py - writes tests/pyline_vectors.h: real
co_linetable bytes of every CPython 3.10-3.13 found, with the line the
interpreter itself gives each instruction (co_lines()), for
tests/check_pyline.c.  Run with each interpreter, appending:

    for py in python3.10 python3.11 python3.12 python3.13; do
        $py tests/python/gen_pyline_vectors.py; done > tests/pyline_vectors.h

(the file is committed: the unit test needs no Python)."""

import sys

# Constructs whose line tables use every encoding: long jumps, line deltas
# over 127 and under -128, multi-line expressions, lines without code,
# instructions without a line, nested code objects.
SOURCE = '''
def simple(a, b):
    c = a + b
    return c * 2

def branches(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            total += i
        elif i % 5 == 0:
            total -= 1
        else:
            continue
    while total > 100:
        total //= 2
    try:
        x = 1 / (n - 3)
    except ZeroDivisionError:
        x = None
    finally:
        total += 1
    return total, x

def multi(a,
          b):
    return (a +
            b +
            [i for i in range(3)][0] +
            sum(j
                for j in range(2)))

class K:
    def method(self):
        return [lambda: k for k in range(2)]
''' + "\n" * 200 + '''
def far():
    x = 1
''' + "    y = 2\n" * 300 + '''
    return x
'''

def codes(co):
    yield co
    for c in co.co_consts:
        if hasattr(c, "co_code"):
            yield from codes(c)

def main():
    v = sys.version_info
    fmt = 310 if v < (3, 11) else 311
    top = compile(SOURCE, "vectors.py", "exec")
    print("/* CPython %d.%d.%d */" % v[:3])
    for co in codes(top):
        n_units = len(co.co_code) // 2
        lines = [-1] * n_units
        for start, end, line in co.co_lines():
            for unit in range(start // 2, end // 2):
                if unit < n_units:
                    lines[unit] = -1 if line is None else line
        table = ", ".join("0x%02x" % b for b in co.co_linetable)
        print("{ %d, \"%d.%d %s\", %d, %d, (const uint8_t[]){ %s }, %d," %
              (fmt, v[0], v[1], co.co_name, co.co_firstlineno, len(co.co_linetable),
               table or "0", n_units))
        print("  (const int[]){ %s } }," % ", ".join(map(str, lines)))

main()
