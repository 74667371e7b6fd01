// ht_inlining.cc - peer: heaptrack's tests/manual/inlining.cpp: allocations
// inside always_inline functions, built with -O2 (peers-flags: -O2).
#include <cstdio>

static inline __attribute__((always_inline)) char *asdf()
{
	char *p = new char[1234];
	__asm__ volatile("" : : "g"(p) : "memory");
	return p;
}

static inline __attribute__((always_inline)) char *bar() { return asdf(); }

__attribute__((noinline)) static char *caller() { return bar(); }

int main()
{
	char *a = caller();
	char *b = bar();
	delete[] a;
	std::printf("%d\n", b != nullptr);
	return 0;
}
