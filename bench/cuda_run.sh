#!/bin/sh
# bench/cuda_run.sh - memline's added time per CUDA allocation + free pair
# (cuMemAlloc_v2 + cuMemFree_v2 through cuGetProcAddress, what cudaMalloc and
# cudaFree come down to), against the CUDA test double, plain and under
# memline, 5 runs each, medians.
# Usage: bench/cuda_run.sh [BUILD_DIR] [PAIRS]   (after `make fixtures`)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
pairs=${2:-200000}
[ -f "$build/cuda/libcuda.so.1" ] || make -s -C "$here/.." BUILD="$build" "$build/cuda/libcuda.so.1"
make -s -C "$here" BUILD="$build" "$build/bench/cuda_bench"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
plain=$(for i in 1 2 3 4 5; do
	LD_LIBRARY_PATH="$build/cuda" "$build/bench/cuda_bench" "$pairs" 4096 | awk '{print $2}'
done | median)
under=$(for i in 1 2 3 4 5; do
	LD_LIBRARY_PATH="$build/cuda" MEMLINE_QUIET=1 "$build/memline" run -o "$out" -- \
		"$build/bench/cuda_bench" "$pairs" 4096 2>/dev/null | awk '{print $2}'
	rm -rf "$out"/memline.*
done | median)
echo "pairs: $pairs x (cuMemAlloc_v2 4096 B + cuMemFree_v2), test double"
echo "plain:        $plain ns per pair"
echo "memline:      $under ns per pair"
echo "added:        $(echo "$under $plain" | awk '{printf "%.1f", $1 - $2}') ns per pair"
