"""Guard-rails on the shape of the code (issue 11): no module over 600 lines and no function over
60 lines in the project's own packages (migrations excluded), so the next feature lands in a
small module with a name instead of growing a large one."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "transforms", "providers", "keys", "captures", "requestlogs")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60


def _modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


MODULES = list(_modules())


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_and_function_sizes(path):
    text = path.read_text()
    problems = []
    lines = text.count("\n") + 1
    if lines > MAX_MODULE_LINES:
        problems.append(f"module has {lines} lines (max {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                problems.append(
                    f"{node.name} (line {node.lineno}) has {length} lines (max {MAX_FUNCTION_LINES})"
                )
    assert not problems, "\n".join(problems)
