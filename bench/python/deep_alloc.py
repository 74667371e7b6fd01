"""bench/python/deep_alloc.py - the cost of reading Python frames: 20 Python
frames deep, a loop makes bytes(1000) objects, each a malloc (pymalloc hands
blocks over 512 bytes to malloc), N times (argv[1], default 1000000)."""
import sys


def deep(level, n):
    if level:
        return deep(level - 1, n)
    keep = None
    for _ in range(n):
        keep = bytes(1000)
    return keep


deep(20, int(sys.argv[1]) if len(sys.argv) > 1 else 1000000)
