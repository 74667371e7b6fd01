// ht_aggregation.cc - peer: heaptrack's tests/manual/test_aggregation.cpp:
// the same functions allocate from several call paths, all leaked.
#include <cstdio>

static void foo() { new char[1]; }
static void bar() { foo(); new char[2]; }
static void asdf() { bar(); new char[3]; }
static void foobar() { asdf(); new char[5]; }

int main()
{
	asdf();
	new char[4];
	foobar();
	std::printf("aggregated\n");
	return 0;
}
