"""memline's Python package: ``memline.profile``, kernprof's and
memory_profiler's ``@profile``.

Under ``memline run`` this package is importable with no setup and
``memline.profile`` is the profiler itself (the builtin ``profile`` too): a
decorated function's every line gets its exact hits, time and memory, shown
by ``memline report lines``.  Run without memline, ``memline.profile`` does
nothing: it returns what it decorates unchanged, so a script keeps its
decorators and runs at full speed.  To import it without memline, put the
directory that holds this package on the path (``PYTHONPATH=<memline's
source tree>/python``), or copy this package into the project.
"""

__all__ = ["profile", "active"]


class _NoProfile:
    """memline.profile when the program does not run under memline."""

    __memline__ = False

    def __repr__(self):
        return "<memline profile (inactive: not running under memline)>"

    def __call__(self, func=None, *args, **kwargs):
        if func is None:
            return self     # @profile(precision=...), memory_profiler's form
        return func

    def wrap(self, func):
        return func

    def add_function(self, func):
        pass

    def enable_by_count(self):
        pass

    def disable_by_count(self):
        pass

    enable = enable_by_count
    disable = disable_by_count

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def runcall(self, func, *args, **kwargs):
        return func(*args, **kwargs)

    def print_stats(self, *args, **kwargs):
        pass

    def dump_stats(self, *args, **kwargs):
        pass

    def get_stats(self):
        return None


def _find_runtime():
    # memline's import hook sets _runtime before running this file; a copy
    # of this package found on sys.path under memline finds the builtin.
    runtime = globals().get("_runtime")
    if runtime is None:
        import builtins
        candidate = getattr(builtins, "profile", None)
        if getattr(candidate, "__memline__", False) is True:
            runtime = candidate
    return runtime


_found = _find_runtime()
#: True when the program runs under memline and @profile records.
active = _found is not None
profile = _found if _found is not None else _NoProfile()
del _found
