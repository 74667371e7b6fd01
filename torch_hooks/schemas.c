/* torch_hooks/schemas.c - what a Python process that imports torch tells
 * memline, through an audit hook (PySys_AddAuditHook, added once the
 * interpreter runs the program) that acts at the "import" events that follow:
 *   - once torch._C is loaded: libc10's real functions are looked up (here,
 *     outside the CUDA allocator's lock), and every ATen operator's (name,
 *     overload) is copied, so that the report names the C++ frame
 *     at::_ops::<name>_<overload>::call exactly as torch.profiler names the
 *     op (the overload cannot be told from the C++ name by itself:
 *     "max_pool2d_with_indices_backward" vs "add_Tensor");
 *   - once torch.autograd.profiler is: record_function scopes as regions.
 * An "import" event is raised only for a module not yet imported, and both
 * modules are imported by `import torch` itself.
 *
 * The operators come from the dispatcher, read at once (it only lists):
 * its list of names (torch._C._dispatch_get_all_op_names, 2.x), else its
 * registrations for every dispatch key (1.x:
 * torch._C._dispatch_get_registrations_for_dispatch_key(), whose default
 * key "" means all of them), both "ns::name[.overload]" strings.  Only a
 * torch._C with neither (an older 1.x) leaves torch._C._jit_get_all_schemas(),
 * which also builds the TorchScript operator registry, after which every
 * operator registered later costs more: so it is read as late as possible,
 * at exit (atexit) or just before a fork (os.register_at_fork, so that
 * children have them).  All of it runs with memline's guard held (nothing
 * it allocates is recorded) and keeps the program's pending exception. */
#include <string.h>
#include "torch_hooks/internal.h"

static void *torch_c_name;	/* "torch._C", a str made at the first import event */
static bool torch_seen, scopes_done, copied;

/* Room for the schemas: names and overloads of ATen ops are short (the
 * longest in 2.x is under 70 bytes together); a longer pair is left out. */
#define SCHEMA_ROOM 160u
#define SCHEMAS_MAX 65536u

struct table {
	char *buf;
	uint32_t cap;
};

/* Appends name (with its "aten::") and overload to the table.  Other
 * namespaces have no at::_ops frame and are skipped.  Returns false when
 * the table is full. */
static bool put_schema(struct table *t, const char *name, size_t name_len,
		       const char *overload, size_t overload_len)
{
	const size_t ns = strlen("aten::");
	if (name_len <= ns || strncmp(name, "aten::", ns) != 0)
		return true;
	name += ns;
	name_len -= ns;
	uint32_t need = (uint32_t)(name_len + overload_len + 2);
	if (ml_torch.schemas_len + need > t->cap)
		return false;
	char *p = t->buf + ml_torch.schemas_len;
	memcpy(p, name, name_len);
	p[name_len] = '\0';
	memcpy(p + name_len + 1, overload, overload_len);
	p[name_len + 1 + overload_len] = '\0';
	ml_torch.schemas_len += need;
	ml_torch.n_schemas++;
	return true;
}

/* The str attribute attr of obj as UTF-8 (into *str, a new reference the
 * caller drops), or NULL. */
static const char *str_attr(void *obj, const char *attr, void **str, long *len)
{
	const struct ml_torch_pyapi *py = &ml_torch_py;
	*str = py->getattr(obj, attr);
	const char *s = *str ? py->utf8(*str, len) : NULL;
	if (!s)
		py->err_clear();
	return s;
}

/* One item of the list: a str "aten::name[.overload]" (the dispatcher's)
 * or a FunctionSchema with name and overload_name.  False when full. */
static bool put_item(struct table *t, void *item)
{
	const struct ml_torch_pyapi *py = &ml_torch_py;
	long len = 0, ov_len = 0;
	const char *s = py->utf8(item, &len);
	if (s) {
		const char *dot = memchr(s, '.', (size_t)len);
		size_t name_len = dot ? (size_t)(dot - s) : (size_t)len;
		return put_schema(t, s, name_len, dot ? dot + 1 : "", dot ? (size_t)len - name_len - 1 : 0);
	}
	py->err_clear();
	void *name_obj = NULL, *ov_obj = NULL;
	const char *name = str_attr(item, "name", &name_obj, &len);
	const char *ov = str_attr(item, "overload_name", &ov_obj, &ov_len);
	bool ok = !name || !ov || put_schema(t, name, (size_t)len, ov, (size_t)ov_len);
	if (name_obj)
		py->decref(name_obj);
	if (ov_obj)
		py->decref(ov_obj);
	return ok;
}

/* Copies every operator of list into the arena, then publishes them. */
static void copy_schemas(void *list)
{
	const struct ml_torch_pyapi *py = &ml_torch_py;
	long n = py->seq_size(list);
	struct table t = { NULL, 0 };
	if (n > 0 && n <= (long)SCHEMAS_MAX) {
		t.cap = (uint32_t)n * SCHEMA_ROOM;
		t.buf = ml_arena_alloc(t.cap);
	}
	if (!t.buf) {
		py->err_clear();
		ml_torch_flag(ML_TORCH_SCHEMAS_FAILED);
		return;
	}
	for (long i = 0; i < n; i++) {
		void *item = py->seq_item(list, i);
		if (item && !put_item(&t, item))
			ml_torch_flag(ML_TORCH_SCHEMAS_TRUNCATED);
		if (item)
			py->decref(item);
	}
	py->err_clear();
	ml_torch.schemas = t.buf;
	ml_torch_flag(ML_TORCH_SCHEMAS);	/* after the copy: the writer reads them then */
}

/* Calls torch._C.<fn>() and copies what it lists.  Returns false when
 * torch._C has no such function. */
static bool copy_from(const char *fn)
{
	const struct ml_torch_pyapi *py = &ml_torch_py;
	void *mod = py->get_module(torch_c_name);
	void *f = mod ? py->getattr(mod, fn) : NULL;
	if (mod)
		py->decref(mod);
	if (!f) {
		py->err_clear();
		return false;
	}
	void *list = py->call(f, NULL);
	py->decref(f);
	copied = true;
	if (list) {
		copy_schemas(list);
		py->decref(list);
	} else {
		py->err_clear();
		ml_torch_flag(ML_TORCH_SCHEMAS_FAILED);
	}
	return true;
}

/* atexit and before a fork: the oldest way, once.  METH_NOARGS. */
static void *copy_late(void *self, void *unused)
{
	(void)self;
	(void)unused;
	const struct ml_torch_pyapi *py = &ml_torch_py;
	bool held = ml_guard_enter_always();
	void *type = NULL, *value = NULL, *tb = NULL;
	py->err_fetch(&type, &value, &tb);
	if (!copied && !copy_from("_jit_get_all_schemas")) {
		copied = true;
		ml_torch_flag(ML_TORCH_SCHEMAS_FAILED);
	}
	py->err_restore(type, value, tb);
	if (held)
		ml_guard_exit();
	py->incref(py->none);
	return py->none;
}

static struct ml_torch_pymethod copy_late_def = { "memline_torch_schemas", copy_late,
						  ML_TORCH_METH_NOARGS, NULL };

/* Calls module.fn(f), or module.fn(kw=f) when kw is given (os.register_at_fork
 * takes keywords only).  0 or -1. */
static int register_with(const char *module, const char *fn, const char *kw, void *f)
{
	const struct ml_torch_pyapi *py = &ml_torch_py;
	void *mod = py->import(module);
	void *reg = mod ? py->getattr(mod, fn) : NULL;
	void *args = reg ? py->tuple_new(kw ? 0 : 1) : NULL;
	void *kwargs = args && kw ? py->dict_new() : NULL;
	void *result = NULL;
	if (args && !kw) {
		py->incref(f);	/* the tuple takes this reference */
		if (py->tuple_set(args, 0, f) == 0)
			result = py->call_kw(reg, args, NULL);
	} else if (kwargs && py->dict_set(kwargs, kw, f) == 0) {
		result = py->call_kw(reg, args, kwargs);
	}
	void *drop[] = { result, kwargs, args, reg, mod };
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (drop[i])
			py->decref(drop[i]);
	py->err_clear();
	return result ? 0 : -1;
}

/* torch._C is loaded: the real functions now, the operators now (from
 * the dispatcher) or at exit and before forks (an older 1.x). */
static void torch_loaded(void)
{
	const struct ml_torch_pyapi *py = &ml_torch_py;
	ml_torch_real_resolve();
	if (copy_from("_dispatch_get_all_op_names") ||
	    copy_from("_dispatch_get_registrations_for_dispatch_key"))
		return;
	void *f = py->cfunction_new(&copy_late_def, NULL, NULL);
	if (!f || register_with("atexit", "register", NULL, f) < 0) {
		py->err_clear();
		ml_torch_flag(ML_TORCH_SCHEMAS_FAILED);
	} else if (register_with("os", "register_at_fork", "before", f) < 0) {
		/* No fork hooks (not POSIX): forked children name ops by C++ ids. */
	}
	if (f)
		py->decref(f);
}

/* True when torch._C is in sys.modules (the first time). */
static bool torch_c_loaded(void)
{
	const struct ml_torch_pyapi *py = &ml_torch_py;
	if (!torch_c_name && !(torch_c_name = py->unicode_from("torch._C"))) {
		py->err_clear();
		return false;
	}
	void *mod = py->get_module(torch_c_name);
	if (!mod) {
		py->err_clear();
		return false;
	}
	py->decref(mod);
	return true;
}

/* Called by the interpreter for every audit event, with the GIL held,
 * until the scopes are done: then the hook leaves the interpreter's list
 * (without a hook, CPython builds no event's arguments).  In a program
 * that never imports torch it stays, and returns at once.  Never raises
 * (returns 0). */
static int audit(const char *event, void *args, void *data)
{
	(void)args;
	(void)data;
	if (scopes_done || event[0] != 'i' || strcmp(event, "import") != 0)
		return 0;
	static bool busy;	/* the GIL serialises; this stops our own imports */
	if (busy)
		return 0;
	busy = true;
	const struct ml_torch_pyapi *py = &ml_torch_py;
	bool held = ml_guard_enter_always();
	void *type = NULL, *value = NULL, *tb = NULL;
	py->err_fetch(&type, &value, &tb);
	if (!torch_seen && torch_c_loaded()) {
		torch_seen = true;
		torch_loaded();
	}
	if (torch_seen && !scopes_done && (scopes_done = ml_torch_record_function_install()))
		ml_core_python_audit_remove(audit);	/* nothing left to do */
	py->err_restore(type, value, tb);
	if (held)
		ml_guard_exit();
	busy = false;
	return 0;
}

/* Once the interpreter runs the program (GIL held): the hook, and a first
 * look, for a torch imported before (sitecustomize, a start-up script). */
void ml_torch_schemas_start(void)
{
	if (ml_torch_py.add_audit_hook(audit, NULL) != 0) {
		ml_torch_py.err_clear();
		ml_warn("cannot follow PyTorch in this Python: op names come from C++ symbols only");
		return;
	}
	audit("import", NULL, NULL);
}
