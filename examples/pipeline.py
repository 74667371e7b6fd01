"""examples/pipeline.py - a small data-cleaning step, profiled by
`./build.sh demo` (examples/demo.sh): parses log lines, keeps a cache that
is never emptied, and aggregates per path.  parse_lines is decorated the
way kernprof and memory_profiler want it: under `memline run`, `profile` is
a builtin; without a profiler the fallback below leaves it undecorated."""
import json
import re

try:
    profile
except NameError:
    def profile(func):
        return func

LINE = re.compile(r'^(\S+) "(GET|POST) (\S+)" (\d{3}) (\d+)$')
_seen = {}


def make_lines(n):
    paths = ["/", "/index.html", "/api/items", "/api/users"]
    return ['10.0.%d.%d "GET %s" %d %d' % (i % 256, i % 7, paths[i % 4], 200 if i % 9 else 404, i * 13 % 5000)
            for i in range(n)]


@profile
def parse_lines(lines):
    rows = []
    for line in lines:
        m = LINE.match(line)
        if m:
            rows.append({"ip": m.group(1), "path": m.group(3),
                         "status": int(m.group(4)), "bytes": int(m.group(5))})
            _seen[m.group(1)] = line          # a cache nobody empties
    return rows


def summarize(rows):
    per_path = {}
    for r in rows:
        per_path.setdefault(r["path"], []).append(r["bytes"])
    return {p: sum(v) / len(v) for p, v in per_path.items()}


def main():
    lines = make_lines(50000)
    rows = parse_lines(lines)
    text = json.dumps(rows)
    back = json.loads(text)
    print(len(back), summarize(back))


main()
