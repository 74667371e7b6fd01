#!/usr/bin/env bash
# build.sh - the README quick start on Debian 12:
#   ./build.sh demo    install what is missing, build, profile the bundled example
#   ./build.sh check   install what is missing, build, run the whole test suite
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(build-essential pkg-config libunwind-dev libdw-dev libelf-dev libzstd-dev zstd check
	libjemalloc-dev python3 valgrind libprotobuf-c-dev protobuf-c-compiler zlib1g-dev)
# check only: clang and llvm build and read the clang-built test fixtures
# (DWARF 5 symbolization, llvm-cov exact hits, the llvm-addr2line
# comparison); libclang-rt-dev holds clang's profile runtime, which clang
# only recommends (without it -fprofile-instr-generate cannot link).
# python3-dev: CPython's internal headers and libpython, against which the
# Python room's offsets are checked; python3-numpy: numpy arrays at their
# exact size in the Python tests; python3-memory-profiler: the oracle of
# the @profile Increment column (tests/e2e/test_kernprof.py).
# (python3-scalene, for bench/python_bench.py, is left to the user.)
# golang-go reads the pprof output back (go tool pprof); chromium renders
# the HTML report headless (numbers, console errors, screenshots).
# python3-torch (PyTorch 1.13, CPU) is the oracle of the ops table by ATen
# op (tests/e2e/test_torch.py, against torch.profiler): 199 packages beyond
# the others, 192 MB to download and 875 MB unpacked; measured here, 15 s to
# download and 45 s to unpack on a loaded 2-core machine.
CHECK_PACKAGES=(clang llvm libclang-rt-dev golang-go chromium python3-dev python3-numpy python3-memory-profiler python3-torch)

usage() {
	echo "usage: $0 demo|check" >&2
	exit 2
}

installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

# Installs the packages that are missing, and only then touches apt.
install_missing() {
	local missing=() pkg sudo=()
	command -v dpkg-query >/dev/null 2>&1 || {
		echo "build.sh: no dpkg-query: install ${PACKAGES[*]} by hand" >&2
		return 0
	}
	for pkg in "${PACKAGES[@]}"; do
		installed "$pkg" || missing+=("$pkg")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null 2>&1 || {
			echo "build.sh: missing packages (${missing[*]}): run as root or install them" >&2
			exit 1
		}
		sudo=(sudo)
	fi
	echo "build.sh: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update
	"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
}

[ $# -eq 1 ] || usage
case "$1" in
demo | check) ;;
*) usage ;;
esac

if [ "$1" = check ]; then
	PACKAGES+=("${CHECK_PACKAGES[@]}")
	# npm fetches speedscope, which reads the folded stacks back in a
	# test; a node.js that brings its own npm is kept as it is.
	command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)
fi
install_missing
# speedscope (pinned; its MIT licence is in the package) from the npm
# registry into build/tools/, for the test that loads folded stacks into it.
# Without it that test is skipped.
fetch_speedscope() {
	local dir=build/tools/speedscope version=1.25.0
	[ -f "$dir/package/dist/release/index.html" ] && return 0
	command -v npm >/dev/null 2>&1 || return 0
	mkdir -p "$dir"
	(cd "$dir" && npm pack --silent "speedscope@$version" >/dev/null 2>&1 &&
		tar xzf "speedscope-$version.tgz") ||
		echo "build.sh: could not fetch speedscope $version from npm: its test will be skipped" >&2
}

[ "$1" = check ] && fetch_speedscope
jobs=-j$(nproc 2>/dev/null || echo 2)
# Plain make: the default goal must build everything (tests/layout_check.sh).
make $jobs
make $jobs "$1"
