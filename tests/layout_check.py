#!/usr/bin/python3
"""tests/layout_check.py - the layout rules of docs/layout.md, checked on
every `make check`, so that what the layout promises cannot silently go:

  - a hook room (a top-level folder with a hooks.c: alloc/, cuda_hooks/,
    lineprof/, process/, and rooms to come) includes only core/core.h and
    its own headers: never another room's, never core/internal.h;
  - core/ includes only core/ and common/ headers;
  - common/ includes only common/ headers;
  - report/ includes only report/ and common/ headers (never cli/);
  - cli/ includes only cli/ headers, report/report.h and common/ headers;
  - symbols are exported (ML_EXPORT) only from <room>/hooks.c files, and
    ML_EXPORT is defined once (core/core.h);
  - one home per shared fact: the kinds' names only in common/kinds.h,
    dlsym(RTLD_NEXT, ...) only in core/next.c (and the allocator's and the
    CUDA driver's own tables, alloc/real.c and cuda_hooks/dlsym.c);
  - plain `make` builds everything: the Makefile's default goal is `all`.

    tests/layout_check.py [--root DIR]

Prints `ok RULE` or `FAIL RULE: where`, then `layout: N passed, M failed`."""

import argparse
import glob
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(root, folder):
	return sorted(glob.glob(os.path.join(root, folder, "*.[ch]")))


def rel(root, path):
	return os.path.relpath(path, root)


def includes(path):
	with open(path, errors="replace") as f:
		return INCLUDE.findall(f.read())


def rooms(root):
	return sorted(d for d in os.listdir(root)
		      if os.path.isfile(os.path.join(root, d, "hooks.c")) and d != "core")


def check_includes(root, folder, allowed):
	"""Every quoted include of folder's files passes allowed(header)."""
	bad = []
	for path in sources(root, folder):
		for h in includes(path):
			if not allowed(h):
				bad.append("%s includes %s" % (rel(root, path), h))
	return bad


def rule_rooms(root):
	bad = []
	for room in rooms(root):
		bad += check_includes(root, room, lambda h, r=room: h == "core/core.h" or
				      h.startswith(r + "/"))
	return bad


def rule_core(root):
	return check_includes(root, "core", lambda h: h.split("/")[0] in ("core", "common"))


def rule_common(root):
	return check_includes(root, "common", lambda h: h.startswith("common/"))


def rule_report(root):
	return check_includes(root, "report", lambda h: h.split("/")[0] in ("report", "common"))


def rule_cli(root):
	return check_includes(root, "cli", lambda h: h.startswith(("cli/", "common/")) or
			      h == "report/report.h")


def all_sources(root):
	out = []
	for d in rooms(root) + ["core", "common", "report", "cli"]:
		out += sources(root, d)
	return out


def code_lines(path):
	"""The file's lines with comments blanked out (line numbers kept)."""
	with open(path, errors="replace") as f:
		text = f.read()
	text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
	text = re.sub(r"//[^\n]*", "", text)
	return text.split("\n")


def grep(root, pattern, allowed):
	"""file:line of every match of pattern in code (not comments) outside
	the files allowed."""
	bad = []
	rx = re.compile(pattern)
	for path in all_sources(root):
		for n, line in enumerate(code_lines(path), 1):
			if rx.search(line) and rel(root, path) not in allowed:
				bad.append("%s:%d" % (rel(root, path), n))
	return bad


def rule_exports(root):
	bad = grep(root, r"^\s*#\s*define\s+ML_EXPORT\b", {"core/core.h"})
	for path in all_sources(root):
		r = rel(root, path)
		if os.path.basename(r) == "hooks.c" or r == "core/core.h":
			continue
		for n, line in enumerate(code_lines(path), 1):
			if re.search(r"\bML_EXPORT\b", line):
				bad.append("%s:%d exports outside a hooks.c" % (r, n))
	return bad


def rule_kinds(root):
	return grep(root, r'"cuda_(device|managed|pinned|pool|vmm|array|mapped|reserved|gpu)"',
		    {"common/kinds.h"})


def rule_next(root):
	return grep(root, r"\bdlv?sym\s*\(\s*RTLD_NEXT",
		    {"core/next.c", "alloc/real.c", "cuda_hooks/dlsym.c"})


def rule_default_goal(root):
	p = subprocess.run(["make", "-C", root, "-pn", "--no-print-directory", "BUILD=/nonexistent"],
			   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
	goals = re.findall(r"^\.DEFAULT_GOAL := (.*)$", p.stdout, re.M)
	return [] if goals == ["all"] else ["the default goal is %r, not all" % goals]


RULES = [
	("rooms include only core/core.h and their own headers", rule_rooms),
	("core includes only core/ and common/", rule_core),
	("common includes only common/", rule_common),
	("report includes only report/ and common/ (never cli/)", rule_report),
	("cli includes only cli/, report/report.h and common/", rule_cli),
	("exports only in hooks.c, ML_EXPORT defined once", rule_exports),
	("kind names only in common/kinds.h", rule_kinds),
	("dlsym(RTLD_NEXT) only in core/next.c and the rooms' tables", rule_next),
	("plain make builds all", rule_default_goal),
]


def main():
	ap = argparse.ArgumentParser(description="memline layout rules")
	ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
	root = ap.parse_args().root
	passed = failed = 0
	for name, fn in RULES:
		bad = fn(root)
		if bad:
			print("FAIL %s: %s" % (name, "; ".join(bad[:10])))
			failed += 1
		else:
			print("ok %s" % name)
			passed += 1
	print("layout: %d passed, %d failed" % (passed, failed))
	return 1 if failed else 0


if __name__ == "__main__":
	sys.exit(main())
