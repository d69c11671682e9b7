"""nbgrader preprocessors that let autograding survive broken and hostile submissions.

They run inside the ``nbgrader autograde`` process, out of reach of the learner's kernel:

- ``RepairCells`` (sanitize phase, before ``OverwriteCells``): a graded or read-only cell whose
  nbgrader metadata was edited, renamed, stripped or deleted is put back from the gradebook,
  so nbgrader's checksums restore its source instead of crashing or leaving a manual-grade hole.
- ``ResilientExecute`` (replaces ``Execute``): when the kernel dies (``os._exit``, a segfault,
  memory) or cannot be interrupted after a timeout (a loop that swallows ``KeyboardInterrupt``),
  the cell and every later code cell get an error output instead of the whole submission
  failing; cells that ran before keep their points.
- ``AuditSubmission`` (after execution): reads the code the learner wrote (every cell that is
  not read-only) and finds tampering with the grading machinery — monkeypatching modules,
  reaching the interpreter (``builtins``, ``sys.modules``, ``exec``, dunder attributes), importing
  ``tutor`` or the reference ``solutions``, touching files. Every graded cell after the first
  such cell scores 0 and shows why.

``configure(c)`` installs them in an nbgrader config object (see ``nbgrader_config.py``).
"""
import ast

from IPython.core.inputtransformer2 import TransformerManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbformat.notebooknode import from_dict
from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.preprocessors import (
    AssignLatePenalties, CheckCellMetadata, ClearOutput, DeduplicateIds, Execute, IgnorePattern,
    LimitOutput, NbGraderPreprocessor, OverwriteCells, OverwriteKernelspec, SaveAutoGrades)

KERNEL_LOST = ("内核已退出或超时后无法中断，此单元及之后的单元未运行 / The kernel died or could not be "
               "interrupted after a timeout: this cell and the cells after it did not run")
FROM_SCRATCH = ("从零实现：第 {cell} 个单元第 {line} 行用了内置的 {name}，本练习的评分单元不计分 / "
                "From scratch: cell {cell}, line {line} uses the built-in {name}; this exercise's graded cells score 0")
TAMPERED = ("评分已作废：第 {cell} 个单元第 {line} 行{what}。请只实现练习本身 / "
            "Not graded: cell {cell}, line {line}: {what_en}. Implement the exercise itself")

# Modules a learner's exercise code never needs and that reach into the interpreter, the
# grading code or the file system.
FORBIDDEN_MODULES = {
    "builtins", "sys", "importlib", "gc", "ctypes", "inspect", "types", "unittest", "IPython",
    "nbgrader", "tutor", "solutions", "os", "subprocess", "shutil", "pathlib", "io", "codecs",
}
FORBIDDEN_NAMES = {
    "__import__", "__builtins__", "__loader__", "__spec__", "exec", "eval", "compile", "globals",
    "vars", "open", "breakpoint", "get_ipython", "delattr",
}
# Frame and generator internals: the road from a learner's function to the check's locals.
FORBIDDEN_ATTRS = {"gi_frame", "cr_frame", "ag_frame", "f_back", "f_locals", "f_globals",
                   "f_builtins", "tb_frame", "tb_next", "overrides", "library"}
# Subclassing these lets an output lie to the comparison (``__torch_function__``, overridden methods).
FORBIDDEN_BASES = {"Tensor", "ndarray", "Parameter", "TorchFunctionMode", "TorchDispatchMode"}
# The built-ins an exercise replaces (as in tutor.guard). Used inside a learner's function or
# class, they void the graded cells of that exercise (up to the next exercise cell); the checks'
# run-time guard covers the cells that call it later.
BUILTIN_REPLACED = {"scaled_dot_product_attention", "multi_head_attention_forward", "MultiheadAttention",
                    "layer_norm", "native_layer_norm", "LayerNorm", "rms_norm", "RMSNorm", "Transformer",
                    "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
                    "TransformerDecoderLayer"}
ALLOWED_DUNDER_ATTRS = {"__init__", "__name__", "__doc__"}
ALLOWED_DUNDER_DEFS = {"__init__", "__repr__", "__str__", "__len__", "__getitem__", "__iter__",
                       "__post_init__"}
# Names the locked setup cells bind to modules; assigning to their attributes is monkeypatching.
MODULE_NAMES = {"torch", "np", "numpy", "nn", "F", "math", "random", "plt", "tqdm"}


def _root(node):
    """The name an attribute/subscript chain starts from (``torch`` in ``torch.testing.x``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_chain(node):
    return isinstance(node, (ast.Name, ast.Attribute))


class _Auditor(ast.NodeVisitor):
    """Collect ``(line, 中文, English)`` for each tampering construct in a parsed cell."""

    def __init__(self, modules):
        self.modules = modules  # module-like names; grows with imports and aliases
        self.found = []

    def flag(self, node, zh, en):
        self.found.append((getattr(node, "lineno", 0), zh, en))

    def visit_Import(self, node):
        for alias in node.names:
            self._import(node, alias.name)
            self.modules.add((alias.asname or alias.name).split(".")[0])

    def visit_ImportFrom(self, node):
        self._import(node, node.module or "")
        for alias in node.names:
            self.modules.add(alias.asname or alias.name)

    def _import(self, node, module):
        parts = module.split(".")
        if parts[0] in FORBIDDEN_MODULES or any(p.startswith("_") or p in FORBIDDEN_ATTRS for p in parts):
            self.flag(node, f"导入了 {module}", f"imports {module}")

    def visit_Name(self, node):
        if node.id in FORBIDDEN_NAMES:
            self.flag(node, f"使用了 {node.id}", f"uses {node.id}")

    def visit_Attribute(self, node):
        attr = node.attr
        if attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDER_ATTRS:
            self.flag(node, f"访问了 {attr}", f"accesses {attr}")
        elif attr.startswith("_") and _root(node) in self.modules:
            self.flag(node, f"访问了模块私有属性 {attr}", f"accesses the private attribute {attr}")
        elif attr in FORBIDDEN_ATTRS or attr.startswith("register_module_"):
            self.flag(node, f"访问了 {attr}", f"accesses {attr}")
        self.generic_visit(node)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "setattr":
            if not (node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "self"):
                self.flag(node, "对 self 以外的对象调用 setattr", "calls setattr on something other than self")
        if isinstance(func, ast.Name) and func.id == "type" and len(node.args) == 3:
            self.flag(node, "用 type() 动态创建类", "creates a class with type()")
        if isinstance(func, ast.Name) and func.id in {"getattr", "hasattr"} and len(node.args) > 1:
            name = node.args[1]
            if isinstance(name, ast.Constant) and str(name.value).startswith("_"):
                self.flag(node, f"用 getattr 访问了 {name.value}", f"uses getattr on {name.value}")
        self.generic_visit(node)

    def _targets(self, node, targets):
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, (ast.Attribute, ast.Subscript)) and _root(sub) in self.modules:
                    self.flag(node, f"修改了模块 {_root(sub)} 的属性", f"modifies the module {_root(sub)}")
                    return

    def visit_Assign(self, node):
        self._targets(node, node.targets)
        # ``t = torch`` / ``T = torch.Tensor``: the alias is module-like too.
        if _is_chain(node.value) and _root(node.value) in self.modules:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.modules.add(target.id)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._targets(node, [node.target])
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._targets(node, [node.target])
        self.generic_visit(node)

    def visit_Delete(self, node):
        self._targets(node, node.targets)
        self.generic_visit(node)

    def visit_For(self, node):
        self._targets(node, [node.target])
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        name = node.name
        if name.startswith("__") and name.endswith("__") and name not in ALLOWED_DUNDER_DEFS:
            self.flag(node, f"定义了特殊方法 {name}", f"defines the special method {name}")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        for base in node.bases:
            name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
            if name in FORBIDDEN_BASES:
                self.flag(node, f"继承了 {name}", f"subclasses {name}")
        self.generic_visit(node)


def audit_source(source, modules=None):
    """Return ``[(line, 中文, English), ...]`` for each tampering construct in one cell's code.

    ``modules`` (a set, updated in place) carries module-like names across the cells of a notebook.
    IPython syntax (``%magic``, ``!shell``) is translated first, so it shows up as ``get_ipython``.
    """
    modules = set(MODULE_NAMES) if modules is None else modules
    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return []  # the kernel cannot run it either: the cell errors and nothing is tampered with
    auditor = _Auditor(modules)
    auditor.visit(tree)
    return sorted(auditor.found)


def builtin_uses(source):
    """``[(line, name)]``: replaced built-ins (``F.layer_norm``, …) used inside a def or class body."""
    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return []
    found = []
    for top in tree.body:
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for node in ast.walk(top):
                if isinstance(node, ast.Attribute) and node.attr in BUILTIN_REPLACED \
                        and _root(node) in MODULE_NAMES | {"torch"}:
                    found.append((node.lineno, node.attr))
        elif isinstance(top, ast.ImportFrom):
            found += [(top.lineno, a.name) for a in top.names if a.name in BUILTIN_REPLACED]
    return found


def _error_output(ename, evalue):
    return from_dict({"output_type": "error", "ename": ename, "evalue": evalue,
                      "traceback": [f"{ename}: {evalue}"]})


class RepairCells(NbGraderPreprocessor):
    """Put graded and read-only cells back the way the gradebook knows them.

    nbgrader alone crashes on a graded cell whose ``grade_id`` was removed, and never restores a
    deleted read-only cell (the setup cell, a provided cell). Here: metadata of an unknown or
    duplicated ``grade_id`` is dropped (the cell becomes a plain cell), flags and points of a
    known one are reset from the gradebook, and every missing source cell is re-inserted after
    the cell that precedes it in the source notebook. ``OverwriteCells`` then restores sources.
    """

    def preprocess(self, nb, resources):
        notebook_id = resources["nbgrader"]["notebook"]
        assignment_id = resources["nbgrader"]["assignment"]
        with Gradebook(resources["nbgrader"]["db_url"]) as gb:
            source_nb = gb.find_notebook(notebook_id, assignment_id)
            source_cells = list(source_nb.source_cells)
            grade_points = {cell.name: cell.max_score for cell in source_nb.grade_cells}
            solutions = {cell.name for cell in source_nb.solution_cells}
            known = {cell.name: cell for cell in source_cells}
            seen = set()
            for cell in nb.cells:
                meta = cell.metadata.get("nbgrader")
                if meta is None:
                    continue
                grade_id = meta.get("grade_id")
                if grade_id not in known or grade_id in seen:
                    del cell.metadata["nbgrader"]
                    continue
                seen.add(grade_id)
                meta["grade"] = grade_id in grade_points
                meta["solution"] = grade_id in solutions
                meta["locked"] = known[grade_id].locked
                if meta["grade"]:
                    meta["points"] = grade_points[grade_id]
                else:
                    meta.pop("points", None)
            position = {cell.metadata.nbgrader["grade_id"]: i
                        for i, cell in enumerate(nb.cells) if "nbgrader" in cell.metadata}
            insert_at = 0
            for source in source_cells:
                if source.name in position:
                    insert_at = position[source.name] + 1
                    continue
                self.log.warning("Cell %s was missing from the submission; restoring it", source.name)
                nb.cells.insert(insert_at, self._cell(source, grade_points, solutions))
                position = {cell.metadata.nbgrader["grade_id"]: i
                            for i, cell in enumerate(nb.cells) if "nbgrader" in cell.metadata}
                insert_at = position[source.name] + 1
        return nb, resources

    @staticmethod
    def _cell(source, grade_points, solutions):
        meta = {"grade": source.name in grade_points, "solution": source.name in solutions,
                "locked": source.locked, "grade_id": source.name, "checksum": source.checksum,
                "schema_version": 3}
        if meta["grade"]:
            meta["points"] = grade_points[source.name]
        cell = {"cell_type": source.cell_type, "source": source.source,
                "metadata": {"nbgrader": meta, "editable": not source.locked, "deletable": False}}
        if source.cell_type == "code":
            cell.update(outputs=[], execution_count=None)
        return from_dict(cell)

    def preprocess_cell(self, cell, resources, index):
        return cell, resources


class ResilientExecute(Execute):
    """``Execute`` that turns a dead or stuck kernel into error outputs, not a failed submission."""

    def preprocess(self, nb, resources=None, km=None):
        self._kernel_dead = False
        return super().preprocess(nb, resources, km)

    def preprocess_cell(self, cell, resources, index):
        if self._kernel_dead:
            if cell.cell_type == "code":
                cell.outputs = [_error_output("KernelLost", KERNEL_LOST)]
            return cell, resources
        try:
            return super().preprocess_cell(cell, resources, index)
        except (DeadKernelError, CellTimeoutError) as error:
            self.log.warning("Kernel lost in cell %d (%s); the remaining cells score 0", index, type(error).__name__)
            self._kernel_dead = True
            cell.outputs.append(_error_output("KernelLost", KERNEL_LOST))
            return cell, resources


class AuditSubmission(NbGraderPreprocessor):
    """Score 0 every graded cell that runs after learner code tampering with the grading, and the
    graded cells of an exercise whose code uses the built-in it replaces."""

    def preprocess(self, nb, resources):
        modules = set(MODULE_NAMES)
        tampered = builtin = None
        for number, cell in enumerate(nb.cells, start=1):
            if utils.is_solution(cell):
                builtin = None
                uses = builtin_uses(cell.source)
                if uses:
                    builtin = FROM_SCRATCH.format(cell=number, line=uses[0][0], name=uses[0][1])
            if builtin is not None and utils.is_grade(cell) and cell.cell_type == "code":
                cell.outputs.append(_error_output("FromScratchViolation", builtin))
            if tampered is None and cell.cell_type == "code" and not utils.is_locked(cell):
                found = audit_source(cell.source, modules)
                if found:
                    line, zh, en = found[0]
                    tampered = TAMPERED.format(cell=number, line=line, what=zh, what_en=en)
                    self.log.warning("Tampering in cell %d: %s", number, tampered)
            if tampered is not None and utils.is_grade(cell) and cell.cell_type == "code":
                cell.outputs.append(_error_output("IntegrityError", tampered))
        return nb, resources


def configure(c):
    """Install the preprocessors above in nbgrader config ``c`` (nbgrader 0.9.6 defaults kept)."""
    c.Autograde.sanitize_preprocessors = [
        ClearOutput, DeduplicateIds, OverwriteKernelspec, RepairCells, OverwriteCells,
        CheckCellMetadata]
    c.Autograde.autograde_preprocessors = [
        ResilientExecute, AuditSubmission, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
        SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
