#!/usr/bin/env bash
# examples/demo.sh BUILD - profiles BUILD/examples/leaky with memline and prints
# its leaks, peak, ops, lines and flame reports, and writes its HTML report;
# then profiles examples/pipeline.py under Debian's python3 with the line
# timer and prints its ops and lines in Python terms (what `make demo` runs).
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

# A Python program, unchanged: Python functions and lines, memory and time.
PY=/usr/bin/python3
if [ -x "$PY" ]; then
	rm -rf "$OUT"/memline.python3*
	show "$ML" run --lines -o "$OUT" -- "$PY" "$(dirname "$0")/pipeline.py"
	PYPROFILE=$(ls -td "$OUT"/memline.python3* | head -n 1)
	show "$ML" report "$PYPROFILE" ops --limit 8
	# @profile's functions: kernprof's table (exact hits and time) with
	# memory columns, then memory_profiler's
	show "$ML" report "$PYPROFILE" lines
	show "$ML" report "$PYPROFILE" lines --layout memory_profiler
	show "$ML" report "$PYPROFILE" html -o "$OUT/pipeline.html"
fi
echo
echo "The runs are in $OUT; open $OUT/leaky.html in a browser, or try:"
echo "  $ML report $PROFILE ops --json"
