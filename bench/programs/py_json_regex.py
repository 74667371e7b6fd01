"""bench/programs/py_json_regex.py - the Python workload of bench/real.py:
builds a list of records, round-trips it through json, and scans generated
log lines with a few regular expressions, the way a data-cleaning script
would.  Deterministic (seeded); prints one summary line."""
import json
import random
import re
import sys

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3

LINE_RE = re.compile(r'^(\S+) - - \[([^\]]+)\] "(GET|POST) (\S+) HTTP/1\.[01]" (\d{3}) (\d+)$')
WORD_RE = re.compile(r"[a-z]{3,}")


def make_records(rng, n):
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa"]
    return [{"id": i,
             "name": " ".join(rng.choice(words) for _ in range(3)),
             "score": rng.random() * 100,
             "tags": [rng.choice(words) for _ in range(rng.randint(1, 5))],
             "nested": {"x": rng.randint(0, 1000), "y": [rng.random() for _ in range(3)]}}
            for i in range(n)]


def make_logs(rng, n):
    paths = ["/", "/index.html", "/api/v1/items", "/api/v1/users", "/static/app.js"]
    return [f'10.0.{rng.randint(0, 255)}.{rng.randint(0, 255)} - - [26/Nov/2026:12:00:{i % 60:02d} +0000] '
            f'"{rng.choice(("GET", "POST"))} {rng.choice(paths)}?q={rng.randint(0, 99999)} HTTP/1.1" '
            f'{rng.choice((200, 200, 200, 404, 500))} {rng.randint(0, 50000)}'
            for i in range(n)]


def main():
    rng = random.Random(12345)
    total = 0
    for _ in range(ROUNDS):
        records = make_records(rng, 20000)
        text = json.dumps(records)
        back = json.loads(text)
        total += sum(r["nested"]["x"] for r in back)
        counts = {}
        for r in back:
            for w in WORD_RE.findall(r["name"]):
                counts[w] = counts.get(w, 0) + 1
        status = {}
        for line in make_logs(rng, 30000):
            m = LINE_RE.match(line)
            if m:
                status[m.group(5)] = status.get(m.group(5), 0) + 1
        total += len(counts) + sum(status.values())
    print(f"total={total}")


main()
