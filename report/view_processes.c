/* report/view_processes.c - the processes view: every process of one or more
 * runs as a tree (what started what), with how it began and ended, its rank
 * and host in a distributed job, and its heap totals, so that a run's
 * processes, or a job's ranks, can be compared side by side. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "report/report.h"
#include "report/units.h"

static const char *rank_source_name(uint32_t s)
{
	switch (s) {
	case ML_RANK_TORCH: return "torch";
	case ML_RANK_OPENMPI: return "openmpi";
	case ML_RANK_PMI: return "pmi";
	case ML_RANK_PMIX: return "pmix";
	case ML_RANK_SLURM: return "slurm";
	default: return NULL;
	}
}

/* "exit 0", "_exit 3", "SIGTERM", "exec", "pthread_exit". */
static void end_text(const struct ml_fmt_meta *m, char *buf, size_t len)
{
	switch (m->end_reason) {
	case ML_END_EXIT:
		snprintf(buf, len, "exit %d", m->end_status);
		break;
	case ML_END_UNDERSCORE_EXIT:
		snprintf(buf, len, "_exit %d", m->end_status);
		break;
	case ML_END_SIGNAL: {
		const char *name = m->end_status > 0 && m->end_status < NSIG ?
			sigabbrev_np(m->end_status) : NULL;
		if (name)
			snprintf(buf, len, "SIG%s", name);
		else
			snprintf(buf, len, "signal %d", m->end_status);
		break;
	}
	case ML_END_EXEC:
		snprintf(buf, len, "exec");
		break;
	case ML_END_THREAD_EXIT:
		snprintf(buf, len, "pthread_exit");
		break;
	default:
		snprintf(buf, len, "?");
	}
}

/* Live bytes of the GPU kinds at their combined peak, or 0. */
static uint64_t gpu_peak(const struct ml_profile *p)
{
	if (p->kinds_present & (1u << ML_KIND_CUDA_GPU))
		return p->totals[ML_KIND_CUDA_GPU].peak_bytes;
	uint64_t sum = 0;
	for (uint32_t k = 0; k < ML_KIND_COUNT; k++)
		if ((p->kinds_present & (1u << k)) && ml_kind_is_gpu((enum ml_kind)k))
			sum += p->totals[k].peak_bytes;
	return sum;
}

struct columns {
	bool rank, host, gpu;
	bool python;		/* a Python program among them: the CPU columns are cpu's */
	uint64_t t0;		/* earliest start of the run shown */
};

static void header_line(FILE *out, const struct columns *c)
{
	fprintf(out, "  %7s %7s %-5s", "PID", "PPID", "How");
	if (c->rank)
		fprintf(out, " %5s", "Rank");
	if (c->host)
		fprintf(out, " %-16s", "Host");
	fprintf(out, " %9s %9s %-12s %11s %11s %11s", "Start", "Time", "End", c->python ? "CPU Peak" : "Heap Peak",
		"Allocated", "Leaked");
	if (c->gpu)
		fprintf(out, " %11s", "GPU Peak");
	fprintf(out, "  Program\n");
}

/* The process's CPU memory: the heap's totals, with a Python program's
 * objects added (they share the heap's peak: common/kinds.h). */
static struct ml_fmt_total cpu_totals(const struct ml_profile *p)
{
	struct ml_fmt_total t = p->totals[ML_KIND_HEAP];
	if (p->kinds_present & (1u << ML_KIND_PYTHON)) {
		const struct ml_fmt_total *py = &p->totals[ML_KIND_PYTHON];
		t.allocs += py->allocs;
		t.alloc_bytes += py->alloc_bytes;
		t.frees += py->frees;
		t.freed_bytes += py->freed_bytes;
		t.live_blocks += py->live_blocks;
		t.live_bytes += py->live_bytes;
		if (py->peak_bytes > t.peak_bytes)
			t.peak_bytes = py->peak_bytes;
	}
	return t;
}

static void proc_line(FILE *out, const struct ml_runset *rs, size_t i, const struct columns *c)
{
	const struct ml_proc *pr = &rs->procs[i];
	const struct ml_profile *p = pr->p;
	const struct ml_fmt_total cpu = cpu_totals(p), *h = &cpu;
	char end[32], peak[ML_UNITS_LEN], alloc[ML_UNITS_LEN], leak[ML_UNITS_LEN];
	char start[ML_UNITS_LEN], took[ML_UNITS_LEN], gpu[ML_UNITS_LEN];
	uint64_t s = p->meta.start_realtime_ns;
	end_text(&p->meta, end, sizeof(end));
	fprintf(out, "%c %7llu %7llu %-5s", pr->main ? '*' : ' ', (unsigned long long)p->meta.pid,
		(unsigned long long)p->process.parent_pid, ml_proc_start_name(pr->start));
	if (c->rank) {
		if (p->process.rank >= 0)
			fprintf(out, " %5lld", (long long)p->process.rank);
		else
			fprintf(out, " %5s", "-");
	}
	if (c->host)
		fprintf(out, " %-16.16s", p->process.host);
	fprintf(out, " %9s %9s %-12s %11s %11s %11s",
		ml_units_seconds(s > c->t0 ? s - c->t0 : 0, start, sizeof(start)),
		ml_units_seconds(p->meta.duration_ns, took, sizeof(took)), end,
		ml_units_bytes(h->peak_bytes, peak, sizeof(peak)),
		ml_units_bytes(h->alloc_bytes, alloc, sizeof(alloc)),
		ml_units_bytes(h->live_bytes, leak, sizeof(leak)));
	if (c->gpu)
		fprintf(out, " %11s", ml_units_bytes(gpu_peak(p), gpu, sizeof(gpu)));
	fprintf(out, "  %*s%s", (int)(2 * pr->depth), "", ml_proc_program(pr));
	/* The arguments after argv[0], cut to keep the line readable. */
	size_t shown = 0;
	for (uint32_t a = 1; a < p->meta.argc && shown < 60; a++) {
		fprintf(out, " %.*s", (int)(60 - shown), p->argv[a]);
		shown += strlen(p->argv[a]) + 1;
	}
	fputs(shown >= 60 ? " ...\n" : "\n", out);
	for (size_t w = 0; w < p->n_warnings; w++)
		fprintf(out, "  %*s  (warning: %s)\n", 7 + 8 + 6, "", p->warnings[w].text);
}

static void text_view(FILE *out, const struct ml_runset *rs)
{
	size_t lo = 0;
	for (size_t r = 0; r < rs->n_runs; lo += rs->runs[r++].n_procs) {
		const struct ml_run *run = &rs->runs[r];
		struct columns c = { false, false, false, false, UINT64_MAX };
		const char *host0 = NULL;
		for (size_t i = lo; i < lo + run->n_procs; i++) {
			const struct ml_profile *p = rs->procs[i].p;
			c.rank |= p->process.rank >= 0;
			c.gpu |= gpu_peak(p) > 0;
			c.python |= (p->kinds_present >> ML_KIND_PYTHON) & 1;
			if (!host0)
				host0 = p->process.host;
			c.host |= strcmp(host0, p->process.host) != 0;
			if (p->meta.start_realtime_ns < c.t0)
				c.t0 = p->meta.start_realtime_ns;
		}
		if (r)
			fputc('\n', out);
		if (run->dir)
			fprintf(out, "Run %s: %zu process%s", run->dir, run->n_procs,
				run->n_procs == 1 ? "" : "es");
		else
			fprintf(out, "Profiles named one by one: %zu", run->n_procs);
		if (run->main != ML_NO_PROC)
			fprintf(out, "; main program (*): %s, pid %llu",
				ml_proc_program(&rs->procs[run->main]),
				(unsigned long long)rs->procs[run->main].p->meta.pid);
		else if (run->dir && run->run_pid)
			fprintf(out, "; the main program (pid %llu) left no profile",
				(unsigned long long)run->run_pid);
		if (host0 && host0[0] && !c.host)
			fprintf(out, "; host %s", host0);
		fputs("\n\n", out);
		header_line(out, &c);
		for (size_t i = lo; i < lo + run->n_procs; i++)
			proc_line(out, rs, i, &c);
	}
}

static void proc_json(struct ml_json *j, const struct ml_runset *rs, size_t i)
{
	const struct ml_proc *pr = &rs->procs[i];
	const struct ml_profile *p = pr->p;
	const struct ml_fmt_total cpu = cpu_totals(p), *h = &cpu;
	char end[32];
	end_text(&p->meta, end, sizeof(end));
	ml_json_object_begin(j);
	ml_json_key(j, "path");
	ml_json_string(j, p->path);
	ml_json_key(j, "run");
	ml_json_u64(j, pr->run);
	ml_json_key(j, "pid");
	ml_json_u64(j, p->meta.pid);
	ml_json_key(j, "parent_pid");
	ml_json_u64(j, p->process.parent_pid);
	ml_json_key(j, "parent");
	if (pr->parent == ML_NO_PROC)
		ml_json_null(j);
	else
		ml_json_u64(j, pr->parent);
	ml_json_key(j, "started_by");
	ml_json_string(j, ml_proc_start_name(pr->start));
	ml_json_key(j, "depth");
	ml_json_u64(j, pr->depth);
	ml_json_key(j, "main");
	ml_json_bool(j, pr->main);
	ml_json_key(j, "program");
	ml_json_string(j, ml_proc_program(pr));
	ml_json_key(j, "argv");
	ml_json_array_begin(j);
	for (uint32_t a = 0; a < p->meta.argc; a++)
		ml_json_string(j, p->argv[a]);
	ml_json_array_end(j);
	ml_json_key(j, "rank");
	ml_json_i64(j, p->process.rank);
	ml_json_key(j, "local_rank");
	ml_json_i64(j, p->process.local_rank);
	ml_json_key(j, "world_size");
	ml_json_i64(j, p->process.world_size);
	ml_json_key(j, "rank_from");
	ml_json_string(j, rank_source_name(p->process.rank_source));
	ml_json_key(j, "host");
	ml_json_string(j, p->process.host);
	ml_json_key(j, "start_realtime_ns");
	ml_json_u64(j, p->meta.start_realtime_ns);
	ml_json_key(j, "duration_ns");
	ml_json_u64(j, p->meta.duration_ns);
	ml_json_key(j, "end");
	ml_json_string(j, end);
	ml_json_key(j, "heap");
	ml_json_object_begin(j);
	ml_json_key(j, "kind");	/* cpu: heap + Python objects, one peak */
	ml_json_string(j, ml_kind_name(ml_report_default_kind(p)));
	ml_json_key(j, "peak_bytes");
	ml_json_u64(j, h->peak_bytes);
	ml_json_key(j, "alloc_bytes");
	ml_json_u64(j, h->alloc_bytes);
	ml_json_key(j, "allocs");
	ml_json_u64(j, h->allocs);
	ml_json_key(j, "leaked_bytes");
	ml_json_u64(j, h->live_bytes);
	ml_json_key(j, "leaked_blocks");
	ml_json_u64(j, h->live_blocks);
	ml_json_object_end(j);
	ml_json_key(j, "gpu_peak_bytes");
	ml_json_u64(j, gpu_peak(p));
	ml_json_key(j, "warnings");
	ml_json_array_begin(j);
	for (size_t w = 0; w < p->n_warnings; w++) {
		ml_json_object_begin(j);
		ml_json_key(j, "text");
		ml_json_string(j, p->warnings[w].text);
		ml_json_key(j, "shown");
		ml_json_bool(j, p->warnings[w].shown);
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
	ml_json_object_end(j);
}

static void json_view(struct ml_json *j, const struct ml_runset *rs)
{
	ml_json_object_begin(j);
	ml_json_key(j, "schema");
	ml_json_string(j, "memline.report");
	ml_json_key(j, "version");
	ml_json_u64(j, 1);
	ml_json_key(j, "view");
	ml_json_string(j, "processes");
	ml_json_key(j, "runs");
	ml_json_array_begin(j);
	for (size_t r = 0; r < rs->n_runs; r++) {
		ml_json_object_begin(j);
		ml_json_key(j, "dir");
		ml_json_string(j, rs->runs[r].dir);
		ml_json_key(j, "run_pid");
		ml_json_u64(j, rs->runs[r].run_pid);
		ml_json_key(j, "main");
		if (rs->runs[r].main == ML_NO_PROC)
			ml_json_null(j);
		else
			ml_json_u64(j, rs->runs[r].main);
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
	ml_json_key(j, "processes");
	ml_json_array_begin(j);
	for (size_t i = 0; i < rs->n; i++)
		proc_json(j, rs, i);
	ml_json_array_end(j);
	ml_json_object_end(j);
	ml_json_finish(j);
}

void ml_report_processes(const struct ml_runset *rs, FILE *out, struct ml_json *j)
{
	if (j)
		json_view(j, rs);
	else
		text_view(out, rs);
}
