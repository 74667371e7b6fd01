// bh_unwind.cc - peer: bytehound's longjmp.c and throw.cpp: allocations made
// before a longjmp and a C++ throw unwind through the frames that made them.
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

static std::jmp_buf env;

__attribute__((noinline)) static void leak_and_jump()
{
	std::malloc(123456);
	std::longjmp(env, 1);
}

__attribute__((noinline)) static void leak_and_throw()
{
	std::malloc(123457);
	throw std::runtime_error("dummy");
}

int main()
{
	if (setjmp(env) == 0)
		leak_and_jump();
	try {
		leak_and_throw();
	} catch (const std::exception &e) {
		std::malloc(123458);
		std::printf("caught %s\n", e.what());
	}
	return 0;
}
