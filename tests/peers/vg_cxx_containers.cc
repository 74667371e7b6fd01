// vg_cxx_containers.cc - peer: valgrind's and heaptrack's C++ tests: the
// standard containers grow, rehash and shrink; one map is leaked.
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

int main()
{
	std::vector<int> v;
	for (int i = 0; i < 10000; i++)
		v.push_back(i);
	v.shrink_to_fit();
	std::unordered_map<int, std::string> u;
	for (int i = 0; i < 2000; i++)
		u[i] = std::string(20 + i % 30, 'u');
	u.clear();
	auto *m = new std::map<std::string, int>;
	for (int i = 0; i < 100; i++)
		(*m)[std::to_string(i * 7919)] = i;
	std::printf("%zu %zu %zu\n", v.size(), u.size(), m->size());
	return 0;
}
