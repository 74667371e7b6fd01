/* python/trace_bridge.c - how the tracer and the interpreter reach each
 * other without an extension module: the interpreter's C API is found with
 * dlsym in the running process (every symbol used here is exported by
 * 3.10 to 3.13, libpython shared or linked into python), and the tracer's
 * C functions become Python callables with PyCFunction_NewEx.  The boot
 * script (python/boot/profile.py) gets them as the dict `_memline`. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "core/core.h"
#include "python/internal.h"
#include "python/tracer.h"

struct ml_pyt_api ml_pyt_api;

static void *sym(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

#define LOOK(field, name) (*(void **)&ml_pyt_api.field = sym(name))

/* The functions every mechanism needs; false when one is missing. */
static bool find_api(uint32_t minor)
{
	LOOK(cfunction_new, "PyCFunction_NewEx");
	LOOK(frame_line, "PyFrame_GetLineNumber");
	LOOK(frame_code, "PyFrame_GetCode");
	LOOK(long_as_long, "PyLong_AsLong");
	LOOK(long_from, "PyLong_FromLongLong");
	LOOK(incref, "Py_IncRef");
	LOOK(bytes_parts, "PyBytes_AsStringAndSize");
	LOOK(err_set, "PyErr_SetString");
	LOOK(exc_type_error, "PyExc_TypeError");
	LOOK(err_occurred, "PyErr_Occurred");
	LOOK(err_clear, "PyErr_Clear");
	LOOK(thread_state, "PyThreadState_Get");
	LOOK(set_attr, "PyObject_SetAttrString");
	LOOK(none, "_Py_NoneStruct");
	LOOK(true_obj, "_Py_TrueStruct");
	LOOK(false_obj, "_Py_FalseStruct");
	bool ok = ml_pyt_api.cfunction_new && ml_pyt_api.frame_line && ml_pyt_api.frame_code &&
		  ml_pyt_api.long_as_long && ml_pyt_api.long_from && ml_pyt_api.incref &&
		  ml_pyt_api.bytes_parts && ml_pyt_api.err_set && ml_pyt_api.exc_type_error &&
		  ml_pyt_api.err_occurred && ml_pyt_api.err_clear && ml_pyt_api.thread_state &&
		  ml_pyt_api.set_attr && ml_pyt_api.none && ml_pyt_api.true_obj &&
		  ml_pyt_api.false_obj && ml_py.api.decref && ml_py.api.dict_new && ml_py.api.dict_set;
	if (minor <= 11) {
		LOOK(set_trace, "PyEval_SetTrace");
		if (minor == 11)
			LOOK(frame_lasti, "PyFrame_GetLasti");
		ok = ok && ml_pyt_api.set_trace && (minor == 10 || ml_pyt_api.frame_lasti);
	}
	return ok;
}
#undef LOOK

void *ml_pyt_none(void)
{
	ml_pyt_api.incref(ml_pyt_api.none);
	return ml_pyt_api.none;
}

void *ml_pyt_type_error(const char *msg)
{
	ml_pyt_api.err_set(*ml_pyt_api.exc_type_error, msg);
	return NULL;
}

static bool is_code(void *obj)
{
	const void *type;
	memcpy(&type, (const char *)obj + 8, sizeof(type));	/* ob_type */
	return type == ml_py.api.code_type;
}

/* ---- the C functions the boot script calls ---- */

/* register(code, first, last, unit_lines, flags): unit_lines is bytes of
 * native int32, the line of each code unit (3.12+), or None. */
static void *py_register(void *self, void *const *args, ssize_t nargs)
{
	(void)self;
	if (nargs != 5 || !is_code(args[0]))
		return ml_pyt_type_error("register(code, first, last, unit_lines, flags)");
	long first = ml_pyt_api.long_as_long(args[1]), last = ml_pyt_api.long_as_long(args[2]);
	long flags = ml_pyt_api.long_as_long(args[4]);
	char *buf = NULL;
	ssize_t len = 0;
	if (ml_pyt_api.err_occurred())
		return NULL;
	if (args[3] != ml_pyt_api.none && ml_pyt_api.bytes_parts(args[3], &buf, &len) < 0)
		return NULL;
	bool guarded = ml_guard_enter_always();
	int rc = ml_pyt_register((uint64_t)(uintptr_t)args[0], (int32_t)first, (int32_t)last,
				 (const int32_t *)buf, (uint32_t)((size_t)len / 4), (uint32_t)flags);
	if (guarded)
		ml_guard_exit();
	if (rc == 0)
		ml_pyt_api.incref(args[0]);	/* kept: its address is never reused */
	else
		ml_pyt_drop();
	return ml_pyt_api.long_from(rc);
}

static void *py_enable(void *self, void *unused)
{
	(void)self, (void)unused;
	ml_pyt_legacy_enable();
	return ml_pyt_none();
}

static void *py_disable(void *self, void *unused)
{
	(void)self, (void)unused;
	ml_pyt_legacy_disable();
	return ml_pyt_none();
}

/* probe(frame, untraced): frame is the caller's; untraced: sys.gettrace()
 * is None. */
static void *py_probe(void *self, void *const *args, ssize_t nargs)
{
	(void)self;
	if (nargs != 2)
		return ml_pyt_type_error("probe(frame, untraced)");
	bool ok = ml_pyt_legacy_probe(args[0], args[1] == ml_pyt_api.true_obj);
	ml_pyt_api.incref(ok ? ml_pyt_api.true_obj : ml_pyt_api.false_obj);
	return ok ? ml_pyt_api.true_obj : ml_pyt_api.false_obj;
}

/* monitoring(tool_id, DISABLE): sys.monitoring is set up; events count. */
static void *py_monitoring(void *self, void *const *args, ssize_t nargs)
{
	(void)self;
	if (nargs != 2)
		return ml_pyt_type_error("monitoring(tool_id, DISABLE)");
	long tool = ml_pyt_api.long_as_long(args[0]);
	if (ml_pyt_api.err_occurred())
		return NULL;
	ml_pyt_mon_set_disable(args[1]);
	ml_pyt_tool_id = (uint32_t)tool;
	ml_pyt_mechanism = ML_PYPROF_MONITORING;
	return ml_pyt_none();
}

static struct ml_pyt_methoddef methods[] = {
	{ "register", (void *)py_register, ML_PY_METH_FASTCALL, NULL },
	{ "enable", (void *)py_enable, ML_PY_METH_NOARGS, NULL },
	{ "disable", (void *)py_disable, ML_PY_METH_NOARGS, NULL },
	{ "probe", (void *)py_probe, ML_PY_METH_FASTCALL, NULL },
	{ "monitoring", (void *)py_monitoring, ML_PY_METH_FASTCALL, NULL },
	{ "mon_line", (void *)ml_pyt_mon_line, ML_PY_METH_FASTCALL, NULL },
	{ "mon_jump", (void *)ml_pyt_mon_jump, ML_PY_METH_FASTCALL, NULL },
	{ "mon_start", (void *)ml_pyt_mon_start, ML_PY_METH_FASTCALL, NULL },
	{ "mon_exit", (void *)ml_pyt_mon_exit, ML_PY_METH_FASTCALL, NULL },
};

/* Puts value (a new reference, or NULL) into dict under key. */
static bool put(void *dict, const char *key, void *value)
{
	if (!value)
		return false;
	int rc = ml_py.api.dict_set(dict, key, value);
	ml_py.api.decref(value);
	return rc == 0;
}

static void *make_namespace(void)
{
	uint32_t minor = (ml_py.version >> 16) & 0xff;
	if (!find_api(minor))
		return NULL;
	if (minor <= 11 && ml_pyt_legacy_expected_offset() < 0)
		return NULL;
	void *ns = ml_py.api.dict_new();
	bool ok = ns != NULL;
	for (size_t i = 0; ok && i < sizeof(methods) / sizeof(methods[0]); i++)
		ok = put(ns, methods[i].name, ml_pyt_api.cfunction_new(&methods[i], NULL, NULL));
	/* The mechanism this interpreter gets: the boot script follows it. */
	long mech = minor <= 11 ? ML_PYPROF_SETTRACE : ML_PYPROF_MONITORING;
	ok = ok && put(ns, "mechanism", ml_pyt_api.long_from(mech));
	if (ok && mech == ML_PYPROF_SETTRACE)
		ml_pyt_mechanism = ML_PYPROF_SETTRACE;
	if (!ok && ns) {
		ml_py.api.decref(ns);
		ns = NULL;
	}
	if (!ns && ml_pyt_api.err_occurred && ml_pyt_api.err_clear && ml_pyt_api.err_occurred())
		ml_pyt_api.err_clear();
	return ns;
}

/* MEMLINE_PYTRACE=0 turns the tracer off (the boot script's profile then
 * decorates nothing): for benchmarks, and a way out. */
static bool tracer_off(void)
{
	const char *v = getenv("MEMLINE_PYTRACE");
	return v && (strcmp(v, "0") == 0 || strcmp(v, "off") == 0 || strcmp(v, "no") == 0 ||
		     strcmp(v, "false") == 0);
}

void *ml_pyt_namespace(void)
{
	static void *ns;
	static bool tried;
	if (!tried && tracer_off()) {
		tried = true;
	} else if (!tried) {
		tried = true;
		ns = make_namespace();
		if (!ns)
			ml_warn("cannot set up @profile's line tracer; decorated functions "
				"run unprofiled");
	}
	if (ns)
		ml_pyt_api.incref(ns);
	return ns;
}
