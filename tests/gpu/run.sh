#!/usr/bin/env bash
# tests/gpu/run.sh - checks that need a real GPU (not part of make check).
#
#   tests/gpu/run.sh [BUILD_DIR]          (default: build)
#
# BUILD_DIR is used as it is when it holds memline and libmemline.so (built
# on another machine; BUILD_DIR/lib, when there, holds the libraries they
# need that the GPU machine lacks: tests/gpu/bundle_libs.sh makes it).
# GPU_BUILD=1 builds BUILD_DIR here first.  Python is `python3` on PATH
# (PYTHON=... to choose).  The checks, in this order (most important
# first), each printing `ok ...`, `FAIL ...` or `skip ...: why`:
#   1. torch_blocks: PyTorch's CUDA memory per tensor (tests/gpu/torch_blocks.py):
#      per-line CUDA bytes against torch.cuda.memory_allocated(), block
#      sizes, peaks against max_memory_allocated/reserved, per-op CUDA memory
#      against torch.profiler, record_function and NVTX as regions;
#   2. torch_nocache: `memline run --no-torch-cache`: one cudaMalloc per tensor;
#   3. the nvcc fixtures' leaks against compute-sanitizer (when built:
#      BUILD_DIR/cuda/rt_static, rt_shared);
#   4. tests/gpu/torch_peak.py with expandable_segments:True and
#      backend:cudaMallocAsync (VMM and pool kinds against max_memory_reserved);
#   5. kp_torch: @profile's CUDA Increment per decorated line against
#      torch.cuda.memory_reserved()'s change (tests/gpu/kp_torch.py).
# A check not started within GPU_BUDGET_S seconds (default 210) is skipped,
# so the whole run stays under four minutes.  GPU_KEEP=DIR keeps the files;
# GPU_ONLY="WORD..." runs only the checks whose names contain a WORD (so that
# several runs can share one GPU at once, each with its own GPU_KEEP).  Ends with
# `gpu: N passed, M failed, K skipped`; exits 1 if any check failed.
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
PYTHON=${PYTHON:-python3}
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
SANITIZER=${SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
BUDGET=${GPU_BUDGET_S:-210}
START=$SECONDS
passed=0
failed=0
skipped=0
ok() { echo "ok $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
skip() { echo "skip $1: $2"; skipped=$((skipped + 1)); }
# in_budget NAME: true when check NAME is wanted (GPU_ONLY: words, one of
# which NAME must contain; unset: every check) and there is time left to start it.
in_budget() {
	local used=$((SECONDS - START)) w
	if [ -n "${GPU_ONLY:-}" ]; then
		for w in $GPU_ONLY; do
			case "$1" in *"$w"*) w=yes; break ;; esac
		done
		[ "$w" = yes ] || { skip "$1" "not in GPU_ONLY"; return 1; }
	fi
	if [ "$used" -ge "$BUDGET" ]; then
		skip "$1" "time budget spent (${used}s of GPU_BUDGET_S=${BUDGET}s)"
		return 1
	fi
	echo "== $1 (at ${used}s)"
}

[ -d "$BUILD/lib" ] && export LD_LIBRARY_PATH="$(cd "$BUILD/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ "${GPU_BUILD:-0}" = 1 ]; then
	make --no-print-directory -j"$(nproc)" BUILD="$BUILD" NVCC="$NVCC" "$BUILD/libmemline.so" \
		"$BUILD/memline" "$BUILD/cuda/rt_static" "$BUILD/cuda/rt_shared" >/dev/null ||
		{ echo "gpu: build failed"; exit 2; }
fi
for f in memline libmemline.so; do
	[ -e "$BUILD/$f" ] || { echo "gpu: no $BUILD/$f (build it, or name the build: tests/gpu/run.sh DIR)"; exit 2; }
done
ML=$BUILD/memline
missing=$(ldd "$ML" "$BUILD/libmemline.so" 2>/dev/null | grep "not found" | sort -u)
if [ -n "$missing" ]; then
	echo "gpu: libraries missing for $ML (copy them into $BUILD/lib: tests/gpu/bundle_libs.sh $BUILD):"
	echo "$missing"
	exit 2
fi
nvidia-smi -L 2>/dev/null || echo "warning: nvidia-smi found no GPU"
# GPU_KEEP=DIR keeps every check's files (profiles, JSON reports, outputs) in DIR.
if [ -n "${GPU_KEEP:-}" ]; then
	work=$GPU_KEEP
	mkdir -p "$work" || exit 2
else
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
fi
TORCH_CUDA=0
if "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	TORCH_CUDA=1
	"$PYTHON" -c 'import sys, torch; print("python %s, torch %s, CUDA %s" % (sys.version.split()[0], torch.__version__, torch.version.cuda))'
fi

# profile_in DIR: the Python program's profile in the run directory that
# `memline run -o DIR` made (memline.<prog>.<pid>/ holds each process's).
profile_in() {
	ls "$1"/memline.*/memline.python*.mlp "$1"/memline.python*.mlp 2>/dev/null | head -n 1
}

# report PROFILE VIEW OUT [ARGS...]: one JSON report, or a FAIL line.
report() {
	local prof=$1 view=$2 out=$3
	shift 3
	"$ML" report "$prof" "$view" --json "$@" >"$out" 2>"$out.err" && return 0
	bad "report $view" "$(tail -n 3 "$out.err")"
	return 1
}

# 1. PyTorch's blocks, per line and per op.
if [ "$TORCH_CUDA" != 1 ]; then
	skip torch_blocks "$PYTHON cannot use torch with CUDA"
elif in_budget torch_blocks; then
	d=$work/blocks
	mkdir -p "$d"
	t0=$SECONDS
	"$ML" run -o "$d" -- "$PYTHON" tests/gpu/torch_blocks.py run "$d/torch.json" >"$d/out.txt" 2>&1
	prof=$(profile_in "$d")
	echo "  run under memline: $((SECONDS - t0))s; $(grep -m1 'max_memory' "$d/out.txt")"
	if [ -z "$prof" ] || [ ! -s "$d/torch.json" ]; then
		bad torch_blocks "no profile or no torch.json: $(tail -n 5 "$d/out.txt")"
	else
		t0=$SECONDS
		report "$prof" lines "$d/lines.json" --function work &&
			report "$prof" ops "$d/ops.json" --limit all &&
			report "$prof" peak "$d/peak.json" &&
			report "$prof" regions "$d/regions.json" &&
			echo "  reports: $((SECONDS - t0))s" &&
			if "$PYTHON" tests/gpu/torch_blocks.py check "$d/torch.json" "$d" | sed 's/^/  /'; then
				ok "torch_blocks: per-tensor CUDA memory matches PyTorch's own numbers"
			else
				bad torch_blocks "see the FAIL lines above"
			fi
		echo "  memline's ops table (first rows):"
		"$ML" report "$prof" ops --limit 8 2>/dev/null | sed 's/^/    /'
		"$ML" report "$prof" lines --function work 2>/dev/null | sed 's/^/    /' | head -n 24
	fi
fi

# 2. --no-torch-cache: PyTorch asks the driver for every tensor.
if [ "$TORCH_CUDA" != 1 ]; then
	skip torch_nocache "$PYTHON cannot use torch with CUDA"
elif in_budget torch_nocache; then
	d=$work/nocache
	mkdir -p "$d"
	"$ML" run -o "$d" --no-torch-cache -- "$PYTHON" tests/gpu/torch_blocks.py nocache >"$d/out.txt" 2>&1
	prof=$(profile_in "$d")
	if [ -z "$prof" ]; then
		bad torch_nocache "no profile: $(tail -n 5 "$d/out.txt")"
	elif report "$prof" lines "$d/lines.json" --function nocache_work && report "$prof" ops "$d/ops.json" --limit all; then
		if "$PYTHON" tests/gpu/torch_blocks.py nocache-check "$d" | sed 's/^/  /'; then
			ok "torch_nocache: one cudaMalloc per tensor, at its line"
		else
			bad torch_nocache "see the FAIL lines above"
		fi
	fi
fi

# 3. The nvcc fixtures' leaks against compute-sanitizer.
for prog in rt_static rt_shared; do
	bin=$BUILD/cuda/$prog
	if [ ! -x "$bin" ]; then
		skip "$prog" "not built ($bin; build with nvcc, or GPU_BUILD=1)"
		continue
	fi
	in_budget "$prog" || continue
	d=$work/$prog
	mkdir -p "$d"
	plain=$("$bin" leak 2>&1)
	under=$("$ML" run -o "$d" -- "$bin" leak 2>/dev/null)
	if [ "$plain" != "$under" ]; then
		bad "$prog output" "without memline '$plain', with memline '$under'"
		continue
	fi
	report "$(ls -d "$d"/memline.* | head -n 1)" leaks "$d/leaks.json" || continue
	if [ ! -x "$SANITIZER" ]; then
		skip "$prog" "no compute-sanitizer ($SANITIZER)"
		continue
	fi
	"$SANITIZER" --leak-check full "$bin" leak >"$d/sanitizer.txt" 2>&1
	if "$PYTHON" tests/gpu/compare_leaks.py "$d/leaks.json" "$d/sanitizer.txt"; then
		ok "$prog leaks match compute-sanitizer"
	else
		bad "$prog leaks" "see above"
	fi
done

# 4. The caching allocator's other backends: VMM and pool segments.
for conf in "expandable_segments:True" "backend:cudaMallocAsync"; do
	if [ "$TORCH_CUDA" != 1 ]; then
		skip "torch $conf" "$PYTHON cannot use torch with CUDA"
		continue
	fi
	in_budget "torch $conf" || continue
	d=$work/torch-${conf//:/_}
	mkdir -p "$d"
	PYTORCH_CUDA_ALLOC_CONF=$conf "$ML" run -o "$d" -- "$PYTHON" tests/gpu/torch_peak.py \
		"$d/torch.json" >"$d/out.txt" 2>&1
	prof=$(profile_in "$d")
	if [ -z "$prof" ]; then
		bad "torch $conf" "no profile: $(tail -n 3 "$d/out.txt")"
		continue
	fi
	report "$prof" peak "$d/peak.json" || continue
	if "$PYTHON" tests/gpu/torch_peak.py --compare "$d/torch.json" "$d/peak.json" "$conf"; then
		ok "torch $conf peak"
	else
		bad "torch $conf peak" "see above"
	fi
done

# 5. @profile: CUDA Increment per decorated line against torch's reserved bytes.
if [ "$TORCH_CUDA" != 1 ]; then
	skip "kp_torch" "$PYTHON cannot use torch with CUDA"
elif in_budget "kp_torch"; then
	d=$work/kp_torch
	mkdir -p "$d"
	"$ML" run -o "$d" -- "$PYTHON" tests/gpu/kp_torch.py "$d/torch.json" >"$d/out.txt" 2>&1
	prof=$(profile_in "$d")
	if [ -z "$prof" ]; then
		bad "kp_torch" "no profile: $(tail -n 3 "$d/out.txt")"
	elif report "$prof" lines "$d/lines.json"; then
		if "$PYTHON" tests/gpu/kp_torch.py --compare "$d/torch.json" "$d/lines.json"; then
			ok "kp_torch @profile CUDA increments"
			"$ML" report "$prof" lines | head -30
		else
			bad "kp_torch" "see above"
		fi
	fi
fi

echo "gpu: $passed passed, $failed failed, $skipped skipped ($((SECONDS - START))s)"
[ "$failed" -eq 0 ]
