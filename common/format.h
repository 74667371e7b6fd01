/* common/format.h - the memline profile file format, version 4 (on-disk layout).
 * Shared by the runtime's writer and the report's reader; docs/format.md is the prose. */
#ifndef ML_COMMON_FORMAT_H
#define ML_COMMON_FORMAT_H

#include <stdbool.h>
#include <stdint.h>
#include "common/kinds.h"
#include "common/pyformat.h"	/* Python frames, PYTHON and PYCODE records */
#include "common/pyprof.h"	/* @profile: PYFUNCS and PYLINES records */
#include "common/torchformat.h"

/*
 * A profile is little-endian:
 *
 *   struct ml_fmt_header                       (64 bytes, not compressed)
 *   the payload: one zstd frame (flags ML_FMT_ZSTD) whose content is
 *     section*: struct ml_fmt_section, payload (payload padded to 8 bytes)
 *
 * header.file_size is the size of the whole file; header.checksum is the
 * FNV-1a 64 hash of every byte after the header, as stored (compressed);
 * header.payload_size is the sections' size once decompressed.  A reader
 * rejects a file whose magic, version, size, checksum or payload size does
 * not match, and validates every length inside every section against the
 * section's size.
 *
 * Records of fixed size are stored as they are declared below.  FRAMES,
 * ADDRESSES, STACKS and COUNTERS are columns of ULEB128 varints (the
 * structs ml_fmt_frame, ml_fmt_stack and ml_fmt_counter are what a reader
 * builds from them); see each section.
 *
 * Unknown section types are skipped (so a minor addition needs no new
 * version); a change to an existing record's layout bumps ML_FMT_VERSION.
 */

#define ML_FMT_MAGIC "MEMLINE\0"	/* 8 bytes */
#define ML_FMT_VERSION 4u
#define ML_FMT_ALIGN 8u

struct ml_fmt_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;	/* sizeof(struct ml_fmt_header) */
	uint64_t file_size;
	uint64_t checksum;	/* FNV-1a 64 over bytes [header_size, file_size) */
	uint32_t section_count;
	uint32_t flags;		/* ML_FMT_ZSTD, or 0: the sections follow as they are */
	uint64_t payload_size;	/* bytes of the sections (decompressed) */
	uint8_t reserved[16];	/* 0 */
};

#define ML_FMT_ZSTD 0x1u	/* the payload is one zstd frame */

enum ml_fmt_section_type {
	ML_SEC_META = 1,	/* one ml_fmt_meta + exe path + argv */
	ML_SEC_MODULES = 2,	/* count x (ml_fmt_module + path + build-id) */
	ML_SEC_STACKS = 3,	/* count stacks, varint columns (frames in ML_SEC_FRAMES) */
	ML_SEC_COUNTERS = 4,	/* count counters, varint columns */
	ML_SEC_TOTALS = 5,	/* count x ml_fmt_total, one per kind seen */
	ML_SEC_TIMELINE = 6,	/* count x ml_fmt_timepoint */
	ML_SEC_SAMPLES = 7,	/* line timer, reserved for lineprof/ */
	ML_SEC_REGIONS = 8,	/* named regions, reserved for lineprof/ */
	ML_SEC_FRAMES = 9,	/* count trie nodes, varint columns */
	ML_SEC_SPANS = 10,	/* ml_fmt_spans_header, then count - 1 x ml_fmt_span */
	ML_SEC_NOTES = 11,	/* count x (ml_fmt_note + text): what the report must say */
	ML_SEC_PROCESS = 12,	/* one ml_fmt_process + hostname: the process in its run */
	ML_SEC_WARNINGS = 13,	/* count x (ml_fmt_warning + text): the runtime's warnings */
	/* Numbers given to sections of work in progress; use exactly these, and
	 * take the next free number (22) for anything new:
	 *   14 PYTHON, 15 PYCODE (the Python room), 16 TORCH (PyTorch's ops),
	 *   17 PYFUNCS, 18 PYLINES (the @profile tracer). */
	ML_SEC_PYTHON = 14,	/* one ml_fmt_python (common/pyformat.h) */
	ML_SEC_PYCODE = 15,	/* count x ml_fmt_pycode + strings (common/pyformat.h) */
	ML_SEC_PYFUNCS = 17,	/* ml_fmt_pyprof, then count - 1 x ml_fmt_pyfunc (common/pyprof.h) */
	ML_SEC_PYLINES = 18,	/* count x ml_fmt_pyline (common/pyprof.h) */
	ML_SEC_ADDRESSES = 19,	/* count distinct frame addresses, varint deltas */
	ML_SEC_RUNTIME = 20,	/* one ml_fmt_runtime: memline's own memory */
	ML_SEC_SAMPLED = 21,	/* one ml_fmt_sampled: --sample's settings and totals */
};

struct ml_fmt_section {
	uint32_t type;
	uint32_t count;		/* number of records in the payload */
	uint64_t size;		/* payload bytes, a multiple of 8 */
};

/* Why the profile was written. */
enum ml_fmt_end_reason {
	ML_END_EXIT = 1,	/* exit() or return from main: end_status = status */
	ML_END_UNDERSCORE_EXIT = 2,	/* _exit/_Exit: end_status = status */
	ML_END_EXEC = 3,	/* before execve and friends */
	ML_END_SIGNAL = 4,	/* fatal signal: end_status = signal number */
	ML_END_THREAD_EXIT = 5,	/* last thread left through pthread_exit */
};

/* ML_SEC_META payload: this struct, then exe_len bytes of the executable's
 * path, then argv_len bytes of argv (each argument NUL-terminated), padded. */
struct ml_fmt_meta {
	uint64_t pid;
	uint64_t ppid;
	uint64_t start_realtime_ns;	/* CLOCK_REALTIME at start-up */
	uint64_t duration_ns;	/* CLOCK_MONOTONIC, start-up to writing */
	uint32_t end_reason;	/* enum ml_fmt_end_reason */
	int32_t end_status;
	uint32_t max_depth;	/* frames captured per stack at most */
	uint32_t flags;		/* ML_META_* */
	uint32_t exe_len;
	uint32_t argv_len;
	uint32_t argc;
	uint32_t reserved;
};

#define ML_META_FORKED 0x1u	/* this process is a fork child of a profiled one */
#define ML_META_TRUNCATED_STACKS 0x2u	/* some stacks hit max_depth */
#define ML_META_DEGRADED 0x4u	/* the runtime hit internal trouble and passed calls through */
#define ML_META_ARGV_CUT 0x8u	/* argv did not fit: only its first whole arguments are stored */
#define ML_META_ALLOC_SHADOWED 0x10u	/* another malloc came first in the symbol lookup */
#define ML_META_SAMPLED 0x20u	/* --sample: COUNTERS hold estimates (ML_SEC_SAMPLED) */

/* ML_SEC_MODULES record: this struct, then path_len bytes of path, then
 * build_id_len bytes of raw build-id, padded.  Frames of a stack belong to
 * the module whose [lo, hi) holds them; the file address is addr - bias. */
struct ml_fmt_module {
	uint64_t bias;		/* load bias (dlpi_addr) */
	uint64_t lo;		/* lowest PT_LOAD address, absolute */
	uint64_t hi;		/* end of the highest PT_LOAD, absolute */
	uint32_t path_len;
	uint32_t build_id_len;
	uint32_t flags;		/* ML_MOD_* */
	uint32_t reserved;
};

#define ML_MOD_UNLOADED 0x1u	/* dlclose'd before the profile was written */
#define ML_MOD_MAIN 0x2u	/* the main executable */
#define ML_MOD_RUNTIME 0x4u	/* libmemline itself: its frames are not the program's */

/* ML_SEC_ADDRESSES: the distinct addresses of FRAMES' nodes, ascending:
 * count varints, the first the address itself, each next one its distance
 * from the one before (> 0).  Index 0 is the first. */

/* ML_SEC_FRAMES: the call-site trie that every stack of ML_SEC_STACKS is a
 * path of.  Nodes are numbered 1..count in file order; a node is one frame
 * whose caller is node parent, or, for parent 0, an outermost frame.
 * parent < the node's own number, so a reader validates the trie in one
 * pass.  Stored as two columns of count varints each: first every node's
 * number - parent (so 1..number), then every node's index into ADDRESSES.
 * A writer shares the nodes of equal (parent, address): stacks with a
 * common outer part store it once.  A reader builds ml_fmt_frame records. */
struct ml_fmt_frame {
	uint32_t parent;	/* 0: root; else an earlier node's number */
	uint32_t reserved;	/* 0 */
	uint64_t address;
};

/* ML_SEC_STACKS: count stacks, ascending ids, as three varint columns: the
 * id (the first itself, then each one's distance from the previous, > 0),
 * the leaf (the FRAMES node of the innermost frame, 0 for no frames), as
 * its distance from the previous stack's leaf, modulo 2^64 (memline writes
 * stacks in the order of their leaves: small deltas), the flags
 * (ML_STACK_*).  The frames, innermost first, are the nodes from
 * leaf up to the root: leaf, its parent, ..., a node with parent 0; depth
 * is their number.  Every frame is a return address unless
 * ML_STACK_EXACT_IP says frame 0 is an interrupted instruction pointer.
 * A reader builds ml_fmt_stack records. */
struct ml_fmt_stack {
	uint32_t id;		/* > 0, unique in the file */
	uint32_t depth;
	uint32_t flags;		/* ML_STACK_* */
	uint32_t leaf;		/* ML_SEC_FRAMES node of the innermost frame, or 0 */
};

#define ML_STACK_EXACT_IP 0x1u
#define ML_STACK_TRUNCATED 0x2u	/* the real stack was deeper than max_depth */
#define ML_STACK_LOST 0x4u	/* allocations whose stack the runtime had no memory to
				 * keep: counted exactly, no frames (depth 0) */

/* Allocation kinds (enum ml_kind): common/kinds.h. */

/* COUNTERS' live_bytes and peak_bytes columns (version 4): for a counter
 * with blocks (live, or live at the peak), alloc_bytes minus the bytes
 * modulo 2^64 (0 when all it allocated is live: the common case, one
 * byte); for one without, the bytes themselves (0 but in sampled
 * estimates' rounding).  A bijection for any alloc_bytes and blocks. */
static inline uint64_t ml_fmt_rel_put(uint64_t alloc_bytes, uint64_t blocks, uint64_t bytes)
{
	return blocks ? alloc_bytes - bytes : bytes;
}

/* The inverse of ml_fmt_rel_put. */
static inline uint64_t ml_fmt_rel_get(uint64_t alloc_bytes, uint64_t blocks, uint64_t v)
{
	return blocks ? alloc_bytes - v : v;
}

/* ML_SEC_COUNTERS: one per (stack, kind) that saw an event, in the order
 * of STACKS (ascending stack ids), stored as 8 varint columns of count
 * values each: the stack (its index in STACKS minus the previous counter's
 * index: 0 or more), kind, allocs, alloc_bytes, live_blocks, live_bytes,
 * peak_blocks, peak_bytes.  frees = allocs - live_blocks and freed_bytes =
 * alloc_bytes - live_bytes (every block allocated was freed or is live).
 * Since version 4 the live_bytes and peak_bytes columns are stored
 * relative to alloc_bytes where blocks are live (at the peak): a stack's
 * live or peak bytes are most often all it allocated (ml_fmt_rel_put).
 * In a sampled profile (ML_META_SAMPLED) the amounts are estimates, block
 * counts in 1/count_unit blocks (ml_fmt_sampled), and four more columns
 * follow: samples, var_alloc_bytes, var_live_bytes, var_peak_bytes (the
 * estimated variances of alloc_bytes, live_bytes and peak_bytes, bytes^2,
 * rounded).  A reader builds ml_fmt_counter records. */
struct ml_fmt_counter {
	uint32_t stack_id;
	uint32_t kind;		/* enum ml_kind */
	uint64_t allocs;
	uint64_t alloc_bytes;	/* requested sizes, summed */
	uint64_t frees;
	uint64_t freed_bytes;
	uint64_t live_blocks;	/* still allocated when the profile was written */
	uint64_t live_bytes;
	uint64_t peak_blocks;	/* live from this stack at the kind's peak */
	uint64_t peak_bytes;
	/* Sampled profiles only (else 0): the samples taken from this stack,
	 * and the estimated variance of alloc_bytes, live_bytes, peak_bytes. */
	uint64_t samples;
	uint64_t var_alloc_bytes, var_live_bytes, var_peak_bytes;
};

/* ML_SEC_TOTALS record: one per kind that saw an event. */
struct ml_fmt_total {
	uint32_t kind;
	uint32_t reserved;
	uint64_t allocs;
	uint64_t alloc_bytes;
	uint64_t frees;
	uint64_t freed_bytes;
	uint64_t live_blocks;
	uint64_t live_bytes;
	uint64_t peak_bytes;	/* the kind's highest total of live bytes */
	uint64_t peak_time_ns;	/* when it was reached, since start-up */
};

/* ML_SEC_TIMELINE record: total live bytes of a kind at a moment. */
struct ml_fmt_timepoint {
	uint32_t kind;
	uint32_t reserved;
	uint64_t time_ns;	/* since start-up */
	uint64_t live_bytes;
};

/* ML_SEC_SAMPLES payload (line timer, lineprof/): record 0 is one
 * ml_fmt_sampling; records 1..count-1 are ml_fmt_sample + depth uint64_t
 * frames (innermost first; frame 0 is the interrupted instruction pointer,
 * flags has ML_STACK_EXACT_IP).  Samples are aggregated per (thread, stack). */
struct ml_fmt_sampling {
	uint64_t period_ns;	/* nanoseconds of the clock per sample */
	uint64_t samples;	/* samples counted into the records */
	uint64_t dropped;	/* samples lost (table full, no stack) */
	uint32_t clock;		/* enum ml_fmt_clock */
	uint32_t flags;		/* ML_SAMPLING_* */
	uint32_t threads;	/* threads that were sampled */
	uint32_t reserved;
	uint64_t reserved2;
};

enum ml_fmt_clock {
	ML_CLOCK_CPU = 1,	/* each thread's CPU time (CLOCK_THREAD_CPUTIME_ID) */
	ML_CLOCK_WALL = 2,	/* wall time (CLOCK_MONOTONIC), blocked time included */
};

#define ML_SAMPLING_STEPPED_ASIDE 0x1u	/* the program took SIGPROF; sampling stopped */

struct ml_fmt_sample {
	uint32_t tid;		/* kernel thread id */
	uint32_t depth;
	uint32_t flags;		/* ML_STACK_* */
	uint32_t reserved;
	uint64_t count;		/* samples with this (tid, stack) */
};

/* ML_SEC_REGIONS record: this struct, then name_len bytes of name, padded.
 * Regions (memline.h, NVTX ranges) form a tree: parent 0 is the root.
 * Times are wall time (CLOCK_MONOTONIC) between begin and end; a region
 * still open when the profile is written is not counted. */
struct ml_fmt_region {
	uint32_t id;		/* > 0, unique in the file */
	uint32_t parent;	/* 0: a top-level region; else an earlier record's id */
	uint32_t name_len;
	uint32_t flags;		/* ML_REGION_* */
	uint64_t count;		/* begin/end pairs completed */
	uint64_t total_ns;	/* summed duration, children included */
	uint64_t alloc_bytes;	/* heap bytes allocated inside, children included */
	uint64_t allocs;
};

#define ML_REGION_NVTX 0x1u	/* came from an NVTX range */

/* ML_SEC_SAMPLED record: how a sampled run (memline run --sample) sampled,
 * and what it counted exactly: every allocation, sampled or not. */
struct ml_fmt_sampled {
	uint64_t rate_bytes;	/* mean bytes between sample points (R) */
	uint64_t seed;		/* of the sampling streams */
	uint64_t samples;	/* allocations sampled */
	uint64_t allocs;	/* every allocation (all kinds), exact */
	uint64_t alloc_bytes;	/* their bytes, exact */
	uint32_t count_unit;	/* COUNTERS' block counts are in 1/count_unit blocks */
	uint32_t reserved;
};

/* ML_SEC_RUNTIME record: memline's own memory when the profile was
 * written (bytes of mappings it made, whether touched or not), for the
 * report to say what profiling cost. */
struct ml_fmt_runtime {
	uint64_t live_table_bytes;	/* the live-block table */
	uint64_t live_blocks;		/* blocks in it (all kinds) */
	uint64_t stack_bytes;		/* the call-site trie: nodes and indexes */
	uint64_t stack_nodes;		/* its nodes */
	uint64_t counter_bytes;		/* per-thread counters and their indexes */
	uint64_t counters;		/* (thread, stack, kind) counters */
	uint64_t arena_bytes;		/* the private heap in all (nodes, counters, walks) */
	uint64_t threads;		/* thread states made (side stacks: 68 KiB each) */
};

/* ML_SEC_SPANS: each completed region (memline.h push/pop, NVTX range) on
 * the time axis, for timelines and traces.  Record 0 is the header; then
 * the first spans completed, at most ML_SPANS_MAX; later ones are only
 * counted (dropped). */
#define ML_SPANS_MAX 32768u
struct ml_fmt_spans_header {
	uint64_t dropped;	/* spans completed after the table was full */
	uint64_t reserved[2];
};

struct ml_fmt_span {
	uint32_t region;	/* the id of its REGIONS record */
	uint32_t tid;		/* the thread that opened it */
	uint64_t start_ns;	/* since start-up (CLOCK_MONOTONIC) */
	uint64_t end_ns;	/* >= start_ns */
};

/* ML_SEC_NOTES record: this struct, then len bytes of text (no NUL, no
 * newline), padded.  Sentences the runtime wants every report of the
 * profile to show as warnings: why some calls could not be seen, say. */
struct ml_fmt_note {
	uint32_t len;
	uint32_t reserved;
};

/* ML_SEC_PROCESS payload: this struct, then host_len bytes of the host name,
 * padded.  Where the process stands in its run (`memline run` starts a run:
 * its program and everything it starts) and in a distributed job. */
struct ml_fmt_process {
	uint64_t run_pid;	/* pid of the program `memline run` started; 0 if unknown */
	uint64_t parent_pid;	/* the parent when this image started (META's ppid is
				 * the parent at the end, maybe a reaper by then) */
	int64_t rank;		/* the job's rank of this process, -1 if none */
	int64_t local_rank;	/* its rank on this host, -1 if unknown */
	int64_t world_size;	/* processes in the job, -1 if unknown */
	uint32_t rank_source;	/* enum ml_fmt_rank_source */
	uint32_t host_len;
};

/* Where the rank was read from (environment variables at start-up). */
enum ml_fmt_rank_source {
	ML_RANK_NONE = 0,
	ML_RANK_TORCH = 1,	/* RANK, LOCAL_RANK, WORLD_SIZE (torchrun, torch.distributed) */
	ML_RANK_OPENMPI = 2,	/* OMPI_COMM_WORLD_RANK, _LOCAL_RANK, _SIZE */
	ML_RANK_PMI = 3,	/* PMI_RANK, MPI_LOCALRANKID, PMI_SIZE (MPICH, Intel MPI) */
	ML_RANK_PMIX = 4,	/* PMIX_RANK */
	ML_RANK_SLURM = 5,	/* SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS */
};

/* ML_SEC_WARNINGS record: this struct, then text_len bytes, padded: one of
 * the runtime's one-line warnings in this process. */
struct ml_fmt_warning {
	uint32_t flags;		/* ML_WARNING_* */
	uint32_t text_len;
};

#define ML_WARNING_SHOWN 0x1u	/* printed on the program's stderr when it happened */

#endif
