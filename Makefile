# memline - one non-recursive Makefile.  `make help` lists the targets.

CONFIG ?= release
V ?= 0
CC ?= cc
CXX ?= c++
BUILD ?= build

ifeq ($(V),1)
Q :=
else
Q := @
endif

PKGS := libunwind libdw
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
UNWIND_LIBS := $(shell pkg-config --libs libunwind 2>/dev/null)
DW_LIBS := $(shell pkg-config --libs libdw 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)
JEMALLOC_LIBS := $(shell pkg-config --libs jemalloc 2>/dev/null)

WARN := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes
BASE_CFLAGS := -std=gnu11 -g $(WARN) -I. -D_GNU_SOURCE $(PKG_CFLAGS) -MMD -MP

ifeq ($(CONFIG),release)
OPT := -O2
else ifeq ($(CONFIG),debug)
OPT := -O0 -DML_DEBUG=1
else ifeq ($(CONFIG),asan)
OPT := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
override BUILD := $(BUILD)-asan
else
$(error CONFIG must be release, debug or asan)
endif

# The preload runtime: position independent, hidden by default, static TLS.
RT_CFLAGS := $(BASE_CFLAGS) -O2 -fPIC -fvisibility=hidden -ftls-model=initial-exec \
	-fexceptions -fno-omit-frame-pointer -mcx16
# The CLI, the report and the tests.
CFLAGS_PLAIN := $(BASE_CFLAGS) $(OPT) -mcx16
SAN_LDFLAGS := -fsanitize=address,undefined
LDFLAGS_PLAIN := $(if $(filter asan,$(CONFIG)),$(SAN_LDFLAGS))

RT_SRCS := $(wildcard alloc/*.c lineprof/*.c cuda_hooks/*.c python/*.c) $(filter-out common/reader.c,$(wildcard common/*.c))
# The recording core, without the exported hooks: what unit tests link.
CORE_SRCS := $(filter-out %/hooks.c %/lifecycle.c,$(RT_SRCS))
REPORT_SRCS := $(filter-out report/main.c,$(wildcard report/*.c)) $(wildcard common/*.c)

RT_OBJS := $(RT_SRCS:%.c=$(BUILD)/rt/%.o)
CORE_OBJS := $(CORE_SRCS:%.c=$(BUILD)/obj/%.o)
REPORT_OBJS := $(REPORT_SRCS:%.c=$(BUILD)/obj/%.o)

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

.PHONY: all check unit e2e fixtures demo bench clean help asan
all: $(LIB) $(CLI) $(EXAMPLE)

$(LIB): $(RT_OBJS)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-z,nodelete -Wl,--no-undefined -o $@ $^ $(UNWIND_LIBS) -ldl -lpthread

$(CLI): $(BUILD)/obj/report/main.o $(BUILD)/libmlreport.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_PLAIN) -o $@ $^ $(DW_LIBS) -lelf -lstdc++

$(BUILD)/libmlreport.a: $(REPORT_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/libmlcore.a: $(CORE_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/rt/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC [rt] $<"
	$(Q)$(CC) $(RT_CFLAGS) -c -o $@ $<

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS_PLAIN) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(BUILD)/libmlreport.a $(BUILD)/libmlcore.a
	@mkdir -p $(dir $@)
	@echo "  TEST    $@"
	$(Q)$(CC) $(CFLAGS_PLAIN) $(LDFLAGS_PLAIN) -o $@ $< $(BUILD)/libmlreport.a $(BUILD)/libmlcore.a \
		$(CHECK_LIBS) $(DW_LIBS) -lelf -lstdc++ $(UNWIND_LIBS) -ldl -lpthread

# Fixtures are tiny, -g, -O0 unless they say otherwise, and never sanitized.
$(BUILD)/fixtures/%: tests/fixtures/%.c
	@mkdir -p $(dir $@)
	@echo "  FIXTURE $@"
	$(Q)$(CC) -g -O0 -fno-omit-frame-pointer -o $@ $< $(FIX_CFLAGS_$*) $(FIX_LDLIBS_$*)

$(BUILD)/fixtures/%: tests/fixtures/%.cc
	@mkdir -p $(dir $@)
	@echo "  FIXTURE $@"
	$(Q)$(CXX) -g -O0 -fno-omit-frame-pointer -o $@ $< $(FIX_CFLAGS_$*) $(FIX_LDLIBS_$*)

$(BUILD)/examples/%: examples/%.c
	@mkdir -p $(dir $@)
	@echo "  EXAMPLE $@"
	$(Q)$(CC) -g -O1 -fno-omit-frame-pointer -o $@ $<

fixtures: $(FIXTURES)

unit: $(CHECKS)
	$(Q)tests/run_unit.sh $(CHECKS)

e2e: $(LIB) $(CLI) $(FIXTURES)
	$(Q)/usr/bin/python3 tests/e2e/run.py --build $(BUILD)

# The whole suite: unit tests, end-to-end tests, then the unit tests and the
# report tool again under ASan+UBSan.
check: all
	$(Q)tests/check_all.sh

asan:
	$(Q)$(MAKE) CONFIG=asan unit

demo: all
	$(Q)./examples/demo.sh $(BUILD)

bench: $(LIB) $(CLI)
	$(Q)$(MAKE) -C bench BUILD=$(abspath $(BUILD))

clean:
	rm -rf build build-asan

help:
	@echo "make [CONFIG=release|debug|asan] [V=1] TARGET"
	@echo "  all      libmemline.so, the memline CLI and the example (default)"
	@echo "  check    the whole test suite: unit, end-to-end, then ASan+UBSan"
	@echo "  unit     Check unit tests only"
	@echo "  e2e      end-to-end tests only"
	@echo "  demo     profile the bundled example and print its reports"
	@echo "  bench    overhead benchmark against heaptrack and valgrind"
	@echo "  clean    remove build outputs"

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
