"""tests/e2e/test_pictures.py - end-to-end tests of the pictures and
interchange views (timeline, flame, folded, trace, pprof, html, --base
diffs), each read back by its consumer where one is installed: `go tool
pprof` (golang-go), headless Chromium (chromium), speedscope's importer
(npm), a JSON parser for traces.  Screenshots of the HTML report go to
BUILD/pictures/ for a person to look at."""

import base64
import gzip
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile

import harness as h
from harness import Fail, Skip, check, eq, test, text
from test_cuda import cuda_env, cuda_fixture

def report_out(files, *args, ok=(0,)):
	"""Runs `memline report FILES ARGS` and returns the process."""
	if isinstance(files, str):
		files = [files]
	p = h.run([h.rcli(), "report"] + list(files) + list(args), timeout=120)
	check(p.returncode in ok, "report %s: exit %d: %s"
	      % (" ".join(args), p.returncode, text(p.stderr).strip()[-400:]))
	return p


_runs = {}


def grow(n):
	"""The profile of `grow N` (made once per N)."""
	if n not in _runs:
		_runs[n] = h.Run("grow", args=[str(n)]).file("grow")
	return _runs[n]


def regions_profile():
	if "regions" not in _runs:
		_runs["regions"] = h.Run("lp_regions").file("lp_regions")
	return _runs["regions"]


def heap_totals(prof):
	"""(alloc_bytes, allocs, peak_bytes, leaked_bytes, leaked_blocks) of the heap."""
	s = h.report(prof, "leaks")["leaks"]["summary"]
	peak = h.report(prof, "peak")["peak"]["peak_bytes"]
	return s["alloc_bytes"], s["allocs"], peak, s["in_use_bytes"], s["in_use_blocks"]


def tool(name):
	path = shutil.which(name)
	if not path:
		raise Skip("%s is not installed (build.sh check installs it)" % name)
	return path


# ------------------------------------------------------------ terminal

@test
def report_timeline_text_and_json():
	prof = regions_profile()
	peak = h.report(prof, "peak")["peak"]["peak_bytes"]
	doc = h.report(prof, "timeline")["timeline"]
	heap = [k for k in doc["kinds"] if k["kind"] == "heap"]
	eq(len(heap), 1, "a heap series")
	eq(heap[0]["peak_bytes"], peak, "timeline peak = peak view's")
	eq(max(b for _, b in heap[0]["points"]), peak, "highest point = the peak")
	times = [t for t, _ in heap[0]["points"]]
	eq(times, sorted(times), "points in time order")
	spans = doc["spans"]
	count = {}
	for s in spans:
		count[s["path"]] = count.get(s["path"], 0) + 1
		check(s["end_ns"] >= s["start_ns"] and s["end_ns"] <= doc["duration_ns"], "span inside the run: %r" % s)
	eq(count, {"outer": 3, "outer/inner": 6, "tail": 1, "grow": 1}, "spans per region")
	inner = [s for s in spans if s["path"] == "outer/inner"]
	check(all(s["end_ns"] - s["start_ns"] >= 20000000 for s in inner), "inner spans last >= 20 ms (usleep)")
	outer = sorted((s["start_ns"], s["end_ns"]) for s in spans if s["path"] == "outer")
	for s in inner:
		check(any(a <= s["start_ns"] and s["end_ns"] <= b for a, b in outer), "inner inside an outer span")
	out = text(report_out(prof, "timeline").stdout)
	lines = out.splitlines()
	check(lines[0].startswith("heap: peak "), "first line: %r" % lines[0])
	check(any("\u25b2 peak" in l or "peak" in l and "\u25b2" in l for l in lines), "a peak marker")
	rows = {m.group(1).strip(): int(m.group(2)) for m in
		(re.match(r"^\s*(\S+)\s+\u2502.*\u2502 (\d+)$", l) for l in lines) if m}
	eq(rows, {"outer": 3, "inner": 6, "tail": 1, "grow": 1}, "region rows and counts")


@test
def report_flame_text():
	prof = grow(3)
	out = text(report_out(prof, "flame").stdout)
	L = h.line_of("grow", "grow")
	alloc = heap_totals(prof)[0]
	check(out.startswith("heap, bytes allocated: "), "header: %r" % out[:80])
	eq(alloc, 3 * 4096 + 1000 + 64 + 300, "bytes allocated")
	m = re.search(r"^\s*([\d.]+)%\s+12\.00 KiB\s.*main \(grow\.c:" + str(L) + r"\)", out, re.M)
	check(m, "the L:grow line with 12.00 KiB: %s" % out)
	eq(m.group(1), "%.1f" % (100.0 * 12288 / alloc), "its share")
	leaked = text(report_out(prof, "flame", "--value", "leaked").stdout)
	check(re.search(r"100\.0%\s+300 B\s.*main \(grow\.c:" + str(h.line_of("grow", "leak")) + r"\)", leaked),
	      "leaked: the L:leak line: %s" % leaked)
	report_out(prof, "flame", "--value", "time", ok=(1,))  # no samples: one error line


# -------------------------------------------------------------- folded

def parse_folded(data, columns=1):
	"""Folded stacks as flamegraph.pl reads them: the count(s) after the
	last space(s); frames separated by ';'.  Returns {stack: counts}."""
	out = {}
	for line in data.splitlines():
		parts = line.rsplit(" ", columns)
		check(len(parts) == columns + 1 and all(re.match(r"^-?\d+$", c) for c in parts[1:]),
		      "folded line: %r" % line)
		check(parts[0] and ";;" not in parts[0], "stack: %r" % line)
		check(parts[0] not in out, "one line per stack: %r" % parts[0])
		out[parts[0]] = [int(c) for c in parts[1:]]
	return out


@test
def report_folded_totals():
	prof = grow(2)
	alloc, allocs, peak, leaked, leaked_blocks = heap_totals(prof)
	for value, want in (("alloc", alloc), ("allocs", allocs), ("peak", peak), ("leaked", leaked),
			    ("leaked_blocks", leaked_blocks)):
		args = ["folded"] + (["--value", value] if value != "alloc" else [])
		st = parse_folded(text(report_out(prof, *args).stdout))
		eq(sum(c[0] for c in st.values()), want, "folded %s total" % value)
	st = parse_folded(text(report_out(prof, "folded").stdout))
	L = h.line_of("grow", "grow")
	grow_lines = [s for s in st if s.endswith("main (grow.c:%d)" % L)]
	eq([st[s][0] for s in grow_lines], [2 * 4096], "the L:grow stack")
	check(grow_lines[0].split(";")[0].startswith("_start"), "outermost frame first: %r" % grow_lines[0])


def speedscope_page():
	index = os.environ.get("MEMLINE_SPEEDSCOPE") or os.path.join(
		h.OPTS.build, "tools", "speedscope", "package", "dist", "release", "index.html")
	if not os.path.exists(index):
		raise Skip("speedscope is not in %s (./build.sh check fetches it from npm)"
			   % os.path.dirname(index))
	return index


@test
def report_folded_speedscope():
	"""speedscope's own importer reads the folded stacks: its sandwich
	view's totals are memline's bytes."""
	index = speedscope_page()
	prof = grow(2)
	folded = report_out(prof, "folded").stdout
	d = tempfile.mkdtemp(dir=h.OPTS.tmp)
	loader = os.path.join(d, "load.js")
	with open(loader, "w") as f:
		f.write("speedscope.loadFileFromBase64(%s, %s)" % (json.dumps("grow.folded"),
			json.dumps(base64.b64encode(folded).decode())))
	out, _ = browse("file://%s#localProfilePath=%s&view=sandwich" % (index, loader),
			"--virtual-time-budget=5000", "--dump-dom")
	cells = re.sub(r"\s*(<[^>]+>\s*)+", "|", out).split("|")
	totals = {}
	for i in range(len(cells) - 2):
		m1, m2 = re.match(r"^([\d,]+) \(", cells[i]), re.match(r"^([\d,]+) \(", cells[i + 1])
		if m1 and m2:
			totals[cells[i + 2].replace("&lt;", "<")] = (int(m1.group(1).replace(",", "")),
								   int(m2.group(1).replace(",", "")))
	alloc = heap_totals(prof)[0]
	check(any(k.startswith("_start") for k in totals), "speedscope's table: %s" % out[-800:])
	eq([v for k, v in totals.items() if k.startswith("_start")], [(alloc, 0)], "_start's total")
	L = h.line_of("grow", "grow")
	eq(totals.get("main (grow.c:%d)" % L), (8192, 8192), "the L:grow line")
	eq(totals.get("helper (grow.c:%d)" % h.line_of("grow", "helper")), (64, 64), "helper's line")


# --------------------------------------------------------------- trace

@test
def report_trace_parses():
	prof = regions_profile()
	peak = h.report(prof, "peak")["peak"]["peak_bytes"]
	d = tempfile.mkdtemp(dir=h.OPTS.tmp)
	out = os.path.join(d, "trace.json")
	report_out(prof, "trace", "-o", out)
	eq(sorted(os.listdir(d)), ["trace.json"], "only the trace left")
	with open(out) as f:
		doc = json.load(f)
	ev = doc["traceEvents"]
	pid = int(re.search(r"\.(\d+)\.mlp$", prof).group(1))
	for e in ev:
		check(e["ph"] in ("M", "C", "X", "i"), "phase %r" % e)
		check(isinstance(e["pid"], int) and isinstance(e["tid"], int), "ids %r" % e)
		check(e["ph"] == "M" or (isinstance(e["ts"], (int, float)) and e["ts"] >= 0), "ts %r" % e)
	names = [e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"]
	eq(names, ["lp_regions (pid %d)" % pid], "process name")
	eq([(e["tid"], e["args"]["name"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"],
	   [(pid, "main")], "the main thread named")
	heap = [e["args"]["bytes"] for e in ev if e["ph"] == "C" and e["name"] == "heap live bytes"]
	eq(max(heap), peak, "the heap counter's highest value = the peak")
	ts = [e["ts"] for e in ev if e["ph"] == "C" and e["name"] == "heap live bytes"]
	eq(ts, sorted(ts), "counter samples in time order")
	sl = [e for e in ev if e["ph"] == "X"]
	count = {}
	for e in sl:
		count[e["args"]["path"]] = count.get(e["args"]["path"], 0) + 1
		eq((e["pid"], e["tid"], e["cat"]), (pid, pid, "region"), "slice on the main thread")
		check(e["dur"] >= 0, "duration")
	eq(count, {"outer": 3, "outer/inner": 6, "tail": 1, "grow": 1}, "slices")
	check(all(e["dur"] >= 20000 for e in sl if e["name"] == "inner"), "inner slices >= 20 ms")
	peaks = [e for e in ev if e["ph"] == "i" and e["name"] == "peak heap"]
	eq([e["args"]["bytes"] for e in peaks], [peak], "the peak instant")


# --------------------------------------------------------------- pprof

def go_pprof(args, path):
	go = tool("go")
	env = dict(os.environ, HOME=h.OPTS.tmp, PPROF_TMPDIR=h.OPTS.tmp, GOFLAGS="-mod=mod")
	p = subprocess.run([go, "tool", "pprof"] + args + [path], stdout=subprocess.PIPE,
			   stderr=subprocess.PIPE, env=env, timeout=120)
	check(p.returncode == 0, "go tool pprof %s: %s" % (" ".join(args), text(p.stderr)[-400:]))
	return text(p.stdout)


def pprof_total(out):
	m = re.search(r"Total samples = (-?\d+)B", out) or re.search(r"of (-?\d+)B total", out)
	check(m, "no total in: %s" % out[:400])
	return int(m.group(1))


def pprof_flat(out, fn):
	for line in out.splitlines():
		cols = line.split()
		if len(cols) >= 6 and cols[-1] == fn:
			return int(cols[0].rstrip("B"))
	raise Fail("no row for %s in: %s" % (fn, out[:600]))


@test
def report_pprof_go():
	prof = grow(2)
	alloc, allocs, peak, leaked, _ = heap_totals(prof)
	d = tempfile.mkdtemp(dir=h.OPTS.tmp)
	out = os.path.join(d, "grow.pb.gz")
	report_out(prof, "pprof", "-o", out)
	with gzip.open(out) as f:
		check(len(f.read()) > 100, "a gzipped profile")
	top = go_pprof(["-top", "-unit=B", "-sample_index=alloc_space"], out)
	eq(pprof_total(top), alloc, "alloc_space total")
	eq(pprof_flat(top, "helper"), 64, "helper's flat alloc_space")
	eq(pprof_flat(top, "main"), alloc - 64, "main's flat alloc_space")
	eq(pprof_total(go_pprof(["-top", "-unit=B", "-sample_index=inuse_space"], out)), peak, "inuse_space = peak")
	eq(pprof_total(go_pprof(["-top", "-unit=B", "-sample_index=leaked_space"], out)), leaked, "leaked_space")
	raw = go_pprof(["-raw"], out)
	check("alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt]" in raw,
	      "Go's heap sample types, inuse_space the default: %s" % raw[:500])
	L = h.line_of("grow", "grow")
	check(re.search(r"main \S*grow\.c:%d" % L, raw), "locations with file and line")
	lines = go_pprof(["-top", "-lines", "-unit=B", "-sample_index=alloc_space"], out)
	check(re.search(r"^\s*8192B .* main \S*grow\.c:%d$" % L, lines, re.M), "the L:grow line: %s" % lines)


@test
def report_pprof_cuda():
	prof = h.Run(cuda_fixture("drv_local"), env=cuda_env()).file("drv_local")
	ops = h.report(prof, "ops")["ops"]
	cuda_total = ops.get("cuda_self_total_bytes")
	check(cuda_total, "the fixture allocates CUDA memory")
	d = tempfile.mkdtemp(dir=h.OPTS.tmp)
	out = os.path.join(d, "cuda.pb.gz")
	report_out(prof, "pprof", "-o", out)
	raw = go_pprof(["-raw"], out)
	check("cuda_alloc_space/bytes" in raw and "cuda_inuse_space/bytes" in raw, "CUDA sample types")
	eq(pprof_total(go_pprof(["-top", "-unit=B", "-sample_index=cuda_alloc_space"], out)), cuda_total,
	   "cuda_alloc_space total = Self CUDA Mem total")


# ---------------------------------------------------------------- diffs

@test
def report_diff_one_line():
	a, b = grow(1), grow(2)
	L = h.line_of("grow", "grow")
	doc = h.report(b, "ops", "--base", a)
	diff = doc["ops"]
	eq((diff["diff"], doc["base"]), (True, a), "a diff against the base")
	eq((diff["measure"], diff["base_total"], diff["new_total"]), ("alloc_bytes", 5460, 9556), "totals")
	eq([(os.path.basename(r["file"]), r["line"], r["function"], r["base_bytes"], r["new_bytes"],
	     r["delta_bytes"], r["base_count"], r["new_count"]) for r in diff["lines"]],
	   [("grow.c", L, "main", 4096, 8192, 4096, 1, 2)], "exactly the L:grow line changed")
	fns = {r["name"]: r["delta_bytes"] for r in diff["functions"]}
	eq(fns.get("main"), 4096, "main grew")
	eq(set(fns.values()), {4096}, "only main and its callers changed: %r" % fns)
	check("helper" not in fns, "helper unchanged")
	eq(len(diff["stacks"]), 1, "one stack changed")
	eq((diff["stacks"][0]["frames"][0]["line"], diff["stacks"][0]["delta_bytes"]), (L, 4096), "the stack")
	out = text(report_out(b, "ops", "--base", a).stdout)
	check(re.search(r"^\s+\+4\.00 KiB\s+4\.00 KiB\s+8\.00 KiB\s+\+1\s+grow\.c:%d\s+main$" % L, out, re.M),
	      "the text diff names the line: %s" % out)
	same = h.report(b, "peak", "--base", b)["peak"]
	eq((same["lines"], same["functions"], same["stacks"]), ([], [], []), "a profile against itself")
	folded = parse_folded(text(report_out(b, "folded", "--base", a).stdout), columns=2)
	changed = {s: c for s, c in folded.items() if c[0] != c[1]}
	eq(list(changed.values()), [[4096, 8192]], "difffolded: one stack changed")
	check(list(changed)[0].endswith("main (grow.c:%d)" % L), "the L:grow stack")
	flame = text(report_out(b, "flame", "--base", a).stdout)
	check(re.search(r"^\s+\+4\.00 KiB\s.*main \(grow\.c:%d\)" % L, flame, re.M), "flame diff: %s" % flame)


@test
def report_diff_pprof():
	a, b = grow(1), grow(3)
	d = tempfile.mkdtemp(dir=h.OPTS.tmp)
	out = os.path.join(d, "diff.pb.gz")
	report_out(b, "pprof", "--base", a, "-o", out)
	top = go_pprof(["-top", "-lines", "-unit=B", "-sample_index=alloc_space"], out)
	eq(pprof_total(top), 2 * 4096, "the difference's total")
	check(re.search(r"^\s*8192B .* main \S*grow\.c:%d$" % h.line_of("grow", "grow"), top, re.M),
	      "only the L:grow line: %s" % top)


# ----------------------------------------------------------------- html

def chromium():
	for name in ("chromium", "chromium-browser", "google-chrome"):
		if shutil.which(name):
			return shutil.which(name)
	raise Skip("chromium is not installed (build.sh check installs it)")


def browse(page, *args, size="1400,900"):
	"""Runs headless Chromium on page with args; returns (stdout, console).
	Chromium itself killed by a signal (a SIGSEGV of its own, seen once in
	the suite on a loaded machine) is tried again, twice at most: the page
	is static, so that says nothing of it."""
	for attempt in range(3):
		prof = tempfile.mkdtemp(dir=h.OPTS.tmp)
		cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		       "--no-first-run", "--disable-background-networking",
		       "--disable-component-update", "--disable-sync", "--user-data-dir=" + prof,
		       "--enable-logging=stderr", "--v=0", "--hide-scrollbars",
		       "--window-size=" + size] + list(args) + [page]
		p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
		shutil.rmtree(prof, ignore_errors=True)
		if p.returncode >= 0:
			break
	err = text(p.stderr)
	console = [l for l in err.splitlines() if "CONSOLE" in l or "Uncaught" in l]
	check(p.returncode == 0, "chromium exit %d: %s" % (p.returncode, err[-500:]))
	return text(p.stdout), console


def dom(page):
	out, console = browse(page, "--dump-dom")
	eq(console, [], "console messages")
	check('data-ready="1"' in out, "the report says it is ready")
	check("data-error=" not in out, "no script error: %s" % re.findall(r'data-error="[^"]*"', out))
	return out


def html_report(profs, name, *extra):
	d = os.path.join(h.OPTS.build, "pictures")
	os.makedirs(d, exist_ok=True)
	out = os.path.join(d, name)
	report_out(profs, "html", "-o", out, *extra)
	with open(out) as f:
		page = f.read()
	check(not re.search(r"(src|href)=\"(https?:)?//", page), "nothing fetched from the network")
	return out, page


def attrs(page, tag_re):
	return [dict(re.findall(r'([\w-]+)="([^"]*)"', m)) for m in re.findall(tag_re, page)]


def page_data(path):
	with open(path) as f:
		page = f.read()
	m = re.search(r'<script type="application/json" id="memline-data">(.*?)</script>', page, re.S)
	return json.loads(m.group(1))


def check_flame_data(path, width):
	"""Every node's total is its self plus its children's, for every value
	(merged "[smaller calls]" nodes included), and the page draws every
	node at least 0.35 px wide: the count it reports."""
	f = page_data(path)["profiles"][0]["flame"]
	n = len(f["parent"])
	for vi, (tot, slf) in enumerate(zip(f["total"], f["self"])):
		kids = [0] * n
		for i in range(1, n):
			kids[f["parent"][i]] += tot[i]
		bad = [i for i in range(n) if tot[i] != slf[i] + kids[i]]
		eq(bad, [], "nodes whose total is not self + children (value %d)" % vi)
	pruned = [f["total"][0][i] for i in range(n) if f["merged"][i]]
	eq(sum(pruned), f["pruned"][0], "merged nodes hold the pruned total")
	tot = f["total"][0]
	visible = sum(1 for i in range(n) if tot[0] and abs(tot[i]) / abs(tot[0]) * width >= 0.35)
	page = dom("file://%s#flame" % path)
	info = attrs(page, r'<div ([^>]*id="fl-info"[^>]*)>')[0]
	check(abs(int(info["data-frames"]) - visible) <= 2, "frames drawn: %s, want about %d"
	      % (info["data-frames"], visible))


@test
def report_html_pruned():
	"""A big cut: most call sites merge into "[N smaller calls]" frames."""
	prof = h.Run(os.path.join(h.OPTS.build, "examples", "leaky")).file("leaky")
	out, _ = html_report(prof, "pruned.html", "--node-fraction", "0.01")
	f = page_data(out)["profiles"][0]["flame"]
	check(any(f["merged"]) and f["pruned_nodes"] > 0, "merged nodes")
	check_flame_data(out, 1400 - 2 * 18 - 2)


@test
def report_html_numbers():
	prof = grow(2)
	alloc, allocs, peak, leaked, _ = heap_totals(prof)
	out, _ = html_report(prof, "grow.html")
	page = dom("file://" + out + "#overview")
	cells = {f: int(v) for f, v in re.findall(r'<td class="num" data-field="(\w+)" data-v="(\d+)"', page)}
	eq((cells["peak_bytes"], cells["alloc_bytes"], cells["leaked_bytes"]), (peak, alloc, leaked),
	   "the overview's heap totals = the JSON views'")
	check("<svg" in page and 'class="peak"' in page, "a timeline with its peak marked")
	page = dom("file://" + out + "#flame")
	info = attrs(page, r'<div ([^>]*id="fl-info"[^>]*)>')[0]
	eq(int(info["data-total"]), alloc, "the flame graph's total")
	check_flame_data(out, 1400 - 2 * 18 - 2)
	page = dom("file://" + out + "#ops")
	rows = re.findall(r'<tr data-name="([^"]*)" data-file="[^"]*">(.*?)</tr>', page)
	got = {name: [int(v) for v in re.findall(r'data-v="(-?\d+)"', cells)] for name, cells in rows}
	for f in h.report(prof, "ops")["ops"]["functions"]:
		row = got.get(f["label"])
		check(row is not None, "ops row %s in the page" % f["label"])
		eq((row[0], row[1], row[2], row[4], row[6]),
		   (f["self"]["alloc_bytes"], f["total"]["alloc_bytes"], f["self"]["allocs"],
		    f["total"]["peak_bytes"], f["total"]["leaked_bytes"]), "ops row %s" % f["label"])
	page = dom("file://" + out + "#source")
	L = h.line_of("grow", "grow")
	m = re.search(r'<tr id="L%d" data-line="%d">(.*?)</tr>' % (L, L), page)
	check(m, "the source view has line %d" % L)
	eq([int(v) for v in re.findall(r'data-v="(-?\d+)"', m.group(1))][:2], [8192, 8192],
	   "L:grow's self and total bytes")


@test
def report_html_screenshots():
	"""Screenshots for a person to look at: BUILD/pictures/*.png."""
	prof = regions_profile()
	out, page = html_report([prof], "regions.html")
	check('"spans":[["outer' in page, "spans in the data")
	shots = os.path.join(h.OPTS.build, "pictures")
	example = h.Run(os.path.join(h.OPTS.build, "examples", "leaky"), opts=["--lines", "--rate", "4999"],
			args=[]).file("leaky")
	ex, _ = html_report([example], "example.html")
	for page_path, tab, png in ((out, "overview", "timeline.png"), (ex, "flame", "flame.png"),
				    (ex, "overview", "example-timeline.png"), (ex, "ops", "functions.png"),
				    (ex, "source", "source.png")):
		target = os.path.join(shots, png)
		if os.path.exists(target):
			os.unlink(target)
		browse("file://%s#%s" % (page_path, tab), "--screenshot=" + target)
		check(os.path.getsize(target) > 10000, "screenshot %s" % png)
	dom("file://" + ex + "#flame")


@test
def report_html_diff_and_processes():
	a, b = grow(1), grow(2)
	out, page = html_report(b, "grow-diff.html", "--base", a)
	p = dom("file://" + out + "#flame")
	eq(int(attrs(p, r'<div ([^>]*id="fl-info"[^>]*)>')[0]["data-total"]), 4096, "the diff's total")
	both, page = html_report([a, b], "two.html")
	eq(len(json.loads(re.search(r'<script type="application/json" id="memline-data">(.*?)</script>',
				    page, re.S).group(1))["profiles"]), 2, "two processes in one page")
	dom("file://" + both + "#overview")


@test
def report_pictures_of_nothing():
	"""A run that allocates nothing: every view still works."""
	prof = h.Run("/bin/true").file("true")
	eq(heap_totals(prof)[0], 0, "nothing allocated")
	check("(nothing: the profile has no bytes allocated)" in text(report_out(prof, "flame").stdout), "flame")
	eq(text(report_out(prof, "folded").stdout), "", "folded: no stacks")
	d = tempfile.mkdtemp(dir=h.OPTS.tmp)
	report_out(prof, "trace", "-o", os.path.join(d, "t.json"))
	with open(os.path.join(d, "t.json")) as f:
		eq([e["ph"] for e in json.load(f)["traceEvents"]], ["M"], "trace: the process only")
	report_out(prof, "pprof", "-o", os.path.join(d, "t.pb.gz"))
	if shutil.which("go"):
		top = go_pprof(["-top", "-sample_index=alloc_space"], os.path.join(d, "t.pb.gz"))
		check("Total samples = 0 " in top, "pprof reads an empty profile: %s" % top[:300])
	out, _ = html_report(prof, "nothing.html")
	dom("file://" + out + "#flame")


@test
def report_bad_picture_usage():
	prof = grow(1)
	for args in (["html", "--json"], ["folded", "--json"], ["timeline", "-o", "x"],
		     ["flame", "--value", "bogus"], ["lines", "--function", "main", "--base", prof],
		     ["flame", "--node-fraction", "2"]):
		eq(report_out(prof, *args, ok=(2,)).returncode, 2, "exit status of %s" % " ".join(args))
	d = tempfile.mkdtemp(dir=h.OPTS.tmp)
	p = report_out(prof, "html", "-o", os.path.join(d, "no", "such", "r.html"), ok=(1,))
	h.one_line_error(p, "html to a missing directory", "cannot write")
	eq(os.listdir(d), [], "nothing left behind")
	p = report_out(prof, "pprof", "--base", os.path.join(d, "missing.mlp"), "-o", os.path.join(d, "x"), ok=(1,))
	h.one_line_error(p, "a missing base", "missing.mlp")
	# -o a FIFO (as /dev/stdout or /dev/null): written through, never replaced
	fifo = os.path.join(d, "fifo")
	os.mkfifo(fifo)
	reader = subprocess.Popen(["cat", fifo], stdout=subprocess.PIPE)
	report_out(prof, "trace", "-o", fifo)
	got = reader.communicate(timeout=60)[0]
	check(json.loads(text(got))["traceEvents"], "the trace came through the FIFO")
	check(stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO is still a FIFO")
	eq(sorted(os.listdir(d)), ["fifo"], "no temporary file left")
