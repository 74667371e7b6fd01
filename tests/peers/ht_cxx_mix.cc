// ht_cxx_mix.cc - peer: heaptrack's tests/manual/test.cpp: a static object
// that allocates before main, new/delete through a call chain, and every C
// allocation function once, printing nothing that depends on addresses.
#include <cstdio>
#include <cstdlib>
#include <malloc.h>

struct Foo {
	int *i;
	Foo() : i(new int) {}
	~Foo() { delete i; }
};

static Foo foo_static;	// allocates before main, frees after it

static int *asdf() { return new int; }
static int *bar() { return asdf(); }
static int *laaa() { return bar(); }

int main()
{
	Foo *f = new Foo;
	delete f;
	char *c = new char[1000];
	delete[] c;
	void *buf = std::malloc(100);
	buf = std::realloc(buf, 200);
	std::free(buf);
	buf = std::calloc(5, 5);
	std::free(buf);
	buf = aligned_alloc(16, 160);
	std::free(buf);
	buf = valloc(32);
	std::free(buf);
	if (posix_memalign(&buf, 16, 64) == 0)
		std::free(buf);
	int *leaks[3] = { asdf(), bar(), laaa() };
	std::printf("%d\n", leaks[0] != leaks[1]);
	return 0;
}
