#!/bin/sh
# bench/profile.sh - where does memline's time per allocation go?  Runs
# alloc_bench under memline inside callgrind (which counts instructions; perf
# has no hardware counters in these VMs) and prints the top functions by
# self cost, and instructions per allocation with and without memline.
# Usage: bench/profile.sh [BUILD_DIR] [ALLOCS_PER_THREAD (default 200000)]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
allocs=${2:-200000}
make -s -C "$here" BUILD="$build" programs
out=$(mktemp -d /tmp/mlprof.XXXXXX)
prog="$build/bench/alloc_bench"

count() {	# count LABEL [env assignments] -> prints total Ir
	label=$1; shift
	env "$@" valgrind -q --tool=callgrind --callgrind-out-file="$out/$label.cg" \
		"$prog" "$allocs" 1 >/dev/null
	callgrind_annotate "$out/$label.cg" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}'
}
plain=$(count plain)
ml=$(count memline LD_PRELOAD="$build/libmemline.so" MEMLINE_OUTPUT_DIR="$out")
echo "instructions, $allocs allocations, 1 thread: plain $plain, memline $ml"
echo "added instructions per allocation: $(( (ml - plain) / allocs ))"
echo
echo "== top functions by self instructions, under memline =="
callgrind_annotate --inclusive=no "$out/memline.cg" 2>/dev/null | sed -n '/file:function/,$p' | head -30
echo
echo "== top functions by inclusive instructions, under memline =="
callgrind_annotate --inclusive=yes "$out/memline.cg" 2>/dev/null | sed -n '/file:function/,$p' | head -30
echo "(callgrind files kept in $out)"
