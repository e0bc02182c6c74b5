"""``a2a-trio serve MODULE:APP``: the application a command line names.

The same names ``hypercorn`` takes: ``package.module:attribute``, a file
``path/to/module.py:attribute`` (its folder goes on the import path), and
``module`` alone for ``module:app``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from ..server.cards import describe_failure
from .errors import CannotRun

__all__ = ["load_application", "source_folder"]


def _split(spec: str) -> tuple[str, str]:
    module, _, attribute = spec.partition(":")
    return module, attribute or "app"


def source_folder(spec: str) -> Path:
    """The folder the application's module is imported from (what ``--reload`` watches)."""
    module, _ = _split(spec)
    path = Path(module)
    if path.suffix == ".py" or "/" in module or path.is_dir():
        return path.resolve().parent
    return Path.cwd()


def load_application(spec: str) -> Any:
    """The object ``spec`` names; :class:`CannotRun` says what is wrong and how to fix it."""
    module_name, attribute = _split(spec)
    if not module_name:
        raise CannotRun(f"{spec!r} names no module: give MODULE:APP, e.g. myagent:app")
    path = Path(module_name)
    if path.suffix == ".py" or "/" in module_name:
        if path.suffix == ".py" and not path.is_file():
            raise CannotRun(f"{spec}: there is no file {path}")
        folder = str(path.resolve().parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        module_name = path.with_suffix("").name if path.suffix == ".py" else path.name
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name and not module_name.startswith(f"{error.name}."):
            raise CannotRun(f"{spec}: {describe_failure(error)}") from None
        raise CannotRun(
            f"{spec}: no module {module_name!r} here ({Path.cwd()}): run a2a-trio serve from "
            "the folder that holds it, or name its file (path/to/module.py:app)"
        ) from None
    except Exception as error:  # the module itself is broken: say where
        problem = describe_failure(error)
        raise CannotRun(f"{spec}: importing {module_name} failed: {problem}") from None
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            found = ", ".join(sorted(n for n in vars(module) if not n.startswith("_"))) or "nothing"
            raise CannotRun(f"{spec}: {module_name} has no {attribute!r} (it has: {found})")
        target = getattr(target, part)
    return target
