// bh_alloc_in_tls.cc - peer: bytehound's alloc-in-tls.cpp: a thread_local
// object whose constructor allocates and whose destructor frees and
// allocates again, in the main thread and in a second thread.
#include <cstdio>
#include <cstdlib>
#include <pthread.h>

struct Dummy {
	void *pointer;
	Dummy() : pointer(std::malloc(123)) {}
	~Dummy()
	{
		std::free(pointer);
		std::free(std::malloc(333));
	}
};

thread_local Dummy dummy;

static void *thread_main(void *)
{
	std::printf("%d\n", dummy.pointer != nullptr);
	return nullptr;
}

int main()
{
	std::printf("%d\n", dummy.pointer != nullptr);
	pthread_t thread;
	pthread_create(&thread, nullptr, thread_main, nullptr);
	pthread_join(thread, nullptr);
	return 0;
}
