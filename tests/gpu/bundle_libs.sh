#!/usr/bin/env bash
# tests/gpu/bundle_libs.sh - copies into BUILD_DIR/lib the libraries memline
# and libmemline.so need that a machine without the -dev packages may lack
# (libdw, libelf, libunwind, libprotobuf-c), so that BUILD_DIR can be carried
# to a GPU machine and used there by tests/gpu/run.sh (which puts
# BUILD_DIR/lib on LD_LIBRARY_PATH).  The C and C++ runtimes, zlib, xz,
# bzip2 and zstd are left to the machine: a newer libstdc++ there must win.
#
#   tests/gpu/bundle_libs.sh [BUILD_DIR]     (default: build)
set -eu
BUILD=${1:-build}
mkdir -p "$BUILD/lib"
ldd "$BUILD/memline" "$BUILD/libmemline.so" |
	awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
	grep -E '/lib(dw|elf|unwind[^/]*|protobuf-c)\.so' |
	while read -r lib; do
		cp -L "$lib" "$BUILD/lib/"
		echo "$BUILD/lib/$(basename "$lib")"
	done
