# python/boot/profile.py - memline's `profile`: kernprof's and memory_profiler's
# @profile, as a builtin, so that scripts written for them run unchanged under
# `memline run`.  Run by the Python room at interpreter start (python/boot.c)
# with `_memline`, the line tracer's C functions (python/trace_bridge.c).  It
# also makes `import memline` give the package next to this file, with this
# very profiler in it.  Nothing here runs per line: a decorated function's
# line events go to C.
import builtins
import os
import sys

_CO_GENERATOR = 0x20
_CO_COROUTINE = 0x80
_CO_ITERABLE_COROUTINE = 0x100
_CO_ASYNC_GENERATOR = 0x200
_GENERATOR_LIKE = _CO_GENERATOR | _CO_COROUTINE | _CO_ITERABLE_COROUTINE | _CO_ASYNC_GENERATOR
_PYFUNC_GENERATOR = 0x1         # common/pyprof.h ML_PYFUNC_GENERATOR
_MONITORING = 2                 # common/pyprof.h ML_PYPROF_MONITORING
_LOCAL_EVENTS = ("LINE", "JUMP", "PY_START", "PY_RETURN", "PY_YIELD")


class _Tracer:
    """The C side, and the decorated code objects it knows."""

    def __init__(self, c):
        self.c = c
        self.monitoring = c["mechanism"] == _MONITORING
        self.tool = None
        self.codes = set()
        self.failed = False

    def _set_up_monitoring(self):
        mon = sys.monitoring
        ev = mon.events
        # 2 is cProfile's, 0, 1 and 5 are the debugger's, coverage's and the
        # optimizer's: memline takes one that programs do not ask for.
        for tool in (4, 3, 2, 1, 0, 5):
            if mon.get_tool(tool) is None:
                mon.use_tool_id(tool, "memline")
                break
        else:
            raise RuntimeError("every sys.monitoring tool id is taken")
        c = self.c
        mon.register_callback(tool, ev.LINE, c["mon_line"])
        mon.register_callback(tool, ev.JUMP, c["mon_jump"])
        mon.register_callback(tool, ev.PY_START, c["mon_start"])
        for name in ("PY_RETURN", "PY_YIELD", "PY_UNWIND"):
            mon.register_callback(tool, getattr(ev, name), c["mon_exit"])
        # A frame left by an exception: a global event (not a local one),
        # cheap where no exception leaves a frame.
        mon.set_events(tool, ev.PY_UNWIND)
        c["monitoring"](tool, mon.DISABLE)
        self.tool = tool
        self.events = 0
        for name in _LOCAL_EVENTS:
            self.events |= getattr(ev, name)

    def register(self, code):
        """Counts code's lines from now on.  False if it cannot."""
        if code in self.codes:
            return True
        if self.failed:
            return False
        try:
            lines = [line for _, _, line in code.co_lines() if line is not None]
            first = min(lines + [code.co_firstlineno])
            last = max(lines + [code.co_firstlineno])
            units = None
            if self.monitoring:
                if self.tool is None:
                    self._set_up_monitoring()
                table = [0] * (len(code.co_code) // 2)
                for start, end, line in code.co_lines():
                    for unit in range(start // 2, min(end // 2, len(table))):
                        table[unit] = line if line is not None else -1
                units = _int32s(table)
            flags = _PYFUNC_GENERATOR if code.co_flags & _GENERATOR_LIKE else 0
            if self.c["register"](code, first, last, units, flags) != 0:
                return False
            if self.monitoring:
                sys.monitoring.set_local_events(self.tool, code, self.events)
        except Exception as exc:  # never break the program: warn once
            self.failed = True
            sys.stderr.write("memline: @profile cannot trace %s: %s\n" % (code.co_name, exc))
            return False
        self.codes.add(code)
        return True


def _int32s(values):
    # native-endian C ints, without importing array (an extension module
    # on some builds: its import would be charged to the decorated line)
    return b"".join(int(v).to_bytes(4, sys.byteorder, signed=True) for v in values)


def _steps(it, enable, disable):
    """Runs generator or coroutine `it` step by step with the tracer on for
    each step only (3.10, 3.11): send, throw and close go through, and so
    does the return value."""
    value = error = None
    while True:
        enable()
        try:
            item = it.send(value) if error is None else it.throw(error)
        except StopIteration as stop:
            return stop.value
        finally:
            disable()
        try:
            value, error = (yield item), None
        except GeneratorExit:
            enable()
            try:
                it.close()
            finally:
                disable()
            raise
        except BaseException as exc:
            value, error = None, exc


class _Awaitable:
    __slots__ = ("coro", "enable", "disable")

    def __init__(self, coro, enable, disable):
        self.coro, self.enable, self.disable = coro, enable, disable

    def __await__(self):
        return (yield from _steps(self.coro, self.enable, self.disable))


def _legacy_wrapper(func, code, enable, disable):
    """3.10, 3.11: the tracer is on for the thread while func's frames run."""
    flags = code.co_flags
    if flags & _CO_ASYNC_GENERATOR:
        async def wrapper(*args, **kwargs):
            agen = func(*args, **kwargs)
            value = None
            while True:
                try:
                    item = await _Awaitable(agen.asend(value), enable, disable)
                except StopAsyncIteration:
                    return
                value = yield item
    elif flags & _CO_COROUTINE:
        async def wrapper(*args, **kwargs):
            return await _Awaitable(func(*args, **kwargs), enable, disable)
    elif flags & _CO_GENERATOR:
        def wrapper(*args, **kwargs):
            return (yield from _steps(func(*args, **kwargs), enable, disable))
    else:
        def wrapper(*args, **kwargs):
            enable()
            try:
                return func(*args, **kwargs)
            finally:
                disable()
    # functools.wraps's work without importing functools (and what it
    # imports) into the program at its first @profile
    for name in ("__module__", "__name__", "__qualname__", "__doc__", "__annotations__"):
        try:
            setattr(wrapper, name, getattr(func, name))
        except AttributeError:
            pass
    wrapper.__dict__.update(getattr(func, "__dict__", {}))
    wrapper.__wrapped__ = func
    return wrapper


class _Profile:
    """memline's `profile`: `@profile` records the exact hits, time and
    memory of every line of the function it decorates (see `memline report
    lines`).  It takes what kernprof's and memory_profiler's decorators
    take: functions, methods, generators, coroutines, classmethod,
    staticmethod, property, classes (every method); `@profile(precision=3)`
    and the LineProfiler methods scripts call (add_function, enable_by_count,
    print_stats, ...) are accepted."""

    __memline__ = True

    def __init__(self, tracer):
        self._tracer = tracer
        c = tracer.c if tracer else None
        legacy = tracer is not None and not tracer.monitoring
        self._enable = c["enable"] if legacy else _nothing
        self._disable = c["disable"] if legacy else _nothing

    def __repr__(self):
        return "<memline profile>"

    def __call__(self, func=None, *args, **kwargs):
        if func is None:
            return self     # memory_profiler's @profile(precision=..., stream=...)
        return self.wrap(func)

    def wrap(self, func):
        if isinstance(func, (staticmethod, classmethod)):
            return type(func)(self.wrap(func.__func__))
        if isinstance(func, property):
            parts = [self.wrap(f) if f is not None else None for f in (func.fget, func.fset, func.fdel)]
            return property(*parts, func.__doc__)
        if isinstance(func, type):
            for name, member in list(vars(func).items()):
                if _is_code_holder(member):
                    setattr(func, name, self.wrap(member))
            return func
        code = getattr(func, "__code__", None)
        if code is None or self._tracer is None or not self._tracer.register(code):
            return func
        if self._tracer.monitoring:
            return func     # 3.12+: events come from the code object itself
        return _legacy_wrapper(func, code, self._enable, self._disable)

    def add_function(self, func):
        code = getattr(func, "__code__", None)
        if code is not None and self._tracer is not None:
            self._tracer.register(code)

    def enable_by_count(self):
        self._enable()

    def disable_by_count(self):
        self._disable()

    enable = enable_by_count
    disable = disable_by_count

    def __enter__(self):
        self._enable()
        return self

    def __exit__(self, *exc):
        self._disable()
        return False

    def runcall(self, func, *args, **kwargs):
        self._enable()
        try:
            return func(*args, **kwargs)
        finally:
            self._disable()

    def print_stats(self, *args, **kwargs):
        """The table is in the profile: `memline report lines`."""

    def dump_stats(self, *args, **kwargs):
        """The numbers go into memline's profile when the program ends."""

    def get_stats(self):
        return None


def _nothing():
    pass


def _is_code_holder(member):
    return (isinstance(member, (staticmethod, classmethod, property))
            or getattr(member, "__code__", None) is not None)


class _PackageFinder:
    """`import memline` gives the package next to this file, with this very
    profiler in it (sys.path is left as it is)."""

    def __init__(self, directory, profile):
        self.directory, self.profile = directory, profile

    def find_spec(self, name, path=None, target=None):
        if name != "memline":
            return None
        import importlib.util
        init = os.path.join(self.directory, "__init__.py")
        spec = importlib.util.spec_from_file_location(
            name, init, submodule_search_locations=[self.directory])
        if spec is not None:
            loader, profile = spec.loader, self.profile
            real_exec = loader.exec_module

            def exec_module(module):
                module._runtime = profile
                real_exec(module)
            loader.exec_module = exec_module
        return spec


def _boot():
    tracer = None
    c = globals().get("_memline")
    if c is not None:       # absent: no tracer (MEMLINE_PYTRACE=0, an unknown layout)
        tracer = _Tracer(c)
        if not tracer.monitoring and not c["probe"](sys._getframe(), sys.gettrace() is None):
            sys.stderr.write("memline: cannot check this interpreter's thread state; "
                             "@profile decorates nothing\n")
            tracer = None
    profile = _Profile(tracer)
    if "profile" not in builtins.__dict__:
        builtins.profile = profile
    package = os.path.join(os.path.dirname(__file__), "memline")
    if os.path.isfile(os.path.join(package, "__init__.py")):
        sys.meta_path.insert(0, _PackageFinder(package, profile))


_boot()
