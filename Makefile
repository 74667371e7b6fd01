# memline - one non-recursive Makefile.  `make help` lists the targets.

CONFIG ?= release
V ?= 0
CC ?= cc
CXX ?= c++
BUILD ?= build
# The folder `make clean` removes with its -asan and -debug siblings.
BUILD_ROOT := $(BUILD)

# Plain `make` builds everything (`all`), whatever rule an included .mk file
# or a later edit puts first.
.DEFAULT_GOAL := all

ifeq ($(V),1)
Q :=
else
Q := @
endif

PKGS := libunwind libdw libzstd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
UNWIND_LIBS := $(shell pkg-config --libs libunwind 2>/dev/null)
DW_LIBS := $(shell pkg-config --libs libdw 2>/dev/null)
# Profiles are zstd-compressed: the runtime writes, the report reads them.
ZSTD_LIBS := $(shell pkg-config --libs libzstd 2>/dev/null || echo -lzstd)
# The runtime takes libzstd's archive (PIC in libzstd-dev) where there is
# one, its symbols kept local: one object less in the program's global
# scope, which every symbol look-up of a library loaded later searches.
# (libunwind is not linked at all: core/libunwind.c loads it.)
ZSTD_ARCHIVE := $(shell $(CC) -print-file-name=libzstd.a)
ZSTD_STATIC := -Wl,--exclude-libs,libzstd.a $(ZSTD_ARCHIVE)
RT_ZSTD_LIBS := $(if $(filter /%,$(ZSTD_ARCHIVE)),$(ZSTD_STATIC),$(ZSTD_LIBS))
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)
JEMALLOC_LIBS := $(shell pkg-config --libs jemalloc 2>/dev/null)
# The pprof view: profile.proto encoded by protobuf-c, gzipped by zlib.
PB_LIBS := $(shell pkg-config --libs libprotobuf-c zlib 2>/dev/null || echo -lprotobuf-c -lz)
PROTOC_C ?= protoc-c

WARN := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes
BASE_CFLAGS := -std=gnu11 -g $(WARN) -I. -D_GNU_SOURCE $(PKG_CFLAGS) -MMD -MP

# debug and asan check the runtime's invariants (ML_ASSERT, core/core.h);
# each configuration builds into its own folder.
ifeq ($(CONFIG),release)
OPT := -O2
DEBUG_DEFS :=
else ifeq ($(CONFIG),debug)
DEBUG_DEFS := -DML_DEBUG=1
OPT := -O0 $(DEBUG_DEFS)
override BUILD := $(BUILD)-debug
else ifeq ($(CONFIG),asan)
DEBUG_DEFS := -DML_DEBUG=1
OPT := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	$(DEBUG_DEFS)
override BUILD := $(BUILD)-asan
else
$(error CONFIG must be release, debug or asan)
endif

# The preload runtime: position independent, hidden by default, static TLS;
# no straight-line vectorizing (it packed the hot paths' counter updates,
# two adds to memory, into six SSE instructions).
RT_CFLAGS := $(BASE_CFLAGS) $(DEBUG_DEFS) -O2 -fPIC -fvisibility=hidden -ftls-model=initial-exec \
	-fexceptions -fno-omit-frame-pointer -mcx16 -fno-tree-slp-vectorize
# The CLI, the report and the tests.
CFLAGS_PLAIN := $(BASE_CFLAGS) $(OPT) -mcx16
SAN_LDFLAGS := -fsanitize=address,undefined
LDFLAGS_PLAIN := $(if $(filter asan,$(CONFIG)),$(SAN_LDFLAGS))

# The runtime: the recording core, the hook rooms and what common/ has for it.
ROOMS := alloc cuda_hooks lineprof process python torch_hooks
RT_SRCS := $(wildcard core/*.c $(ROOMS:%=%/*.c)) $(wildcard common/*.c)
# The recording core and the rooms' insides, without the exported hooks,
# the rooms' registrations and the runtime's constructor: what unit tests link.
CORE_SRCS := $(filter-out %/hooks.c %/room.c core/lifecycle.c,$(RT_SRCS))
# The report library (reading, symbolizing, aggregating, rendering) and the
# command line on top of it.
REPORT_SRCS := $(wildcard report/*.c) $(wildcard common/*.c)
CLI_SRCS := $(wildcard cli/*.c)
# Generated from report/pprof/profile.proto.
PB_GEN := $(BUILD)/gen/report/pprof/profile.pb-c
# The HTML report's page, script and style, embedded by report/html_assets.S.
HTML_ASSETS := $(wildcard report/html/*)

RT_OBJS := $(RT_SRCS:%.c=$(BUILD)/rt/%.o)
CORE_OBJS := $(CORE_SRCS:%.c=$(BUILD)/obj/%.o)
REPORT_OBJS := $(REPORT_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/profile.pb-c.o \
	$(BUILD)/obj/report/html_assets.o
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)

LIB := $(BUILD)/libmemline.so
CLI := $(BUILD)/memline
CHECKS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/check_*.c))

FIXTURE_C := $(wildcard tests/fixtures/*.c)
FIXTURE_CXX := $(wildcard tests/fixtures/*.cc)
FIXTURES := $(FIXTURE_C:tests/fixtures/%.c=$(BUILD)/fixtures/%) \
	$(FIXTURE_CXX:tests/fixtures/%.cc=$(BUILD)/fixtures/%)
# Per-fixture flags: FIX_CFLAGS_<name>, FIX_LDLIBS_<name>.
FIX_LDLIBS_jemalloc_linked := $(JEMALLOC_LIBS)
FIX_LDLIBS_jemalloc_cxx := $(JEMALLOC_LIBS)
FIX_LDLIBS_threads16 := -lpthread
FIX_CFLAGS_static_prog := -static
-include tests/fixtures/flags.mk
-include tests/cuda_double/cuda.mk

EXAMPLE := $(BUILD)/examples/leaky
# Python boot scripts: run by the Python room at the interpreter's start,
# from <the directory of libmemline.so>/python (docs/python.md).
PY_BOOT := $(patsubst python/boot/%,$(BUILD)/python/%,$(wildcard python/boot/*.py)) \
	$(patsubst python/%,$(BUILD)/python/%,$(wildcard python/memline/*.py))
# Torture programs: each runs alone and under memline (tests/torture/run.py).
# A program's companion library, tests/torture/NAME.lib.c, is built as
# libNAME.so next to it (the program dlopens it).
TORTURE_LIB_SRCS := $(wildcard tests/torture/*.lib.c)
TORTURE := $(patsubst tests/torture/%.c,$(BUILD)/torture/%,$(filter-out $(TORTURE_LIB_SRCS),$(wildcard tests/torture/*.c))) \
	$(patsubst tests/torture/%.lib.c,$(BUILD)/torture/lib%.so,$(TORTURE_LIB_SRCS))

.PHONY: all check unit e2e torture torture-slow layout fixtures demo bench clean help asan peers
# Everything: the runtime, the CLI, the example, every fixture (the CUDA
# test double included) and every unit test binary.
all: $(LIB) $(CLI) $(EXAMPLE) $(FIXTURES) $(CHECKS) $(TORTURE) $(PY_BOOT)

$(BUILD)/python/%.py: python/boot/%.py
	@mkdir -p $(dir $@)
	$(Q)cp $< $@

# The `memline` package (memline.profile), served to profiled programs by
# the boot script profile.py and importable without memline as a no-op.
$(BUILD)/python/memline/%.py: python/memline/%.py
	@mkdir -p $(dir $@)
	$(Q)cp $< $@

$(LIB): $(RT_OBJS)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-z,nodelete -Wl,--no-undefined -o $@ $^ $(RT_ZSTD_LIBS) -lm -ldl \
		-lpthread

$(CLI): $(CLI_OBJS) $(BUILD)/libmlreport.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_PLAIN) -o $@ $^ $(DW_LIBS) -lelf $(ZSTD_LIBS) -lm -lstdc++ $(PB_LIBS)

$(BUILD)/libmlreport.a: $(REPORT_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/libmlcore.a: $(CORE_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/rt/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC [rt] $<"
	$(Q)$(CC) $(RT_CFLAGS) $(RT_EXTRA) -c -o $@ $<

# The hot path's files without frame pointers (one register more, no frame
# set up): their CFI describes every frame, for the walker and libunwind
# alike.  A function that takes __builtin_frame_address(0) (ML_UNWIND_MARK:
# the hooks, ml_thread_side_run's callers) keeps its frame pointer anyway.
HOT_RT := alloc/hooks core/track core/unwind core/livetab core/stacktab core/timeline \
	core/counters
$(patsubst %,$(BUILD)/rt/%.o,$(HOT_RT)): RT_EXTRA := -fomit-frame-pointer

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS_PLAIN) -I$(BUILD)/gen -c -o $@ $<

$(PB_GEN).c $(PB_GEN).h: report/pprof/profile.proto
	@mkdir -p $(BUILD)/gen
	@echo "  PROTOC  $<"
	$(Q)$(PROTOC_C) --c_out=$(BUILD)/gen $<

# The generated code needs the header first (the pprof view includes it).
$(BUILD)/obj/report/view_pprof.o: $(PB_GEN).h
$(BUILD)/obj/gen/profile.pb-c.o: $(PB_GEN).c $(PB_GEN).h
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(filter-out -Wshadow,$(CFLAGS_PLAIN)) -I$(BUILD)/gen -c -o $@ $<

$(BUILD)/obj/report/html_assets.o: report/html_assets.S $(HTML_ASSETS)
	@mkdir -p $(dir $@)
	@echo "  AS      $<"
	$(Q)$(CC) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(BUILD)/libmlreport.a $(BUILD)/libmlcore.a
	@mkdir -p $(dir $@)
	@echo "  TEST    $@"
	$(Q)$(CC) $(CFLAGS_PLAIN) $(LDFLAGS_PLAIN) -o $@ $< $(BUILD)/libmlreport.a $(BUILD)/libmlcore.a \
		$(CHECK_LIBS) $(DW_LIBS) -lelf $(ZSTD_LIBS) -lstdc++ $(UNWIND_LIBS) -lm -ldl -lpthread $(PB_LIBS)

# Fixtures are tiny, -g, -O0 unless they say otherwise, and never sanitized.
$(BUILD)/fixtures/%: tests/fixtures/%.c
	@mkdir -p $(dir $@)
	@echo "  FIXTURE $@"
	$(Q)$(CC) -g -O0 -fno-omit-frame-pointer -o $@ $< $(FIX_CFLAGS_$*) $(FIX_LDLIBS_$*)

$(BUILD)/fixtures/%: tests/fixtures/%.cc
	@mkdir -p $(dir $@)
	@echo "  FIXTURE $@"
	$(Q)$(CXX) -g -O0 -fno-omit-frame-pointer -o $@ $< $(FIX_CFLAGS_$*) $(FIX_LDLIBS_$*)

# Torture programs: plain -g -O0 builds of ordinary C, never sanitized.
$(BUILD)/torture/%: tests/torture/%.c
	@mkdir -p $(dir $@)
	@echo "  TORTURE $@"
	$(Q)$(CC) -g -O0 -fno-omit-frame-pointer -pthread -o $@ $< -ldl

$(BUILD)/torture/lib%.so: tests/torture/%.lib.c
	@mkdir -p $(dir $@)
	@echo "  TORTURE $@"
	$(Q)$(CC) -g -O0 -fno-omit-frame-pointer -shared -fPIC -o $@ $<

$(BUILD)/examples/%: examples/%.c
	@mkdir -p $(dir $@)
	@echo "  EXAMPLE $@"
	$(Q)$(CC) -g -O1 -fno-omit-frame-pointer -o $@ $<

fixtures: $(FIXTURES)

unit: $(CHECKS)
	$(Q)tests/run_unit.sh $(CHECKS)

e2e: $(LIB) $(CLI) $(EXAMPLE) $(FIXTURES)
	$(Q)/usr/bin/python3 tests/e2e/run.py --build $(BUILD)

# Each torture program alone and under memline: same behaviour, exact profile.
torture: $(LIB) $(CLI) $(TORTURE)
	$(Q)/usr/bin/python3 tests/torture/run.py --build $(BUILD)

# The same with the programs marked @slow.
torture-slow: $(LIB) $(CLI) $(TORTURE)
	$(Q)/usr/bin/python3 tests/torture/run.py --build $(BUILD) --slow

# The layout rules of docs/layout.md (who may include what).
layout:
	$(Q)/usr/bin/python3 tests/layout_check.py

# The whole suite: unit tests, end-to-end tests, the torture suite, the
# layout rules, then the unit tests and the report tool again under
# ASan+UBSan.
check: all
	$(Q)BUILD=$(BUILD_ROOT) CHECK_BUILD=$(BUILD) tests/check_all.sh

asan:
	$(Q)$(MAKE) CONFIG=asan unit

# memline against valgrind on programs modelled on the peers' tests
# (tests/peers/compare.py; skipped without valgrind).
peers: $(LIB) $(CLI)
	$(Q)/usr/bin/python3 tests/peers/compare.py --build $(BUILD)

demo: all
	$(Q)./examples/demo.sh $(BUILD)

bench: $(LIB) $(CLI)
	$(Q)$(MAKE) -C bench BUILD=$(abspath $(BUILD))

clean:
	rm -rf $(BUILD_ROOT) $(BUILD_ROOT)-asan $(BUILD_ROOT)-debug

help:
	@echo "make [CONFIG=release|debug|asan] [V=1] TARGET"
	@echo "  all      everything: libmemline.so, the CLI, the example, fixtures,"
	@echo "           torture programs and unit test binaries (the default goal)"
	@echo "  check    the whole suite: unit, end-to-end, torture, layout, then"
	@echo "           ASan+UBSan (CONFIG=debug check: the same on a debug build)"
	@echo "  unit     Check unit tests only"
	@echo "  e2e      end-to-end tests only"
	@echo "  torture  each tests/torture program alone and under memline"
	@echo "           (torture-slow: with the programs marked @slow)"
	@echo "  layout   the layout rules (docs/layout.md)"
	@echo "  peers    memline against valgrind on the peers' test programs (tests/peers/)"
	@echo "  demo     profile the bundled example and print its reports"
	@echo "  bench    overhead benchmark against heaptrack and valgrind"
	@echo "  clean    remove build outputs"

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
