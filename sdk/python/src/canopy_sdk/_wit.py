"""The componentize-py bindings of ``canopy:plugin@0.3.0``, imported in one place.

The bindings (the ``wit_world`` package and ``componentize_py_types``) exist only while
componentize-py builds a component: it generates them from the WIT at build time, and they are
never committed. Outside a build (unit tests, type checking without generated bindings) the names
below are ``None`` and only the SDK's pure-Python parts work: forms, results, packing, rows.
"""

from __future__ import annotations

import importlib
from typing import Any

AVAILABLE: bool

try:  # pragma: no cover - only inside a componentize-py build
    # importlib, not `import`: the bindings are generated at build time, and a type checker
    # run on the SDK alone should not look for them.
    types: Any = importlib.import_module("wit_world.imports.types")
    packed: Any = importlib.import_module("wit_world.imports.packed")
    collections: Any = importlib.import_module("wit_world.imports.collections")
    logging: Any = importlib.import_module("wit_world.imports.logging")
    environment: Any = importlib.import_module("wit_world.imports.environment")
    workflow: Any = importlib.import_module("wit_world.exports.workflow")
    Err: Any = importlib.import_module("componentize_py_types").Err
    AVAILABLE = True
except ImportError:  # plain CPython: no host to call
    types = packed = collections = logging = environment = workflow = Err = None
    AVAILABLE = False


def require(what: str) -> None:
    """Raises a clear error when a host call is made outside a component."""
    if not AVAILABLE:
        raise RuntimeError(
            f"{what} needs the Canopy host: it only works inside a component built with "
            "componentize-py against wit/plugin@0.3.0"
        )
