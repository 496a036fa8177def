"""ztask.compat under another name, so that a program's unchanged
`import ipyparallel` (and `from ipyparallel.client.view import ...`) gets
ztask.compat itself: the same module objects, hence the same classes for
`except` and `isinstance`.

A package directory that stands in for IPython Parallel holds one line,

    import ztask.compat; ztask.compat.install_as(__name__, __path__)

and a script can say `ztask.compat.install_as("ipyparallel")` before its
imports. A submodule the stand-in package has of its own (a test suite's
folder, say) is still found in its directory.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

_REAL = __name__.rsplit(".", 1)[0]  # "ztask.compat"


class _Loader(importlib.abc.Loader):
    """Hands out a module that is already imported, under a second name."""

    def __init__(self, module):
        self._module = module

    def create_module(self, spec):
        return self._module

    def exec_module(self, module):
        pass


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, name, own_path):
        self._name = name
        self._own_path = list(own_path or [])

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(self._name + "."):
            return None
        real = _REAL + fullname[len(self._name):]
        try:
            found = importlib.util.find_spec(real)
        except (ImportError, ValueError):
            found = None
        if found is not None:
            return importlib.machinery.ModuleSpec(fullname, _Loader(importlib.import_module(real)))
        if self._own_path and fullname.count(".") == 1:
            return importlib.machinery.PathFinder.find_spec(fullname, self._own_path)
        return None


def own_submodule(attribute):
    """`from NAME import sub` of a stand-in package's own submodule: the
    import system looks for it under ztask.compat's name, so ztask.compat
    asks here (None when no stand-in has it)."""
    for finder in sys.meta_path:
        if isinstance(finder, _Finder) and finder._own_path:
            full = "%s.%s" % (finder._name, attribute)
            if importlib.machinery.PathFinder.find_spec(full, finder._own_path) is not None:
                return importlib.import_module(full)
    return None


def install_as(name, own_path=None):
    """Makes `import NAME` (and every `NAME.sub`) give ztask.compat's
    modules. `own_path`: the stand-in package's __path__, searched for
    submodules ztask.compat does not have."""
    real = sys.modules[_REAL]
    for finder in sys.meta_path:
        if isinstance(finder, _Finder) and finder._name == name:
            break
    else:
        sys.meta_path.insert(0, _Finder(name, own_path))
    sys.modules[name] = real
    return real
