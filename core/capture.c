/* core/capture.c - captures the calling thread's call stack: the cached
 * .eh_frame walker (unwind.c) when it can, libunwind otherwise; drops the
 * runtime's own innermost frames and applies the depth limit. */
#include <string.h>
#include "core/internal.h"
#include "common/sigsafe.h"

struct ml_skip ml_skip;
int ml_capture_fast;

void ml_stacktab_set_skip(uint64_t lo, uint64_t hi)
{
	ml_skip.lo = lo;
	ml_skip.range = hi - lo;
}

void ml_stacktab_set_mode(void)
{
	ml_capture_fast = ml_config.fast_unwind && !ml_config.verify_unwind && !ml_rooms_decorating;
}

/* Inlined into both entry points so that, whichever is used, frame 0 is a
 * return address inside that entry point and frame 1 in its caller. */
static inline __attribute__((always_inline)) uint32_t
capture(uint64_t *buf, uint32_t max_depth, uint32_t *flags, uint32_t *skip)
{
	/* void * and uint64_t are the same on the 64-bit targets we build for;
	 * unwinding straight into buf saves a copy on every allocation. */
	_Static_assert(sizeof(void *) == sizeof(uint64_t), "64-bit only");
	*flags = 0;
	*skip = 0;
	int want = (int)(max_depth + CAPTURE_SLACK + 1);
	int n = -1;
	if (ml_config.fast_unwind)
		n = ml_unwind_fast(buf, (uint32_t)want);	/* cached; -1: declined */
	if (n < 0)
		n = (int)ml_libunwind_capture(buf, (uint32_t)want);
	uint32_t s = 0;
	if (n <= 0) {
		/* Keep counting (totals stay exact) with an empty stack. */
		ml_warn_once("cannot unwind the stack; some allocations have no call stack");
		return 0;
	}
	while (s < (uint32_t)n && buf[s] - ml_skip.lo < ml_skip.range)
		s++;
	uint32_t depth = (uint32_t)n - s;
	if (depth > max_depth) {
		depth = max_depth;
		*flags |= ML_STACK_TRUNCATED;
	}
	*skip = s;
	return depth;
}

uint32_t ml_stacktab_capture_raw(uint64_t *buf, uint32_t max_depth, uint32_t *flags,
				 uint32_t *skip)
{
	return capture(buf, max_depth, flags, skip);
}

uint32_t ml_stacktab_capture(uint64_t *frames, uint32_t max_depth, uint32_t *flags)
{
	uint64_t buf[ML_CAPTURE_BUF];
	uint32_t skip;
	uint32_t depth = capture(buf, max_depth, flags, &skip);
	memcpy(frames, buf + skip, depth * sizeof(uint64_t));
	return depth;
}

uint32_t ml_stack_capture(uint64_t *frames, uint32_t max, uint32_t *flags)
{
	uint64_t buf[ML_CAPTURE_BUF];
	uint32_t skip;
	if (max > ML_DEPTH_MAX)
		max = ML_DEPTH_MAX;
	uint32_t depth = capture(buf, max, flags, &skip);
	memcpy(frames, buf + skip, depth * sizeof(uint64_t));
	return depth;
}

/* MEMLINE_VERIFY_UNWIND: stacks checked, and those that differed. */
static uint64_t verified, differed;

/* Compares stack (from the walker's node cache) with what libunwind finds
 * from here, the runtime's own frames dropped: frame for frame, to the
 * same outermost frame.  Counts a difference (and says the first one). */
void __attribute__((noinline)) ml_stacktab_verify(uint32_t stack)
{
	uint64_t buf[ML_CAPTURE_BUF];
	if (!ml_libunwind_ready())
		return;	/* nothing to compare with */
	int n = (int)ml_libunwind_capture(buf, ML_CAPTURE_BUF);
	uint32_t s = 0, id = stack, i = 0;
	while (s < (uint32_t)(n > 0 ? n : 0) && buf[s] - ml_skip.lo < ml_skip.range)
		s++;
	for (; id >= ML_NODE_FIRST && s + i < (uint32_t)n; i++) {
		uint32_t parent;
		uint64_t address;
		ml_stacktab_node(id, &parent, &address);
		if (address != buf[s + i])
			break;
		id = parent;
	}
	__atomic_add_fetch(&verified, 1, __ATOMIC_RELAXED);
	if (id >= ML_NODE_FIRST || s + i != (uint32_t)n) {
		if (__atomic_add_fetch(&differed, 1, __ATOMIC_RELAXED) == 1)
			ml_warn("MEMLINE_VERIFY_UNWIND: a stack differs from libunwind's");
	}
}

void ml_stacktab_verify_report(void)
{
	char line[128], num[24];
	size_t pos = 0;
	if (!ml_config.verify_unwind)
		return;
	line[0] = '\0';
	ml_sigsafe_append(line, sizeof(line), &pos, "MEMLINE_VERIFY_UNWIND: ");
	ml_sigsafe_utoa(num, verified);
	ml_sigsafe_append(line, sizeof(line), &pos, num);
	ml_sigsafe_append(line, sizeof(line), &pos, " stacks checked against libunwind, ");
	ml_sigsafe_utoa(num, differed);
	ml_sigsafe_append(line, sizeof(line), &pos, num);
	ml_sigsafe_append(line, sizeof(line), &pos, " differ");
	ml_warn(line);
}

/* The full capture (libunwind, decorators) into a buffer on the side
 * stack: apart, so that the fast path (ml_unwind_stack) sets up no large
 * frame. */
uint32_t __attribute__((noinline)) ml_stacktab_here_slow(struct ml_intern_cache *cache)
{
	uint64_t buf[ML_CAPTURE_BUF];
	uint32_t flags, skip;
	uint32_t depth = capture(buf, ml_config.max_depth, &flags, &skip);
	if (__builtin_expect(ml_rooms_decorating, 0)) {
		/* The whole buffer: a decorator may add frames past max_depth
		 * native ones (the Python room: up to ML_PYFRAMES_MAX). */
		uint32_t cap = ML_CAPTURE_BUF - skip;
		depth = ml_rooms_decorate(buf + skip, depth, cap, &flags);
	}
	if (flags & ML_STACK_TRUNCATED)
		__atomic_or_fetch(&ml_core_flags, ML_META_TRUNCATED_STACKS, __ATOMIC_RELAXED);
	return ml_stacktab_intern(cache, buf + skip, depth, flags);
}

/* MEMLINE_VERIFY_UNWIND with a room's stack id (ml_rooms_stack_id): the
 * stack libunwind finds from here (the runtime's own frames dropped, cut
 * at the depth limit) decorated by the rooms, as here_slow makes it, must
 * be the very node the room gave. */
static void __attribute__((noinline)) verify_room(uint32_t stack, struct ml_intern_cache *cache)
{
	uint64_t buf[ML_CAPTURE_BUF];
	uint32_t flags = 0, s = 0;
	if (!ml_libunwind_ready())
		return;
	int n = (int)ml_libunwind_capture(buf, ML_CAPTURE_BUF);
	while (s < (uint32_t)(n > 0 ? n : 0) && buf[s] - ml_skip.lo < ml_skip.range)
		s++;
	uint32_t depth = (uint32_t)(n > 0 ? n : 0) - s;
	if (depth > ml_config.max_depth) {
		depth = ml_config.max_depth;
		flags |= ML_STACK_TRUNCATED;
	}
	depth = ml_rooms_decorate(buf + s, depth, ML_CAPTURE_BUF - s, &flags);
	uint32_t want = ml_stacktab_intern(cache, buf + s, depth, flags);
	__atomic_add_fetch(&verified, 1, __ATOMIC_RELAXED);
	if (want != stack && __atomic_add_fetch(&differed, 1, __ATOMIC_RELAXED) == 1)
		ml_warn("MEMLINE_VERIFY_UNWIND: a stack a room gave differs from libunwind's");
}

uint32_t ml_stacktab_here_rooms(struct ml_intern_cache *cache)
{
	uint32_t node = ml_config.fast_unwind ? ml_rooms_stack_id(cache) : 0;
	if (!node)
		return ml_stacktab_here_slow(cache);
	if (__builtin_expect(ml_config.verify_unwind, 0) && node != ML_NODE_LOST)
		verify_room(node, cache);
	return node;
}
