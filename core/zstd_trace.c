/* core/zstd_trace.c - libzstd's tracing hooks, as no-ops, for the runtime's
 * copy of libzstd (the archive, linked in: Makefile).  The archive leaves
 * them as weak references for the program to define; unresolved there, they
 * would stay in the runtime's dynamic symbol table, to be looked up in the
 * program's scope at start-up and, where a program defined them, called
 * with the runtime's compression.  Defined here, hidden, they bind inside
 * the runtime.  Their types are libzstd's (zstd_trace.h, not installed):
 * ZSTD_TraceCtx is an unsigned long long, 0 meaning "not traced". */
struct ZSTD_CCtx_s;

/* 0: this compression is not traced (so compress_end is never called). */
unsigned long long ZSTD_trace_compress_begin(const struct ZSTD_CCtx_s *cctx)
{
	(void)cctx;
	return 0;
}

void ZSTD_trace_compress_end(unsigned long long ctx, const void *trace)
{
	(void)ctx;
	(void)trace;
}
