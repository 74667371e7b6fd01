// ht_async.cc - peer: heaptrack's tests/manual/threaded.cpp: std::async tasks
// allocate blocks that other tasks free (20 rounds of 4 pairs).  Each pair
// is waited for before the next starts: how many thread stacks glibc can
// reuse (and so how many it allocates) then does not depend on timing.
#include <cstdio>
#include <future>
#include <vector>

static const int PER_TASK = 200;

static int **alloc_block()
{
	int **block = new int *[PER_TASK];
	for (int i = 0; i < PER_TASK; ++i)
		block[i] = new int(i);
	return block;
}

static void dealloc_block(std::future<int **> &&f)
{
	int **block = f.get();
	for (int i = 0; i < PER_TASK; ++i)
		delete block[i];
	delete[] block;
}

int main()
{
	std::vector<int> sizes;
	for (int round = 0; round < 20; ++round)
		for (int k = 0; k < 4; ++k) {
			auto made = std::async(std::launch::async, alloc_block);
			made.wait();
			std::async(std::launch::async, dealloc_block, std::move(made)).get();
			sizes.push_back(round);
		}
	std::printf("rounds done\n");
	return 0;
}
