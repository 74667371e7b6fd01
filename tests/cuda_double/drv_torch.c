/* tests/cuda_double/drv_torch.c - PyTorch's allocators without PyTorch: ops
 * of the stand-in operator library (fake_aten.cc) on the stand-in caching
 * allocator (fake_caching.cc, on the driver double) and CPU allocator
 * (fake_c10.cc), loaded with RTLD_LOCAL as torch._C loads PyTorch.
 *   drv_torch v1|v2 [spin]  the libraries with the 1.x or 2.x signature of
 *                           c10::reportMemoryUsageToProfiler; spin: then
 *                           300 ms of CPU in one op, measured
 * Prints what the stand-in libc10 was told (memline must forward every
 * call) and what the caching allocator holds. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef void *(*op_fn)(size_t, int);

static void *lib;

static void *sym(const char *name)
{
	void *p = dlsym(lib, name);
	if (!p) {
		fprintf(stderr, "no %s: %s\n", name, dlerror());
		_exit(3);
	}
	return p;
}

int main(int argc, char **argv)
{
	/* An absolute path, as the module map keeps it for the report. */
	char exe[PATH_MAX], path[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 2;
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(path, sizeof(path), "%s/torch_%s/libtorch_fake.so", exe, argc > 1 ? argv[1] : "v2");
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "%s\n", dlerror());
		return 2;
	}
	op_fn empty = (op_fn)sym("fake_empty"), zeros = (op_fn)sym("fake_zeros");
	op_fn add = (op_fn)sym("fake_add"), pool_backward = (op_fn)sym("fake_pool_backward");
	op_fn sum = (op_fn)sym("fake_sum");
	void (*release)(void *, int) = (void (*)(void *, int))sym("fake_free");
	void (*counts)(long *, long *, long *) = (void (*)(long *, long *, long *))sym("fake_c10_counts");
	size_t (*allocated)(void) = (size_t (*)(void))sym("fake_cuda_allocated");
	size_t (*reserved)(void) = (size_t (*)(void))sym("fake_cuda_reserved");

	void *a = empty(1000, 1);	/* L:t_empty */
	void *b = zeros(4 << 20, 1);	/* L:t_zeros */
	void *c = add(3000, 1);	/* L:t_add */
	void *d = pool_backward(600000, 1);	/* L:t_pool */
	void *e = sum(100, 1);	/* L:t_sum */
	release(c, 1);	/* L:t_free */
	void *f = empty(700, 0);	/* L:t_cpu */
	void *g = add(2000, 0);	/* L:t_cpu_add */
	release(f, 0);	/* L:t_cpu_free */
	if (!a || !b || !d || !e || !g)
		return 4;
	long reports, net, frees;
	counts(&reports, &net, &frees);
	printf("c10 reports %ld net %ld cpu frees %ld\n", reports, net, frees);
	printf("allocated %zu reserved %zu\n", allocated(), reserved());
	if (argc > 2 && strcmp(argv[2], "spin") == 0) {
		long (*spin)(long) = (long (*)(long))sym("fake_spin");
		printf("spin %ld ns\n", spin(300));	/* L:t_spin */
	}
	return 0;
}
