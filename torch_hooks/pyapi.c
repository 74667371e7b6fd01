/* torch_hooks/pyapi.c - the few functions of the Python C API the PyTorch
 * room calls (from its audit hook, with the GIL held), found with dlsym in
 * the process: memline links no libpython.  All of them are in the stable
 * ABI of CPython 3.8 and later. */
#include <dlfcn.h>
#include <string.h>
#include "torch_hooks/internal.h"

struct ml_torch_pyapi ml_torch_py;

/* Stores the address of sym in *slot (a function pointer's storage). */
static bool find(void *slot, const char *sym)
{
	void *p = dlsym(RTLD_DEFAULT, sym);
	memcpy(slot, &p, sizeof(p));
	return p != NULL;
}
#define FIND(field, sym) find(&ml_torch_py.field, sym)

bool ml_torch_pyapi_find(void)
{
	/* A process without PySys_AddAuditHook is no Python memline follows:
	 * look no further (the common case for native programs). */
	if (!FIND(add_audit_hook, "PySys_AddAuditHook"))
		return false;
	return FIND(get_module, "PyImport_GetModule") &&
	       FIND(unicode_from, "PyUnicode_FromString") &&
	       FIND(utf8, "PyUnicode_AsUTF8AndSize") &&
	       FIND(getattr, "PyObject_GetAttrString") &&
	       FIND(call, "PyObject_CallObject") &&
	       FIND(call_kw, "PyObject_Call") &&
	       FIND(tuple_new, "PyTuple_New") &&
	       FIND(tuple_set, "PyTuple_SetItem") &&
	       FIND(import, "PyImport_ImportModule") &&
	       FIND(seq_size, "PySequence_Size") &&
	       FIND(seq_item, "PySequence_GetItem") &&
	       FIND(incref, "Py_IncRef") &&
	       FIND(decref, "Py_DecRef") &&
	       FIND(err_fetch, "PyErr_Fetch") &&
	       FIND(err_restore, "PyErr_Restore") &&
	       FIND(err_clear, "PyErr_Clear") &&
	       FIND(compile, "Py_CompileStringExFlags") &&
	       FIND(eval_code, "PyEval_EvalCode") &&
	       FIND(dict_new, "PyDict_New") &&
	       FIND(dict_set, "PyDict_SetItemString") &&
	       FIND(builtins, "PyEval_GetBuiltins") &&
	       FIND(cfunction_new, "PyCFunction_NewEx") &&
	       FIND(none, "_Py_NoneStruct");
}
