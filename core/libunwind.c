/* core/libunwind.c - everything the runtime asks of libunwind: loading it,
 * its set-up, stack capture from here (the fallback of core/unwind.c's
 * walker) and from a signal context (the line timer's samples).
 *
 * Loading it.  libunwind is not linked: the runtime loads it with
 * dlopen(RTLD_LOCAL) at start-up and calls it through a table.  Linked, it
 * and liblzma (its dependency) would join the program's global scope, and
 * every symbol look-up of every library loaded later (an import torch makes
 * millions) would search both in vain.  Without libunwind the runtime
 * still runs: stacks its own walker cannot take are left empty.
 *
 * Taming it.  Left alone, libunwind takes two of the program's descriptors
 * at start-up (a pipe it reads and writes to test whether an address is
 * readable, and reopens when the program closed it) and, in unw_backtrace,
 * one of the program's pthread keys.  A program that closes inherited
 * descriptors and opens its own files on those numbers would then have
 * bytes read from and written to its files.  So: its local address space's
 * memory accessor is replaced by ours, which tests readability without any
 * descriptor (process_vm_readv on ourselves, or rt_sigprocmask reading the
 * word where that call is forbidden); the pipe it made is closed; and
 * captures walk with unw_step, never through unw_backtrace's keyed cache.
 * Nor may a capture touch libunwind's thread-local storage: a dlopen'ed
 * library's is allocated (malloc) at each thread's first use, which may be
 * in the line timer's signal handler.  unw_backtrace's cache is the only
 * user in libunwind 1.6; later versions keep the per-thread cache of unwind
 * info there, so the global one is asked for.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include "core/internal.h"
#include "common/sigsafe.h"

/* libunwind's soname since 1.1. */
#define LIBUNWIND_SONAME "libunwind.so.8"
/* The symbol a libunwind.h name stands for ("_ULx86_64_step"). */
#define SYMBOL(name) SYMBOL_(name)
#define SYMBOL_(name) #name

/* The libunwind calls the runtime makes, typed by libunwind.h's own
 * declarations (which are never called directly: no symbol of libunwind
 * is referenced at link time). */
static struct {
	__typeof__(unw_tdep_getcontext) *getcontext;
	__typeof__(unw_init_local) *init_local;
	__typeof__(unw_init_local2) *init_local2;
	__typeof__(unw_step) *step;
	__typeof__(unw_get_reg) *get_reg;
	__typeof__(unw_get_accessors) *get_accessors;
	__typeof__(unw_flush_cache) *flush_cache;
	__typeof__(unw_set_caching_policy) *set_caching_policy;
	__typeof__(unw_local_addr_space) *local_addr_space;
} unw;
/* Set once unw is filled and libunwind tamed; never cleared. */
static volatile int unw_ready;

#define PAGE_MASK_ (~(uint64_t)4095)
#define GOOD_PAGES 8u

/* Pages found readable during the current capture on this thread.  Reset
 * at every capture, so that a page unmapped since is never trusted. */
static __thread uint64_t tl_good[GOOD_PAGES] __attribute__((tls_model("initial-exec")));
static __thread uint32_t tl_good_next __attribute__((tls_model("initial-exec")));
static volatile int use_sigmask;	/* process_vm_readv is forbidden here */

/* True when the 8-byte word at addr (8-aligned, so on one page) can be
 * read, into *val.  No descriptor; async-signal-safe. */
static bool read_checked(uint64_t addr, uint64_t *val)
{
	int saved = errno;
	bool ok = false;
	if (!use_sigmask) {
		struct iovec local = { val, sizeof(*val) }, remote = { (void *)addr, sizeof(*val) };
		ssize_t n = syscall(SYS_process_vm_readv, getpid(), &local, 1UL, &remote, 1UL, 0UL);
		if (n == (ssize_t)sizeof(*val))
			ok = true;
		else if (n < 0 && (errno == EPERM || errno == ENOSYS || errno == EACCES))
			use_sigmask = 1;	/* seccomp or an old kernel: the other way */
	}
	if (use_sigmask && !ok) {
		/* The kernel reads the 8-byte set at addr, or fails with EFAULT;
		 * the mask it blocked for an instant is put back at once. */
		uint64_t old = 0;
		if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, (void *)addr, &old, 8UL) == 0) {
			syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8UL);
			*val = *(const volatile uint64_t *)(uintptr_t)addr;
			ok = true;
		}
	}
	errno = saved;
	return ok;
}

static bool page_known_good(uint64_t page)
{
	for (uint32_t i = 0; i < GOOD_PAGES; i++)
		if (tl_good[i] == page)
			return true;
	return false;
}

/* libunwind's local accessor, without its pipe.  In libunwind 1.6 the
 * accessor's argument carries "validate" in its low bit (libunwind sets it
 * where unwind info is missing or doubtful); older versions pass a cursor
 * (always even), and then every read is checked. */
static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write,
		      void *arg)
{
	(void)as;
	if (write) {
		*(unw_word_t *)addr = *val;
		return 0;
	}
#if UNW_VERSION_MAJOR > 1 || (UNW_VERSION_MAJOR == 1 && UNW_VERSION_MINOR >= 6)
	bool validate = ((uintptr_t)arg & 1) != 0;
#else
	bool validate = true;
#endif
	if (!validate) {
		*val = *(const unw_word_t *)addr;
		return 0;
	}
	uint64_t page = addr & PAGE_MASK_;
	if (!page || (addr & 7))
		return -UNW_EINVAL;
	if (page_known_good(page)) {
		*val = *(const unw_word_t *)addr;
		return 0;
	}
	uint64_t v;
	if (!read_checked(addr, &v))
		return -UNW_EINVAL;
	tl_good[tl_good_next++ % GOOD_PAGES] = page;
	*val = v;
	return 0;
}

/* The two lowest free descriptors from 0 (where pipe2 puts its ends). */
static void lowest_free_two(int out[2])
{
	int found = 0;
	for (int fd = 0; found < 2 && fd < 65536; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
			out[found++] = fd;
	if (found < 2)
		out[0] = out[1] = -1;
}

/* True when a and b are the two ends of one pipe, non-blocking, as
 * libunwind makes its validation pipe. */
static bool is_validation_pipe(int a, int b)
{
	struct stat sa, sb;
	if (a < 0 || b < 0 || fstat(a, &sa) < 0 || fstat(b, &sb) < 0)
		return false;
	int fa = fcntl(a, F_GETFL), fb = fcntl(b, F_GETFL);
	return S_ISFIFO(sa.st_mode) && S_ISFIFO(sb.st_mode) && sa.st_ino == sb.st_ino &&
		sa.st_dev == sb.st_dev && fa >= 0 && fb >= 0 && (fa & O_NONBLOCK) &&
		(fa & O_ACCMODE) == O_RDONLY && (fb & O_ACCMODE) == O_WRONLY;
}

/* Sets loaded libunwind up, as the file's comment says.  Returns 0 or
 * -ENOSYS (no accessors to replace: it keeps its own). */
static int tame(void)
{
	/* libunwind opens its pipe on first use: on the two lowest free
	 * descriptors (start-up runs before the program's threads). */
	int fds[2];
	lowest_free_two(fds);
	unw_addr_space_t space = *unw.local_addr_space;
	unw_accessors_t *acc = unw.get_accessors(space);
	if (is_validation_pipe(fds[0], fds[1])) {
		close(fds[0]);
		close(fds[1]);
	}
	if (!acc)
		return -ENOSYS;
	/* From here on libunwind reads memory only through access_mem: its
	 * pipe (now closed) is never used again. */
	acc->access_mem = access_mem;
	unw.flush_cache(space, 0, 0);
	/* Not UNW_CACHE_PER_THREAD: thread-local (the file's comment).  The
	 * global cache is what libunwind 1.6 as Debian builds it gave for
	 * either (it has no per-thread one): a lock that blocks signals. */
	unw.set_caching_policy(space, UNW_CACHE_GLOBAL);
	return 0;
}

/* Fills unw from lib; false when a symbol is missing. */
static bool bind(void *lib)
{
	const struct {
		const char *name;
		void **at;
	} calls[] = {
		{ SYMBOL(unw_tdep_getcontext), (void **)&unw.getcontext },
		{ SYMBOL(unw_init_local), (void **)&unw.init_local },
		{ SYMBOL(unw_init_local2), (void **)&unw.init_local2 },
		{ SYMBOL(unw_step), (void **)&unw.step },
		{ SYMBOL(unw_get_reg), (void **)&unw.get_reg },
		{ SYMBOL(unw_get_accessors), (void **)&unw.get_accessors },
		{ SYMBOL(unw_flush_cache), (void **)&unw.flush_cache },
		{ SYMBOL(unw_set_caching_policy), (void **)&unw.set_caching_policy },
		{ SYMBOL(unw_local_addr_space), (void **)&unw.local_addr_space },
	};
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		if (!(*calls[i].at = dlsym(lib, calls[i].name)))
			return false;
	return true;
}

static void warn_not_loaded(const char *why)
{
	char line[320];
	size_t pos = 0;
	line[0] = '\0';
	ml_sigsafe_append(line, sizeof(line), &pos, "cannot load " LIBUNWIND_SONAME " (");
	ml_sigsafe_append(line, sizeof(line), &pos, why ? why : "no reason given");
	ml_sigsafe_append(line, sizeof(line), &pos,
			  "); stacks memline's own walker cannot take are left empty");
	ml_warn(line);
}

int ml_libunwind_init(bool anytime)
{
	static int tried;
	if (tried)
		return unw_ready ? 0 : -ENOENT;
	/* A dlopen or dlclose under way (maybe the very call that allocated):
	 * the loader's lists are half changed, no time to load another. */
	if (!anytime && _r_debug.r_state != RT_CONSISTENT)
		return -EAGAIN;
	tried = 1;
	/* (A library without all the calls stays loaded, unused: local, it
	 * costs the program's look-ups nothing.) */
	void *lib = dlopen(LIBUNWIND_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!lib || !bind(lib)) {
		warn_not_loaded(lib ? "a call is missing" : dlerror());
		return -ENOENT;
	}
	int rc = tame();
	__atomic_store_n(&unw_ready, 1, __ATOMIC_RELEASE);
	return rc;
}

bool ml_libunwind_ready(void)
{
	return __atomic_load_n(&unw_ready, __ATOMIC_ACQUIRE);
}

/* Copies the cursor's frames into frames[0..max). */
static uint32_t walk(unw_cursor_t *c, uint64_t *frames, uint32_t max, uint32_t *flags)
{
	uint32_t n = 0;
	do {
		unw_word_t ip;
		if (unw.get_reg(c, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		if (n == max) {
			*flags |= ML_STACK_TRUNCATED;
			break;
		}
		frames[n++] = (uint64_t)ip;
	} while (unw.step(c) > 0);
	return n;
}

uint32_t __attribute__((noinline)) ml_libunwind_capture(uint64_t *frames, uint32_t max)
{
	unw_context_t uc;
	unw_cursor_t c;
	uint32_t flags = 0;
	if (!ml_libunwind_ready())
		return 0;
	tl_good_next = 0;
	memset(tl_good, 0, sizeof(tl_good));
	if (unw.getcontext(&uc) < 0 || unw.init_local(&c, &uc) < 0)
		return 0;
	return walk(&c, frames, max, &flags);
}

uint32_t ml_stack_capture_context(void *ucontext, uint64_t *frames, uint32_t max,
				  uint32_t *flags)
{
	unw_cursor_t c;
	if (!ml_libunwind_ready())
		return 0;
	tl_good_next = 0;
	memset(tl_good, 0, sizeof(tl_good));
	if (unw.init_local2(&c, (unw_context_t *)ucontext, UNW_INIT_SIGNAL_FRAME) < 0)
		return 0;
	return walk(&c, frames, max, flags);
}
