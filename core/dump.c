/* core/dump.c - writes the profile file (common/format.h) through
 * common/writer.h: META, MODULES, FRAMES, STACKS, COUNTERS, TOTALS, TIMELINE,
 * PROCESS, WARNINGS, then the rooms' own sections (rooms.c), on the
 * runtime's own stack (ownstack.c).
 * No malloc, no stdio: it runs at exit, before exec and in signal handlers.
 * File name: <dir>/memline.<prog>.<pid>.mlp, or .<pid>.<n>.mlp when an exec'd
 * predecessor with the same pid already wrote that name. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "core/internal.h"
#include "common/sigsafe.h"
#include "common/writer.h"

static struct ml_writer writer;
static char cmdline[65536];
static char exe[PATH_MAX];
static char my_path[PATH_MAX];	/* the name this process wrote, if any */
static pid_t my_path_pid;
static int busy;
static volatile pid_t writer_tid;	/* the thread writing, while busy */

/* Reads a whole small file into buf; returns its length (0 on error). */
static size_t read_file(const char *path, char *buf, size_t cap)
{
	int fd = ml_sigsafe_fd_private(open(path, O_RDONLY | O_CLOEXEC));
	size_t len = 0;
	if (fd < 0)
		return 0;
	while (len < cap) {
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	return len;
}

/* The program name for the file name: the executable's base name, with
 * anything but [A-Za-z0-9._+-] replaced by '_'. */
static void prog_name(char *out, size_t cap)
{
	const char *base = strrchr(exe, '/');
	base = base ? base + 1 : exe;
	size_t n = 0;
	for (; *base && n + 1 < cap; base++, n++) {
		char c = *base;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(c >= '0' && c <= '9') || c == '.' || c == '_' || c == '+' || c == '-';
		out[n] = ok ? c : '_';
	}
	if (!n)
		memcpy(out, "prog", (n = 4));
	out[n] = '\0';
}

/* "<dir>/memline.<prog>.<pid>[.<n>].mlp"; false if too long. */
static bool make_path(char *out, size_t cap, uint32_t n)
{
	char prog[256], num[24];
	size_t pos = 0;
	out[0] = '\0';
	prog_name(prog, sizeof(prog));
	ml_sigsafe_utoa(num, (uint64_t)getpid());
	const char *parts[] = { ml_config.output_dir, "/memline.", prog, ".", num };
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		if (!ml_sigsafe_append(out, cap, &pos, parts[i]))
			return false;
	if (n) {
		ml_sigsafe_utoa(num, n);
		if (!ml_sigsafe_append(out, cap, &pos, ".") || !ml_sigsafe_append(out, cap, &pos, num))
			return false;
	}
	return ml_sigsafe_append(out, cap, &pos, ".mlp");
}

/* ---- sections ---- */

static size_t cmdline_len;
/* Signals that wait while the profile is written (ml_dump_write). */
static sigset_t async_fatal;

void ml_dump_init(void)
{
	sigemptyset(&async_fatal);
	ml_signals_add_async(&async_fatal, ml_signals_line_timer());
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	cmdline_len = read_file("/proc/self/cmdline", cmdline, sizeof(cmdline));
}

static void put_meta(uint32_t reason, int32_t status)
{
	size_t exe_len = strlen(exe);
	/* Re-read (the program may have rewritten its argv); once the main
	 * thread has exited /proc/self reads empty: keep the start-up copy. */
	size_t argv_len = read_file("/proc/self/cmdline", cmdline, sizeof(cmdline));
	if (argv_len == 0)
		argv_len = cmdline_len;
	else
		cmdline_len = argv_len;
	uint32_t argc = 0, flags = ml_core_flags;
	if (argv_len == sizeof(cmdline)) {	/* cut: end on a whole argument */
		flags |= ML_META_ARGV_CUT;
		while (argv_len && cmdline[argv_len - 1] != '\0')
			argv_len--;
	}
	for (size_t i = 0; i < argv_len; i++)
		argc += cmdline[i] == '\0';
	struct ml_fmt_meta m = {
		.pid = (uint64_t)getpid(),
		.ppid = (uint64_t)getppid(),
		.start_realtime_ns = ml_clock_start_realtime_ns(),
		.duration_ns = ml_clock_elapsed_ns(),
		.end_reason = reason,
		.end_status = status,
		.max_depth = ml_config.max_depth,
		.flags = flags | (ml_config.sample_bytes ? ML_META_SAMPLED : 0),
		.exe_len = (uint32_t)exe_len,
		.argv_len = (uint32_t)argv_len,
		.argc = argc,
	};
	ml_writer_begin(&writer, ML_SEC_META);
	ml_writer_put(&writer, &m, sizeof(m));
	ml_writer_put(&writer, exe, exe_len);
	ml_writer_put(&writer, cmdline, argv_len);
	ml_writer_record(&writer);
	ml_writer_end(&writer);
}

static void put_module(const struct ml_module_rec *m, void *arg)
{
	struct ml_fmt_module r = {
		.bias = m->bias, .lo = m->lo, .hi = m->hi,
		.path_len = m->path_len, .build_id_len = m->build_id_len,
		.flags = m->flags,
	};
	ml_writer_put(&writer, &r, sizeof(r));
	ml_writer_put(&writer, m->path, m->path_len);
	ml_writer_put(&writer, m->build_id, m->build_id_len);
	ml_writer_record(&writer);
}

static void put_totals(struct ml_fmt_total *totals)
{
	ml_writer_begin(&writer, ML_SEC_TOTALS);
	for (uint32_t k = 0; k < ML_KIND_COUNT; k++) {
		struct ml_fmt_total *t = &totals[k];
		struct ml_kind_totals kt;
		if (!t->reserved)
			continue;
		ml_counters_totals(k, &kt);
		t->kind = k;
		t->reserved = 0;
		if (ml_config.sample_bytes) {	/* the counters' fixed point, in blocks */
			uint64_t u = ML_SAMPLE_UNIT;
			uint64_t allocs = (t->allocs + u / 2) / u, live = (t->live_blocks + u / 2) / u;
			t->allocs = allocs;
			t->live_blocks = live;
			t->frees = allocs - live;
		}
		t->peak_bytes = kt.peak_bytes;
		t->peak_time_ns = kt.peak_ns > ml_clock_start_mono_ns() ?
			kt.peak_ns - ml_clock_start_mono_ns() : 0;
		ml_writer_put(&writer, t, sizeof(*t));
		ml_writer_record(&writer);
		t->reserved = 1;
	}
	ml_writer_end(&writer);
}

static void put_point(uint32_t kind, uint64_t ns, uint64_t live, void *arg)
{
	struct ml_fmt_timepoint p = { .kind = kind, .time_ns = ns,
				      .live_bytes = live };
	ml_writer_put(&writer, &p, sizeof(p));
	ml_writer_record(&writer);
}

static void put_timeline(const struct ml_fmt_total *totals)
{
	ml_writer_begin(&writer, ML_SEC_TIMELINE);
	ml_timeline_foreach(put_point, NULL);
	/* A last point per kind: the state when the profile was written (the
	 * timeline of a kind others share the peak of is their sum). */
	uint64_t now = ml_clock_elapsed_ns();
	for (uint32_t k = 0; k < ML_KIND_COUNT; k++) {
		if (!totals[k].reserved || ml_kind_peak_of((enum ml_kind)k) != k)
			continue;
		uint64_t live = 0;
		for (uint32_t m = 0; m < ML_KIND_COUNT; m++)
			if (ml_kind_peak_of((enum ml_kind)m) == k && totals[m].reserved)
				live += totals[m].live_bytes;
		struct ml_fmt_timepoint p = { .kind = k, .time_ns = now, .live_bytes = live };
		ml_writer_put(&writer, &p, sizeof(p));
		ml_writer_record(&writer);
	}
	ml_writer_end(&writer);
}

/* RUNTIME: what memline itself holds (format.h). */
static void put_runtime(void)
{
	struct ml_fmt_runtime r = {
		.live_table_bytes = ml_livetab_bytes(),
		.live_blocks = ml_livetab_count(),
		.stack_bytes = ml_stacktab_bytes(),
		.stack_nodes = ml_stacktab_count(),
		.counter_bytes = ml_thread_bytes(),
		.counters = ml_thread_counter_count(),
		.arena_bytes = ml_arena_used(),
		.threads = ml_thread_count(),
	};
	ml_writer_begin(&writer, ML_SEC_RUNTIME);
	ml_writer_put(&writer, &r, sizeof(r));
	ml_writer_record(&writer);
	ml_writer_end(&writer);
}

/* Gives the file its final name; see the file comment. */
static int commit(void)
{
	if (my_path[0] && my_path_pid == getpid())
		return ml_writer_commit(&writer, my_path, true);
	for (uint32_t n = 0; n < 1000; n++) {
		char path[PATH_MAX];
		if (!make_path(path, sizeof(path), n))
			return -ENAMETOOLONG;
		int rc = ml_writer_commit(&writer, path, false);
		if (rc == -EEXIST)
			continue;
		if (rc == 0) {
			memcpy(my_path, path, sizeof(path));
			my_path_pid = getpid();
		}
		return rc;
	}
	return -EEXIST;
}

static int write_all_sections(uint32_t reason, int32_t status)
{
	struct ml_fmt_total totals[ML_KIND_COUNT];
	char path[PATH_MAX];
	memset(totals, 0, sizeof(totals));
	if (!exe[0])
		ml_dump_init();
	if (!make_path(path, sizeof(path), 0))
		return -ENAMETOOLONG;
	int rc = ml_writer_open(&writer, path, ml_config.file_mode);
	if (rc == -EEXIST) {
		/* A temporary left by an exec'd predecessor (same pid) that died
		 * while writing: it is ours to remove. */
		char tmp[PATH_MAX + 32], num[24];
		size_t pos = 0;
		tmp[0] = '\0';
		ml_sigsafe_utoa(num, (uint64_t)getpid());
		if (ml_sigsafe_append(tmp, sizeof(tmp), &pos, path) &&
		    ml_sigsafe_append(tmp, sizeof(tmp), &pos, ".tmp.") &&
		    ml_sigsafe_append(tmp, sizeof(tmp), &pos, num))
			unlink(tmp);
		rc = ml_writer_open(&writer, path, ml_config.file_mode);
	}
	if (rc < 0)
		return rc;
	if (ml_config.sample_bytes)
		ml_writer_small(&writer);
	if (reason != ML_END_SIGNAL)	/* dl_iterate_phdr takes the loader lock */
		ml_modules_refresh();
	else	/* lock-free: only the modules our stacks point into */
		ml_dump_modules_of_stacks();
	put_meta(reason, status);
	ml_writer_begin(&writer, ML_SEC_MODULES);
	ml_modules_foreach(put_module, NULL);
	ml_writer_end(&writer);
	ml_dump_stacks(&writer, totals);
	put_totals(totals);
	put_timeline(totals);
	put_runtime();
	ml_procinfo_put_section(&writer);
	ml_warn_put_section(&writer);
	ml_rooms_write_sections(&writer);	/* lineprof's samples and regions, ... */
	ml_notes_write(&writer);
	rc = commit();
	if (rc < 0)
		ml_writer_abort(&writer);
	return rc;
}

void ml_dump_after_fork(void)
{
	writer_tid = 0;
	busy = 0;	/* another thread may have been writing at the fork */
}

void ml_dump_wait_other(void)
{
	pid_t me = (pid_t)syscall(SYS_gettid);
	struct timespec ms = { 0, 1000000 };
	while (__atomic_load_n(&busy, __ATOMIC_ACQUIRE) && writer_tid != me)
		nanosleep(&ms, NULL);
}

/* What the writer reports back from the runtime's own stack. */
struct write_job {
	uint32_t reason;
	int32_t status;
};

/* Says in one line why the profile could not be written. */
static void warn_failed(int rc)
{
	char msg[PATH_MAX + 160];
	size_t pos = 0;
	msg[0] = '\0';
	ml_sigsafe_append(msg, sizeof(msg), &pos, "cannot write the profile in ");
	ml_sigsafe_append(msg, sizeof(msg), &pos, ml_config.output_dir);
	ml_sigsafe_append(msg, sizeof(msg), &pos, ": ");
	ml_sigsafe_append_errno(msg, sizeof(msg), &pos, -rc);	/* in words, no malloc */
	if (rc == -EFBIG)
		ml_sigsafe_append(msg, sizeof(msg), &pos,
				  " (it would pass the file size limit, RLIMIT_FSIZE)");
	ml_warn(msg);
}

static int write_job_run(void *arg)
{
	const struct write_job *job = arg;
	int rc = write_all_sections(job->reason, job->status);
	ml_stacktab_verify_report();
	if (rc < 0)
		warn_failed(rc);
	return rc;
}

int ml_dump_write(uint32_t reason, int32_t status)
{
	/* The signals that end a process from outside wait until the file is
	 * complete (SIGTERM as a process exits, say: Pool.terminate; a
	 * SIGALRM); our handler then runs and the process still dies of them. */
	sigset_t quiet = async_fatal, old;
	sigaddset(&quiet, SIGTERM);	/* even before ml_dump_init */
	sigaddset(&quiet, SIGINT);
	sigaddset(&quiet, SIGHUP);
	sigaddset(&quiet, SIGPIPE);
	sigaddset(&quiet, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &quiet, &old);
	if (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE)) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return -EBUSY;
	}
	writer_tid = (pid_t)syscall(SYS_gettid);
	bool guarded = ml_guard_enter_always();
	ML_ASSERT(ml_guard_held());	/* nothing the writer does is recorded */
	int saved_errno = errno;
	/* On the runtime's own stack: the caller's may be a small alternate
	 * signal stack or a coroutine's. */
	struct write_job job = { reason, status };
	int rc = ml_ownstack_run(write_job_run, &job);
	errno = saved_errno;
	if (guarded)
		ml_guard_exit();
	writer_tid = 0;
	__atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}
