#!/usr/bin/env bash
# examples/demo.sh BUILD - profiles BUILD/examples/leaky with memline and prints
# its leaks, peak, ops, lines and flame reports, and writes its HTML report
# (what `make demo` runs).
set -euo pipefail
BUILD=${1:-build}
ML="$BUILD/memline"
OUT="$BUILD/demo"

show() {
	echo
	echo "\$ $*"
	"$@"
}

mkdir -p "$OUT"
rm -rf "$OUT"/memline.leaky.*
show "$ML" run -o "$OUT" -- "$BUILD/examples/leaky" 100
# The run's directory: its profiles (here one, the program's).
PROFILE=$(ls -td "$OUT"/memline.leaky.* | head -n 1)
show "$ML" report "$PROFILE" leaks
show "$ML" report "$PROFILE" peak
show "$ML" report "$PROFILE" ops --sort self_cpu_memory_usage --limit 10
show "$ML" report "$PROFILE" lines --function parse_record
show "$ML" report "$PROFILE" flame
show "$ML" report "$PROFILE" html -o "$OUT/leaky.html"
echo
echo "The run is $PROFILE; open $OUT/leaky.html in a browser, or try:"
echo "  $ML report $PROFILE ops --json"
