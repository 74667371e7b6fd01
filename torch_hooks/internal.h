/* torch_hooks/internal.h - private interfaces of the PyTorch room: the
 * per-block reports of PyTorch's allocators (c10::reportMemoryUsageToProfiler,
 * hooks.c), the real function they forward to (real.c), and what the room
 * learns from a Python process that imports torch (pyapi.c, schemas.c):
 * the operator schemas and record_function scopes.  docs/torch.md. */
#ifndef ML_TORCH_INTERNAL_H
#define ML_TORCH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/core.h"	/* the format: the TORCH section */

/* c10::Device as it is passed by value: DeviceType then DeviceIndex, one
 * int8_t each (a 2-byte trivially copyable struct: one integer register). */
struct ml_c10_device {
	int8_t type;
	int8_t index;
};
#define ML_C10_CUDA 1		/* c10::DeviceType::CUDA */

/* The functions of libc10 memline hooks. */
enum ml_torch_fn {
	ML_TORCH_REPORT_V1,	/* reportMemoryUsageToProfiler(void*, int64_t, int64_t, int64_t, Device): 1.x */
	ML_TORCH_REPORT_V2,	/* reportMemoryUsageToProfiler(void*, int64_t, size_t, size_t, Device): 2.x */
	ML_TORCH_FREE_CPU,	/* free_cpu(void*): frees a CPU tensor's storage */
	ML_TORCH_FNS,
};
/* Both signatures take their integers in registers the same way, so one
 * type calls either. */
typedef void (*ml_c10_report_fn)(void *ptr, int64_t size, uint64_t allocated, uint64_t reserved,
				 struct ml_c10_device device);
typedef void (*ml_c10_free_fn)(void *ptr);

/* ---- real.c: the definitions in PyTorch's libc10 ---- */

/* The mangled name of each function. */
extern const char *const ml_torch_symbol[ML_TORCH_FNS];

/* libc10's definition of fn, found the first time (libc10 is loaded
 * RTLD_LOCAL below torch._C, so RTLD_NEXT cannot see it: each loaded
 * library is asked through a RTLD_NOLOAD handle, those named libc10.*
 * first).  NULL when there is none (one warning).  Thread-safe; takes the
 * dynamic linker's lock on the first call only. */
void *ml_torch_real(enum ml_torch_fn fn);
/* Looks up now every function this PyTorch defines (outside PyTorch's
 * allocator lock: the Python side calls it when torch._C is loaded). */
void ml_torch_real_resolve(void);

/* ---- the room's state (room.c) ---- */

struct ml_torch_state {
	uint32_t flags;				/* ML_TORCH_*, atomic or */
	uint64_t block_allocs, block_frees;	/* atomic adds */
	uint64_t other_reports;
	uint64_t tensor_frees;
	/* The schemas (common/torchformat.h), in the arena. */
	char *schemas;
	uint32_t schemas_len, n_schemas;
};
extern struct ml_torch_state ml_torch;

static inline void ml_torch_flag(uint32_t bit)
{
	__atomic_fetch_or(&ml_torch.flags, bit, __ATOMIC_RELAXED);
}

/* ---- pyapi.c: the interpreter's C API, found with dlsym ---- */

/* PyMethodDef, the public ABI. */
struct ml_torch_pymethod {
	const char *name;
	void *(*fn)(void *self, void *arg);
	int flags;
	const char *doc;
};
#define ML_TORCH_METH_NOARGS 0x4
#define ML_TORCH_METH_O 0x8

struct ml_torch_pyapi {
	int (*add_audit_hook)(int (*hook)(const char *event, void *args, void *data), void *data);
	void *(*get_module)(void *name);		/* PyImport_GetModule: new ref */
	void *(*unicode_from)(const char *s);
	const char *(*utf8)(void *str, long *len);	/* PyUnicode_AsUTF8AndSize */
	void *(*getattr)(void *obj, const char *name);	/* new ref */
	void *(*call)(void *callable, void *args);	/* PyObject_CallObject */
	void *(*call_kw)(void *callable, void *args, void *kwargs);	/* PyObject_Call */
	void *(*tuple_new)(long n);
	int (*tuple_set)(void *tuple, long i, void *item);	/* steals item */
	void *(*import)(const char *name);		/* PyImport_ImportModule */
	long (*seq_size)(void *seq);
	void *(*seq_item)(void *seq, long i);		/* new ref */
	void (*incref)(void *obj);
	void (*decref)(void *obj);
	void (*err_fetch)(void **type, void **value, void **tb);
	void (*err_restore)(void *type, void *value, void *tb);
	void (*err_clear)(void);
	void *(*compile)(const char *src, const char *file, int start, void *flags, int opt);
	void *(*eval_code)(void *code, void *globals, void *locals);
	void *(*dict_new)(void);
	int (*dict_set)(void *dict, const char *key, void *value);
	void *(*builtins)(void);			/* borrowed */
	void *(*cfunction_new)(struct ml_torch_pymethod *def, void *self, void *module);
	void *none;					/* &_Py_NoneStruct */
};
extern struct ml_torch_pyapi ml_torch_py;

/* Fills ml_torch_py with dlsym.  Returns true when every function is
 * there (a CPython 3.8 or later in the process). */
bool ml_torch_pyapi_find(void);

/* ---- schemas.c: the audit hook ---- */

/* Registers the audit hook that, once torch._C is loaded, reads the
 * operator schemas and looks the real functions up, and once
 * torch.autograd.profiler is, records record_function scopes as regions.
 * Once, when the interpreter runs the program (GIL held); needs
 * ml_torch_pyapi_find(). */
void ml_torch_schemas_start(void);

/* ---- record_function.c: scopes as memline regions ---- */

/* Wraps torch.autograd.profiler.record_function's __enter__ / __exit__ so
 * that each scope is also a memline region (memline.h's push/pop).  GIL and
 * guard held.  Returns true once done (or impossible), false to try again
 * at a later import (the class is not defined yet). */
bool ml_torch_record_function_install(void);

/* ---- write.c ---- */
void ml_torch_write(struct ml_writer *w);

#endif
