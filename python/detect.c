/* python/detect.c - finds a CPython interpreter in the process at start-up:
 * its version, its layout (layout.c), the functions memline calls and the
 * address range of its eval loop.  Only dlsym and dladdr: nothing runs in
 * the interpreter here. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/core.h"
#include "python/internal.h"

struct ml_py_state ml_py;

static void *sym(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

/* PY_VERSION_HEX of the interpreter: Py_Version (3.11+), else parsed from
 * Py_GetVersion() ("3.10.13 (main, ...)"; a static buffer, no malloc). */
static uint32_t version_hex(void)
{
	const unsigned long *v = sym("Py_Version");
	if (v)
		return (uint32_t)*v;
	const char *(*get)(void) = (const char *(*)(void))sym("Py_GetVersion");
	const char *s = get ? get() : NULL;
	if (!s)
		return 0;
	char *end;
	unsigned long major = strtoul(s, &end, 10), minor = 0, micro = 0;
	if (*end == '.')
		minor = strtoul(end + 1, &end, 10);
	if (*end == '.')
		micro = strtoul(end + 1, &end, 10);
	if (major > 255 || minor > 255 || micro > 255)
		return 0;
	return (uint32_t)(major << 24 | minor << 16 | micro << 8 | 0xf0);
}

#define LOOK(field, name) (*(void **)&ml_py.api.field = sym(name))

/* The interpreter's functions; false when a required one is missing. */
static bool find_api(void)
{
	LOOK(this_thread_state, "PyGILState_GetThisThreadState");
	if (!LOOK(is_finalizing, "Py_IsFinalizing"))
		LOOK(is_finalizing, "_Py_IsFinalizing");
	LOOK(is_initialized, "Py_IsInitialized");
	LOOK(add_audit_hook, "PySys_AddAuditHook");
	LOOK(get_allocator, "PyMem_GetAllocator");
	LOOK(set_allocator, "PyMem_SetAllocator");
	LOOK(get_arena, "PyObject_GetArenaAllocator");
	LOOK(allocator_name, "_PyMem_GetCurrentAllocatorName");	/* optional */
	LOOK(set_arena, "PyObject_SetArenaAllocator");
	LOOK(compile, "Py_CompileStringExFlags");
	LOOK(eval_code, "PyEval_EvalCode");
	LOOK(dict_new, "PyDict_New");
	LOOK(dict_set, "PyDict_SetItemString");
	LOOK(builtins, "PyEval_GetBuiltins");
	LOOK(unicode_from, "PyUnicode_FromString");
	LOOK(decref, "Py_DecRef");
	LOOK(err_fetch, "PyErr_Fetch");
	LOOK(err_restore, "PyErr_Restore");
	LOOK(object_str, "PyObject_Str");
	LOOK(unicode_utf8, "PyUnicode_AsUTF8");
	LOOK(lock_acquire, "PyThread_acquire_lock");
	LOOK(lock_release, "PyThread_release_lock");
	LOOK(mutex_lock, "PyMutex_Lock");	/* 3.13 */
	LOOK(mutex_unlock, "PyMutex_Unlock");
	ml_py.api.code_type = sym("PyCode_Type");
	return ml_py.api.this_thread_state && ml_py.api.add_audit_hook && ml_py.api.code_type &&
	       ml_py.api.compile && ml_py.api.eval_code && ml_py.api.dict_new &&
	       ml_py.api.dict_set && ml_py.api.builtins && ml_py.api.decref &&
	       ml_py.api.err_fetch && ml_py.api.err_restore;
}
#undef LOOK

/* Where a dynamic symbol lies and how big it is (0 if unknown). */
static void *sym_sized(const char *name, size_t *size)
{
	void *p = sym(name);
	Dl_info info;
	const ElfW(Sym) *s = NULL;
	*size = 0;
	if (p && dladdr1(p, &info, (void **)&s, RTLD_DL_SYMENT) && s)
		*size = s->st_size;
	return p;
}

/* The eval loop's hot code, from its dynamic symbol's size, and the
 * module that holds it (the interpreter: python3.x or libpython). */
static void find_eval(void)
{
	void *eval = sym("_PyEval_EvalFrameDefault");
	Dl_info info;
	const ElfW(Sym) *s = NULL;
	if (eval && dladdr1(eval, &info, (void **)&s, RTLD_DL_SYMENT) && s && s->st_size) {
		ml_py.eval_lo = (uint64_t)(uintptr_t)eval;
		ml_py.eval_hi = ml_py.eval_lo + s->st_size;
		ml_modules_range_of(ml_py.eval_lo, &ml_py.interp_lo, &ml_py.interp_hi);
	}
}

static void unsupported(uint32_t v, const char *why)
{
	char msg[160];
	snprintf(msg, sizeof(msg), "Python %u.%u.%u: %s; its profile has native frames only",
		 v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff, why);
	ml_warn(msg);
}

void ml_py_detect(void)
{
	if (!sym("PyGILState_GetThisThreadState"))
		return;		/* not a Python process */
	uint32_t v = version_hex();
	uint32_t major = v >> 24, minor = (v >> 16) & 0xff;
	if (major != 3 || minor < 10 || minor > 13) {
		unsupported(v, "memline reads CPython 3.10 to 3.13");
		return;
	}
	ml_py.runtime = sym_sized("_PyRuntime", &ml_py.runtime_size);
	ml_py.layout = ml_py_layout_for(minor, ml_py.runtime);
	if (!ml_py.layout) {
		unsupported(v, "memline does not know this build's layout");
		return;
	}
	if (!find_api()) {
		unsupported(v, "the interpreter lacks functions memline needs");
		return;
	}
	find_eval();
	ml_py.version = v;
	if (ml_py.layout->model == ML_PY_FRAME_OBJECTS)
		ml_py.flags |= ML_PY_QUALNAME_IS_NAME;
	ml_py.found = true;
}
