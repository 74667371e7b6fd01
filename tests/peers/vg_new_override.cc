// vg_new_override.cc - peer: valgrind memcheck's new_override test: the
// program defines the global operator new and delete itself (on malloc).
// memline records the mallocs and charges them to the line that called new.
#include <cstdio>
#include <cstdlib>
#include <new>

void *operator new(std::size_t n)
{
	void *p = std::malloc(n ? n : 1);
	if (!p)
		throw std::bad_alloc();
	return p;
}

void operator delete(void *p) noexcept
{
	std::free(p);
}

void operator delete(void *p, std::size_t) noexcept
{
	std::free(p);
}

struct Item {
	int v[10];
};

int main()
{
	Item *a = new Item;
	Item *b = new Item;
	delete a;
	std::printf("%d\n", b->v[0] * 0);
	return 0;
}
