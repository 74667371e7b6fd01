#!/usr/bin/env bash
# tests/gpu/run.sh - CUDA checks that need a real GPU (not part of make check).
#
#   tests/gpu/run.sh [BUILD_DIR]        (default build-gpu)
#   GPU_NO_BUILD=1 tests/gpu/run.sh build   (use a build made elsewhere)
#
# 1. Builds memline and the nvcc fixtures (tests/cuda_double/rt_alloc.cu with
#    nvcc's defaults, i.e. static libcudart, and with -cudart shared).
# 2. Runs each fixture in `leak` mode (one block leaked per allocation API)
#    under memline and under `compute-sanitizer --leak-check full`, and
#    compares the leaked blocks (tests/gpu/compare_leaks.py).
# 3. When python3 can import torch with CUDA, runs tests/gpu/torch_peak.py
#    with the caching allocator, expandable_segments:True and
#    backend:cudaMallocAsync, comparing memline's CUDA peak with
#    torch.cuda.max_memory_reserved(); and tests/gpu/kp_torch.py: @profile's
#    CUDA Increment per line against torch.cuda.memory_reserved()'s change.
# Prints one line per check and `gpu: N passed, M failed`.
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:-build-gpu}
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
SANITIZER=${SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
passed=0
failed=0
ok() { echo "ok $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1: $2"; failed=$((failed + 1)); }

nvidia-smi -L 2>/dev/null || echo "warning: nvidia-smi found no GPU"
[ -x "$NVCC" ] || { echo "gpu: no nvcc at $NVCC"; exit 2; }
# Only what these checks run (plain make would also build the unit tests,
# which need Check).  GPU_NO_BUILD=1 uses BUILD_DIR as it is: built on
# another machine, for a GPU machine without the -dev packages.
if [ "${GPU_NO_BUILD:-0}" = 1 ]; then
	for f in libmemline.so memline cuda/rt_static cuda/rt_shared; do
		[ -x "$BUILD/$f" ] || { echo "gpu: no $BUILD/$f (GPU_NO_BUILD=1)"; exit 2; }
	done
else
	make --no-print-directory -j"$(nproc)" BUILD="$BUILD" NVCC="$NVCC" "$BUILD/libmemline.so" \
		"$BUILD/memline" "$BUILD/cuda/rt_static" "$BUILD/cuda/rt_shared" >/dev/null ||
		{ echo "gpu: build failed"; exit 2; }
fi
ML=$BUILD/memline
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for prog in rt_static rt_shared; do
	bin=$BUILD/cuda/$prog
	d=$work/$prog
	mkdir -p "$d"
	plain=$("$bin" leak 2>&1)
	under=$("$ML" run -o "$d" -- "$bin" leak 2>/dev/null)
	if [ "$plain" != "$under" ]; then
		bad "$prog output" "without memline '$plain', with memline '$under'"
		continue
	fi
	"$ML" report "$d"/memline.* leaks --json >"$d/leaks.json" 2>"$d/report.err" ||
		{ bad "$prog report" "$(cat "$d/report.err")"; continue; }
	"$ML" report "$d"/memline.* leaks >"$d/leaks.txt" 2>/dev/null
	if [ -x "$SANITIZER" ]; then
		"$SANITIZER" --leak-check full "$bin" leak >"$d/sanitizer.txt" 2>&1
		if /usr/bin/python3 tests/gpu/compare_leaks.py "$d/leaks.json" "$d/sanitizer.txt"; then
			ok "$prog leaks match compute-sanitizer"
		else
			bad "$prog leaks" "see above"
		fi
	else
		bad "$prog" "no compute-sanitizer ($SANITIZER)"
	fi
	sed -n '/^CUDA (host stack/,$p' "$d/leaks.txt" | head -60
done

if /usr/bin/python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	for conf in "" "expandable_segments:True" "backend:cudaMallocAsync"; do
		d=$work/torch-${conf:-default}
		d=${d//:/_}
		mkdir -p "$d"
		PYTORCH_CUDA_ALLOC_CONF=$conf "$ML" run -o "$d" -- /usr/bin/python3 tests/gpu/torch_peak.py \
			"$d/torch.json" >"$d/out.txt" 2>&1
		prof=$(ls "$d"/memline.*/memline.python*.mlp 2>/dev/null | head -n 1)
		if [ -z "$prof" ]; then
			bad "torch ${conf:-default}" "no profile: $(tail -n 3 "$d/out.txt")"
			continue
		fi
		"$ML" report "$prof" peak --json >"$d/peak.json"
		if /usr/bin/python3 tests/gpu/torch_peak.py --compare "$d/torch.json" "$d/peak.json" "${conf:-default}"; then
			ok "torch ${conf:-default} peak"
		else
			bad "torch ${conf:-default} peak" "see above"
		fi
	done
	# @profile: CUDA Increment per decorated line against torch's reserved bytes.
	d=$work/kp_torch
	mkdir -p "$d"
	"$ML" run -o "$d" -- /usr/bin/python3 tests/gpu/kp_torch.py "$d/torch.json" >"$d/out.txt" 2>&1
	prof=$(ls "$d"/memline.*/memline.python*.mlp 2>/dev/null | head -n 1)
	if [ -z "$prof" ]; then
		bad "kp_torch" "no profile: $(tail -n 3 "$d/out.txt")"
	elif "$ML" report "$prof" lines --json >"$d/lines.json" &&
		/usr/bin/python3 tests/gpu/kp_torch.py --compare "$d/torch.json" "$d/lines.json"; then
		ok "kp_torch @profile CUDA increments"
		"$ML" report "$prof" lines | head -30
	else
		bad "kp_torch" "see above"
	fi
else
	echo "skip torch: python3 cannot use torch with CUDA"
fi

echo "gpu: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
