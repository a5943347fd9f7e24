"""Which modules a distribution provides, for ``%pip``: the installed
distributions before and after pip ran, their top-level import names, which
of those have a compiled extension imported now, and the eviction of the
others from ``sys.modules`` so the next import loads what is installed."""

import re
import sys


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions():
    """Installed distributions as {normalized name: (name, distribution)};
    the first on sys.path (the one imports see) wins."""
    from importlib import metadata
    found = {}
    for dist in metadata.distributions():
        try:
            name = dist.metadata["Name"]
        except Exception:
            continue
        if name and normalize(name) not in found:
            found[normalize(name)] = (name, dist)
    return found


def signature(dist):
    return dist.version, str(getattr(dist, "_path", ""))


def import_names(dist):
    """The top-level import names of *dist*: top_level.txt, plus the
    packages and modules its RECORD lists (wheels without top_level.txt)."""
    names = set()
    try:
        text = dist.read_text("top_level.txt") or ""
    except Exception:
        text = ""
    for line in text.split():
        names.add(line.strip().split("/")[0])
    try:
        files = dist.files or []
    except Exception:
        files = []
    for path in files:
        parts = path.parts
        if not parts or parts[0] in ("..", "__pycache__"):
            continue
        top = parts[0]
        if top.endswith((".dist-info", ".egg-info", ".data")):
            continue
        if len(parts) == 1:
            stem, dot, suffix = top.partition(".")
            if suffix.split(".")[-1] not in ("py", "pyc", "so", "pyd"):
                continue
            top = stem
        names.add(top)
    return {name for name in names if name.isidentifier()}


def with_compiled_extensions(names):
    """The top-level names among *names* with a compiled extension module
    (a .so or .pyd, as importlib's EXTENSION_SUFFIXES says) imported now."""
    from importlib.machinery import EXTENSION_SUFFIXES
    found = set()
    for module_name, module in list(sys.modules.items()):
        top = module_name.partition(".")[0]
        if top not in names or top in found:
            continue
        path = getattr(module, "__file__", None) or ""
        if isinstance(path, str) and path.endswith(tuple(EXTENSION_SUFFIXES)):
            found.add(top)
    return sorted(found)


def evict(names):
    """Remove these top-level modules and their submodules from sys.modules
    (never standard-library ones, nor the runner's); the names that were
    imported."""
    protected = set(getattr(sys, "stdlib_module_names", ())) | set(
        sys.builtin_module_names) | {__name__.partition(".")[0]}
    names = set(names) - protected
    evicted = set()
    for module in list(sys.modules):
        top = module.partition(".")[0]
        if top in names:
            del sys.modules[module]
            evicted.add(top)
    return sorted(evicted)
