#!/usr/bin/python3
"""tests/e2e/run.py - end-to-end tests: fixture programs under `memline run`,
then `memline report --json`, asserting exact bytes, counts, functions and
source lines.  Standard library only.

    tests/e2e/run.py [--build DIR] [-k SUBSTR] [-v] [--cli MEMLINE]

Prints `ok NAME`, `skip NAME: why` or `FAIL NAME: reason` per test, then
`e2e: N passed, M failed, K skipped`; exits 1 if any test failed.

The tests live in one file per area, test_<area>.py, registered with @test
in harness.py's one list; a new test goes into its area's file (a new area
is one more name in AREAS)."""

import argparse
import importlib
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Fail, Skip, OPTS, TESTS  # noqa: E402

# The areas, in the order their tests run.
AREAS = ["alloc", "process", "runs", "cli", "report", "cuda", "lineprof", "regions", "pictures", "python",
         "kernprof", "torch"]


def run_one(fn):
	"""Runs one test; returns "ok", "skip" or "fail" after its line."""
	t0 = time.time()
	try:
		fn()
		took = " (%.1fs)" % (time.time() - t0) if OPTS.verbose else ""
		print("ok %s%s" % (fn.__name__, took))
		return "ok"
	except Skip as e:
		print("skip %s: %s" % (fn.__name__, e))
		return "skip"
	except Fail as e:
		print("FAIL %s: %s" % (fn.__name__, str(e).replace("\n", " ")[:600]))
	except Exception as e:  # a harness bug or an unexpected document
		print("FAIL %s: %s: %s" % (fn.__name__, type(e).__name__, str(e)[:300]))
	return "fail"


def main():
	ap = argparse.ArgumentParser(description="memline end-to-end tests")
	ap.add_argument("--build", default="build")
	ap.add_argument("-k", dest="filter", default="")
	ap.add_argument("-v", dest="verbose", action="store_true")
	ap.add_argument("--cli", default=None, help="memline binary for report-only tests")
	args = ap.parse_args()
	OPTS.build = os.path.abspath(args.build)
	OPTS.cli = args.cli and os.path.abspath(args.cli)
	OPTS.filter = args.filter
	OPTS.verbose = args.verbose
	for area in AREAS:
		importlib.import_module("test_" + area)
	names = [fn.__name__ for fn in TESTS]
	dup = sorted(set(n for n in names if names.count(n) > 1))
	if dup:
		print("e2e: tests registered twice: %s" % ", ".join(dup))
		return 2
	OPTS.tmp = tempfile.mkdtemp(prefix="memline-e2e-")
	counts = {"ok": 0, "skip": 0, "fail": 0}
	try:
		for fn in TESTS:
			if OPTS.filter in fn.__name__:
				counts[run_one(fn)] += 1
				sys.stdout.flush()
	finally:
		shutil.rmtree(OPTS.tmp, ignore_errors=True)
	print("e2e: %d passed, %d failed, %d skipped" % (counts["ok"], counts["fail"], counts["skip"]))
	return 1 if counts["fail"] else 0


if __name__ == "__main__":
	sys.exit(main())
