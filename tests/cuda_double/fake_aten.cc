/* tests/cuda_double/fake_aten.cc - a stand-in for PyTorch's operators
 * (libtorch_fake.so): functions named as torchgen names the entry of each
 * ATen operator, at::_ops::<name>[_<overload>]::call, nesting as the real
 * ones do, allocating through the fake CPU allocator (c10::alloc_cpu, the
 * fake libc10) or the fake CUDA caching allocator (fake_caching.cc).  The
 * extern "C" functions at the end are what C programs and Python (ctypes)
 * call: one per op, a "tensor" being a block of bytes on device 0 (CPU) or
 * 1 (CUDA).  Built -O0: no call is inlined away. */
#include <stddef.h>
#include <time.h>

namespace c10 {
void *alloc_cpu(size_t nbytes);
void free_cpu(void *p);
}  // namespace c10

extern "C" void *fake_cuda_malloc(size_t n);
extern "C" void fake_cuda_free(void *p);

static void *storage(size_t n, int device)
{
	return device ? fake_cuda_malloc(n) : c10::alloc_cpu(n);
}

static void release(void *p, int device)
{
	if (device)
		fake_cuda_free(p);
	else
		c10::free_cpu(p);
}

namespace at {
namespace _ops {

/* aten::empty.memory_format: allocates the tensor itself (its self). */
struct empty_memory_format {
	static void *call(size_t n, int device);
};
void *empty_memory_format::call(size_t n, int device)
{
	return storage(n, device);
}

/* aten::zeros: through aten::empty (self 0, total n). */
struct zeros {
	static void *call(size_t n, int device);
};
void *zeros::call(size_t n, int device)
{
	return empty_memory_format::call(n, device);
}

/* aten::add.Tensor: its output through aten::empty, and a scratch buffer
 * of its own, freed before it returns (net 0 for it). */
struct add_Tensor {
	static void *call(size_t n, int device);
};
void *add_Tensor::call(size_t n, int device)
{
	void *scratch = storage(n / 2, device);
	void *out = empty_memory_format::call(n, device);
	release(scratch, device);
	return out;
}

/* aten::max_pool2d_with_indices_backward: no overload, underscores in the
 * name; allocates its output itself. */
struct max_pool2d_with_indices_backward {
	static void *call(size_t n, int device);
};
void *max_pool2d_with_indices_backward::call(size_t n, int device)
{
	return storage(n, device);
}

/* aten::sum.dim_IntList: an overload with an underscore. */
struct sum_dim_IntList {
	static void *call(size_t n, int device);
};
void *sum_dim_IntList::call(size_t n, int device)
{
	return storage(n, device);
}

/* aten::spin (no such op in PyTorch: a stand-in for a busy kernel):
 * burns ms milliseconds of the thread's CPU time and returns the
 * nanoseconds it measured. */
struct spin {
	static long call(long ms);
};
long spin::call(long ms)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	volatile unsigned long x = 0;
	long ns;
	do {
		for (int i = 0; i < 100000; i++)
			x = x * 31 + (unsigned long)i;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
		ns = (t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec);
	} while (ns < ms * 1000000L);
	return ns;
}

}  // namespace _ops
}  // namespace at

extern "C" {
void *fake_empty(size_t n, int device)
{
	return at::_ops::empty_memory_format::call(n, device);
}

void *fake_zeros(size_t n, int device)
{
	return at::_ops::zeros::call(n, device);
}

void *fake_add(size_t n, int device)
{
	return at::_ops::add_Tensor::call(n, device);
}

void *fake_pool_backward(size_t n, int device)
{
	return at::_ops::max_pool2d_with_indices_backward::call(n, device);
}

void *fake_sum(size_t n, int device)
{
	return at::_ops::sum_dim_IntList::call(n, device);
}

long fake_spin(long ms)
{
	return at::_ops::spin::call(ms);
}

/* Frees a tensor outside any op (Python's `del t`). */
void fake_free(void *p, int device)
{
	release(p, device);
}
}
