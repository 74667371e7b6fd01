/* lineprof/spans.c - each completed region on the time axis: the first
 * ML_SPANS_MAX (region, thread, start, end) records, later ones counted.
 * Lock-free: a slot is claimed with one atomic add and published by its
 * region id, stored last. */
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/core.h"
#include "lineprof/internal.h"

static struct ml_fmt_span spans[ML_SPANS_MAX];
static uint64_t n_claimed;	/* slots handed out, dropped ones included */
static __thread uint32_t tl_span_tid __attribute__((tls_model("initial-exec")));

uint32_t ml_lp_span_tid(void)
{
	if (!tl_span_tid)
		tl_span_tid = (uint32_t)syscall(SYS_gettid);
	return tl_span_tid;
}

void ml_lp_span_add(uint32_t region, uint32_t tid, uint64_t start_mono_ns, uint64_t end_mono_ns)
{
	uint64_t i = __atomic_fetch_add(&n_claimed, 1, __ATOMIC_RELAXED);
	if (i >= ML_SPANS_MAX || !region)
		return;
	/* since start-up, on the same clock (CLOCK_MONOTONIC) */
	uint64_t t0 = ml_clock_start_mono_ns();
	struct ml_fmt_span *s = &spans[i];
	s->tid = tid;
	s->start_ns = start_mono_ns > t0 ? start_mono_ns - t0 : 0;
	s->end_ns = end_mono_ns > t0 ? end_mono_ns - t0 : 0;
	if (s->end_ns < s->start_ns)
		s->end_ns = s->start_ns;
	__atomic_store_n(&s->region, region, __ATOMIC_RELEASE);
}

void ml_lp_spans_reset(void)
{
	uint64_t n = __atomic_load_n(&n_claimed, __ATOMIC_RELAXED);
	memset(spans, 0, (n < ML_SPANS_MAX ? n : ML_SPANS_MAX) * sizeof(spans[0]));
	n_claimed = 0;
	tl_span_tid = 0;	/* the fork child's thread has a tid of its own */
}

void ml_lp_spans_write(struct ml_writer *w)
{
	uint64_t n = __atomic_load_n(&n_claimed, __ATOMIC_ACQUIRE);
	if (!n)
		return;
	uint64_t kept = n < ML_SPANS_MAX ? n : ML_SPANS_MAX;
	struct ml_fmt_spans_header h = { .dropped = n - kept };
	ml_writer_begin(w, ML_SEC_SPANS);
	ml_writer_put(w, &h, sizeof(h));
	ml_writer_record(w);
	/* A slot claimed but not yet published (its thread is still filling
	 * it in) is left out. */
	for (uint64_t i = 0; i < kept; i++) {
		if (!__atomic_load_n(&spans[i].region, __ATOMIC_ACQUIRE))
			continue;
		struct ml_fmt_span s = spans[i];
		ml_writer_put(w, &s, sizeof(s));
		ml_writer_record(w);
	}
	ml_writer_end(w);
}
