"""Which attributes of the user's module are its functions, callable over HTTP.

A module's namespace holds more than its author's functions: everything it imports is an attribute too. Served,
`from os import getenv` answers the app's secrets and `from subprocess import check_output` runs commands, with
nothing in the source that looks like a function of the app. So only what the module defines is served:

- a function whose code belongs to the module: its `__globals__` are the module's own namespace. Unlike
  `__module__`, which functools.wraps copies from the function it wraps, this says where the code was written:
  a wrapper made by the app's decorator is the app's, whatever it wraps; a library's wrapper is not;
- a callable layered over one of those: a decorator's result with `__wrapped__` (functools.lru_cache), a
  functools.partial, a bound method;
- an instance of a class the module defines (its `__call__`).

When the module has `__all__`, exactly the names in it are served, imported or not: the author named them.
Never served: names starting with `_`, classes (callable, but they construct, they are not functions), and
whatever is not callable.
"""

import functools
import types

# A bound on following `__wrapped__`, `func` and `__func__`: an object may answer any attribute (`__getattr__`).
_MAX_LAYERS = 100


def exported_names(module):
    """The names in the module's `__all__`, in its order, or None when it has none."""
    # The module's own namespace, never getattr: a module `__getattr__` (PEP 562: a lazy import or a deprecation
    # shim) answers any name, and would make another module's `__all__` and functions this one's.
    exported = vars(module).get("__all__")
    if exported is None:
        return None
    if isinstance(exported, str):
        exported = (exported,)  # one name, not the set of its characters (as `name in "add"` would make it)
    return tuple(dict.fromkeys(name for name in exported if isinstance(name, str)))


def is_served(module, name, target):
    """Whether `target`, the module's attribute `name`, is one of its functions."""
    if name.startswith("_") or not callable(target) or isinstance(target, type):
        return False
    exported = exported_names(module)
    if exported is not None:
        return name in exported
    return is_defined_in(module, target)


def served_names(module):
    """The names of the module's functions, in `__all__`'s order or else the order the module defined them."""
    exported = exported_names(module)
    candidates = list(vars(module)) if exported is None else exported
    return [name for name in candidates if is_served(module, name, vars(module).get(name))]


def is_defined_in(module, target):
    """Whether the module's own code made `target` (see the module's docstring)."""
    namespace = module.__dict__
    seen = set()
    while target is not None and id(target) not in seen and len(seen) < _MAX_LAYERS:
        seen.add(id(target))
        if isinstance(target, types.FunctionType):
            if target.__globals__ is namespace:
                return True
        elif not isinstance(target, (types.BuiltinFunctionType, types.MethodType, functools.partial)):
            if type(target).__module__ == module.__name__:
                return True
        target = _wrapped(target)
    return False


def _wrapped(target):
    """What `target` calls through to: a partial's function, a method's function, a decorator's `__wrapped__`."""
    if isinstance(target, functools.partial):
        return target.func
    if isinstance(target, types.MethodType):
        return target.__func__
    try:
        return getattr(target, "__wrapped__", None)
    except Exception:  # an object answering any attribute, and raising for this one: nothing to follow
        return None
