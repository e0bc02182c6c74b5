"""The shape rules of tools/check_shape.py, held over the whole of a2a_trio.

Issue 28 asks for no import cycle inside a2a_trio, no read of another object's
underscore attribute, and no module over 500 lines (generated code aside).
Every module keeps them; these tests keep it so, and ``python tools/check_shape.py``
lists any offender with where it is.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "tools" / "check_shape.py"
_spec = importlib.util.spec_from_file_location("check_shape", TOOL)
assert _spec is not None and _spec.loader is not None
check_shape = importlib.util.module_from_spec(_spec)
sys.modules["check_shape"] = check_shape
_spec.loader.exec_module(check_shape)

OFFENDERS = check_shape.offenders()


def test_no_module_of_a2a_trio_is_in_an_import_cycle() -> None:
    assert OFFENDERS.cycles == []


def test_no_module_reads_another_objects_underscore_attributes() -> None:
    assert OFFENDERS.underscore_reads == {}


def test_no_module_is_over_500_lines() -> None:
    assert OFFENDERS.long_modules == {}


def test_the_checker_finds_what_issue_28_names() -> None:
    # The offences the issue described (runtime's, mended since) are found: the checker can fail.
    assert check_shape._cycles(
        {
            "a2a_trio.runtime.host": {"a2a_trio.runtime.membership"},
            "a2a_trio.runtime.membership": {"a2a_trio.runtime.host"},
            "a2a_trio.runtime.feed": set(),
        }
    ) == [["a2a_trio.runtime.host", "a2a_trio.runtime.membership"]]
    source = "self._host._executions._end_stored(task_id)\nself._nursery.start_soon(f)\n"
    assert sorted(check_shape._underscore_reads(ast.parse(source))) == [
        "1: self._host._executions",
        "1: self._host._executions._end_stored",
    ]
