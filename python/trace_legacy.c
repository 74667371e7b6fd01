/* python/trace_legacy.c - line events on CPython 3.10 and 3.11: a C trace
 * function (PyEval_SetTrace), the channel sys.settrace uses, so its events
 * are exactly the ones a sys.settrace function sees.  It is on for a thread
 * only while a decorated function runs there (the decorator's wrapper calls
 * enable and disable around each call and each step of a generator or
 * coroutine): code outside decorated functions runs untraced, at full
 * speed.  Frames of other code called meanwhile get f_trace_lines = 0 at
 * their call event, so their lines raise no callback.  A trace function the
 * thread had before (a debugger, coverage) is kept and called for every
 * event, and its frames keep their line events. */
#include <string.h>
#include "core/core.h"
#include "python/internal.h"
#include "python/tracer.h"

/* What the decorator's wrappers did on this thread. */
struct legacy_thread {
	int depth;			/* enable() calls not yet matched by disable() */
	ml_pyt_tracefunc prev;		/* the thread's trace function before ours */
	void *prev_obj;			/* its argument: a reference held here */
	uint64_t last_frame;		/* the frame of the last event, and its code */
	struct ml_pyt_code *last_code;
};
static __thread struct legacy_thread ml_tl_pyt_legacy __attribute__((tls_model("initial-exec")));

/* Offsets into PyFrameObject and PyThreadState, from the 3.10 and 3.11
 * headers; each is trusted only after the boot script's probe (below) saw
 * it hold what it should on this very interpreter. */
struct legacy_layout {
	int trace_lines;	/* PyFrameObject.f_trace_lines (char) */
	int code;		/* 3.10 f_code; 3.11 f_frame (then ->f_code at 32) */
	int lasti;		/* 3.10 f_lasti (int, code units) */
	int tracefunc, traceobj;	/* PyThreadState.c_tracefunc, c_traceobj */
};
static const struct legacy_layout layout_310 = { 84, 32, 96, 64, 80 };
static const struct legacy_layout layout_311 = { 44, 24, -1, 72, 88 };
static const struct legacy_layout *L;
int ml_pyt_frame_trace_lines_offset = -1;
static bool frame_code_ok, tstate_ok;

static int tracefunc(void *obj, void *frame, int what, void *arg);

int ml_pyt_legacy_expected_offset(void)
{
	uint32_t minor = (ml_py.version >> 16) & 0xff;
	L = minor == 10 ? &layout_310 : minor == 11 ? &layout_311 : NULL;
	return L ? L->trace_lines : -1;
}

/* ---- reading frames and the thread state ---- */

static uint64_t load64(uint64_t addr)
{
	uint64_t v;
	memcpy(&v, (const void *)(uintptr_t)addr, sizeof(v));
	return v;
}

static uint64_t code_of(void *frame)
{
	uint64_t f = (uint64_t)(uintptr_t)frame;
	if (frame_code_ok)
		return L == &layout_311 ? load64(load64(f + 24) + 32) : load64(f + 32);
	void *code = ml_pyt_api.frame_code(frame);	/* a new reference */
	if (code)
		ml_py.api.decref(code);
	return (uint64_t)(uintptr_t)code;
}

/* Whether frame has not run yet: a call, not a generator resumed. */
static bool fresh(void *frame, uint64_t code)
{
	if (L == &layout_310) {
		int lasti;
		memcpy(&lasti, (const char *)frame + L->lasti, sizeof(lasti));
		return lasti < 0;
	}
	/* 3.11: the call event comes from the frame's first RESUME, at
	 * _co_firsttraceable; a resumption's RESUME comes later. */
	int32_t first;
	memcpy(&first, (const void *)(uintptr_t)(code + ml_py.layout->co_firsttraceable), 4);
	return ml_pyt_api.frame_lasti(frame) / 2 <= first;
}

/* The thread's trace function now, when the probe found where it is. */
static bool current_trace(void *tstate, ml_pyt_tracefunc *fn, void **obj)
{
	if (!tstate_ok || !tstate)
		return false;
	memcpy(fn, (const char *)tstate + L->tracefunc, sizeof(*fn));
	memcpy(obj, (const char *)tstate + L->traceobj, sizeof(*obj));
	return true;
}

/* ---- the probe: are the offsets right on this interpreter? ---- */

static int probe_trace(void *obj, void *frame, int what, void *arg)
{
	(void)obj, (void)frame, (void)what, (void)arg;
	return 0;
}

/* Sets the frame's f_trace_lines from Python and reads it raw. */
static bool trace_lines_byte_is(void *frame, void *value, char want)
{
	if (ml_pyt_api.set_attr(frame, "f_trace_lines", value) < 0) {
		ml_pyt_api.err_clear();
		return false;
	}
	return ((const char *)frame)[L->trace_lines] == want;
}

/* Sets a trace function of ours and finds it, and its argument, where the
 * offsets say.  Only on a thread without a trace function (nothing read
 * there is ever used as an object before it checks out). */
static void probe_tstate(void)
{
	void *ts = ml_pyt_api.thread_state(), *marker = ml_pyt_api.true_obj;
	ml_pyt_api.set_trace(probe_trace, marker);
	ml_pyt_tracefunc fn = NULL;
	void *obj = NULL;
	tstate_ok = true;	/* for current_trace; confirmed below */
	current_trace(ts, &fn, &obj);
	tstate_ok = fn == probe_trace && obj == marker;
	ml_pyt_api.set_trace(NULL, NULL);
}

bool ml_pyt_legacy_probe(void *frame, bool untraced)
{
	if (!L || !frame)
		return false;
	void *code = ml_pyt_api.frame_code(frame);
	frame_code_ok = false;
	if (code) {
		uint64_t f = (uint64_t)(uintptr_t)frame;
		uint64_t raw = L == &layout_311 ? load64(load64(f + 24) + 32) : load64(f + 32);
		frame_code_ok = raw == (uint64_t)(uintptr_t)code;
		ml_py.api.decref(code);
	}
	bool lines_ok = trace_lines_byte_is(frame, ml_pyt_api.false_obj, 0) &&
			trace_lines_byte_is(frame, ml_pyt_api.true_obj, 1);
	ml_pyt_frame_trace_lines_offset = lines_ok ? L->trace_lines : -1;
	tstate_ok = false;
	if (untraced)
		probe_tstate();
	return tstate_ok;
}

/* ---- enable, disable ---- */

static void install(struct legacy_thread *t)
{
	ml_pyt_tracefunc fn = NULL;
	void *obj = NULL;
	if (current_trace(ml_pyt_api.thread_state(), &fn, &obj) && fn != tracefunc) {
		if (t->prev_obj)
			ml_py.api.decref(t->prev_obj);
		t->prev = fn;
		t->prev_obj = obj;
		if (obj)
			ml_pyt_api.incref(obj);
	}
	t->last_frame = 0;
	ml_pyt_api.set_trace(tracefunc, NULL);
}

static bool ours_now(void)
{
	ml_pyt_tracefunc fn = NULL;
	void *obj = NULL;
	return !current_trace(ml_pyt_api.thread_state(), &fn, &obj) || fn == tracefunc;
}

void ml_pyt_legacy_enable(void)
{
	struct legacy_thread *t = &ml_tl_pyt_legacy;
	/* Installed again when the program set its own meanwhile. */
	if (t->depth++ == 0 || !ours_now())
		install(t);
}

void ml_pyt_legacy_disable(void)
{
	struct legacy_thread *t = &ml_tl_pyt_legacy;
	if (t->depth == 0 || --t->depth > 0)
		return;
	/* The program's own trace function, set meanwhile, stays. */
	if (ours_now())
		ml_pyt_api.set_trace(t->prev, t->prev_obj);
	if (t->prev_obj)
		ml_py.api.decref(t->prev_obj);
	t->prev = NULL;
	t->prev_obj = NULL;
	t->last_frame = 0;
}

/* ---- the trace function ---- */

/* The decorated code frame runs, or NULL (then its lines are turned off,
 * unless another trace function wants them). */
static struct ml_pyt_code *decorated(struct legacy_thread *t, void *frame)
{
	uint64_t f = (uint64_t)(uintptr_t)frame;
	if (f == t->last_frame)
		return t->last_code;
	struct ml_pyt_code *c = ml_pyt_find(code_of(frame));
	t->last_frame = f;
	t->last_code = c;
	if (!c && !t->prev && ml_pyt_frame_trace_lines_offset >= 0)
		((char *)frame)[ml_pyt_frame_trace_lines_offset] = 0;
	return c;
}

static int tracefunc(void *obj, void *frame, int what, void *arg)
{
	(void)obj;
	struct legacy_thread *t = &ml_tl_pyt_legacy;
	struct ml_pyt_code *c;
	switch (what) {
	case ML_PYTRACE_CALL:
		t->last_frame = 0;	/* a new frame may have an old one's address */
		if ((c = decorated(t, frame)) && fresh(frame, c->code))
			ml_pyt_on_start((uint64_t)(uintptr_t)frame, c, 0);
		break;
	case ML_PYTRACE_LINE:
		if ((c = decorated(t, frame)))
			ml_pyt_on_line((uint64_t)(uintptr_t)frame, c, ml_pyt_api.frame_line(frame), 0);
		break;
	case ML_PYTRACE_RETURN:
		if ((c = decorated(t, frame)))
			ml_pyt_on_exit((uint64_t)(uintptr_t)frame, 0);
		t->last_frame = 0;
		break;
	}
	return t->prev ? t->prev(t->prev_obj, frame, what, arg) : 0;
}
