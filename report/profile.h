/* report/profile.h - a profile file loaded and validated in memory (the reader). */
#ifndef ML_REPORT_PROFILE_H
#define ML_REPORT_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/format.h"
#include "common/pyformat.h"

struct ml_module {
	uint64_t bias, lo, hi;
	const char *path;		/* NUL-terminated copy */
	const uint8_t *build_id;
	uint32_t build_id_len;
	uint32_t flags;			/* ML_MOD_* */
};

struct ml_stack {
	uint32_t id;
	uint32_t depth;
	uint32_t flags;			/* ML_STACK_* */
	/* Innermost first; NULL where the frames are the walk from leaf to the
	 * root of the profile's frame_nodes (a file's stacks): read them with
	 * ml_profile_stack_frames. */
	const uint64_t *frames;
	uint32_t leaf;			/* its innermost node in frame_nodes (0: none) */
};

/* A SAMPLES record: samples of one thread with one stack (line timer). */
struct ml_sample {
	uint32_t tid;
	uint32_t depth;
	uint32_t flags;			/* ML_STACK_*: frame 0 is an exact IP */
	uint64_t count;
	const uint64_t *frames;		/* innermost first */
};

/* A REGIONS record: a node of the region tree (memline.h, NVTX). */
struct ml_region {
	uint32_t id;
	uint32_t parent;		/* 0: top level; else an earlier region's id */
	uint32_t flags;			/* ML_REGION_* */
	const char *name;
	uint64_t count, total_ns, alloc_bytes, allocs;
};

/* The TORCH section (common/torchformat.h): a process that used PyTorch. */
struct ml_profile_torch {
	bool present;
	uint32_t flags;			/* ML_TORCH_* */
	uint64_t block_allocs, block_frees, other_reports, tensor_frees;
	uint32_t n_schemas;
	/* n_schemas (name, overload) pairs: schemas[2 i] the ATen name without
	 * "aten::", schemas[2 i + 1] the overload ("" for none). */
	const char **schemas;
};

/* The PROCESS section: where the process stood in its run and its job. */
struct ml_process_info {
	bool present;			/* the profile has the section */
	uint64_t run_pid;		/* pid of the program `memline run` started, 0 */
	uint64_t parent_pid;		/* the parent when it started (PROCESS), else META's ppid */
	int64_t rank, local_rank, world_size;	/* -1 where unknown */
	uint32_t rank_source;		/* enum ml_fmt_rank_source */
	const char *host;		/* "" when unknown */
};

/* A WARNINGS record: one of the runtime's warnings in the process. */
struct ml_warning {
	const char *text;
	bool shown;			/* printed on the program's stderr then */
};

/* A PYCODE record: one Python code object. */
struct ml_pycode {
	uint32_t id;
	int32_t firstlineno;
	uint32_t flags;			/* ML_PYCODE_* */
	const char *filename;		/* co_filename as the program had it */
	const char *name;		/* co_qualname (3.10: co_name) */
	const uint8_t *linetable;
	uint32_t linetable_len;
	uint32_t linetable_format;	/* enum ml_py_linetable: its process's */
	const char *cwd;		/* its process's working directory */
};

struct ml_profile {
	const char *path;		/* the file it was read from */
	struct ml_fmt_meta meta;
	const char *exe;
	const char **argv;		/* meta.argc entries */
	struct ml_module *modules;
	size_t n_modules;
	struct ml_stack *stacks;	/* sorted by id */
	size_t n_stacks;
	/* The FRAMES trie (nodes 1..n_frame_nodes at [id - 1]): stacks share
	 * their outer frames there rather than each holding a copy. */
	const struct ml_fmt_frame *frame_nodes;
	size_t n_frame_nodes;
	struct ml_fmt_counter *counters;
	size_t n_counters;
	struct ml_fmt_total totals[ML_KIND_COUNT];
	uint32_t kinds_present;		/* bit k set: totals[k] came from the file */
	struct ml_fmt_timepoint *timeline;
	size_t n_timeline;
	bool has_samples;		/* a SAMPLES section: the run used --lines */
	struct ml_fmt_sampling sampling;	/* its header record */
	struct ml_sample *samples;
	size_t n_samples;
	struct ml_region *regions;	/* in file order: parents first */
	size_t n_regions;
	bool has_runtime;		/* a RUNTIME section: memline's own memory */
	struct ml_fmt_runtime runtime;
	/* memline run --sample: the counters are estimates (their block counts
	 * already in blocks), with variances; these are its settings and the
	 * exact totals of every allocation. */
	bool sampled;
	struct ml_fmt_sampled alloc_sampling;
	const struct ml_fmt_span *spans;	/* regions on the time axis, in the order they ended */
	size_t n_spans;
	uint64_t spans_dropped;		/* spans the runtime had no room for */
	const char **notes;		/* the runtime's notes (NOTES): warnings to show */
	size_t n_notes;
	struct ml_profile_torch torch;
	struct ml_process_info process;
	struct ml_warning *warnings;
	size_t n_warnings;
	/* A profile made by ml_profile_merge (report/merge.h): the profiles it
	 * sums; META's pid is then 0. */
	const struct ml_profile **merged;
	size_t n_merged;
	bool has_python;		/* a PYTHON section: the process ran CPython */
	struct ml_fmt_python python;
	const char *python_cwd;		/* the working directory at start */
	struct ml_pycode *pycodes;	/* sorted by id */
	size_t n_pycodes;
	/* @profile (PYFUNCS and PYLINES, common/pyprof.h): the decorated
	 * functions' exact per-line numbers; every code_id is in pycodes and
	 * every line's code_id among pyfuncs. */
	bool has_pyprof;
	struct ml_fmt_pyprof pyprof;
	const struct ml_fmt_pyfunc *pyfuncs;
	size_t n_pyfuncs;
	const struct ml_fmt_pyline *pylines;
	size_t n_pylines;
	void *priv;			/* owned storage */
};

/* Reads and validates the profile at path.  Returns 0 and *out, or -errno
 * (-EINVAL for a file that is not a valid profile) with a one-line reason
 * in err ("truncated: 812 of 4096 bytes", "not a memline profile", ...).
 * Never trusts a length or offset from the file. */
int ml_profile_load(const char *path, struct ml_profile **out, char *err, size_t errlen);

/* Reads only what says which process a profile is and its totals: META,
 * TOTALS, PROCESS and WARNINGS (every other field empty), without the
 * checksum: for listing many profiles (`memline run`'s summary, the
 * processes view).  Same results otherwise. */
int ml_profile_load_meta(const char *path, struct ml_profile **out, char *err, size_t errlen);

/* Same, from a buffer (the fuzzer's entry point); the buffer is copied. */
int ml_profile_parse(const void *data, size_t len, struct ml_profile **out, char *err, size_t errlen);

void ml_profile_free(struct ml_profile *p);

/* The stack with this id, or NULL. */
const struct ml_stack *ml_profile_stack(const struct ml_profile *p, uint32_t id);

/* The frames of stack st of p, innermost first: st->frames, or its walk
 * through p's trie written into buf (st->depth entries). */
const uint64_t *ml_profile_stack_frames(const struct ml_profile *p, const struct ml_stack *st,
					uint64_t *buf);

/* The Python code object with this id, or NULL. */
const struct ml_pycode *ml_profile_pycode(const struct ml_profile *p, uint32_t id);

/* The module holding addr, or NULL. */
const struct ml_module *ml_profile_module(const struct ml_profile *p, uint64_t addr);

#endif
