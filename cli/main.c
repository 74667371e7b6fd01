/* cli/main.c - the memline command: dispatches to `run` and `report`. */
#include <stdarg.h>
#include <string.h>
#include "cli/cli.h"

void ml_cli_usage(FILE *out)
{
	fputs(
"usage: memline run [-o DIR] [--depth N] [--sample BYTES] [--no-follow]\n"
"                   [--no-torch-cache] [--no-pymem] [--native]\n"
"                   [--lines [--clock cpu|wall]\n"
"                   [--rate HZ]] [--] PROG [ARGS...]\n"
"       memline report [RUN|FILE...] VIEW [--json] [options]\n"
"       memline --help\n"
"\n"
"run: runs PROG with libmemline.so preloaded; every process of the run writes\n"
"its profile into the run's directory, memline.<prog>.<pid>/, and one line\n"
"says what was written.  Exits with PROG's exit status.\n"
"  -o DIR        make the run's directory in DIR (default: the current directory)\n"
"  --depth N     capture at most N frames per stack (1-256, default 64)\n"
"  --sample BYTES  record allocations by sampling, one every BYTES bytes on\n"
"                average (byte-based Poisson sampling, as tcmalloc does):\n"
"                every amount is then an unbiased estimate, shown with its\n"
"                standard deviation; a few percent overhead (default: exact)\n"
"  --no-follow   profile only PROG itself: not its fork children, not\n"
"                programs it starts with exec\n"
"  --no-torch-cache  set PYTORCH_NO_CUDA_MEMORY_CACHING=1: PyTorch then\n"
"                allocates every tensor from the driver, so CUDA memory is\n"
"                attributed per tensor rather than per caching-allocator segment\n"
"  --no-pymem    Python: leave the interpreter's PyMem allocators alone (Python\n"
"                objects are then seen only as the malloc blocks pymalloc takes)\n"
"  --native      Python: keep the interpreter's own C frames below the line\n"
"                that made each Python object (by default they are left out,\n"
"                as report's default views leave them out; larger profiles)\n"
"  --lines       the line timer: sample every thread's stack (time per line)\n"
"  --clock C     cpu (each thread's CPU time, default) or wall (blocked time too)\n"
"  --rate HZ     samples per second per thread (1-100000, default 997)\n"
"\n"
"report: prints a view of a run (its directory; default: the newest run or\n"
"profile in the current directory) or of profile FILEs.  Of a run, the views\n"
"show the main program; several processes are reported one after another.\n"
"  leaks [--limit N|all]       blocks never freed, by stack, largest first (100\n"
"                              records unless --limit says otherwise)\n"
"  peak [--limit N|all]        what was live at the heap's peak, by stack and line\n"
"  ops [--sort KEY] [--limit N|all] [--by op|function]\n"
"                              PyTorch key_averages layout: one row per ATen op\n"
"                              for a program that used PyTorch (--by op), else\n"
"                              one row per function (--by function)\n"
"  lines [--layout L]          every Python function decorated with @profile, as\n"
"                              kernprof -l -v (L: line_profiler, the default) or\n"
"                              python -m memory_profiler (L: memory_profiler) shows it\n"
"  lines --function NAME       every line of NAME with its memory (repeatable)\n"
"  lines --top N [-u UNIT]     with --lines profiles: the N functions with the most\n"
"                              time, line_profiler's layout (UNIT in seconds, 1e-6)\n"
"  regions                     the tree of memline.h / NVTX regions\n"
"  timeline                    memory over time per kind (and regions), in the terminal\n"
"  flame [--value V] [--node-fraction F]\n"
"                              the heaviest call paths as a text tree\n"
"  folded [--value V]          folded stacks for flamegraph.pl, inferno, speedscope\n"
"  html [-o FILE]              one self-contained HTML page: timelines, flame\n"
"                              graph, functions, source heat\n"
"  trace [-o FILE]             Chrome trace / Perfetto JSON\n"
"  pprof -o FILE               gzipped profile.proto for go tool pprof\n"
"  --base OLD                  with ops, peak, leaks, flame, folded, html, pprof:\n"
"                              what grew and shrank since OLD (a profile or a run)\n"
"  --value V                   alloc (default), allocs, peak, peak_blocks, leaked,\n"
"                              leaked_blocks, time\n"
"  processes                   every process of the runs: tree, rank, host, totals\n"
"  --pid P[,P...]              the process with pid P (its last program)\n"
"  --rank R[,R...]             the topmost process of rank R of a distributed job\n"
"  --program NAME              every process running NAME\n"
"  --children                  instead: every process the chosen ones started\n"
"                              (DataLoader and pool workers, subprocesses)\n"
"  --all                       every process\n"
"  --merge                     one report summing the chosen processes\n"
"  --json                      one JSON document (schema memline.report, version 1)\n"
"  --native                    Python programs: every native frame of stacks with\n"
"                              Python frames (the interpreter's own are left out)\n"
"  --kind KIND                 the memory kind the views show (default heap, or cpu\n"
"                              for a Python program: heap + python, its objects;\n"
"                              pyarena: pymalloc's arenas; CUDA\n"
"                              kinds: cuda_device, cuda_managed, cuda_pinned,\n"
"                              cuda_pool, cuda_vmm, cuda_array, cuda_mapped,\n"
"                              cuda_reserved, cuda_gpu = the GPU kinds together);\n"
"                              with heap, CUDA columns and sections are added\n"
"                              when the profile has CUDA memory\n"
"  sort keys: self_cpu_memory_usage (default), cpu_memory_usage, count,\n"
"             peak_cpu_memory, leaked_cpu_memory, self_peak_cpu_memory, allocs,\n"
"             self_cuda_memory_usage, cuda_memory_usage,\n"
"             self_cpu_time_total, cpu_time_total, self_other_memory_usage,\n"
"             other_memory_usage, self_cuda_reserved\n"
"\n"
"See docs/cli.md for details.\n", out);
}

int ml_cli_usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("memline: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see `memline --help`)\n", stderr);
	return ML_EXIT_USAGE;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return ml_cli_usage_error("no command given: use `memline run` or `memline report`");
	const char *cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		ml_cli_usage(stdout);
		return 0;
	}
	if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0) &&
	    (strcmp(cmd, "run") == 0 || strcmp(cmd, "report") == 0)) {
		ml_cli_usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "run") == 0)
		return ml_cli_run(argc - 1, argv + 1);
	if (strcmp(cmd, "report") == 0)
		return ml_cli_report(argc - 1, argv + 1);
	return ml_cli_usage_error("unknown command '%s'", cmd);
}
