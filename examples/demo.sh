#!/usr/bin/env bash
# examples/demo.sh BUILD - profiles BUILD/examples/leaky with memline and prints
# its leaks, peak, ops and lines reports (what `make demo` runs).
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
rm -f "$OUT"/memline.leaky.*.mlp
show "$ML" run -o "$OUT" -- "$BUILD/examples/leaky" 100
PROFILE=$(ls -t "$OUT"/memline.leaky.*.mlp | head -n 1)
show "$ML" report "$PROFILE" leaks
show "$ML" report "$PROFILE" peak
show "$ML" report "$PROFILE" ops --sort self_cpu_memory_usage --limit 10
show "$ML" report "$PROFILE" lines --function parse_record
echo
echo "The profile is $PROFILE; try: $ML report $PROFILE ops --json"
