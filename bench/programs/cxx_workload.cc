// bench/programs/cxx_workload.cc - the C++ translation unit that gcc's
// cc1plus compiles in bench/real.py: an ordinary piece of modern C++ (a small
// JSON value type with a parser and printer, a log summariser,
// containers and algorithms of the standard library).  It is compiled, not
// run: what is measured is the compiler's allocation behaviour on real
// template-heavy code.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace mini {

struct Value;
using Array = std::vector<Value>;
using Object = std::map<std::string, Value, std::less<>>;

struct Value {
	std::variant<std::nullptr_t, bool, double, std::string, Array, Object> v;

	Value() : v(nullptr) {}
	Value(std::nullptr_t) : v(nullptr) {}
	Value(bool b) : v(b) {}
	Value(double d) : v(d) {}
	Value(int i) : v(static_cast<double>(i)) {}
	Value(std::string s) : v(std::move(s)) {}
	Value(const char *s) : v(std::string(s)) {}
	Value(Array a) : v(std::move(a)) {}
	Value(Object o) : v(std::move(o)) {}

	bool is_null() const { return std::holds_alternative<std::nullptr_t>(v); }
	const Object *object() const { return std::get_if<Object>(&v); }
	const Array *array() const { return std::get_if<Array>(&v); }
	const std::string *string() const { return std::get_if<std::string>(&v); }
	std::optional<double> number() const
	{
		if (auto d = std::get_if<double>(&v))
			return *d;
		return std::nullopt;
	}
	const Value &operator[](std::string_view key) const
	{
		static const Value null;
		if (auto o = object()) {
			auto it = o->find(key);
			if (it != o->end())
				return it->second;
		}
		return null;
	}
};

class ParseError : public std::runtime_error {
public:
	ParseError(const std::string &what, size_t at)
		: std::runtime_error(what + " at offset " + std::to_string(at)), offset(at) {}
	size_t offset;
};

class Parser {
public:
	explicit Parser(std::string_view text) : s(text) {}

	Value parse()
	{
		Value v = value();
		skip();
		if (i != s.size())
			throw ParseError("trailing characters", i);
		return v;
	}

private:
	std::string_view s;
	size_t i = 0;

	void skip()
	{
		while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
			i++;
	}
	char peek()
	{
		skip();
		if (i >= s.size())
			throw ParseError("unexpected end", i);
		return s[i];
	}
	void expect(char c)
	{
		if (peek() != c)
			throw ParseError(std::string("expected '") + c + "'", i);
		i++;
	}
	Value value()
	{
		switch (peek()) {
		case '{': return object();
		case '[': return array();
		case '"': return Value(string());
		case 't': literal("true"); return Value(true);
		case 'f': literal("false"); return Value(false);
		case 'n': literal("null"); return Value(nullptr);
		default: return number();
		}
	}
	void literal(std::string_view word)
	{
		if (s.substr(i, word.size()) != word)
			throw ParseError("bad literal", i);
		i += word.size();
	}
	Value number()
	{
		size_t start = i;
		while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) ||
					s[i] == '-' || s[i] == '+' || s[i] == '.' || s[i] == 'e' || s[i] == 'E'))
			i++;
		if (start == i)
			throw ParseError("bad number", i);
		return Value(std::stod(std::string(s.substr(start, i - start))));
	}
	std::string string()
	{
		expect('"');
		std::string out;
		while (i < s.size() && s[i] != '"') {
			char c = s[i++];
			if (c == '\\' && i < s.size()) {
				char e = s[i++];
				switch (e) {
				case 'n': out += '\n'; break;
				case 't': out += '\t'; break;
				case 'u': out += '?'; i += 4; break;
				default: out += e;
				}
			} else {
				out += c;
			}
		}
		expect('"');
		return out;
	}
	Value array()
	{
		expect('[');
		Array a;
		if (peek() == ']') {
			i++;
			return a;
		}
		for (;;) {
			a.push_back(value());
			if (peek() == ',') {
				i++;
				continue;
			}
			expect(']');
			return a;
		}
	}
	Value object()
	{
		expect('{');
		Object o;
		if (peek() == '}') {
			i++;
			return o;
		}
		for (;;) {
			std::string key = string();
			expect(':');
			o.emplace(std::move(key), value());
			if (peek() == ',') {
				i++;
				continue;
			}
			expect('}');
			return o;
		}
	}
};

void print(std::ostream &os, const Value &v, int indent = 0)
{
	std::visit([&](const auto &x) {
		using T = std::decay_t<decltype(x)>;
		if constexpr (std::is_same_v<T, std::nullptr_t>) {
			os << "null";
		} else if constexpr (std::is_same_v<T, bool>) {
			os << (x ? "true" : "false");
		} else if constexpr (std::is_same_v<T, double>) {
			os << std::setprecision(17) << x;
		} else if constexpr (std::is_same_v<T, std::string>) {
			os << std::quoted(x);
		} else if constexpr (std::is_same_v<T, Array>) {
			os << '[';
			for (size_t k = 0; k < x.size(); k++) {
				if (k)
					os << ", ";
				print(os, x[k], indent + 2);
			}
			os << ']';
		} else {
			os << "{\n";
			size_t k = 0;
			for (const auto &[key, val] : x) {
				os << std::string(indent + 2, ' ') << std::quoted(key) << ": ";
				print(os, val, indent + 2);
				os << (++k < x.size() ? ",\n" : "\n");
			}
			os << std::string(indent, ' ') << '}';
		}
	}, v.v);
}

} // namespace mini

namespace logs {

struct Entry {
	std::string host, method, path;
	int status = 0;
	uint64_t bytes = 0;
	double seconds = 0;
};

// Splits a common-log-format line with a trailing duration:
// HOST - - [DATE] "METHOD PATH HTTP/x" STATUS BYTES SECONDS
std::optional<Entry> parse_line(const std::string &line)
{
	std::istringstream in(line);
	std::string ident, user, date, request, proto, status, bytes, seconds;
	Entry e;
	if (!(in >> e.host >> ident >> user))
		return std::nullopt;
	if (!std::getline(in, date, ']') || !std::getline(in >> std::ws, request, '"') ||
	    !std::getline(in, request, '"'))
		return std::nullopt;
	std::istringstream req(request);
	if (!(req >> e.method >> e.path >> proto) || proto.rfind("HTTP/", 0) != 0)
		return std::nullopt;
	static const std::set<std::string> methods = { "GET", "POST", "PUT", "DELETE", "HEAD" };
	if (!methods.count(e.method) || !(in >> status >> bytes >> seconds) || status.size() != 3 ||
	    !std::all_of(status.begin(), status.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
		return std::nullopt;
	e.status = std::stoi(status);
	e.bytes = bytes == "-" ? 0 : std::stoull(bytes);
	e.seconds = std::stod(seconds);
	return e;
}

template <typename Key, typename Fn>
std::vector<std::pair<Key, uint64_t>> top(const std::vector<Entry> &entries, Fn key_of, size_t n)
{
	std::unordered_map<Key, uint64_t> counts;
	for (const auto &e : entries)
		counts[key_of(e)]++;
	std::vector<std::pair<Key, uint64_t>> out(counts.begin(), counts.end());
	std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) {
		return a.second != b.second ? a.second > b.second : a.first < b.first;
	});
	if (out.size() > n)
		out.resize(n);
	return out;
}

struct Summary {
	uint64_t requests = 0, bytes = 0, errors = 0;
	double p50 = 0, p99 = 0;
	std::map<int, uint64_t> by_status;
	std::set<std::string> hosts;
};

Summary summarise(const std::vector<Entry> &entries)
{
	Summary s;
	std::vector<double> times;
	times.reserve(entries.size());
	for (const auto &e : entries) {
		s.requests++;
		s.bytes += e.bytes;
		s.errors += e.status >= 500;
		s.by_status[e.status]++;
		s.hosts.insert(e.host);
		times.push_back(e.seconds);
	}
	if (!times.empty()) {
		std::sort(times.begin(), times.end());
		s.p50 = times[times.size() / 2];
		s.p99 = times[std::min(times.size() - 1, times.size() * 99 / 100)];
	}
	return s;
}

mini::Value to_json(const Summary &s)
{
	mini::Object o;
	o["requests"] = mini::Value(static_cast<double>(s.requests));
	o["bytes"] = mini::Value(static_cast<double>(s.bytes));
	o["errors"] = mini::Value(static_cast<double>(s.errors));
	o["p50"] = mini::Value(s.p50);
	o["p99"] = mini::Value(s.p99);
	mini::Object st;
	for (const auto &[code, n] : s.by_status)
		st[std::to_string(code)] = mini::Value(static_cast<double>(n));
	o["by_status"] = mini::Value(std::move(st));
	mini::Array hosts;
	for (const auto &h : s.hosts)
		hosts.emplace_back(h);
	o["hosts"] = mini::Value(std::move(hosts));
	return mini::Value(std::move(o));
}

} // namespace logs

int main(int argc, char **argv)
{
	std::vector<logs::Entry> entries;
	std::string line;
	size_t bad = 0;
	while (std::getline(std::cin, line)) {
		if (auto e = logs::parse_line(line))
			entries.push_back(std::move(*e));
		else
			bad++;
	}
	auto summary = logs::summarise(entries);
	auto json = logs::to_json(summary);
	mini::print(std::cout, json);
	std::cout << "\n";
	for (const auto &[path, n] : logs::top<std::string>(entries, [](const logs::Entry &e) { return e.path; }, 10))
		std::cout << std::setw(8) << n << "  " << path << "\n";
	for (const auto &[host, n] : logs::top<std::string>(entries, [](const logs::Entry &e) { return e.host; }, 5))
		std::cout << std::setw(8) << n << "  " << host << "\n";
	if (argc > 1) {
		mini::Parser p(argv[1]);
		try {
			mini::print(std::cout, p.parse());
		} catch (const mini::ParseError &err) {
			std::cerr << err.what() << " (" << err.offset << ")\n";
			return 1;
		}
	}
	std::cerr << bad << " lines skipped\n";
	return 0;
}
