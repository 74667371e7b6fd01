"""bench/python/json_work.py - allocation-heavy pure Python: build a list of
dicts, json.dumps it, json.loads it back, N times (argv[1], default 3)."""
import json
import sys


def build(n):
    return [{"id": i, "name": "item%d" % i, "tags": ["a", "b", str(i)], "score": i * 0.5,
             "nested": {"x": i, "y": [i, i + 1]}} for i in range(n)]


def main(rounds):
    for _ in range(rounds):
        data = build(40000)
        text = json.dumps(data)
        back = json.loads(text)
        assert len(back) == len(data)


main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
