/* torch_hooks/schemas.c - what a Python process that imports torch tells
 * memline, read by an audit hook (PySys_AddAuditHook, registered before the
 * interpreter starts) at the "import" events that follow:
 *   - once torch._C is loaded: every ATen operator's (name, overload) from
 *     torch._C._jit_get_all_schemas(), so that the report names the C++
 *     frame at::_ops::<name>_<overload>::call exactly as torch.profiler
 *     names the op (the overload cannot be told from the C++ name by
 *     itself: "max_pool2d_with_indices_backward" vs "add_Tensor"); and
 *     libc10's real reportMemoryUsageToProfiler, looked up here, outside
 *     the CUDA allocator's lock;
 *   - once torch.autograd.profiler is: record_function scopes as regions.
 * An "import" event is raised only for a module not yet imported, and both
 * modules are imported by `import torch` itself, so the work happens during
 * that import.  All of it runs with memline's guard held (nothing it
 * allocates is recorded) and keeps the program's pending exception. */
#include <string.h>
#include "torch_hooks/internal.h"

static void *torch_c_name;	/* "torch._C", a str made at the first import event */
static bool schemas_done, scopes_done;

/* Room for the schemas: names and overloads of ATen ops are short (the
 * longest in 2.x is under 70 bytes together); a longer pair is left out. */
#define SCHEMA_ROOM 160u
#define SCHEMAS_MAX 65536u

/* Appends name (without "aten::") and overload to the schema table.
 * Returns false when it is full. */
static bool put_schema(char *buf, uint32_t cap, const char *name, long name_len,
		       const char *overload, long overload_len)
{
	const long ns = (long)strlen("aten::");
	if (name_len <= ns || strncmp(name, "aten::", (size_t)ns) != 0)
		return true;	/* prim::, quantized::, ...: no at::_ops frame */
	name += ns;
	name_len -= ns;
	uint32_t need = (uint32_t)(name_len + overload_len + 2);
	if (ml_torch.schemas_len + need > cap)
		return false;
	char *p = buf + ml_torch.schemas_len;
	memcpy(p, name, (size_t)name_len);
	p[name_len] = '\0';
	memcpy(p + name_len + 1, overload, (size_t)overload_len);
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

/* Copies every schema of list into the arena. */
static void copy_schemas(void *list)
{
	const struct ml_torch_pyapi *py = &ml_torch_py;
	long n = py->seq_size(list);
	if (n <= 0 || n > (long)SCHEMAS_MAX) {
		ml_torch_flag(ML_TORCH_SCHEMAS_FAILED);
		return;
	}
	uint32_t cap = (uint32_t)n * SCHEMA_ROOM;
	char *buf = ml_arena_alloc(cap);
	if (!buf) {
		ml_torch_flag(ML_TORCH_SCHEMAS_FAILED);
		return;
	}
	for (long i = 0; i < n; i++) {
		void *item = py->seq_item(list, i), *name_obj = NULL, *ov_obj = NULL;
		long name_len = 0, ov_len = 0;
		const char *name = item ? str_attr(item, "name", &name_obj, &name_len) : NULL;
		const char *ov = item ? str_attr(item, "overload_name", &ov_obj, &ov_len) : NULL;
		if (name && ov && !put_schema(buf, cap, name, name_len, ov, ov_len))
			ml_torch_flag(ML_TORCH_SCHEMAS_TRUNCATED);
		void *drop[] = { name_obj, ov_obj, item };
		for (size_t k = 0; k < sizeof(drop) / sizeof(drop[0]); k++)
			if (drop[k])
				py->decref(drop[k]);
	}
	py->err_clear();
	ml_torch.schemas = buf;
	ml_torch_flag(ML_TORCH_SCHEMAS);
}

/* Once torch._C is loaded: the schemas, and libc10's real functions. */
static void try_schemas(void)
{
	const struct ml_torch_pyapi *py = &ml_torch_py;
	if (!torch_c_name && !(torch_c_name = py->unicode_from("torch._C"))) {
		py->err_clear();
		return;
	}
	void *mod = py->get_module(torch_c_name);
	if (!mod) {
		py->err_clear();
		return;
	}
	schemas_done = true;
	ml_torch_real_resolve();
	void *fn = py->getattr(mod, "_jit_get_all_schemas");
	py->decref(mod);
	void *list = fn ? py->call(fn, NULL) : NULL;
	if (fn)
		py->decref(fn);
	if (list) {
		copy_schemas(list);
		py->decref(list);
	} else {
		py->err_clear();
		ml_torch_flag(ML_TORCH_SCHEMAS_FAILED);
	}
}

/* Called by the interpreter for every audit event, with the GIL held.
 * Never raises (returns 0). */
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
	if (!schemas_done)
		try_schemas();
	if (schemas_done && !scopes_done)
		scopes_done = ml_torch_record_function_install();
	py->err_restore(type, value, tb);
	if (held)
		ml_guard_exit();
	busy = false;
	return 0;
}

/* Before the interpreter starts: no Python object may be made yet. */
void ml_torch_schemas_start(void)
{
	if (ml_torch_py.add_audit_hook(audit, NULL) != 0)
		ml_warn("cannot follow PyTorch in this Python: op names come from C++ symbols only");
}
