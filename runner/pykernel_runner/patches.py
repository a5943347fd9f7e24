"""Tools for patching the process without importing what is patched at start-up.

Which functions the kernel patches, and why, is the kernel's business; here
are the wrappers it patches them with.
"""

import sys


class PatchOnImport:
    """A sys.meta_path hook that patches a module as its first import ends,
    so the runner need not import the module at start-up."""

    def __init__(self, patches):
        self._patches = patches     # module name -> function(module)

    @classmethod
    def install(cls, patches):
        for name in [name for name in patches if name in sys.modules]:
            patches.pop(name)(sys.modules[name])
        sys.meta_path.insert(0, cls(patches))

    def find_spec(self, name, path=None, target=None):
        if name not in self._patches:
            return None
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            if finder is self or find_spec is None:
                continue
            spec = find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, self._patches.pop(name))
                return spec
        return None


class _PatchingLoader:
    """Runs the real loader, then the patch; otherwise the real loader."""

    def __init__(self, loader, patch):
        self._loader = loader
        self._patch = patch

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._patch(module)


def flushing_first(start_child, before):
    """Wrap a function that starts a child so *before* (which sends pending
    output) runs first."""
    def call(*args, **kwargs):
        before()
        return start_child(*args, **kwargs)
    call.__name__ = call.__qualname__ = start_child.__name__
    call.__doc__ = start_child.__doc__
    return call


def write_after_pending(write, output, late_write):
    """os.write() for cells: bytes for fd 1/2 go after text printed before them,
    and *late_write* may take them instead (returning the count written)."""
    def call(fd, data):
        if fd == 1 or fd == 2:
            if output.pending_chars:
                output.flush()
            written = late_write(fd, data)
            if written is not None:
                return written
        return write(fd, data)
    call.__name__ = call.__qualname__ = "write"
    call.__doc__ = write.__doc__
    return call

