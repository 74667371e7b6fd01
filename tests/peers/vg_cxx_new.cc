// vg_cxx_new.cc - peer: valgrind memcheck's new_nothrow, cxx17_aligned_new,
// sized_delete and mismatches tests: every operator new and delete form,
// arrays of objects with destructors (a cookie), a failed nothrow new, and
// a leaked object owning another.
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

struct Owner {
	char *buf;
	Owner() : buf(new char[64]) {}
	~Owner() { delete[] buf; }
};

struct alignas(128) Wide {
	char b[200];
};

int main()
{
	int *one = new int(1);
	Owner *owners = new Owner[3];
	Wide *wide = new Wide;
	Wide *wides = new Wide[2];
	void *raw = ::operator new(100, std::align_val_t(256));
	char *nt = new (std::nothrow) char[77];
	char *fail = new (std::nothrow) char[(size_t)1 << 62];
	std::vector<std::string> v;
	for (int i = 0; i < 20; i++)
		v.push_back(std::string(30 + i, 'x'));
	delete one;
	delete[] owners;
	delete wide;
	delete[] wides;
	::operator delete(raw, std::align_val_t(256));
	::operator delete[](nt, 77);
	Owner *leaked = new Owner;		// 8 + 64 bytes leaked
	std::printf("%d %zu %d\n", fail == nullptr, v.size(), leaked != nullptr);
	return 0;
}
