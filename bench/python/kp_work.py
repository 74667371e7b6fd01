"""bench/python/kp_work.py - @profile's cost: one decorated hot function (three
line events per iteration and no allocation on any version, so that
memline's allocation recording stays out of the figure), the same work
undecorated (before and after the decorated ones ran), and a decorated
function whose loop calls an undecorated Python function.  Prints each
part's least thread CPU time over several calls (the program's own clock;
the least is the call least disturbed by a loaded machine) as JSON.

    kp_work.py ITEMS"""
import builtins
import json
import sys
import time

profile = builtins.__dict__.get("profile") or (lambda f: f)


@profile
def hot(data):
	y = 0
	for x in data:
		y = x
		z = y
	return z


def cold(data):
	y = 0
	for x in data:
		y = x
		z = y
	return z


def leaf(x):
	return x


@profile
def caller(data):
	s = 0
	for x in data:
		s = leaf(x)
	return s


def timed(fn, data, times=1):
	"""The least thread CPU time of `times` calls: the call least disturbed
	by other work on a loaded machine."""
	best = None
	for _ in range(times):
		t0 = time.thread_time_ns()
		fn(data)
		t = time.thread_time_ns() - t0
		best = t if best is None or t < best else best
	return best


if __name__ == "__main__":
	n = int(sys.argv[1])
	data = [i & 7 for i in range(n)]
	hot(data[:10])		# warm up: decorated, registered, traced once
	caller(data[:10])
	out = {"items": n}
	out["cold_ns"] = timed(cold, data, 15)	# undecorated: the least of 15
	out["hot_ns"] = timed(hot, data, 3)
	out["caller_ns"] = timed(caller, data, 3)
	out["cold_after_ns"] = timed(cold, data, 15)
	print(json.dumps(out))
