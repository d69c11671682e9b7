"""The submission audit as plain code: what in a learner's cell reaches the grading machinery.

``audit_source`` reads one cell (IPython syntax translated first) and returns a ``Finding`` for each
construct that writes to imported modules, functions and classes (``torch.allclose = …``,
``sys.modules[…]``, ``builtins``), walks frames, runs computed code, imports the reference
``solutions``, touches files or runs shell commands; ``builtin_uses`` finds the built-ins an exercise
replaces. Ordinary Python on the learner's own objects is never judged by the spelling of a name.
No nbgrader here: ``grader.audit_submission.AuditSubmission`` applies it to a notebook, with the
allow-lists below as settings configurable from ``nbgrader_config.py``.
"""
import ast
from collections import deque
from functools import lru_cache
from typing import NamedTuple

from IPython.core.inputtransformer2 import TransformerManager

from tutor.guard import FORBIDDEN_BUILTINS
from tutor.integrity import WATCHED, WATCHED_CLASSES

FROM_SCRATCH = ("从零实现：第 {cell} 个单元第 {line} 行用了内置的 {name}，本练习（{exercise}）的评分单元不计分 / "
                "From scratch: cell {cell}, line {line} uses the built-in {name}; the graded cells of this "
                "exercise ({exercise}) score 0")
TAMPERED = ("评分已作废：第 {cell} 个单元第 {line} 行{what}，本练习（{exercise}）的评分单元不计分；请只实现练习本身 / "
            "Not graded: cell {cell}, line {line} {what_en}, so the graded cells of this exercise ({exercise}) "
            "score 0; implement the exercise itself")
TAMPERED_LATER = ("评分已作废：第 {cell} 个单元第 {line} 行{what}，这会影响之后的所有评分，"
                  "本练习（{exercise}）及之后各练习的评分单元不计分；请只实现练习本身 / "
                  "Not graded: cell {cell}, line {line} {what_en}, which can change every later test, so the "
                  "graded cells of this exercise ({exercise}) and of every later exercise score 0; "
                  "implement the exercise itself")

# What the audit judges is what code does to objects that are not the learner's own: the modules
# and functions the notebook imports (the grader uses the same objects), the interpreter, the files
# of the course. Ordinary Python on the learner's own definitions is never judged by its spelling.
#
# Module trees whose attributes a learner may set: plotting and progress-bar style, cuDNN
# switches, environment variables (``KMP_DUPLICATE_LIB_OK`` on macOS).
CONFIG_PATHS = ("matplotlib", "tqdm", "torch.backends", "os.environ")
# Reaching these lets code see or change the grader's frames and functions from the inside.
FRAME_ATTRS = {"gi_frame", "cr_frame", "ag_frame", "f_back", "f_locals", "f_globals", "f_builtins", "tb_frame"}
INTERNAL_DUNDERS = {"__globals__", "__closure__", "__subclasses__", "__builtins__"}
# Writing these replaces what an object is or how a function runs.
WRITE_DUNDERS = {"__class__", "__code__", "__globals__", "__defaults__", "__kwdefaults__", "__dict__",
                 "__bases__", "__closure__"}
# Calls that walk frames, hook the interpreter, find objects in memory, or touch files and processes.
FORBIDDEN_CALLS = {
    "sys._getframe", "sys.settrace", "sys.setprofile", "sys.addaudithook", "threading.settrace",
    "threading.setprofile", "inspect.currentframe", "inspect.stack", "inspect.trace",
    "inspect.getouterframes", "inspect.getinnerframes", "gc.get_objects", "gc.get_referrers",
    "gc.get_referents", "importlib.reload", "resource.setrlimit", "resource.prlimit", "os.open", "os.forkpty",
}
# Modules and functions whose every attribute counts (``ctypes.CDLL``, ``sqlite3.connect``) ...
FORBIDDEN_CALL_TREES = ("ctypes", "subprocess", "sqlite3", "pty", "os.system", "os.popen", "os.remove", "os.unlink",
                        "os.rename", "os.replace", "os.rmdir", "os.removedirs", "os.mkdir", "os.makedirs",
                        "os.chmod", "os.link", "os.symlink", "os.truncate", "os.putenv", "os.fork", "shutil.move",
                        "shutil.rmtree")
# ... and families named by how they begin: os.execv/execl/execvp..., os.spawnlp..., os.posix_spawn(p),
# shutil.copy/copyfile/copy2/copytree/copymode...
FORBIDDEN_CALL_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn", "shutil.copy")
FILE_WRITE_METHODS = {"write_text", "write_bytes", "unlink", "rmdir", "touch", "symlink_to", "hardlink_to", "chmod"}
OPENERS = {"open", "io.open", "codecs.open"}
NAMESPACE_MUTATORS = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"}
# Magics that only time or display: their code (for cell magics) is audited like any cell.
SAFE_MAGICS = {"time", "timeit", "matplotlib", "precision", "pprint", "who", "whos"}
# Subclassing these lets an output lie to the comparison; defining these hooks does the same.
FORBIDDEN_BASES = {"Tensor", "ndarray", "Parameter", "TorchFunctionMode", "TorchDispatchMode"}
FORBIDDEN_DEFS = {"__torch_function__", "__torch_dispatch__"}
REFERENCE = "solutions"
# What the run-time integrity check (``tutor.integrity``) watches, finds changed and puts back: a
# write to one of their attributes costs only the exercise that holds it. Anything else that
# reaches the grading cannot be undone and costs every exercise from there on.
RESTORED = set(WATCHED) | {f"{module}.{cls}" for module, cls in WATCHED_CLASSES}


class Finding(NamedTuple):
    line: int
    zh: str
    en: str
    local: bool  # True: only its own exercise can be affected; False: every later exercise too


def _restored(path):
    """True for ``owner.attr`` with ``owner`` watched by the integrity check (``torch.allclose``)."""
    owner, _, attr = path.rpartition(".")
    return owner in RESTORED and attr.isidentifier() and not attr.startswith("_")


def _constant(node):
    """The value of a string expression made of literals (``"a" + "b"``, ``f"{'x'}"``), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _constant(node.left), _constant(node.right)
        return None if left is None or right is None else left + right
    return None


def _under(path, trees):
    return any(path == tree or path.startswith(tree + ".") or path.startswith(tree + "[") for tree in trees)


def _targets(node):
    """The assignment targets inside a (possibly nested, starred) target expression."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return [t for elt in node.elts for t in _targets(elt)]
    if isinstance(node, ast.Starred):
        return _targets(node.value)
    return [node]


class _Auditor(ast.NodeVisitor):
    """Collect a ``Finding`` for each construct in a parsed cell that reaches the grading.

    ``external`` maps each name bound to an object from outside the learner's code (an imported
    module, function or class, or an alias of one) to its dotted path (``F`` ->
    ``torch.nn.functional``). It carries across the cells of a notebook and is updated as names
    are imported, aliased or re-bound to the learner's own values.
    """

    def __init__(self, external, config_paths=CONFIG_PATHS, safe_magics=SAFE_MAGICS):
        self.external = external
        self.config_paths, self.safe_magics = tuple(config_paths), set(safe_magics)
        self.found = []
        self._line = None  # the line of the exec/eval call whose literal code is being audited

    def flag(self, node, zh, en, local=False):
        self.found.append(Finding(self._line or getattr(node, "lineno", 0), zh, en, local))

    def path(self, node):
        """Dotted path of the outside object ``node`` denotes, or None for the learner's own values."""
        if isinstance(node, ast.Name):
            return self.external.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.path(node.value)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.NamedExpr):
            return self.path(node.value)
        if isinstance(node, ast.Subscript):
            key = _constant(node.slice)
            if key == "__builtins__":
                return "builtins"
            base = self.path(node.value)
            if base is not None and key is not None and (base == "builtins" or base.endswith(".__dict__")):
                return f"{base.removesuffix('.__dict__')}.{key}"  # a namespace entry is an attribute
            return None if base is None else f"{base}[...]"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            if node.func.id == "vars":
                base = self.path(node.args[0])
                return None if base is None else f"{base}.__dict__"
            if node.func.id == "getattr":
                base, attr = self.path(node.args[0]), _constant(node.args[1]) if len(node.args) > 1 else None
                return None if base is None else f"{base}.{attr or '?'}"
        return None

    # -- names bound by the cell -------------------------------------------------------------
    def bind(self, target, value_path=None):
        for node in _targets(target):
            if isinstance(node, ast.Name):
                if value_path is None:
                    self.external.pop(node.id, None)  # now the learner's own value
                else:
                    self.external[node.id] = value_path
            else:
                self.write(node)

    def write(self, node):
        """An attribute or item of ``node.value`` is set or deleted."""
        if isinstance(node, ast.Attribute) and node.attr in WRITE_DUNDERS:
            self.flag(node, f"改写了 {node.attr}", f"rewrites {node.attr}")
            return
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            path = self.path(node)
            if path is not None and not _under(path, self.config_paths):
                self.flag(node, f"修改了外部对象 {path}", f"modifies {path}, which is not the learner's own object",
                          local=_restored(path))

    def import_(self, node, module):
        if _under(module, [REFERENCE]):
            self.flag(node, f"导入了参考实现 {module}", f"imports the reference implementation {module}", local=True)

    def visit_Import(self, node):
        for alias in node.names:
            self.import_(node, alias.name)
            if alias.asname:
                self.external[alias.asname] = alias.name
            else:
                self.external[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node):
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            self.import_(node, f"{module}.{alias.name}" if module else alias.name)
            if alias.name != "*":
                self.external[alias.asname or alias.name] = f"{module}.{alias.name}"

    def visit_Assign(self, node):
        self.visit(node.value)
        value = self.path(node.value)
        for target in node.targets:
            self.bind(target, value)
            self._visit_target(target)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)
            self.bind(node.target, self.path(node.value))
        self._visit_target(node.target)

    def visit_AugAssign(self, node):
        self.visit(node.value)
        self.bind(node.target)
        self._visit_target(node.target)

    def visit_NamedExpr(self, node):
        self.visit(node.value)
        self.bind(node.target, self.path(node.value))

    def visit_Delete(self, node):
        for target in node.targets:
            self.bind(target)
            self._visit_target(target)

    def visit_For(self, node):
        self.visit(node.iter)
        self.bind(node.target)
        self._visit_target(node.target)
        for stmt in node.body + node.orelse:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_withitem(self, node):
        self.visit(node.context_expr)
        if node.optional_vars is not None:
            self.bind(node.optional_vars)
            self._visit_target(node.optional_vars)

    def visit_comprehension(self, node):
        self.visit(node.iter)
        self.bind(node.target)
        for cond in node.ifs:
            self.visit(cond)

    def _visit_target(self, target):
        """Read-side checks inside a target (``x.f_back.y = 1`` walks a frame)."""
        for node in _targets(target):
            if isinstance(node, (ast.Attribute, ast.Subscript)):
                self.visit(node.value)
                if isinstance(node, ast.Subscript):
                    self.visit(node.slice)

    def visit_FunctionDef(self, node):
        if node.name in FORBIDDEN_DEFS:
            self.flag(node, f"定义了 {node.name}", f"defines {node.name}, which lets an output lie to the checks",
                      local=True)
        for expr in node.decorator_list + node.args.defaults + [d for d in node.args.kw_defaults if d]:
            self.visit(expr)
        params = {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}
        params |= {a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None}
        self._body(node.body, params)  # a parameter named ``F`` is the caller's value, not the module
        self.external.pop(node.name, None)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self._bases(node, node.bases)
        for expr in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.visit(expr)
        self._body(node.body, set())
        self.external.pop(node.name, None)

    def _body(self, stmts, params):
        """Visit a function or class body: names it binds are its own, they do not leak out."""
        outer = self.external
        self.external = {k: v for k, v in outer.items() if k not in params}
        for stmt in stmts:
            self.visit(stmt)
        self.external = outer

    def _bases(self, node, bases):
        for base in bases:
            name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
            if name in FORBIDDEN_BASES:
                self.flag(node, f"继承了 {name}", f"subclasses {name}, which lets an output lie to the checks",
                          local=True)

    # -- reads and calls -----------------------------------------------------------------------
    def visit_Attribute(self, node):
        self._attr_read(node, node.attr)
        self.generic_visit(node)

    def _attr_read(self, node, attr):
        if attr in FRAME_ATTRS or attr in INTERNAL_DUNDERS:
            self.flag(node, f"访问了解释器内部的 {attr}", f"reaches into the interpreter with {attr}")

    def visit_Name(self, node):
        if node.id in ("exec", "eval", "compile", "__import__", "get_ipython"):
            self.flag(node, f"使用了 {node.id}", f"uses {node.id}")  # a call of these is handled below

    def visit_Call(self, node):
        func, path = node.func, self.path(node.func)
        name = func.id if isinstance(func, ast.Name) else None
        if name in ("exec", "eval", "compile") or path in ("builtins.exec", "builtins.eval", "builtins.compile"):
            self._run_code(node)
        elif name == "__import__" or path in ("importlib.import_module", "builtins.__import__"):
            module = _constant(node.args[0]) if node.args else None
            if module is None:
                self.flag(node, "动态导入了模块", "imports a module whose name is computed at run time")
            else:
                self.import_(node, module)
        elif self._magic(node):
            pass
        else:
            self._call(node, func, path, name)
            self.visit(func)
        for arg in node.args[1:] if name in ("exec", "eval", "compile") else node.args:
            self.visit(arg)
        for keyword in node.keywords:
            self.visit(keyword.value)

    def _call(self, node, func, path, name):
        if path is not None and (path in FORBIDDEN_CALLS or _under(path, FORBIDDEN_CALL_TREES)
                                 or path.startswith(FORBIDDEN_CALL_PREFIXES)):
            self.flag(node, f"调用了 {path}", f"calls {path}")
        if name in ("setattr", "delattr") or (isinstance(func, ast.Attribute)
                                               and func.attr in ("__setattr__", "__delattr__")):
            bound = isinstance(func, ast.Attribute) and self.path(func.value) is not None
            target = self.path(func.value) if bound else (self.path(node.args[0]) if node.args else None)
            if target is not None and not _under(target, self.config_paths):
                attr = _constant(node.args[1 - bound]) if len(node.args) > 1 - bound else None
                self.flag(node, f"用 {getattr(func, 'attr', name)} 修改了外部对象 {target}",
                          f"modifies {target} with {getattr(func, 'attr', name)}",
                          local=attr is not None and _restored(f"{target}.{attr}"))
        if name in ("getattr", "hasattr") and len(node.args) > 1:
            attr = _constant(node.args[1])
            target = self.path(node.args[0])
            if attr is not None:
                self._attr_read(node, attr)
            elif target is not None and _under(target, ("tutor", REFERENCE, "nbgrader", "builtins", "sys")):
                self.flag(node, f"用计算出的名字读取了 {target} 的属性",
                          f"reads an attribute of {target} by a computed name")
        if name == "type" and len(node.args) == 3:
            bases = node.args[1]
            if isinstance(bases, ast.Tuple):
                self._bases(node, bases.elts)
            else:
                self.flag(node, "用 type() 创建了基类未知的类", "creates a class with type() from unknown bases",
                          local=True)
        opener = name in OPENERS or path in OPENERS
        method_open = not opener and isinstance(func, ast.Attribute) and func.attr == "open"  # Path(...).open("w")
        if (opener or method_open) and self._writes(node, position=0 if method_open else 1):
            self.flag(node, "以写入方式打开了文件", "opens a file for writing")
        if isinstance(func, ast.Attribute):
            if func.attr in FILE_WRITE_METHODS:
                self.flag(node, f"用 {func.attr} 修改了文件", f"changes files with {func.attr}")
            receiver = self.path(func.value)
            if func.attr in NAMESPACE_MUTATORS and receiver is not None and (
                    receiver.endswith("__dict__") or _under(receiver, ("sys.modules", "builtins"))):
                self.flag(node, f"修改了 {receiver}", f"modifies {receiver}")

    @staticmethod
    def _writes(node, position=1):
        """True when the open call ``node`` may write: its mode (argument ``position`` or ``mode=``) is
        computed or has w, a, x or +."""
        mode = (node.args[position] if len(node.args) > position
                else next((k.value for k in node.keywords if k.arg == "mode"), None))
        if mode is None:
            return False
        value = _constant(mode)
        return value is None or any(c in value for c in "wax+")

    def _run_code(self, node):
        """``exec``/``eval``/``compile`` of a literal is audited as code; of a computed string, flagged."""
        code = _constant(node.args[0]) if node.args else None
        if code is None:
            self.flag(node, f"用 {getattr(node.func, 'id', 'exec')} 运行了运行时拼出的代码",
                      f"runs code built at run time with {getattr(node.func, 'id', 'exec')}")
            return
        self._nested(node, code)

    def _nested(self, node, code):
        try:
            tree = ast.parse(code)
        except SyntaxError:
            return
        outer, self._line = self._line, self._line or node.lineno
        self.visit(tree)
        self._line = outer

    def _magic(self, node):
        """``%magic`` / ``!shell`` as IPython translates them: ``get_ipython().run_line_magic(...)``."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
                and getattr(func.value.func, "id", None) == "get_ipython"):
            return False
        magic = _constant(node.args[0]) if node.args else None
        if func.attr in ("run_line_magic", "run_cell_magic") and magic in self.safe_magics:
            if func.attr == "run_cell_magic" and len(node.args) > 2:
                body = _constant(node.args[2])
                if body is not None:
                    self._nested(node, body)
            return True
        shown = "!" if func.attr in ("system", "getoutput") else f"%{magic}" if magic else func.attr
        self.flag(node, f"使用了 IPython 命令 {shown}", f"uses the IPython command {shown}")
        return True


# The names the course's setup cells bind, for auditing a cell on its own (tests, tools); a
# notebook's audit learns them from its own read-only cells instead.
SETUP_NAMES = {"__builtins__": "builtins", "torch": "torch", "np": "numpy", "numpy": "numpy", "nn": "torch.nn",
               "F": "torch.nn.functional", "math": "math", "random": "random", "plt": "matplotlib.pyplot",
               "report": "tutor.grading.report", "grade": "tutor.grading.grade"}


@lru_cache(maxsize=4096)  # the read-only cells are the same in every submission; trees are only read
def _parse(source):
    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return None  # the kernel cannot run it either: the cell errors and nothing is tampered with


def audit_source(source, external=None, config_paths=CONFIG_PATHS, safe_magics=SAFE_MAGICS):
    """Return a ``Finding(line, 中文, English, local)`` for each construct in one cell that reaches the
    grading, in line order.

    ``external`` (a dict, updated in place) carries the names bound to outside objects across the
    cells of a notebook (default: a copy of ``SETUP_NAMES``). IPython syntax (``%magic``,
    ``!shell``) is translated first. ``config_paths`` and ``safe_magics``: the allow-lists (the
    defaults, or ``AuditSubmission``'s settings).
    """
    external = dict(SETUP_NAMES) if external is None else external
    tree = _parse(source)
    if tree is None:
        return []
    auditor = _Auditor(external, config_paths, safe_magics)
    auditor.visit(tree)
    return sorted(set(auditor.found))


def builtin_uses(source, external=None, forbidden=FORBIDDEN_BUILTINS):
    """``[(line, name)]``: a built-in an exercise replaces (``F.layer_norm``, …; ``forbidden`` is the
    table, ``tutor.guard.forbidden_for(exercise names)``), by whatever name, used inside a def or
    class body, or imported by name. ``external`` as in ``audit_source``, as it stands before the
    cell (not changed). A method reached through a value (``loss.backward()``) has no path: the
    checks' run-time guard sees it."""
    tree = _parse(source)
    if tree is None:
        return []
    auditor = _Auditor(dict(SETUP_NAMES) if external is None else dict(external))
    found = []
    for top in tree.body:
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found += [(node.lineno, forbidden[path]) for node in ast.walk(top)
                      if isinstance(node, (ast.Name, ast.Attribute))
                      and (path := auditor.path(node)) in forbidden]
        elif isinstance(top, (ast.Import, ast.ImportFrom)):
            auditor.visit(top)
            found += [(top.lineno, forbidden[auditor.external[a.asname or a.name]]) for a in top.names
                      if auditor.external.get(a.asname or a.name) in forbidden]
    return found



def bound_names(tree, defs_only=False):
    """Names a cell binds in the notebook's namespace, top-level statements first: every name stored
    outside function and class bodies, lambdas and comprehensions (assignments, for/with targets,
    walrus), and def, class and import names; ``defs_only``: the def and class names alone."""
    bound, todo = {}, deque(tree.body)
    while todo:
        node = todo.popleft()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound[node.name] = None
            continue
        if defs_only:
            pass
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update(dict.fromkeys((a.asname or a.name).split(".")[0] for a in node.names))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound[node.id] = None
        if not isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            todo.extend(ast.iter_child_nodes(node))
    return list(bound)


def read_names(tree):
    """Every name the code reads (loads), at any depth."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def defined(source):
    """Names a cell defines at top level (``def``/``class``): the exercise's contract names."""
    tree = _parse(source)
    return [] if tree is None else bound_names(tree, defs_only=True)


