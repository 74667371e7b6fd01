// vg_cxx_exceptions.cc - peer: valgrind's C++ exception tests: each throw
// allocates the exception object (__cxa_allocate_exception: malloc) and its
// message; they are freed when the catch ends.  One exception is leaked.
#include <cstdio>
#include <stdexcept>
#include <string>

static int depth_throw(int n)
{
	if (n == 0)
		throw std::runtime_error(std::string(40, 'e'));
	return depth_throw(n - 1) + 1;
}

int main()
{
	int caught = 0;
	for (int i = 0; i < 50; i++) {
		try {
			depth_throw(i % 10);
		} catch (const std::exception &e) {
			caught += e.what()[0] == 'e';
		}
	}
	std::exception_ptr kept;
	try {
		throw std::logic_error("kept for later");
	} catch (...) {
		kept = std::current_exception();
	}
	new std::exception_ptr(kept);	// leaked: keeps the exception alive
	std::printf("%d\n", caught);
	return 0;
}
