/* core/rooms.c - the registry through which hook rooms plug into the core
 * (struct ml_room, core/core.h): start-up, fork children, signals the
 * program takes, stack decorators and profile sections.  Rooms never call
 * each other; the core calls them here, in registration order. */
#include <errno.h>
#include <string.h>
#include "core/internal.h"

static const struct ml_room *rooms[ML_ROOMS_MAX];
static uint32_t n_rooms;
static uint32_t decorating_mask;	/* bit i: rooms[i] decorates (set at start) */
volatile int ml_rooms_decorating;
/* The one decorating room, when it gives stack ids itself (set at start). */
static const struct ml_room *stack_room;

_Static_assert(ML_CORE_STACK_ROOT == ML_NODE_ROOT && ML_CORE_STACK_LOST == ML_NODE_LOST,
	       "the trie's roots as rooms see them");

/* Constructors run one at a time, before any thread: no lock needed. */
void ml_room_register(const struct ml_room *room)
{
	if (n_rooms == ML_ROOMS_MAX) {
		ml_warn("too many hook rooms; one is left out");
		return;
	}
	rooms[n_rooms++] = room;
}

void ml_rooms_start(void)
{
	for (uint32_t i = 0; i < n_rooms; i++) {
		if (rooms[i]->start)
			rooms[i]->start();
		if (rooms[i]->decorate_stack &&
		    (!rooms[i]->decorates || rooms[i]->decorates())) {
			decorating_mask |= 1u << i;
			ml_rooms_decorating = 1;
		}
	}
	ml_stacktab_set_mode();	/* ml_capture_fast: off while rooms decorate */
	for (uint32_t i = 0; i < n_rooms; i++)
		if (decorating_mask == 1u << i && rooms[i]->stack_id && rooms[i]->stack_memo_size)
			stack_room = rooms[i];
}

uint32_t ml_rooms_stack_id(struct ml_intern_cache *ic)
{
	const struct ml_room *r = stack_room;
	struct ml_thread *t;
	if (!r || !(t = ml_thread_self()))
		return 0;
	if (__builtin_expect(!t->room_memo, 0) &&
	    !(t->room_memo = ml_arena_alloc(r->stack_memo_size)))
		return 0;
	return r->stack_id(t->room_memo, ic);
}

void ml_rooms_memo_reset(void *memo)
{
	if (memo && stack_room)
		memset(memo, 0, stack_room->stack_memo_size);
}

uint32_t ml_core_stack_child(struct ml_intern_cache *ic, uint32_t parent, uint64_t address)
{
	return ml_stacktab_child_cached(ic, parent, address);
}

uint32_t ml_core_native_stack(struct ml_intern_cache *ic)
{
	return ml_unwind_native_stack(ic);
}

uint32_t ml_core_stack_path(uint32_t id, uint64_t *ras, uint32_t max)
{
	uint32_t n = 0;
	while (id > ML_NODE_LOST) {
		uint32_t parent;
		uint64_t address;
		if (n == max)
			return UINT32_MAX;
		ml_stacktab_node(id, &parent, &address);
		if (ras)
			ras[n] = address;
		n++;
		id = parent;
	}
	return id == ML_NODE_ROOT ? n : UINT32_MAX;
}

uint32_t ml_core_stack_join(struct ml_intern_cache *ic, uint32_t parent, uint32_t native)
{
	uint64_t frames[ML_DEPTH_MAX];
	uint32_t n = ml_core_stack_path(native, frames, ML_DEPTH_MAX);
	if (n == UINT32_MAX)
		return 0;
	uint32_t above = ml_core_stack_path(parent, frames + n, ML_DEPTH_MAX - n);
	if (above == UINT32_MAX)
		return 0;
	return ml_stacktab_intern(ic, frames, n + above, 0);
}

int ml_core_native_until(struct ml_native_path *out, uint64_t *buf, uint32_t max, uint64_t lo,
			 uint64_t span)
{
	return ml_unwind_until(out, buf, max, lo, span);
}

void ml_rooms_fork_child(void)
{
	for (uint32_t i = 0; i < n_rooms; i++)
		if (rooms[i]->fork_child)
			rooms[i]->fork_child();
}

void ml_rooms_signal_taken(int sig)
{
	for (uint32_t i = 0; i < n_rooms; i++)
		if (rooms[i]->signal_taken)
			rooms[i]->signal_taken(sig);
}

void ml_rooms_thread_end(void)
{
	for (uint32_t i = 0; i < n_rooms; i++)
		if (rooms[i]->thread_end)
			rooms[i]->thread_end();
}

void ml_core_python_ready(void)
{
	for (uint32_t i = 0; i < n_rooms; i++)
		if (rooms[i]->python_ready)
			rooms[i]->python_ready();
}

int ml_core_python_audit_remove(int (*hook)(const char *event, void *args, void *data))
{
	for (uint32_t i = 0; i < n_rooms; i++)
		if (rooms[i]->python_audit_remove)
			return rooms[i]->python_audit_remove(hook);
	return -ENOENT;
}

void ml_rooms_write_sections(struct ml_writer *w)
{
	for (uint32_t i = 0; i < n_rooms; i++)
		if (rooms[i]->write_sections)
			rooms[i]->write_sections(w);
}

uint32_t ml_rooms_decorate(uint64_t *frames, uint32_t depth, uint32_t cap, uint32_t *flags)
{
	ML_ASSERT(depth <= cap);
	for (uint32_t i = 0; i < n_rooms; i++)
		if (decorating_mask & (1u << i)) {
			depth = rooms[i]->decorate_stack(frames, depth, cap, flags);
			ML_ASSERT(depth <= cap);
		}
	return depth;
}

uint32_t ml_core_decorate_stack(uint64_t *frames, uint32_t depth, uint32_t cap,
				uint32_t *flags)
{
	return ml_rooms_decorating ? ml_rooms_decorate(frames, depth, cap, flags) : depth;
}
