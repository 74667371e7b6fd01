#!/bin/sh
# bench/run.sh - the overhead benchmark, all of it in one run:
#   1. the floor: one stack capture of a ~20-frame stack (unwind_floor);
#   2. alloc_bench (synthetic, malloc-heavy) plain, under memline, memline
#      --sample, heaptrack and valgrind (driver.py): added time per
#      allocation and profile sizes, as ratios to heaptrack's;
#   3. real programs (real.py): cc1plus, python3, sqlite3, numpy, torch CPU
#      plain / memline / heaptrack / massif: added time, RSS, profile sizes;
#   4. memline's own memory per live block and per stack (rss.py).
# Usage: bench/run.sh [BUILD_DIR] [--quick]   (BUILD_DIR defaults to ./build;
# run `make` first).  --quick: fewer reps, no valgrind.  Takes 10-20 minutes
# (2-4 quick); docs/bench.md has the latest results.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
[ $# -gt 0 ] && shift
quick=
[ "${1:-}" = --quick ] && quick=1
make -s -C "$here" BUILD="$build" programs
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "== floor: one stack capture of a ~20-frame stack =="
"$build/bench/unwind_floor" 200000
echo
echo "== alloc_bench: added time per allocation, file sizes =="
if [ -n "$quick" ]; then
	/usr/bin/python3 "$here/driver.py" --build "$build" --bin "$build/bench" --reps 3 --no-valgrind
else
	/usr/bin/python3 "$here/driver.py" --build "$build" --bin "$build/bench"
fi
echo
echo "== real programs =="
if [ -n "$quick" ]; then
	/usr/bin/python3 "$here/real.py" --build "$build" --reps 1 --no-valgrind
else
	/usr/bin/python3 "$here/real.py" --build "$build"
fi
echo
echo "== memline's own memory =="
reps=3
[ -n "$quick" ] && reps=1
/usr/bin/python3 "$here/rss.py" --build "$build" --prog "$build/bench/rss_prog" --reps "$reps"
