/* python/boot.c - how memline gets into the interpreter without the program's
 * help: an audit hook (PySys_AddAuditHook, registered from the constructor
 * before the interpreter starts) that, at the interpreter's "run" event
 * (cpython.run_file, run_module, run_command, ...; the GIL held, the
 * interpreter fully initialised, before __main__ runs):
 *   1. checks that the frames read raw are the interpreter's frames;
 *   2. wraps the PyMem domains and the arena allocator (hooks.c);
 *   3. hides memline's variables from os.environ (MEMLINE_*, its
 *      LD_PRELOAD entry, NVTX_INJECTION64_PATH naming it) but not from the
 *      C environment: exec'd children must still be profiled;
 *   4. runs the boot scripts (*.py of <libmemline's dir>/python, or of
 *      MEMLINE_PY_BOOT_DIR), each in a namespace of its own.
 * sys.path, sys.modules, __main__ and the environment the program reads
 * stay as they were.  docs/python.md says why not a sitecustomize. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/core.h"
#include "python/internal.h"
#include "python/tracer.h"

#define PY_FILE_INPUT 257	/* Py_file_input */
#define BOOT_SCRIPT_MAX (1u << 20)

struct ml_py_boot_config ml_py_boot_config = { .allocators = true, .frames = true };

static volatile int check_result;	/* layout check: 0 not run, 1 good, -1 bad */
/* The word of _PyRuntime that heads the list of C audit hooks (add_hook);
 * NULL when not found. */
static uint64_t *audit_head;
static volatile uint64_t check_code;	/* the code object the check runs */
static volatile bool gave_up;		/* the layout check failed: no frames */

/* ---- running a little Python, privately ---- */

/* A fresh globals dict with __builtins__, __name__ and __file__ (and, for
 * boot scripts, `_memline`: the line tracer's C functions, when it can run
 * here); NULL on error (a Python exception is then set). */
static void *private_globals(const char *file, bool tracer)
{
	const struct ml_py_api *api = &ml_py.api;
	void *g = api->dict_new();
	if (!g)
		return NULL;
	void *name = api->unicode_from ? api->unicode_from("__memline_boot__") : NULL;
	void *path = api->unicode_from ? api->unicode_from(file) : NULL;
	int rc = api->dict_set(g, "__builtins__", api->builtins());
	if (name && rc == 0)
		rc = api->dict_set(g, "__name__", name);
	if (path && rc == 0)
		rc = api->dict_set(g, "__file__", path);
	void *ns = tracer && rc == 0 ? ml_pyt_namespace() : NULL;
	if (ns) {
		rc = api->dict_set(g, "_memline", ns);
		api->decref(ns);
	}
	if (name)
		api->decref(name);
	if (path)
		api->decref(path);
	if (rc < 0) {
		api->decref(g);
		return NULL;
	}
	return g;
}

/* Warns "what: <the pending exception>" and clears it. */
static void warn_exception(const char *what)
{
	const struct ml_py_api *api = &ml_py.api;
	void *type = NULL, *value = NULL, *tb = NULL;
	api->err_fetch(&type, &value, &tb);
	const char *text = NULL;
	void *s = value && api->object_str ? api->object_str(value) : NULL;
	if (s && api->unicode_utf8)
		text = api->unicode_utf8(s);
	char msg[512];
	snprintf(msg, sizeof(msg), "%s: %s", what, text ? text : "a Python exception");
	ml_warn(msg);
	/* The str's own failure (if any) is dropped with the rest. */
	void *t2 = NULL, *v2 = NULL, *tb2 = NULL;
	api->err_fetch(&t2, &v2, &tb2);
	void *drop[] = { s, type, value, tb, t2, v2, tb2 };
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (drop[i])
			api->decref(drop[i]);
}

/* Compiles src as file and runs it in a private namespace (with
 * `_memline` when tracer).  Returns 0, or
 * -1 after warning about the exception it raised. */
static int run_source(const char *src, const char *file, const char *what, bool tracer)
{
	const struct ml_py_api *api = &ml_py.api;
	void *code = api->compile(src, file, PY_FILE_INPUT, NULL, -1);
	void *g = code ? private_globals(file, tracer) : NULL;
	void *result = g ? api->eval_code(code, g, g) : NULL;
	if (result)
		api->decref(result);
	else
		warn_exception(what);
	if (g)
		api->decref(g);
	if (code)
		api->decref(code);
	return result ? 0 : -1;
}

/* ---- 1. the layout check ---- */

/* Runs at the "memline.layout_check" event, inside the check's own code:
 * the innermost frame read raw must be that code, and the code object
 * must copy as "<module>" of "<memline>". */
static int frames_match(void)
{
	uint64_t frames[4];
	uint32_t flags = 0;
	uint32_t n = ml_py_walk_unchecked(frames, 0, 4, &flags, 0);
	if (n == 0 || ml_pyframe_hidden(frames[0]))
		return -1;
	struct ml_py_reader r = { .safe = false, .lookup_only = false, .failed = false };
	const struct ml_py_code *c = ml_py_code_get(&r, check_code);
	if (!c || c->id != ml_pyframe_code(frames[0]))
		return -1;
	static const char file[] = "<memline>", name[] = "<module>";
	bool ok = c->filename_len == sizeof(file) - 1 && memcmp(c->data, file, sizeof(file) - 1) == 0 &&
		  c->name_len == sizeof(name) - 1 &&
		  memcmp(c->data + c->filename_len, name, sizeof(name) - 1) == 0;
	return ok ? 1 : -1;
}

static bool check_layout(void)
{
	const struct ml_py_api *api = &ml_py.api;
	void *code = api->compile("__import__('sys').audit('memline.layout_check')\n", "<memline>",
				  PY_FILE_INPUT, NULL, -1);
	if (!code) {
		warn_exception("cannot check the interpreter's frames");
		return false;
	}
	check_code = (uint64_t)(uintptr_t)code;
	void *g = private_globals("<memline>", false);
	void *result = g ? api->eval_code(code, g, g) : NULL;
	if (result)
		api->decref(result);
	else
		warn_exception("cannot check the interpreter's frames");
	if (g)
		api->decref(g);
	api->decref(code);
	return check_result == 1;
}

/* ---- 3. os.environ without memline's variables ---- */

/* Only when os is imported already (the program would see an import). */
static const char hide_environ_src[] =
	"import sys\n"
	"os = sys.modules.get('os')\n"
	"data = getattr(getattr(os, 'environ', None), '_data', None)\n"
	"if isinstance(data, dict):\n"
	"    for key in [k for k in data if isinstance(k, bytes) and k.startswith(b'MEMLINE_')]:\n"
	"        del data[key]\n"
	"    for key in (b'NVTX_INJECTION64_PATH', b'NVTX_INJECTION32_PATH'):\n"
	"        if b'libmemline' in data.get(key, b''):\n"
	"            del data[key]\n"
	"    pre = data.get(b'LD_PRELOAD')\n"
	"    if isinstance(pre, bytes):\n"
	"        kept = [p for p in pre.replace(b' ', b':').split(b':') if p and b'libmemline' not in p]\n"
	"        if kept:\n"
	"            data[b'LD_PRELOAD'] = b':'.join(kept)\n"
	"        else:\n"
	"            del data[b'LD_PRELOAD']\n";

/* ---- 4. boot scripts ---- */

static int is_script(const struct dirent *d)
{
	size_t n = strlen(d->d_name);
	return n > 3 && d->d_name[0] != '.' && strcmp(d->d_name + n - 3, ".py") == 0;
}

/* Reads a whole file (regular, under BOOT_SCRIPT_MAX) into a malloc'd,
 * NUL-terminated buffer; NULL on failure. */
static char *read_script(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *buf = NULL;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < BOOT_SCRIPT_MAX &&
	    (buf = malloc((size_t)st.st_size + 1))) {
		size_t got = 0;
		while (got < (size_t)st.st_size) {
			ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		buf[got] = '\0';
	}
	close(fd);
	return buf;
}

static void run_boot_scripts(void)
{
	const char *dir = ml_py_boot_config.boot_dir;
	struct dirent **names = NULL;
	int n = dir[0] ? scandir(dir, &names, is_script, alphasort) : -1;
	if (n < 0 && dir[0]) {
		/* a runtime copied without its python/ folder: say why a script
		 * written for kernprof stops at NameError: 'profile' */
		char msg[PATH_MAX + 160];
		snprintf(msg, sizeof(msg), "no boot scripts in %s: @profile and the memline module "
			 "are not defined (keep python/ beside libmemline.so)", dir);
		ml_warn(msg);
	}
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX + 256], what[PATH_MAX + 300];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		snprintf(what, sizeof(what), "boot script %s failed", path);
		char *src = read_script(path);
		if (src)
			run_source(src, path, what, true);
		free(src);
		free(names[i]);
	}
	free(names);
}

static void boot(void)
{
	const struct ml_py_api *api = &ml_py.api;
	void *type = NULL, *value = NULL, *tb = NULL;
	api->err_fetch(&type, &value, &tb);	/* the program's pending error, kept */
	if (!getcwd(ml_py.cwd, sizeof(ml_py.cwd)))
		ml_py.cwd[0] = '\0';
	if (check_layout()) {
		ml_py.walking = ml_py_boot_config.frames;
	} else {
		gave_up = true;
		char msg[160];
		snprintf(msg, sizeof(msg), "cannot read the frames of Python %u.%u.%u; "
			 "its profile has native frames only", ml_py.version >> 24,
			 (ml_py.version >> 16) & 0xff, (ml_py.version >> 8) & 0xff);
		ml_warn(msg);
	}
	if (ml_py_boot_config.allocators && !gave_up && ml_py_hooks_install() == 0)
		ml_py.flags |= ML_PY_ALLOCATORS;
	run_source(hide_environ_src, "<memline>", "cannot hide memline's variables from os.environ",
		   false);
	run_boot_scripts();
	ml_core_python_ready();	/* other rooms' turn (e.g. PyTorch's audit hook) */
	api->err_restore(type, value, tb);
}

static bool is_run_event(const char *event)
{
	static const char *const runs[] = { "run_file", "run_module", "run_command", "run_stdin",
					    "run_startup", "run_interactivehook" };
	if (strncmp(event, "cpython.", 8) != 0)
		return false;
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++)
		if (strcmp(event + 8, runs[i]) == 0)
			return true;
	return false;
}

/* ---- the interpreter's list of C audit hooks ---- */

/* Takes (take) or releases the runtime's lock over the list, as
 * PySys_AddAuditHook does: the word before the head (_PyRuntime.audit_hooks
 * is {mutex, head} since 3.12: 3.12's a PyThread_type_lock, 3.13's a
 * PyMutex), for an interpreter with a GIL of its own may be adding a hook.
 * 3.10 and 3.11 have none: every adder holds the one GIL, as we do.
 * Returns false when the lock is not what it should be: then the list is
 * left alone. */
static bool list_lock(bool take)
{
	const struct ml_py_api *api = &ml_py.api;
	unsigned minor = (ml_py.version >> 16) & 0xff;
	if (minor < 12)
		return true;
	uint64_t word = audit_head[-1], probe;
	struct ml_py_reader r = { .safe = true };
	if (minor == 12) {
		if (!word || (word & 7) || !api->lock_acquire || !api->lock_release ||
		    !ml_py_read(&r, &probe, word, sizeof(probe)))
			return false;
		if (take)
			api->lock_acquire((void *)(uintptr_t)word, 1);	/* WAIT_LOCK */
		else
			api->lock_release((void *)(uintptr_t)word);
		return true;
	}
	/* PyMutex: one byte (locked 1, parked 2), then padding */
	if ((word & ~(uint64_t)3) || !api->mutex_lock || !api->mutex_unlock)
		return false;
	if (take)
		api->mutex_lock(&audit_head[-1]);
	else
		api->mutex_unlock(&audit_head[-1]);
	return true;
}

/* The list: entries {next, hook, userData}, appended by PySys_AddAuditHook
 * and only ever removed, and freed, by _PySys_ClearAuditHooks at the
 * interpreter's end.  An event's loop reads an entry's next after calling
 * its hook: an entry taken out keeps its next, is never freed, and the
 * loop goes on past it.  Returns 0 or -ENOENT. */
static int unlink_entry(ml_py_audit_fn hook)
{
	uint64_t *link = audit_head;
	for (unsigned n = 0; *link && n < 4096; n++) {
		uint64_t *entry = (uint64_t *)(uintptr_t)*link;
		if (entry[1] == (uint64_t)(uintptr_t)hook) {
			__atomic_store_n(link, entry[0], __ATOMIC_RELEASE);
			return 0;
		}
		link = &entry[0];
	}
	return -ENOENT;
}

int ml_py_audit_remove(ml_py_audit_fn hook)
{
	if (!audit_head || !list_lock(true))
		return -ENOENT;
	int rc = unlink_entry(hook);
	list_lock(false);
	return rc;
}

/* ---- the audit hook ---- */

/* Called by the interpreter for every audit event, with the GIL held,
 * until the end of boot, when the hook leaves the list (without a hook,
 * CPython builds no event's arguments).  Never raises (returns 0). */
static int audit(const char *event, void *args, void *data)
{
	(void)args;
	(void)data;
	/* Still here at the interpreter's end (no run event: an embedding
	 * program; or a list lock not as expected), just before it frees the
	 * entries: ours leaves the list, never to be freed, as it always could
	 * (one thread is left).  It was allocated by PyMem_RawMalloc in our
	 * constructor, before the interpreter set up its allocators; under -X
	 * dev or PYTHONMALLOC=debug the RawFree at its end would be the debug
	 * allocator's, which aborts on a block it did not allocate. */
	if (event[0] == 'c' && strcmp(event, "cpython._PySys_ClearAuditHooks") == 0) {
		if (audit_head)
			unlink_entry(audit);
		return 0;
	}
	if (event[0] == 'm' && strcmp(event, "memline.layout_check") == 0) {
		if (!check_result)
			check_result = frames_match();
		return 0;
	}
	if (ml_py.booted)
		return 0;
	/* Only python's main raises these (an embedding program gets native
	 * frames and malloc'd objects only: docs/python.md). */
	if (is_run_event(event)) {
		ml_py.booted = true;	/* first: boot's own events come back here */
		bool guarded = ml_guard_enter_always();
		boot();
		ml_py_audit_remove(audit);	/* nothing left to do */
		if (guarded)
			ml_guard_exit();
	}
	return 0;
}

/* Registers the audit hook and finds where the runtime keeps our entry:
 * the word of _PyRuntime that the registration turned from 0 into a
 * pointer to an entry naming our hook ({next, hook, data}).  Read through
 * the safe reader: no guess is dereferenced plainly. */
static int add_hook(void)
{
	size_t size = ml_py.runtime_size & ~(size_t)7;
	uint64_t *before = NULL;
	if (ml_py.runtime && size && size <= (64u << 20)) {
		before = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (before == MAP_FAILED)
			before = NULL;
		else
			memcpy(before, ml_py.runtime, size);
	}
	if (ml_py.api.add_audit_hook(audit, NULL) != 0) {
		if (before)
			munmap(before, size);
		return -ENOSYS;
	}
	if (!before)
		return 0;
	uint64_t *now = ml_py.runtime;
	uint64_t *found = NULL;
	for (size_t i = 0; i < size / 8; i++) {
		uint64_t w = now[i], fields[2];
		struct ml_py_reader r = { .safe = true };
		if (before[i] || !w || (w & 7) || !ml_py_read(&r, fields, w, sizeof(fields)) ||
		    fields[1] != (uint64_t)(uintptr_t)audit)
			continue;
		if (found) {	/* two candidates: touch neither */
			found = NULL;
			break;
		}
		found = &now[i];
	}
	munmap(before, size);
	audit_head = found;
	return 0;
}

int ml_py_boot_init(void)
{
	if (!ml_py_boot_config.boot_dir[0]) {
		/* <dir of libmemline.so>/python */
		Dl_info self;
		if (dladdr((void *)&ml_py_boot_init, &self) && self.dli_fname) {
			const char *slash = strrchr(self.dli_fname, '/');
			size_t len = slash ? (size_t)(slash - self.dli_fname) : 0;
			if (len && len + 8 < sizeof(ml_py_boot_config.boot_dir)) {
				memcpy(ml_py_boot_config.boot_dir, self.dli_fname, len);
				strcpy(ml_py_boot_config.boot_dir + len, "/python");
			}
		}
	}
	return add_hook();
}
