"""bench/python/numpy_work.py - a numpy CPU workload: matrix products and
element-wise temporaries, ROUNDS times (argv[1], default 60)."""
import sys

import numpy as np


def main(rounds):
    rng = np.random.default_rng(0)
    a = rng.random((300, 300))
    for _ in range(rounds):
        b = a @ a.T
        c = np.sin(b) + np.cos(a) * 2.0
        d = c.sum(axis=0)
        a = (a + d[None, :] * 1e-6) / 1.0001
    return float(a.sum())


main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
