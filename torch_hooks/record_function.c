/* torch_hooks/record_function.c - torch.profiler.record_function("name")
 * scopes as memline regions (`memline report regions`).  The scope's
 * RecordFunction lives in PyTorch's C++ and is only observed while
 * torch.profiler runs, so memline wraps the Python class's __enter__ and
 * __exit__ (record_function is one class: torch.profiler re-exports
 * torch.autograd.profiler's) with two C functions that call memline.h's
 * region API, the public entry points any program uses: regions belong to
 * the line timer's room, which this room does not call directly. */
#include <dlfcn.h>
#include <string.h>
#include "torch_hooks/internal.h"

#define PY_FILE_INPUT 257	/* Py_file_input */

static void (*region_push)(const char *name);
static void (*region_pop)(void);

static void *none(void)
{
	ml_torch_py.incref(ml_torch_py.none);
	return ml_torch_py.none;
}

/* push(name): a region opens.  A name that is no str opens "(unnamed)". */
static void *push(void *self, void *arg)
{
	(void)self;
	long len = 0;
	const char *name = ml_torch_py.utf8(arg, &len);
	if (!name)
		ml_torch_py.err_clear();
	region_push(name ? name : "");
	return none();
}

static void *pop(void *self, void *unused)
{
	(void)self;
	(void)unused;
	region_pop();
	return none();
}

static struct ml_torch_pymethod push_def = { "memline_region_push", push, ML_TORCH_METH_O, NULL };
static struct ml_torch_pymethod pop_def = { "memline_region_pop", pop, ML_TORCH_METH_NOARGS, NULL };

/* Runs in a namespace of its own, with push and pop in it.  The region
 * opens before PyTorch's own __enter__ and closes after its __exit__, and
 * closes if __enter__ raises. */
static const char wrap_src[] =
	"import sys\n"
	"rf = sys.modules['torch.autograd.profiler'].record_function\n"
	"def wrap(enter, exit_, push=push, pop=pop):\n"
	"    def __enter__(self):\n"
	"        push(str(getattr(self, 'name', '')))\n"
	"        try:\n"
	"            return enter(self)\n"
	"        except BaseException:\n"
	"            pop()\n"
	"            raise\n"
	"    def __exit__(self, *exc):\n"
	"        try:\n"
	"            return exit_(self, *exc)\n"
	"        finally:\n"
	"            pop()\n"
	"    __enter__.__wrapped__ = enter\n"
	"    __exit__.__wrapped__ = exit_\n"
	"    return __enter__, __exit__\n"
	"rf.__enter__, rf.__exit__ = wrap(rf.__enter__, rf.__exit__)\n";

/* True when torch.autograd.profiler has defined record_function. */
static bool class_defined(void)
{
	const struct ml_torch_pyapi *py = &ml_torch_py;
	void *name = py->unicode_from("torch.autograd.profiler");
	void *mod = name ? py->get_module(name) : NULL;
	void *cls = mod ? py->getattr(mod, "record_function") : NULL;
	void *drop[] = { cls, mod, name };
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (drop[i])
			py->decref(drop[i]);
	py->err_clear();
	return cls != NULL;
}

/* Runs wrap_src with push and pop.  Returns 0 or -1. */
static int wrap(void)
{
	const struct ml_torch_pyapi *py = &ml_torch_py;
	int rc = -1;
	void *code = py->compile(wrap_src, "<memline torch>", PY_FILE_INPUT, NULL, -1);
	void *g = code ? py->dict_new() : NULL;
	void *f_push = g ? py->cfunction_new(&push_def, NULL, NULL) : NULL;
	void *f_pop = f_push ? py->cfunction_new(&pop_def, NULL, NULL) : NULL;
	if (f_pop && py->dict_set(g, "__builtins__", py->builtins()) == 0 &&
	    py->dict_set(g, "push", f_push) == 0 && py->dict_set(g, "pop", f_pop) == 0) {
		void *result = py->eval_code(code, g, g);
		if (result) {
			py->decref(result);
			rc = 0;
		}
	}
	void *drop[] = { f_pop, f_push, g, code };
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (drop[i])
			py->decref(drop[i]);
	py->err_clear();
	return rc;
}

bool ml_torch_record_function_install(void)
{
	if (!region_push || !region_pop) {
		region_push = (void (*)(const char *))dlsym(RTLD_DEFAULT, "memline_region_push");
		region_pop = (void (*)(void))dlsym(RTLD_DEFAULT, "memline_region_pop");
		if (!region_push || !region_pop)
			return true;	/* no region API: nothing to do */
	}
	if (!class_defined())
		return false;
	if (wrap() == 0)
		ml_torch_flag(ML_TORCH_RECORD_FUNCTION);
	else
		ml_warn("cannot record torch.profiler.record_function scopes as regions");
	return true;
}
