#!/usr/bin/env bash
# tests/check_all.sh - the whole suite behind `make check`: unit tests, the
# end-to-end tests, the torture suite, the layout rules, then the unit tests
# and the report tool under ASan+UBSan.
# Ends with one line, `check: N passed, M failed, K skipped`; exits non-zero on failure.
set -u
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
# The build folder of the configuration being checked (build, build-debug):
# its runtime and fixtures make the profiles the ASan report tool reads.
CHECK_BUILD=${CHECK_BUILD:-$BUILD}
MAKE=${MAKE:-make}
JOBS=-j$(nproc 2>/dev/null || echo 2)
passed=0
failed=0
skipped=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Runs one part, echoing its output, and adds the counts of its summary line
# ("<prefix>: N passed, M failed").  A part that fails without a summary
# (a build error, a crash) counts as one failure.
part() {
	local prefix=$1 title=$2
	shift 2
	echo "== $title"
	"$@" 2>&1 | tee "$log"
	local rc=${PIPESTATUS[0]}
	local line
	line=$(grep -E "^$prefix: [0-9]+ passed, [0-9]+ failed" "$log" | tail -n 1)
	if [ -z "$line" ]; then
		echo "check: '$title' ended (exit $rc) without a '$prefix:' summary line"
		failed=$((failed + 1))
		return
	fi
	local p f
	p=$(echo "$line" | sed -E 's/^[a-z0-9]+: ([0-9]+) passed, ([0-9]+) failed.*/\1/')
	f=$(echo "$line" | sed -E 's/^[a-z0-9]+: ([0-9]+) passed, ([0-9]+) failed.*/\2/')
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "check: '$title' exited $rc although it reported no failure"
		f=1
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	local s
	s=$(echo "$line" | sed -nE 's/.*, ([0-9]+) skipped.*/\1/p')
	skipped=$((skipped + ${s:-0}))
}

# The release build: unit tests, fixtures under memline run, the torture
# programs alone and under memline, the layout rules, and the peers'
# programs against valgrind.
part unit "unit tests ($BUILD)" $MAKE --no-print-directory $JOBS BUILD="$BUILD" unit
part e2e "end-to-end tests ($BUILD)" $MAKE --no-print-directory $JOBS BUILD="$BUILD" e2e
part torture "torture suite ($BUILD)" $MAKE --no-print-directory $JOBS BUILD="$BUILD" torture
part layout "layout rules (docs/layout.md)" /usr/bin/python3 tests/layout_check.py
# The peers' test programs under memline and valgrind (skipped without it).
part peers "memline against valgrind ($BUILD)" $MAKE --no-print-directory $JOBS BUILD="$BUILD" peers

# ASan+UBSan: the unit tests, then the report tool (build-asan/memline) on
# good, truncated, corrupt and fuzzed profiles made by the release runtime.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
part unit "unit tests under ASan+UBSan ($BUILD-asan)" \
	$MAKE --no-print-directory $JOBS CONFIG=asan BUILD="$BUILD" unit
asan_cli() {
	$MAKE --no-print-directory $JOBS CONFIG=asan BUILD="$BUILD" "$BUILD-asan/memline" || {
		echo "e2e: 0 passed, 1 failed"
		return 1
	}
	/usr/bin/python3 tests/e2e/run.py --build "$CHECK_BUILD" --cli "$BUILD-asan/memline" -k report_
}
part e2e "report tool under ASan+UBSan ($BUILD-asan/memline)" asan_cli
# A run's processes, picked and merged (report/runs.c, merge.c), likewise.
part e2e "runs under ASan+UBSan ($BUILD-asan/memline)" \
	/usr/bin/python3 tests/e2e/run.py --build "$CHECK_BUILD" --cli "$BUILD-asan/memline" -k run_

echo "check: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
