/* tests/python/layout_check.c - python/layout.c's offsets against the
 * interpreter's own headers: compiled once per installed CPython (with
 * Py_BUILD_CORE and its internal headers, linked with its libpython for
 * 3.13's _PyRuntime) by tests/e2e/test_python.py.  Prints "layout: ok" or
 * one line per field that differs, and exits 1 then. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#endif
#include "internal/pycore_runtime.h"
#include "internal/pycore_pystate.h"
#include <stddef.h>
#include <stdio.h>
#include "python/internal.h"

static int bad;

static void same(const char *what, size_t mine, size_t theirs)
{
	if (mine != theirs) {
		printf("layout: %s is %zu in memline, %zu in the headers\n", what, mine, theirs);
		bad = 1;
	}
}

int main(void)
{
	const struct ml_py_layout *L = ml_py_layout_for(PY_MINOR_VERSION, &_PyRuntime);
	if (!L) {
		printf("layout: memline has no layout for %s\n", PY_VERSION);
		return 1;
	}
#if PY_VERSION_HEX < 0x030B0000
	same("tstate.frame", L->ts_frame, offsetof(PyThreadState, frame));
	same("frame.f_back", L->fr_previous, offsetof(PyFrameObject, f_back));
	same("frame.f_code", L->fr_code, offsetof(PyFrameObject, f_code));
	same("frame.f_lasti", L->fr_instr, offsetof(PyFrameObject, f_lasti));
	same("frame size", L->fr_size, offsetof(PyFrameObject, f_state) + 4);
#else
#if PY_VERSION_HEX < 0x030D0000
	same("tstate.cframe", L->ts_cframe, offsetof(PyThreadState, cframe));
	same("cframe.current_frame", L->cframe_current, offsetof(_PyCFrame, current_frame));
	same("iframe.f_code", L->fr_code, offsetof(_PyInterpreterFrame, f_code));
	same("iframe.prev_instr", L->fr_instr, offsetof(_PyInterpreterFrame, prev_instr));
#else
	same("tstate.current_frame", L->ts_frame, offsetof(PyThreadState, current_frame));
	same("iframe.f_executable", L->fr_code, offsetof(_PyInterpreterFrame, f_executable));
	same("iframe.instr_ptr", L->fr_instr, offsetof(_PyInterpreterFrame, instr_ptr));
#endif
	same("iframe.previous", L->fr_previous, offsetof(_PyInterpreterFrame, previous));
	same("iframe.owner", L->fr_owner, offsetof(_PyInterpreterFrame, owner));
#if PY_VERSION_HEX < 0x030C0000
	same("iframe.is_entry", L->fr_is_entry, offsetof(_PyInterpreterFrame, is_entry));
#endif
	same("code.co_qualname", L->co_qualname, offsetof(PyCodeObject, co_qualname));
	same("code._co_firsttraceable", L->co_firsttraceable,
	     offsetof(PyCodeObject, _co_firsttraceable));
	same("code.co_code_adaptive", L->co_code_adaptive, offsetof(PyCodeObject, co_code_adaptive));
#endif
	same("code.co_firstlineno", L->co_firstlineno, offsetof(PyCodeObject, co_firstlineno));
	same("code.co_filename", L->co_filename, offsetof(PyCodeObject, co_filename));
	same("code.co_name", L->co_name, offsetof(PyCodeObject, co_name));
	same("code.co_linetable", L->co_linetable, offsetof(PyCodeObject, co_linetable));
	same("str.length", L->str_length, offsetof(PyASCIIObject, length));
	same("str.state", L->str_state, offsetof(PyASCIIObject, state));
	same("str ascii data", L->str_ascii_size, sizeof(PyASCIIObject));
	same("str compact data", L->str_compact_size, sizeof(PyCompactUnicodeObject));
	same("bytes.ob_size", L->bytes_size, offsetof(PyVarObject, ob_size));
	same("bytes.ob_sval", L->bytes_data, offsetof(PyBytesObject, ob_sval));
	if (!bad)
		printf("layout: ok (%s)\n", PY_VERSION);
	return bad;
}
