# tests/cuda_double/cuda.mk - the CUDA test double (libcuda.so.1), the
# driver-API fixtures that run against it, and, when the CUDA toolkit is
# installed, fixtures built with nvcc.  Included by the top-level Makefile;
# everything lands in $(BUILD)/cuda/ and is added to FIXTURES (so `make e2e`
# builds it).  Without /usr/local/cuda only the nvcc fixtures are skipped.

NVCC ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc))
CUDA_DIR := $(BUILD)/cuda
CUDA_DOUBLE := $(CUDA_DIR)/libcuda.so.1
CUDA_DRV_FIXTURES := $(patsubst tests/cuda_double/%.c,$(CUDA_DIR)/%,\
	$(filter-out tests/cuda_double/libcuda.c tests/cuda_double/probe_preload.c \
	tests/cuda_double/fake_c10_cuda.c tests/cuda_double/drv_user_lib.c \
	tests/cuda_double/fake_cudart.c,\
	$(wildcard tests/cuda_double/*.c)))
# Stand-ins for PyTorch's libraries (fake_c10.cc, fake_caching.cc,
# fake_aten.cc), with each signature of c10::reportMemoryUsageToProfiler:
# torch_v1/ and torch_v2/, each library finding its neighbours by $ORIGIN.
CUDA_TORCH := $(foreach v,v1 v2,$(CUDA_DIR)/torch_$(v)/libc10.so \
	$(CUDA_DIR)/torch_$(v)/libc10_cuda.so $(CUDA_DIR)/torch_$(v)/libtorch_fake.so)
CUDA_PROBE := $(CUDA_DIR)/libprobe_preload.so $(CUDA_DIR)/libc10_cuda.so \
	$(CUDA_DIR)/libdrv_user.so
CUDA_NVCC_FIXTURES := $(if $(NVCC),$(CUDA_DIR)/rt_static $(CUDA_DIR)/rt_shared)
FIXTURES += $(CUDA_DOUBLE) $(CUDA_DRV_FIXTURES) $(CUDA_PROBE) $(CUDA_NVCC_FIXTURES) $(CUDA_TORCH)

$(CUDA_DOUBLE): tests/cuda_double/libcuda.c
	@mkdir -p $(dir $@)
	@echo "  DOUBLE  $@"
	$(Q)$(CC) -g -O1 -fPIC -shared -fvisibility=hidden -Wl,-soname,libcuda.so.1 \
		-Wl,-Bsymbolic -o $@ $< -lpthread

$(CUDA_DIR)/libprobe_preload.so: tests/cuda_double/probe_preload.c
	@mkdir -p $(dir $@)
	@echo "  PROBE   $@"
	$(Q)$(CC) -g -O1 -fPIC -shared -o $@ $< -ldl

# A library named like PyTorch's CUDA library (the report recognises it).
$(CUDA_DIR)/libc10_cuda.so: tests/cuda_double/fake_c10_cuda.c
	@mkdir -p $(dir $@)
	@echo "  FAKE    $@"
	$(Q)$(CC) -g -O1 -fPIC -shared -o $@ $<

TORCH_SOFLAGS = -g -O0 -fno-omit-frame-pointer -fPIC -shared -Wl,--disable-new-dtags,-rpath,'$$ORIGIN' \
	$(if $(filter torch_v1,$(notdir $(@D))),-DFAKE_C10_V1)

$(CUDA_DIR)/torch_%/libc10.so: tests/cuda_double/fake_c10.cc
	@mkdir -p $(dir $@)
	@echo "  FAKE    $@"
	$(Q)$(CXX) $(TORCH_SOFLAGS) -Wl,-soname,libc10.so -o $@ $<

$(CUDA_DIR)/torch_%/libc10_cuda.so: tests/cuda_double/fake_caching.cc tests/cuda_double/drv_common.h \
		$(CUDA_DIR)/torch_%/libc10.so
	@mkdir -p $(dir $@)
	@echo "  FAKE    $@"
	$(Q)$(CXX) $(TORCH_SOFLAGS) -Itests/cuda_double -Wl,-soname,libc10_cuda.so -o $@ $< \
		-L$(@D) -lc10 -ldl

$(CUDA_DIR)/torch_%/libtorch_fake.so: tests/cuda_double/fake_aten.cc $(CUDA_DIR)/torch_%/libc10_cuda.so
	@mkdir -p $(dir $@)
	@echo "  FAKE    $@"
	$(Q)$(CXX) $(TORCH_SOFLAGS) -Wl,-soname,libtorch_fake.so -o $@ $< -L$(@D) -lc10_cuda -lc10

# A library linked with the double, loaded by drv_local with RTLD_LOCAL.
$(CUDA_DIR)/libdrv_user.so: tests/cuda_double/drv_user_lib.c $(CUDA_DOUBLE)
	@mkdir -p $(dir $@)
	@echo "  LIB     $@"
	$(Q)$(CC) -g -O0 -fPIC -shared -o $@ $< $(CUDA_DOUBLE)

# drv_linked links against the double the way a program links with -lcuda;
# the others dlopen libcuda.so.1 like the CUDA runtime does.
$(CUDA_DIR)/drv_linked: tests/cuda_double/drv_linked.c $(CUDA_DOUBLE)
	@mkdir -p $(dir $@)
	@echo "  FIXTURE $@"
	$(Q)$(CC) -g -O0 -fno-omit-frame-pointer -o $@ $< $(CUDA_DOUBLE) -ldl

$(CUDA_DIR)/%: tests/cuda_double/%.c tests/cuda_double/drv_common.h
	@mkdir -p $(dir $@)
	@echo "  FIXTURE $@"
	$(Q)$(CC) -g -O0 -fno-omit-frame-pointer -o $@ $< -ldl

# The shape of nvcc's default (libcudart linked into the program, without
# debug info) without the toolkit: the stand-in runtime built with -g0.
$(CUDA_DIR)/fake_cudart.o: tests/cuda_double/fake_cudart.c tests/cuda_double/drv_common.h
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) -g0 -O0 -fno-omit-frame-pointer -c -o $@ $<

$(CUDA_DIR)/drv_static_rt: tests/cuda_double/drv_static_rt.c $(CUDA_DIR)/fake_cudart.o
	@mkdir -p $(dir $@)
	@echo "  FIXTURE $@"
	$(Q)$(CC) -g -O0 -fno-omit-frame-pointer -o $@ $< $(CUDA_DIR)/fake_cudart.o -ldl

# The real CUDA runtime: nvcc's default (static libcudart) and shared.
$(CUDA_DIR)/rt_static: tests/cuda_double/rt_alloc.cu
	@mkdir -p $(dir $@)
	@echo "  NVCC    $@"
	$(Q)$(NVCC) -g -o $@ $<

$(CUDA_DIR)/rt_shared: tests/cuda_double/rt_alloc.cu
	@mkdir -p $(dir $@)
	@echo "  NVCC    $@"
	$(Q)$(NVCC) -g -cudart shared -o $@ $<
