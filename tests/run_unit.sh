#!/bin/sh
# tests/run_unit.sh - runs each Check unit test binary given as an argument,
# shows its output, and ends with one line: "unit: N passed, M failed".
# Exits non-zero if any test failed or any binary crashed or printed no summary.
set -u
: "${CK_FORK:=yes}"
export CK_FORK

passed=0
failed=0
broken=0
log=$(mktemp "${TMPDIR:-/tmp}/run_unit.XXXXXX") || exit 2
trap 'rm -f "$log"' EXIT

for t in "$@"; do
	echo "== $t"
	"$t" >"$log" 2>&1
	rc=$?
	cat "$log"
	# Check's summary: "100%: Checks: 11, Failures: 0, Errors: 0" (one per runner).
	sums=$(sed -n 's/.*Checks: \([0-9]*\), Failures: \([0-9]*\), Errors: \([0-9]*\).*/\1 \2 \3/p' "$log")
	if [ -z "$sums" ]; then
		echo "$t: no Check summary (exit status $rc)"
		failed=$((failed + 1))
		broken=1
		continue
	fi
	bad_here=0
	while read -r checks failures errors; do
		bad_here=$((bad_here + failures + errors))
		passed=$((passed + checks - failures - errors))
		failed=$((failed + failures + errors))
	done <<SUMS
$sums
SUMS
	if [ "$rc" -ne 0 ] && [ "$bad_here" -eq 0 ]; then
		echo "$t: exit status $rc with no failed test"
		broken=1
	fi
done

echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$broken" -eq 0 ]
