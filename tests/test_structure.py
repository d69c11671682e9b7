"""The test suite's own structure (issue 40, item 6): no test module imports another (a test module's
helpers live in tests/pipeline_helpers.py, the one module test files share), and no check of this
rule can be dodged by a relative or a ``tests.``-prefixed import."""
import ast

from tools.paths import ROOT

TESTS = ROOT / "tests"


def imported_modules(source):
    """Every module name an ``import`` or ``from ... import`` in ``source`` names, at any depth."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names.append(module)
            if node.level or module in ("tests", "tests.browser"):  # from tests import test_x: a module
                names += [f"{module}.{alias.name}".lstrip(".") for alias in node.names]
    return names


def imports_of_test_modules(source):
    """The test modules among ``imported_modules(source)``: a last dotted part named ``test_*``."""
    return sorted({name for name in imported_modules(source) if name.rsplit(".", 1)[-1].startswith("test_")})


def test_no_test_module_imports_another():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        found += [f"{path.relative_to(ROOT)} imports {name}"
                  for name in imports_of_test_modules(path.read_text(encoding="utf-8"))]
    assert not found, "move what they share to tests/pipeline_helpers.py:\n" + "\n".join(found)


def test_the_scan_sees_each_way_of_importing_a_test_module():
    for source in ("import test_lab", "from test_lab import menu", "from tests.test_idioms import _prefix",
                   "from tests import test_idioms", "from . import test_leaks",
                   "def f():\n    import test_idioms\n    return test_idioms"):
        assert imports_of_test_modules(source), f"missed: {source!r}"
    assert not imports_of_test_modules("from pipeline_helpers import read_nb\nimport pytest\n"
                                       "from tutor.grading import test_cell")  # a function named test_*
