#!/usr/bin/python3
"""tests/gpu/compare_leaks.py - compares memline's CUDA leaks with
compute-sanitizer's.

    compare_leaks.py LEAKS.json SANITIZER.txt

LEAKS.json is `memline report FILE leaks --json`; SANITIZER.txt the output of
`compute-sanitizer --leak-check full PROG`, whose leaks read
"========= Leaked 1,048,576 bytes at 0x7f..." and whose summary reads
"========= LEAK SUMMARY: N bytes leaked in M allocations".

Every block compute-sanitizer reports must be one of memline's CUDA leak
records (matched by size; memline also reports pinned host memory, which
compute-sanitizer may not).  Exits 1 on a block memline missed."""

import json
import re
import sys


def main():
	doc = json.load(open(sys.argv[1]))
	cuda = doc["leaks"].get("cuda", {"records": [], "kinds": []})
	ours = []
	for r in cuda["records"]:
		# one record per stack: blocks of equal size from one line
		for _ in range(r["blocks"]):
			ours.append((r["bytes"] // max(r["blocks"], 1), r["kind"],
				     "%s:%s" % (r["frames"][0].get("file"), r["frames"][0].get("line"))
				     if r["frames"] else "?"))
	text = open(sys.argv[2]).read()
	theirs = [int(m.replace(",", "")) for m in re.findall(r"Leaked ([\d,]+) bytes at", text)]
	summary = re.search(r"LEAK SUMMARY: ([\d,]+) bytes leaked in (\d+) allocations", text)
	print("compute-sanitizer: %d leaks %s; summary: %s" % (
		len(theirs), sorted(theirs), summary.group(0) if summary else "none"))
	print("memline: %d CUDA leaks: %s" % (len(ours), sorted((s, k) for s, k, _ in ours)))
	left = list(ours)
	missed = []
	for size in theirs:
		hit = next((o for o in left if o[0] == size), None)
		if hit:
			left.remove(hit)
		else:
			missed.append(size)
	for s, k, where in left:
		print("memline only: %d bytes %s at %s" % (s, k, where))
	if missed:
		print("MISSED by memline: %s" % missed)
		return 1
	if not theirs:
		print("compute-sanitizer reported no leak: nothing to compare")
		return 1
	return 0


if __name__ == "__main__":
	sys.exit(main())
