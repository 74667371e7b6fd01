/* memline.h - named regions for memline's region report (`memline report
 * regions`), for C and C++.  Header only; install it anywhere on the include
 * path.  Costs one compare and branch per call when the program does not run
 * under memline: the entry points are weak symbols that only libmemline.so
 * (preloaded by `memline run`) defines.
 *
 *   memline_push("step");  ...  memline_pop();     regions nest per thread
 *   MEMLINE_REGION("load") { ... }                 C: a scoped region
 *   { memline::region r("load"); ... }             C++: RAII
 *
 * A region's time is wall time from push to pop; its memory is the heap
 * bytes the thread allocated meanwhile.  Regions of the same name under the
 * same parent are merged; NVTX ranges (nvtxRangePushA/Pop, StartA/End) are
 * recorded the same way. */
#ifndef MEMLINE_H
#define MEMLINE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Defined by libmemline.so; NULL when it is not loaded. */
extern void memline_region_push(const char *name) __attribute__((weak));
extern void memline_region_pop(void) __attribute__((weak));

/* Opens region name (copied; at most 127 bytes kept) inside the calling
 * thread's innermost open region. */
static inline void memline_push(const char *name)
{
	if (memline_region_push)
		memline_region_push(name);
}

/* Closes the calling thread's innermost open region. */
static inline void memline_pop(void)
{
	if (memline_region_pop)
		memline_region_pop();
}

/* MEMLINE_REGION("name") { body }: push before the body, pop after it
 * (do not leave the body with break, goto or return). */
#define MEMLINE_REGION(name) \
	for (int memline_once_ = (memline_push(name), 1); memline_once_; \
	     memline_once_ = 0, memline_pop())

#ifdef __cplusplus
}

namespace memline {
/* A region open for the lifetime of the object. */
class region {
public:
	explicit region(const char *name) { memline_push(name); }
	~region() { memline_pop(); }
	region(const region &) = delete;
	region &operator=(const region &) = delete;
};
}
#endif

#endif
