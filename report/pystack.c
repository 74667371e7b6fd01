/* report/pystack.c - orders a stack with Python frames (report/pystack.h).
 * A run is a sequence of Python frames, innermost first, that ends with an
 * ENTRY frame (the frame an eval-loop call began with) or with the end of
 * the Python frames. */
#include "common/format.h"
#include "common/pyformat.h"
#include "report/pystack.h"

/* Python frames [first, depth) of frames as runs: run k is
 * [start[k], start[k + 1]).  Returns the number of runs (start holds one
 * more entry: the end). */
static uint32_t find_runs(const uint64_t *frames, uint32_t first, uint32_t depth, uint32_t *start)
{
	uint32_t n = 0;
	start[0] = first;
	for (uint32_t i = first; i < depth; i++)
		if (ml_pyframe_entry(frames[i]) || i + 1 == depth)
			start[++n] = i + 1;
	return n;
}

static void put_run(const uint64_t *frames, uint32_t lo, uint32_t hi,
		    struct ml_pystack_item *out, size_t *n)
{
	for (uint32_t i = lo; i < hi; i++)
		out[(*n)++] = (struct ml_pystack_item){
			.addr = frames[i], .index = i, .python = true,
			.show = ml_pyframe_hidden(frames[i]) ? ML_PYSTACK_NEVER : ML_PYSTACK_SHOW,
		};
}

/* Default-view visibility of the native frames: the interpreter's own, and
 * everything outside the outermost shown Python frame, is --native only. */
static void mark_natives(const struct ml_pystack_env *env, struct ml_pystack_item *out, size_t n)
{
	size_t outer = n;	/* the outermost shown Python frame */
	for (size_t i = n; i-- > 0;)
		if (out[i].python && out[i].show == ML_PYSTACK_SHOW) {
			outer = i;
			break;
		}
	for (size_t i = 0; i < n; i++) {
		if (out[i].python)
			continue;
		bool launch = outer < n && i > outer;
		if (launch || (outer < n && env->in_interpreter(env->ctx, out[i].addr, out[i].index)))
			out[i].show = ML_PYSTACK_NATIVE_ONLY;
	}
}

size_t ml_pystack_order(const uint64_t *frames, uint32_t depth, uint32_t flags,
			const struct ml_pystack_env *env, struct ml_pystack_item *out)
{
	uint32_t natives = 0;
	while (natives < depth && !ml_pyframe_is(frames[natives]))
		natives++;
	/* At most one run or eval frame per frame; a stack holds at most
	 * max_depth (<= 256) + ML_PYFRAMES_MAX frames, well under 1024. */
	uint32_t run_start[1024 + 2], evals[1024];
	if (depth > 1024) {
		for (uint32_t i = 0; i < depth; i++)
			out[i] = (struct ml_pystack_item){ .addr = frames[i], .index = i,
							   .python = ml_pyframe_is(frames[i]) };
		return depth;
	}
	uint32_t n_runs = find_runs(frames, natives, depth, run_start);
	uint32_t n_evals = 0;
	for (uint32_t i = 0; i < natives; i++)
		if (env->is_eval(env->ctx, frames[i], i))
			evals[n_evals++] = i;
	/* paired_run[e]: the run eval frame e runs, or -1. */
	int32_t paired_run[1024];
	uint32_t pairs = n_runs < n_evals ? n_runs : n_evals;
	bool cut = (flags & (ML_STACK_TRUNCATED | ML_STACK_PY_TRUNCATED | ML_STACK_PY_NATIVE_CUT)) != 0;
	uint32_t first_run = 0, last_run_end = 0;	/* runs not paired: [0, first_run) and
							 * [last_run_end, n_runs) */
	for (uint32_t e = 0; e < n_evals; e++)
		paired_run[e] = -1;
	if (!cut) {
		for (uint32_t k = 0; k < pairs; k++)
			paired_run[n_evals - 1 - k] = (int32_t)(n_runs - 1 - k);
		first_run = n_runs - pairs;
		last_run_end = n_runs;
	} else {
		for (uint32_t k = 0; k < pairs; k++)
			paired_run[k] = (int32_t)k;
		first_run = 0;
		last_run_end = pairs;
	}
	size_t n = 0;
	bool leftovers_placed = first_run == 0;
	uint32_t e = 0;
	for (uint32_t i = 0; i < natives; i++) {
		bool is_eval = e < n_evals && evals[e] == i;
		int32_t run = is_eval ? paired_run[e++] : -1;
		if (run >= 0) {
			if (!leftovers_placed) {
				/* Inner runs without an eval frame of their own. */
				put_run(frames, run_start[0], run_start[first_run], out, &n);
				leftovers_placed = true;
			}
			put_run(frames, run_start[run], run_start[run + 1], out, &n);
		}
		out[n++] = (struct ml_pystack_item){ .addr = frames[i], .index = i };
	}
	if (!leftovers_placed)	/* no eval frame at all: Python frames outside */
		put_run(frames, run_start[0], run_start[first_run], out, &n);
	put_run(frames, run_start[last_run_end], run_start[n_runs], out, &n);
	mark_natives(env, out, n);
	return n;
}
