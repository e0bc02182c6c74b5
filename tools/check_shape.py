"""The shape of a2a_trio: import cycles, reads of underscore attributes, long modules.

    python tools/check_shape.py            # every offender, exit 1 if there is any
    python tools/check_shape.py --json     # the same as JSON

Three rules (issue 28), checked on the source with :mod:`ast`, nothing imported:

- **No import cycle** inside ``a2a_trio`` (imports under ``TYPE_CHECKING`` count:
  a cycle of types is still two modules that cannot be read apart).
- **No read of another object's underscore attribute**: ``x._name`` where ``x`` is
  not ``self``, ``cls`` or ``super()`` (``self._host._executions`` reads the host's private
  field; ``module._helper`` a module's private name). Dunders are public.
- **No module over 500 lines**, generated code (protoc's output) aside.

:func:`offenders` is what ``tests/test_shape.py`` asserts on for the packages
already clean.
"""

from __future__ import annotations

import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "a2a_trio"
MAX_LINES = 500
GENERATED = {"a2a_trio.protocol.proto.a2a_pb2"}
#: The standard library's documented functions whose names start with an underscore.
STDLIB_PUBLIC = {"os._exit", "sys._getframe"}


@dataclass
class Offenders:
    """Every offence found: cycles (module lists), underscore reads, long modules."""

    cycles: list[list[str]] = field(default_factory=list)
    underscore_reads: dict[str, list[str]] = field(default_factory=dict)
    long_modules: dict[str, int] = field(default_factory=dict)

    def within(self, package: str) -> Offenders:
        """Only the offences of modules inside ``package`` (a dotted name)."""

        def inside(module: str) -> bool:
            return module == package or module.startswith(package + ".")

        return Offenders(
            cycles=[cycle for cycle in self.cycles if any(inside(m) for m in cycle)],
            underscore_reads={m: r for m, r in self.underscore_reads.items() if inside(m)},
            long_modules={m: n for m, n in self.long_modules.items() if inside(m)},
        )

    def __bool__(self) -> bool:
        return bool(self.cycles or self.underscore_reads or self.long_modules)


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, tree: ast.AST, known: set[str]) -> set[str]:
    """The package's modules that ``name`` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # ``from . import x`` imports the module x when there is one; a name
            # that is no module comes from ``origin`` itself.
            for alias in node.names:
                submodule = f"{origin}.{alias.name}"
                targets.add(submodule if submodule in known else origin)
    imported = set()
    for target in targets:
        # The nearest enclosing module the package has (a name inside it is its module).
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            imported.add(target)
    return imported


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    # Depth is at most the number of modules (~150), well within Python's default
    # limit; raising that limit would leak into the test run that imports this
    # (the JSON decoder relies on it to refuse deep nesting).
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _underscore_reads(tree: ast.AST) -> list[str]:
    """Each ``x._name`` whose ``x`` is not ``self`` or ``cls``, as ``line: source``."""
    reads = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        if isinstance(node.value, ast.Call) and ast.unparse(node.value) == "super()":
            continue  # the object's own method, as its parent class defines it
        if ast.unparse(node) in STDLIB_PUBLIC:
            continue  # documented API that the standard library names with an underscore
        reads.append(f"{node.lineno}: {ast.unparse(node)}")
    # Once each, in the walk's order within a line: a set's order would change with
    # the interpreter's string hashing (PYTHONHASHSEED), run to run.
    return sorted(dict.fromkeys(reads), key=lambda read: int(read.partition(":")[0]))


def offenders() -> Offenders:
    """Every offence of the package against the three rules."""
    found = modules()
    known = set(found)
    graph: dict[str, set[str]] = {}
    result = Offenders()
    for name, path in found.items():
        source = path.read_text()
        tree = ast.parse(source)
        graph[name] = _imported(name, path, tree, known)
        if name in GENERATED:
            continue
        reads = _underscore_reads(tree)
        if reads:
            result.underscore_reads[name] = reads
        lines = source.count("\n")
        if lines > MAX_LINES:
            result.long_modules[name] = lines
    result.cycles = _cycles(graph)
    return result


def main() -> int:
    """Print every offender; exit 1 if there is any."""
    found = offenders()
    if "--json" in sys.argv[1:]:
        print(json.dumps(found.__dict__, indent=2))
        return 1 if found else 0
    print(f"import cycles: {len(found.cycles)}")
    for cycle in found.cycles:
        print("  " + " <-> ".join(cycle))
    reads = sum(len(r) for r in found.underscore_reads.values())
    print(f"underscore reads of other objects: {reads} in {len(found.underscore_reads)} modules")
    for module, module_reads in found.underscore_reads.items():
        print(f"  {module}: {len(module_reads)}")
    print(f"modules over {MAX_LINES} lines: {len(found.long_modules)}")
    for module, lines in sorted(found.long_modules.items(), key=lambda item: -item[1]):
        print(f"  {module}: {lines}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
