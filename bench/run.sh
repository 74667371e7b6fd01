#!/bin/sh
# bench/run.sh - the overhead benchmark: alloc_bench plain, under memline,
# heaptrack and valgrind, side by side; prints a table of medians and the
# ratios memline/heaptrack of added time per allocation and of file size.
# Usage: bench/run.sh [BUILD_DIR] [driver options, see bench/driver.py -h]
# BUILD_DIR defaults to ./build (run `make` first).  Takes 2-5 minutes.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
[ $# -gt 0 ] && shift
make -s -C "$here" BUILD="$build" programs
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "== floor: one stack capture of a ~20-frame stack =="
"$build/bench/unwind_floor" 200000
echo
echo "== overhead =="
exec /usr/bin/python3 "$here/driver.py" --build "$build" --bin "$build/bench" "$@"
