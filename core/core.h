/* core/core.h - the recording core's one public header: everything a hook
 * room (alloc/, cuda_hooks/, lineprof/, process/, rooms to come) may use.
 * The core records raw events; it never symbolizes or formats.  What is
 * not here is private to core/ (core/internal.h).  docs/layout.md says which
 * room may touch what. */
#ifndef ML_CORE_CORE_H
#define ML_CORE_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include "common/format.h"
#include "common/writer.h"

/* ================================================================ basics */

/* Marks a symbol libmemline exports (the build hides everything else).
 * Exported symbols live only in <room>/hooks.c files. */
#define ML_EXPORT __attribute__((visibility("default")))

/* Debug builds (CONFIG=debug and CONFIG=asan define ML_DEBUG=1) check the
 * core's invariants; release builds compile ML_ASSERT to nothing, but its
 * condition is still parsed, so it cannot rot.  A failed check prints one
 * line (async-signal-safe) and aborts. */
#ifndef ML_DEBUG
#define ML_DEBUG 0
#endif
#define ML_ASSERT(cond) do { \
	if (ML_DEBUG && !(cond)) \
		ml_assert_fail(#cond, __FILE__, __LINE__); \
} while (0)
__attribute__((noreturn, cold)) void ml_assert_fail(const char *what, const char *file, int line);

/* ============================================================ thread-local state */

/* The runtime's hot per-thread variables, one initial-exec TLS block
 * (core/guard.c): a function that touches several of them reads the
 * block's offset from the GOT once, not once per variable.  The names
 * below are the fields' (ml_tl_guard, ml_tl_thread, ...). */
struct ml_unwind_mark { uint64_t ra, sp, bp; };
/* What a thread knows of one kind's timeline (core/timeline.c). */
struct ml_timeline_thread {
	uint32_t countdown;	/* events to the next clock read */
	uint32_t gen;		/* the timeline reset it belongs to (0: never used) */
	uint64_t known;		/* the bucket at idx holds at least this (max live + 1) */
	uint64_t now_ns;	/* the clock at the last read */
	uint64_t idx;		/* the bucket now_ns fell in, at shift */
	uint32_t shift;
};
struct ml_thread;
struct ml_sample_count;
struct ml_tls {
	int guard;			/* ml_tl_guard: inside memline (see below) */
	int plain;			/* ml_tl_plain: this event without atomics (internal.h) */
	struct ml_thread *thread;	/* ml_tl_thread: the thread's state (internal.h) */
	/* --sample: the countdown of the thread's state, or, before it has
	 * one, ml_sample_none's (never NULL: ml_track_sample_skip) */
	struct ml_sample_count *sample;
	struct ml_unwind_mark mark;	/* ml_tl_mark: the hook's frame (below) */
	int *errno_at;			/* the thread's errno, once asked (core/track.c) */
	uint64_t alloc_bytes, allocs;	/* ml_tl_alloc_bytes, ml_tl_allocs (below) */
	struct ml_timeline_thread timeline[ML_KIND_COUNT];	/* ml_tl_timeline */
};
extern __thread struct ml_tls ml_tl __attribute__((tls_model("initial-exec")));
#define ml_tl_guard (ml_tl.guard)
#define ml_tl_plain (ml_tl.plain)
#define ml_tl_thread (ml_tl.thread)
#define ml_tl_mark (ml_tl.mark)
#define ml_tl_alloc_bytes (ml_tl.alloc_bytes)
#define ml_tl_allocs (ml_tl.allocs)
#define ml_tl_timeline (ml_tl.timeline)

/* ============================================================ the guard */

/* The per-thread reentrancy guard.  ml_guard_enter() returns true when the
 * caller now holds the guard and may record; false when this thread is
 * already inside memline (the runtime's own work, or a hook called from a
 * hook), or recording is off: then the caller just passes the call through.
 * Async-signal-safe. */
extern volatile int ml_core_active;
static inline bool ml_guard_enter(void)
{
	if (ml_tl_guard || !ml_core_active)
		return false;
	ml_tl_guard = 1;
	return true;
}
static inline void ml_guard_exit(void)
{
	ml_tl_guard = 0;
}
/* Takes the guard whether or not recording is on (for the runtime's own
 * work: writing the profile, start-up).  False if already held. */
static inline bool ml_guard_enter_always(void)
{
	if (ml_tl_guard)
		return false;
	ml_tl_guard = 1;
	return true;
}
/* True while this thread holds the guard. */
static inline bool ml_guard_held(void)
{
	return ml_tl_guard != 0;
}

/* ============================================================ recording */

/* Recording is on (the core started and the process may record). */
extern volatile int ml_core_active;

/* What stops the allocation hooks' passes under --sample (alloc/hooks.c),
 * each hook testing its bits in one instruction: ML_PASS_OFF unless
 * sampling with recording on (the core keeps it with ml_core_active),
 * ML_PASS_UNREADY until the real allocator is known, ML_PASS_NO_CXX until
 * C++'s operators take the direct way (alloc/real.c clears both).  All
 * set at first. */
extern volatile uint32_t ml_pass_stop __attribute__((visibility("hidden")));
#define ML_PASS_OFF 1u
#define ML_PASS_UNREADY 2u
#define ML_PASS_NO_CXX 4u

/* Starts recording on the first allocation hook call, before the runtime's
 * constructor, once libc is up (environ set).  The caller makes sure the
 * real allocator is known.  Idempotent, cheap once done; never recurses
 * (takes the guard). */
void ml_lifecycle_start(void);

/* The ml_track_* calls below leave errno as they found it.
 *
 * Records a successful allocation of size requested bytes at ptr, of the
 * given kind, with the calling thread's stack.  Call with the guard held,
 * after the real allocator returned ptr != NULL.  Never allocates through
 * the hooked allocator; thread-safe; no global lock. */
void ml_track_alloc(void *ptr, size_t size, enum ml_kind kind);
/* ml_track_alloc(ptr, size, ML_KIND_HEAP) for a ptr known not to be NULL,
 * the hook's mark set (ML_UNWIND_MARK, below): the hooks' entry, no test
 * of any of these. */
void ml_track_alloc_heap(void *ptr, size_t size);

/* ml_track_alloc, and the same block counted a second time under the
 * pseudo-kind also (one stack capture; its own live-table entry (ptr, also),
 * released with ml_track_free(ptr, also) or detach/release).  For the CUDA
 * hooks' combined GPU total (ML_KIND_CUDA_GPU); cold path. */
void ml_track_alloc_also(void *ptr, size_t size, enum ml_kind kind, enum ml_kind also);

/* Records the release of ptr.  Call with the guard held, BEFORE the real
 * free: after it another thread may be given the same address.  Unknown
 * pointers (allocated before start-up, or by an untracked path) are
 * ignored.  Returns the size recorded at allocation, or 0 if unknown. */
size_t ml_track_free(void *ptr, enum ml_kind kind);
/* ml_track_free(ptr, ML_KIND_HEAP) for a ptr known not to be NULL. */
size_t ml_track_free_heap(void *ptr);

/* A block taken out of the live table while a realloc-like call runs.
 * Sequence, guard held throughout:
 *   ml_track_detach(old)            before the real call (old may be freed by it)
 *   real call
 *   success:        ml_track_moved(&held, new, size)   (one event for the peak)
 *   failure:        ml_track_reattach(&held)           (old is still allocated)
 *   old freed only: ml_track_release(&held)            (e.g. glibc realloc(p, 0))
 * While detached the block still counts as live. */
struct ml_track_held {
	uint64_t addr;		/* 0: old was unknown (moved then records a plain alloc) */
	uint64_t size;
	uint32_t stack;
	uint32_t kind;
};
bool ml_track_detach(void *ptr, enum ml_kind kind, struct ml_track_held *held);
void ml_track_moved(const struct ml_track_held *held, void *ptr, size_t size,
		    enum ml_kind kind);
void ml_track_reattach(const struct ml_track_held *held);
void ml_track_release(const struct ml_track_held *held);

/* Per thread: the allocations recorded so far (ml_track_alloc and
 * ml_track_moved, every kind) and their requested bytes.  Rooms read
 * differences (lineprof's regions).  initial-exec TLS, core/track.c. */
/* Counts one allocation of size bytes on this thread: two TLS adds,
 * async-signal-safe.  Called by ml_track_*; tests call it directly. */
static inline void ml_track_count_thread(uint64_t size)
{
	ml_tl_alloc_bytes += size;
	ml_tl_allocs++;
}

/* --sample: a thread's countdown to its next sample point and its exact
 * totals, in the thread's state (core/internal.h), which ml_tl.sample
 * points to, so that a room's hook can test it inline
 * (ml_track_sample_skip). */
struct ml_sample_count {
	int64_t left;		/* bytes to the next sample point */
	uint64_t allocs, bytes;	/* every allocation, exactly */
};
/* --sample only: counts an allocation of size bytes the caller just made
 * on this thread, or is about to make (outside memline: the guard held,
 * or free, as the allocation hooks' pass_alloc).  True: not a sample
 * point, nothing more to do; false: the caller records it (ml_track_alloc,
 * which then decides: a sample point, or no thread state yet).  A
 * subtraction and four adds: track_alloc's test, and the hooks' and the
 * Python room's wrappers' (python/hooks.c), which call it on every
 * allocation.  A signal handler that allocates in between may have its
 * countdown step lost: sampling goes on from the value written. */
/* A thread without a state counts down on this one, whose next point is
 * always here (left INT64_MIN): the caller records, which makes the state. */
extern struct ml_sample_count ml_sample_none __attribute__((visibility("hidden")));
static inline bool ml_track_sample_skip(size_t size)
{
	struct ml_sample_count *s = ml_tl.sample;
	if (__builtin_expect((int64_t)size >= s->left, 0))
		return false;
	s->left -= (int64_t)size;
	s->allocs++;
	s->bytes += size;
	ml_track_count_thread(size);
	return true;
}
/* Takes back what ml_track_sample_skip counted for size bytes: the call
 * it was counted for (before it ran) failed. */
static inline void ml_track_sample_unskip(size_t size)
{
	struct ml_sample_count *s = ml_tl.sample;
	s->left += (int64_t)size;
	s->allocs--;
	s->bytes -= size;
	ml_tl_alloc_bytes -= size;
	ml_tl_allocs--;
}

/* --sample only: the filter of sampled blocks' addresses, a counting
 * filter of two slots per address, each the number of sampled blocks
 * living at addresses that hash there (core/sampling.c keeps it).
 * ml_sampling_maybe false: addr is certainly not a sampled block, and its
 * free has nothing to record.  Two slots: with one, an address the program
 * frees over and over whose slot a long-lived sampled block shared went to
 * the live table on every free (seen: 120 k of 220 k frees of a JSON
 * program's run, +0.7%).  Lock-free; inline, as most frees of a sampled
 * run end here (the core's free paths, and the hooks' own test before
 * them).  A sampled block was added before its address was handed to the
 * program, so its free (which follows) sees it. */
#define ML_SAMPLING_FILTER_BITS 16u
extern uint32_t ml_sampling_filter[1u << ML_SAMPLING_FILTER_BITS];
static inline uint64_t ml_sampling_hash(uint64_t addr)
{
	return addr * 0x9e3779b97f4a7c15ull;
}
/* The two slots of hash h: its top bits, and the bits below them. */
static inline uint32_t ml_sampling_slot(uint64_t h, unsigned which)
{
	return (uint32_t)(h >> (64 - ML_SAMPLING_FILTER_BITS * (which + 1))) &
	       ((1u << ML_SAMPLING_FILTER_BITS) - 1);
}
static inline bool ml_sampling_maybe(uint64_t addr)
{
	uint64_t h = ml_sampling_hash(addr);
	return __atomic_load_n(&ml_sampling_filter[ml_sampling_slot(h, 0)], __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&ml_sampling_filter[ml_sampling_slot(h, 1)], __ATOMIC_ACQUIRE);
}

/* The hook's own frame, whose caller is where the next stack walk on this
 * thread starts instead of walking the runtime's frames.  ML_UNWIND_MARK()
 * goes in the hook itself (so inlined into it), just before
 * ml_track_alloc/moved; ml_unwind_unmark() right after, so that the mark
 * never outlives the hook's frame (core/unwind.c).  It notes the caller's
 * state as the hook's frame record gives it: the runtime is built with
 * frame pointers, so rbp (the frame address) points at the caller's saved
 * rbp, the return address above it, and the caller's rsp is 16 bytes
 * above (MEMLINE_VERIFY_UNWIND checks every such stack against
 * libunwind's). */
#define ML_UNWIND_MARK() do { \
	const uint64_t *fp_ = (const uint64_t *)__builtin_frame_address(0); \
	ml_tl_mark.ra = fp_[1]; \
	ml_tl_mark.bp = fp_[0]; \
	ml_tl_mark.sp = (uint64_t)(uintptr_t)(fp_ + 2); \
} while (0)
static inline void ml_unwind_unmark(void) { ml_tl_mark.sp = 0; }

/* Runs fn(arg) on the calling thread's side stack, memline's own 64 KiB
 * (the program's stack may be a coroutine's few KiB), and returns its
 * result; right here when the thread has no side stack yet (none is made:
 * this may run in a signal handler) or is on it already.  Call with the
 * guard held.  Async-signal-safe. */
long ml_core_on_side_stack(long (*fn)(void *), void *arg);

/* Captures the calling thread's stack, without memline's own innermost
 * frames, into frames[0..max), innermost first (return addresses).  Sets
 * ML_STACK_TRUNCATED in *flags when cut at max (at most ML_DEPTH_MAX).
 * Returns the depth.  Call with the guard held; not in a signal handler
 * that may have interrupted a capture on this thread. */
uint32_t ml_stack_capture(uint64_t *frames, uint32_t max, uint32_t *flags);

/* Captures the stack of the context a signal interrupted (ucontext is the
 * handler's third argument) into frames[0..max), innermost first: frame 0
 * is the exact interrupted instruction.  Sets ML_STACK_TRUNCATED in *flags
 * when cut at max.  Returns the depth, 0 on failure.  Async-signal-safe; no
 * descriptor, no malloc (core/libunwind.c). */
uint32_t ml_stack_capture_context(void *ucontext, uint64_t *frames, uint32_t max,
				  uint32_t *flags);

/* The live bytes of kind's running total now (for a kind that shares
 * another's total, that total).  One relaxed load: lock-free,
 * async-signal-safe, callable with or without the guard. */
uint64_t ml_core_live_bytes(enum ml_kind kind);

/* The size recorded for the live block (ptr, kind), or 0 when none is
 * live.  Takes one live-table shard's spinlock briefly; never allocates.
 * For rooms that must tell apart bytes the interpreter holds only for
 * their own callback (the Python tracer). */
uint64_t ml_core_live_block_size(const void *ptr, enum ml_kind kind);

/* Lets every registered stack decorator (struct ml_room) rewrite a stack
 * captured outside ml_track_* (lineprof's samples): frames[0..depth),
 * innermost first, cap slots.  Returns the new depth.  Async-signal-safe;
 * a no-op when no room decorates.  With ML_STACK_NESTED in *flags the
 * thread was interrupted inside memline itself (no native frames were
 * taken): a decorator then must not allocate or wait for anything (it may
 * still add what it can read). */
#define ML_STACK_NESTED 0x80000000u	/* capture time only: never written */
uint32_t ml_core_decorate_stack(uint64_t *frames, uint32_t depth, uint32_t cap,
				uint32_t *flags);

/* For a room's stack_id (struct ml_room).  Stacks are paths of a trie of
 * frames, outermost first: the path of no frames is ML_CORE_STACK_ROOT,
 * a frame's node the child (its caller's node, its address).  Returns 0
 * when the table has no room for a new node (the stack is then
 * ML_CORE_STACK_LOST).  ic: the thread's caches, as stack_id got them. */
struct ml_intern_cache;
#define ML_CORE_STACK_ROOT 1u
#define ML_CORE_STACK_LOST 3u
uint32_t ml_core_stack_child(struct ml_intern_cache *ic, uint32_t parent, uint64_t address);
/* The stack id of the allocation's native frames alone, as a capture with
 * no room decorating it would intern them (memline's own frames left
 * out): the core's walk from the hook's mark, its path interned.  0 where
 * the full capture must (no mark, the walker declining, more frames than
 * the depth limit); ML_CORE_STACK_LOST without room.  Only in an
 * allocation hook's recording (ML_UNWIND_MARK), as stack_id runs. */
uint32_t ml_core_native_stack(struct ml_intern_cache *ic);
/* The return addresses of stack id's path, innermost first, into ras[0,
 * n) (NULL: only counted); returns n, or UINT32_MAX when the path has
 * more than max or does not hang below ML_CORE_STACK_ROOT. */
uint32_t ml_core_stack_path(uint32_t id, uint64_t *ras, uint32_t max);
/* The stack id of parent's path with every frame of native's below it,
 * interned as a capture's stack is (only the frames past the part it
 * shares with the thread's last interned stack are looked up); 0 when it
 * would hold more than ML_DEPTH_MAX frames, ML_CORE_STACK_LOST without
 * room. */
uint32_t ml_core_stack_join(struct ml_intern_cache *ic, uint32_t parent, uint32_t native);
/* The allocation's native return addresses, innermost first (those the
 * full capture gives, memline's own frames left out), up to and including
 * the first one, ra, with ra - 1 - lo < span, at most max of them: in
 * out->ras[0, out->n), which is buf (max slots) or the thread's cache of
 * such walks (valid until the next call).  out->token, when not 0, names
 * them: the thread gets the same token again only for the same
 * addresses.  Returns their count, or -1 when there is no such address
 * among the first max, or the walk cannot tell (then the full capture
 * must).  Only in an allocation hook's recording (its mark set:
 * ML_UNWIND_MARK). */
struct ml_native_path {
	const uint64_t *ras;
	uint32_t n;
	uint64_t token;
};
int ml_core_native_until(struct ml_native_path *out, uint64_t *buf, uint32_t max, uint64_t lo,
			 uint64_t span);

/* The Python room calls this once its interpreter runs the program: every
 * room's python_ready (struct ml_room), GIL and guard held. */
void ml_core_python_ready(void);

/* A room whose audit hook (added at python_ready) has nothing left to do
 * calls this from that hook or later, GIL held: the Python room takes the
 * hook's entry out of the interpreter's list, never to be freed, so that
 * with no hook left CPython builds no audit event's arguments again.  A
 * loop calling the hook now goes on past it.  Returns 0, or -ENOENT: the
 * hook stays in the list (the list was not found, or no Python room). */
int ml_core_python_audit_remove(int (*hook)(const char *event, void *args, void *data));

/* ======================================================== configuration */

#define ML_DEPTH_DEFAULT 64u
#define ML_DEPTH_MAX 256u

/* The runtime's settings, read from the environment once at start-up
 * (core/config.c).  Read-only outside core/. */
struct ml_config {
	char output_dir[PATH_MAX];	/* MEMLINE_OUTPUT_DIR, else cwd at start */
	uint32_t max_depth;		/* MEMLINE_DEPTH, 1..ML_DEPTH_MAX */
	bool follow;			/* MEMLINE_FOLLOW (default 1) */
	bool quiet;			/* MEMLINE_QUIET */
	bool fast_unwind;		/* not MEMLINE_LIBUNWIND_ONLY (unwind.c) */
	bool verify_unwind;		/* MEMLINE_VERIFY_UNWIND: check every fast stack
					 * against libunwind (tests; slow) */
	uint64_t sample_bytes;		/* MEMLINE_SAMPLE: mean bytes between samples;
					 * 0: every allocation (exact) */
	uint64_t sample_seed;		/* MEMLINE_SAMPLE_SEED (0: from the clock) */
	unsigned file_mode;		/* MEMLINE_FILE_MODE: profiles' permission bits */
};
extern struct ml_config ml_config;

/* Rewrites an LD_PRELOAD value in place without its libmemline entries. */
void ml_config_filter_preload(char *value);

/* ================================================================ clock */

/* CLOCK_MONOTONIC at start-up, ns: what "since start-up" in the profile
 * counts from (a room turns its own monotonic times into profile times). */
uint64_t ml_clock_start_mono_ns(void);

/* ========================================================== diagnostics */

/* Adds a sentence (at most 1 KiB, no newline) that every report of this
 * profile shows as a warning: why some calls could not be seen, say.  The
 * profile keeps at most 16 of them (4 KiB).  Thread-safe; not for signal
 * handlers. */
void ml_core_note(const char *note);
/* Flags the profile (ML_META_*: META flags the report explains). */
void ml_core_flag(uint32_t flag);

/* An address read from a loaded module's dynamic section (DT_SYMTAB, ...):
 * glibc has relocated most of them in place, some loaders do not. */
static inline uintptr_t ml_dyn_addr(uintptr_t base, uint64_t v)
{
	return v < base ? base + v : v;
}

/* The span [lo, hi) of the PT_LOAD segments of the loaded module that
 * holds addr (0,0 if none).  Takes the loader's lock: not in a hook. */
void ml_modules_range_of(uint64_t addr, uint64_t *lo, uint64_t *hi);
/* The loader's counts of objects loaded and unloaded since the start
 * (dl_phdr_info's dlpi_adds, dlpi_subs); UINT64_MAX when unknown.  Takes
 * the loader's list lock (dl_iterate_phdr's) for one callback. */
void ml_modules_load_counts(uint64_t *adds, uint64_t *subs);

/* The address of the function libmemline itself exports as name, or NULL
 * (whatever the symbol lookup finds first: the program's own, an earlier
 * preload's).  Reads libmemline's dynamic symbol table; thread-safe. */
void *ml_self_export(const char *name);
/* The function name as the first loaded module other than libmemline
 * that defines and exports it has it, in load order and whatever its scope
 * (a library loaded RTLD_LOCAL included), or NULL; *path names that module
 * ("" for the program).  Reads dynamic symbol tables under the loader's
 * list lock (dl_iterate_phdr); no allocation. */
void *ml_export_anywhere(const char *name, const char **path);
/* The same among the modules whose path pick accepts (NULL: all). */
void *ml_export_among(const char *name, const char **path, bool (*pick)(const char *path));

/* One-line diagnostics: write(2) only, async-signal-safe, never allocate.
 * ml_warn prints "memline: <msg>" on stderr unless MEMLINE_QUIET or
 * descriptor 2 is no longer the stream it was at start-up, and keeps the
 * message for the profile either way (core/warn.c). */
void ml_warn(const char *msg);
/* True while descriptor 2 is the stream it was at start-up (a program may
 * close stderr and open a file of its own there): write nothing to it
 * otherwise.  Async-signal-safe (fstat). */
bool ml_stderr_is_ours(void);
/* Flags the run ML_META_DEGRADED and warns once, but keeps recording. */
void ml_warn_once(const char *msg);

/* ================================================= private memory, locks */

/* The runtime's private heap (mmap, never the hooked malloc).  Returns
 * zeroed memory aligned to 16 bytes, or NULL when the arena is exhausted
 * (then the run is degraded).  Thread-safe, lock-free on the common path.
 * Memory is never returned. */
void *ml_arena_alloc(size_t size);

/* A tiny spinlock, for short critical sections that may run in hooks. */
typedef struct { volatile int locked; } ml_spin_t;
/* sched_yield(2); async-signal-safe, never allocates. */
void ml_spin_yield(void);
/* ml_spin_lock's wait for a lock it found taken (core/spin.c). */
void ml_spin_wait(ml_spin_t *l);
/* One exchange inline; a lock found taken is waited for out of line
 * (spins briefly, then yields: with more threads than CPUs the holder may
 * be preempted, and spinning through a whole time slice would be waste),
 * so that callers keep their values in registers around it. */
static inline void ml_spin_lock(ml_spin_t *l)
{
	if (__builtin_expect(__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE) != 0, 0))
		ml_spin_wait(l);
}
static inline void ml_spin_unlock(ml_spin_t *l)
{
	__atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

/* ====================================================== real functions */

/* The next definition of sym after libmemline (dlsym RTLD_NEXT), looked up
 * once into *cache (NULL stays NULL: looked up again next time).
 * Thread-safe.  Not for signal handlers before the first lookup. */
void *ml_next_sym(const char *sym, void **cache);
/* ml_next_sym with a cache of its own at the call site. */
#define ML_NEXT(type, sym) ({ static void *ml_cache_; (type)ml_next_sym(sym, &ml_cache_); })

/* The real sigaction (not the program-facing one of process/hooks.c):
 * found on first use, before any of memline's handlers can run.  Same
 * results and errno as libc's; ENOSYS if it cannot be found. */
struct sigaction;
int ml_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* ============================================ the process's life (process/) */

/* For process/hooks.c: each call is what the core does at that event. */
/* main returned status: the exit status the profile records. */
void ml_lifecycle_main_returned(int status);
/* exit(status) was called (the first of main's return and exit wins). */
void ml_lifecycle_exit_called(int status);
/* _exit/_Exit: writes the profile now (atexit handlers will not run). */
void ml_lifecycle_underscore_exit(int status);
/* quick_exit(status) was called; its at_quick_exit handlers run next. */
void ml_lifecycle_quick_exit(int status);
/* The program's at_quick_exit handlers have run (memline's handler,
 * registered first, runs last): writes the profile, as at _exit. */
void ml_lifecycle_quick_exit_handlers_done(void);
/* pthread_exit on this thread (the main thread may end the process so). */
void ml_lifecycle_thread_exit(void);
/* abort() was called: writes the profile (as for SIGABRT) when memline's
 * handler would catch SIGABRT, and gives SIGABRT its default action back. */
void ml_signals_before_abort(void);
/* Just before an exec: writes the profile (if exec fails, recording goes
 * on and the next write replaces the same file). */
void ml_lifecycle_before_exec(void);
/* Around the real dlclose: keeps the unloaded module in the module map
 * and forgets cached unwind rules for its addresses, when it went away
 * (begin's result goes to end). */
uint64_t ml_lifecycle_dlclose_begin(void);
void ml_lifecycle_dlclose_end(uint64_t begin);

/* The program's sigaction and signal calls: memline's fatal-signal handler
 * stays installed where the program sets SIG_DFL, and is never seen: the
 * program reads back exactly the action it set.  Rooms' signal_taken
 * callbacks run first.  Same results and errno as libc's (core/signals.c). */
int ml_signals_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
typedef void (*ml_sighandler_t)(int);
ml_sighandler_t ml_signals_signal(int sig, ml_sighandler_t handler);

/* A room takes sig for itself (lineprof: SIGPROF) and installs act.  The
 * program keeps reading back the action sig had before; when it sets an
 * action of its own, the room's signal_taken runs first and must let go
 * (ml_signals_release, then restore what it wants).  Not for the fatal
 * signals the core manages.  Returns 0 or -errno; call at start-up
 * (core/sigclaim.c). */
int ml_signals_claim(int sig, const struct sigaction *act);
void ml_signals_release(int sig);

/* ============================================================= threads */

/* Makes sure the core's and every room's thread_end run when the calling
 * thread ends (its start routine returns, pthread_exit, cancellation; the
 * main thread's pthread_exit).  Takes no pthread key.  Idempotent and
 * cheap once done; may allocate through libc with the guard held.  Returns
 * false when the thread's end cannot be seen (it is already ending): then
 * the caller keeps no per-thread resource. */
bool ml_thread_watch(void);
/* True once this thread's thread_end callbacks have run. */
bool ml_thread_ended(void);

/* ================================================================ rooms */

/* How a hook room plugs into the core's life, in place of calling other
 * rooms.  Every callback is optional (NULL).  Rooms register from a
 * constructor (ML_ROOM below), before the core starts; callbacks then run
 * in registration order, which is unspecified between rooms: a room must
 * not depend on another room's callbacks. */
struct ml_room {
	const char *name;
	/* At start-up, in the runtime's constructor on the main thread, after
	 * the core started (never when it could not).  May read the
	 * environment, install handlers, use the arena; must not fail: trouble
	 * is one warning and the room stays off. */
	void (*start)(void);
	/* In a fork child (atfork), after the core reset its own state; also
	 * when the child does not record (MEMLINE_FOLLOW=0). */
	void (*fork_child)(void);
	/* The calling thread is ending, after ml_thread_watch: release what
	 * the room keeps for it (a timer, a record).  Runs on that thread,
	 * guard held; a thread that never called ml_thread_watch may end
	 * without it. */
	void (*thread_end)(void);
	/* The program installs its own action for sig (sigaction with an
	 * action, signal); before it is installed. */
	void (*signal_taken)(int sig);
	/* At every stack capture (allocations, and samples through
	 * ml_core_decorate_stack): may rewrite frames[0..depth), innermost
	 * first, in place within cap slots (e.g. the Python room puts Python
	 * frames in place of the interpreter's), and set ML_STACK_* bits in
	 * *flags.  Returns the new depth.  Runs with the guard held, maybe in a
	 * signal handler: async-signal-safe, no malloc, no locks. */
	uint32_t (*decorate_stack)(uint64_t *frames, uint32_t depth, uint32_t cap,
				   uint32_t *flags);
	/* At an allocation's capture, when this room is the only one that
	 * decorates: the stack id that the full capture decorated by
	 * decorate_stack would give, found faster (its frames through
	 * ml_core_stack_child, its native ones with ml_core_native_until),
	 * or 0: the full capture runs.  memo: stack_memo_size bytes of the
	 * calling thread's own, zeroed when made and when a new thread takes
	 * the thread state over.  Guard held, on the side stack; never in a
	 * signal handler.  NULL: none. */
	uint32_t (*stack_id)(void *memo, struct ml_intern_cache *ic);
	uint32_t stack_memo_size;
	/* Asked once after start: whether this process needs decorate_stack
	 * (NULL: yes).  While no room does, captures take the core's fast
	 * unwinder (e.g. the Python room: only in a Python interpreter). */
	bool (*decorates)(void);
	/* In a Python process whose interpreter the Python room follows: once
	 * the interpreter runs the program (its first cpython.run_* audit
	 * event), on that thread, GIL and guard held.  A room may call the
	 * Python C API here, e.g. add an audit hook of its own: added now, the
	 * interpreter allocates its entry with the allocators it frees it with
	 * (-X dev, PYTHONMALLOC=debug), which a hook added before it started
	 * would not be.  Keeps no Python error pending. */
	void (*python_ready)(void);
	/* The Python room only: ml_core_python_audit_remove. */
	int (*python_audit_remove)(int (*hook)(const char *event, void *args, void *data));
	/* Appends the room's sections to the profile being written (after the
	 * core's own), with w's ml_writer_begin/put/record/end.  Runs at exit,
	 * before exec and in fatal-signal handlers: async-signal-safe. */
	void (*write_sections)(struct ml_writer *w);
};

/* Adds room (static storage, never freed) to the registry.  Call from a
 * constructor (ML_ROOM).  At most ML_ROOMS_MAX rooms; more is a warning. */
#define ML_ROOMS_MAX 8
void ml_room_register(const struct ml_room *room);

/* Registers the struct ml_room named var from a constructor that runs
 * before the core's (constructor priority 101; the core starts at 102). */
#define ML_ROOM(var) \
	__attribute__((constructor(101))) static void ml_room_register_##var(void) \
	{ \
		ml_room_register(&(var)); \
	}

#endif
