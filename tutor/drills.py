"""Practice mode of the 手撕 drill bank (lessons/10_drills.py): timer, verdict, progress, reveal,
reset and mock interviews. Learner-side: never imports ``solutions`` until a reveal asks for it.

    from tutor.drills import start, finish, reveal, give_up, reset, mock_interview, progress
    start("softmax")                 # ⏱️ the timer of one drill
    _ = report("softmax", softmax)   # the course check (tutor.grading), then:
    finish("softmax", _)             # time taken, progress saved
    reveal("softmax")                # the reference and its classic mistakes: only after a pass or give_up()
    give_up("softmax")               # unlocks the reveal without a pass
    reset("softmax")                 # the blank drill cell back into workspace/10_drills.ipynb
    mock_interview()                 # workspace/mock_interview_<time>.ipynb: 3 drills, easy/medium/hard

Progress (which drills passed, attempts, best time) is the ``"drills"`` part of the learner's record,
``tutor.store`` (``progress.json`` in ``workspace/`` or ``workspace/en/``; nothing is written elsewhere),
beside what the chapters' checks found: ``tutor.progress()`` shows both. In ``workspace/en/`` (the
English edition) resets and mock interviews take their cells from ``notebooks/en/``.
"""
import ast
import builtins
import copy
import datetime
import inspect
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path

import contract

from . import lang, mistakes, store
from .checks import CHECKS


def print(*args, **kwargs):
    """Every line this module shows, in the course language (``tutor.lang.text``: English only in the
    English edition)."""
    builtins.print(*(lang.text(a) for a in args), **kwargs)


LESSON = "10_drills"
MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
HEADERS = ("## 练习 ", "## Drill ")  # every drill's group of cells starts with a markdown cell like this (zh, en)
USES = re.compile(r"uses your ([^)]*)")  # how a drill's docstring names the earlier drills it builds on


@dataclass(frozen=True)
class Drill:
    name: str            # the course check that grades it (tutor.checks.CHECKS)
    title: str           # 中文 / English
    minutes: int         # interview-style target time

    @property
    def mistakes(self):
        """The classic mistakes its check names (the check's ``mistakes=``; tests/test_registry.py
        ties them to the catalogue)."""
        return CHECKS[self.name].mistakes

    @property
    def objects(self):
        """The reference objects a reveal shows: every component this drill's check proves."""
        return tuple(c.name for c in contract.COMPONENTS if self.name in c.checks)


DRILLS = [
    Drill("softmax", "数值稳定的 softmax / stable softmax", 5),
    Drill("attention_numpy", "NumPy 注意力 / attention in NumPy", 8),
    Drill("scaled_dot_product_attention",
          "缩放点积注意力（掩码、全遮挡行）/ scaled dot-product attention (mask, fully masked rows)", 10),
    Drill("MultiHeadAttention", "多头注意力 / multi-head attention", 15),
    Drill("sinusoidal_positional_encoding", "正弦位置编码表 / sinusoidal positional encoding", 8),
    Drill("PositionalEncoding", "位置编码模块 / positional-encoding module", 5),
    Drill("apply_rope", "旋转位置编码 RoPE / rotary position embedding", 10),
    Drill("FeedForward", "前馈网络 / feed-forward network", 5),
    Drill("LayerNorm", "LayerNorm", 8),
    Drill("RMSNorm", "RMSNorm", 5),
    Drill("ResidualLayerNorm", "残差 + LayerNorm（Post-LN）/ residual + LayerNorm (Post-LN)", 3),
    Drill("PreLNResidual", "Pre-LN 残差子层 / Pre-LN residual sublayer", 3),
    Drill("make_pad_mask", "填充掩码 / padding mask", 3),
    Drill("make_subsequent_mask", "因果掩码 / causal mask", 3),
    Drill("EncoderLayer", "编码器层 / encoder layer", 10),
    Drill("DecoderLayer", "解码器层 / decoder layer", 12),
    Drill("copy_loss", "忽略 PAD 的交叉熵 / cross-entropy that ignores PAD", 5),
    Drill("exact_match", "序列完全匹配率 / sequence exact match", 5),
    Drill("repeat_kv", "GQA 的 KV 头重复 / repeating KV heads for GQA", 3),
    Drill("GroupedQueryAttention", "分组查询注意力（RoPE、KV 缓存）/ grouped-query attention (RoPE, KV cache)", 20),
    Drill("SwiGLU", "SwiGLU 前馈网络 / SwiGLU FFN", 5),
    Drill("make_sliding_window_mask", "滑动窗口因果掩码 / causal sliding-window mask", 5),
    Drill("top_k_filter", "top-k 过滤 / top-k filtering", 5),
    Drill("top_p_filter", "top-p（核）过滤 / top-p (nucleus) filtering", 8),
    Drill("sampling_probs", "温度 + top-k + top-p 的采样分布 / sampling distribution", 5),
    Drill("sample_next_token", "采样下一个 token / sampling the next token", 5),
    Drill("generate", "带 KV 缓存的生成 / generation with a KV cache", 12),
    Drill("beam_search", "束搜索 / beam search", 20),
    Drill("softmax_backward", "softmax 反向传播 / softmax backward", 8),
    Drill("layer_norm_backward", "LayerNorm 反向传播 / LayerNorm backward", 15),
    Drill("cross_entropy", "交叉熵（ignore_index、标签平滑）/ cross-entropy (ignore_index, label smoothing)", 10),
    Drill("attention_flops_and_memory", "注意力的 FLOPs 与显存 / attention FLOPs and memory", 8),
    Drill("kv_cache_bytes", "KV 缓存大小 / KV-cache size", 3),
    Drill("batch_norm_forward", "BatchNorm 前向（训练模式）/ BatchNorm forward (training mode)", 5),
    Drill("batch_norm_backward", "BatchNorm 反向传播 / BatchNorm backward", 15),
    Drill("mlp_backward", "MLP 反向传播 / MLP backward", 10),
    Drill("online_softmax", "在线 softmax / online softmax", 8),
    Drill("tiled_attention", "分块注意力（FlashAttention 前向）/ tiled attention (FlashAttention's forward)", 15),
    Drill("TopKRouter", "MoE 的 top-k 路由器 / MoE top-k router", 8),
    Drill("load_balancing_loss", "MoE 负载均衡损失 / MoE load-balancing loss", 5),
    Drill("quantize_int8", "INT8 逐通道对称量化 / symmetric INT8 per-channel quantization", 5),
    Drill("ppo_clip_loss", "PPO 裁剪目标 / PPO clipped objective", 8),
    Drill("grpo_loss", "GRPO 损失 / GRPO loss", 12),
    Drill("dpo_loss", "DPO 损失 / DPO loss", 5),
    Drill("LoRALinear", "LoRA 线性层 / LoRA linear layer", 10),
]
BY_NAME = {d.name: d for d in DRILLS}

_STARTED = {}     # drill -> time.monotonic() at start()
_UNLOCKED = set()  # drills passed or given up in this kernel


def _drill(name):
    if name not in BY_NAME:
        raise KeyError(f"没有这个练习 / no drill named {name!r}; drills: {', '.join(BY_NAME)}")
    return BY_NAME[name]


# ---------------------------------------------------------------- progress (the learner's record, tutor.store)

def load_progress():
    """{drill: {"passed", "attempts", "best_seconds", "gave_up", "last"}} from the learner's record ({} if none)."""
    return store.load().get("drills", {})


def _record(name, passed, seconds=None, gave_up=False):
    def change(data):
        entry = data.setdefault("drills", {}).setdefault(
            name, {"passed": False, "attempts": 0, "best_seconds": None, "gave_up": False})
        if gave_up:
            entry["gave_up"] = True
        else:
            entry["attempts"] += 1
            if passed:
                entry["passed"] = True
                if seconds is not None and (entry["best_seconds"] is None or seconds < entry["best_seconds"]):
                    entry["best_seconds"] = round(seconds, 1)
        entry["last"] = datetime.datetime.now().isoformat(timespec="seconds")
    return store.update(change)


def progress():
    """Print every drill with its status and best time from the progress file."""
    data, path = load_progress(), store.path()
    where = path.name if path else "未保存：不在 workspace/ 中运行 / not saved: not running in workspace/"
    print(f"练习进度 / drill progress ({where})")
    for i, d in enumerate(DRILLS, 1):
        entry = data.get(d.name, {})
        mark = "✅" if entry.get("passed") else ("🏳️" if entry.get("gave_up") else "·")
        best = f"{entry['best_seconds']:.1f} s" if entry.get("best_seconds") is not None else "-"
        print(f"{mark} {i:2d}. {d.name:32s} 目标 / target {d.minutes:2d} min   最好 / best {best}")


# ---------------------------------------------------------------- timer, verdict

def start(name):
    """Start (or restart) the timer of drill ``name``."""
    d = _drill(name)
    _STARTED[name] = time.monotonic()
    print(f"⏱️ {name}: 计时开始，目标 {d.minutes} 分钟 / timer started, target {d.minutes} min. "
          f"写好下面的单元格后运行检查 / write the cell below, then run the check")


def finish(name, result):
    """After ``report(name, obj)``: the time taken, and the attempt recorded (a pass unlocks ``reveal``)."""
    _drill(name)
    if result is None:  # no reference package here: the check could not judge
        print("⏱️ 无法判定，未计入进度 / no verdict, nothing recorded")
        return
    seconds = time.monotonic() - _STARTED[name] if name in _STARTED else None
    took = (f"用时 / time taken {seconds:.1f} s" if seconds is not None
            else "没有计时：先运行 start / not timed: run start first")
    if result.passed:
        _UNLOCKED.add(name)
    saved = _record(name, result.passed, seconds)
    verdict = "通过 / passed" if result.passed else "未通过 / not yet"
    note = (f"进度已记录 / progress saved in {saved.name}" if saved
            else "进度未保存（不在 workspace/ 中）/ progress not saved (not in workspace/)")
    print(f"⏱️ {name}: {verdict}, {took}; {note}")


def give_up(name):
    """Unlock the reveal of drill ``name`` without a pass (recorded as given up), and reveal it."""
    _drill(name)
    _UNLOCKED.add(name)
    _record(name, False, gave_up=True)
    reveal(name)


# ---------------------------------------------------------------- reveal

def _unlocked(name):
    return name in _UNLOCKED or load_progress().get(name, {}).get("passed", False)


def reveal(name):
    """The reference solution and the classic mistakes of drill ``name`` -- only after a passing
    attempt (this session or in the progress file) or ``give_up(name)``."""
    d = _drill(name)
    if not _unlocked(name):
        print(f"🔒 {name}: 先写出能通过检查的答案，或者运行 give_up({name!r}) 再看参考答案 / "
              f"pass the check first, or call give_up({name!r}) to see the reference")
        return
    print(f"📖 {name}: 参考答案 / reference solution")
    try:
        import solutions
    except ImportError:
        print("（这个环境没有安装参考实现 solutions，看不到参考代码 / the reference package solutions is not "
              "installed here, so the reference code cannot be shown）")
    else:
        for obj in d.objects:
            lines = inspect.getsource(getattr(solutions, obj)).rstrip().split("\n")
            code = "\n".join(line for line in lines if line.strip() not in MARKERS)
            builtins.print((lang.english_code(code) if lang.english() else code) + "\n")
    print("常见错误（检查会指出名字）/ classic mistakes (the check names them):")
    for mid in d.mistakes:
        zh, en = mistakes.MISTAKES[mid]
        builtins.print(f"- {mid}: {en if lang.english() else f'{zh} / {en}'}")


# ---------------------------------------------------------------- pristine notebook, reset, mock

def pristine_notebook_path():
    """notebooks/10_drills.ipynb of this course (the generated, blank edition); notebooks/en/10_drills.ipynb
    when the notebook runs in workspace/en/."""
    cwd = Path.cwd()
    edition = store.edition(cwd)
    for root in (cwd.parent.parent if edition else cwd.parent, Path(__file__).resolve().parents[1]):
        path = root / "notebooks" / edition / f"{LESSON}.ipynb"
        if path.exists():
            return path
    raise FileNotFoundError(f"找不到 / cannot find notebooks/{edition + '/' if edition else ''}{LESSON}.ipynb")


def _read(path):
    import nbformat

    return nbformat.read(str(path), as_version=4)


def _write(nb, path):
    import nbformat

    nbformat.write(nb, str(path))


def _groups(nb):
    """{drill name: [cell indices of its group]} in notebook order (a group starts at a HEADERS cell)."""
    groups, current = {}, None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            current = [] if cell.source.startswith(HEADERS) else None
        if current is None:
            continue
        current.append(i)
        if cell.cell_type == "code" and cell.get("id", "").startswith("impl_"):
            name = next(d.name for d in DRILLS if cell.id == "impl_" + "_".join(d.objects))
            groups[name] = current
    return groups


def reset(name, notebook=None):
    """Put the blank cell of drill ``name`` back into ``notebook`` (default: workspace/10_drills.ipynb);
    the old file is kept in workspace/backup/. Reload the notebook from disk afterwards."""
    d = _drill(name)
    target = Path(notebook) if notebook else Path.cwd() / f"{LESSON}.ipynb"
    pristine = {c.get("id"): c for c in _read(pristine_notebook_path()).cells}
    cell_id = "impl_" + "_".join(d.objects)
    nb = _read(target)
    cells = [c for c in nb.cells if c.get("id") == cell_id]
    if not cells:
        raise ValueError(f"{target.name} 里没有练习 {name} 的单元格 / has no cell of drill {name}")
    backup = target.parent / "backup" / f"{target.stem}-{datetime.datetime.now():%Y%m%d-%H%M%S}.ipynb"
    backup.parent.mkdir(parents=True, exist_ok=True)
    _write(nb, backup)
    cells[0].source = pristine[cell_id].source
    cells[0].outputs, cells[0].execution_count = [], None
    _write(nb, target)
    _STARTED.pop(name, None)
    print(f"↩️ {name}: 已恢复空白单元格 / blank cell restored in {target.name} "
          f"(旧文件 / old file: backup/{backup.name}). "
          f"请在 JupyterLab 里 File → Reload Notebook from Disk / reload the notebook from disk")
    return target


def _uses(source):
    return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}


def _provided_definitions():
    """{name: source} of every top-level def/class in the collapsed (provided) cells of the chapter
    notebooks: what a mock interview may hand over for a drill that builds on another."""
    found = {}
    for path in sorted(pristine_notebook_path().parent.glob("*.ipynb")):
        for cell in _read(path).cells:
            if cell.cell_type != "code" or not cell.metadata.get("jupyter", {}).get("source_hidden"):
                continue
            tree = ast.parse(cell.source)
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    found.setdefault(node.name, ast.get_source_segment(cell.source, node))
    return found


def _needs(nb, groups, name, provided):
    """Provided definitions drill ``name`` needs (its docstring says "uses your ``X``"; then what X
    uses, transitively), in dependency order; None if one is not provided by any chapter."""
    exercised = {o for d in DRILLS for o in d.objects}
    blank = "\n".join(nb.cells[i].source for i in groups[name] if nb.cells[i].get("id", "").startswith("impl_"))
    uses = {n for m in USES.findall(blank) for n in re.findall(r"``(\w+)``", m)}
    order, todo = [], sorted((uses & exercised) - set(_drill(name).objects))
    while todo:
        dep = todo.pop()
        if dep in order:
            continue
        if dep not in provided:
            return None
        order.insert(0, dep)
        todo += sorted((_uses(provided[dep]) & exercised) - set(order))
    return order


TIERS = ((0, 3), (4, 8), (9, 60))  # easy, medium, hard: a drill's target minutes


def _draw_by_difficulty(eligible, k, rng):
    """``k`` drills taken from the difficulty tiers in turn (easy, medium, hard, easy, ...), each at random."""
    tiers = [[n for n in eligible if lo <= BY_NAME[n].minutes <= hi] for lo, hi in TIERS]
    chosen = []
    while len(chosen) < min(k, len(eligible)):
        for tier in tiers:
            left = [n for n in tier if n not in chosen]
            if left and len(chosen) < k:
                chosen.append(rng.choice(left))
    return chosen


def mock_interview(k=3, seed=None, folder=None):
    """Write a notebook with ``k`` random drills (and, collapsed, what they build on) into the
    workspace; returns its path. The drills come from the difficulty tiers in turn (k=3: one easy,
    one medium, one hard); only drills whose prerequisites the chapters provide are drawn."""
    import nbformat

    nb = _read(pristine_notebook_path())
    groups, provided = _groups(nb), _provided_definitions()
    eligible = [n for n in groups if _needs(nb, groups, n, provided) is not None]
    chosen = sorted(_draw_by_difficulty(eligible, k, random.Random(seed)), key=list(groups).index)
    setup = next(c for c in nb.cells if c.cell_type == "code")
    english = (f"{k} random drills: {', '.join(chosen)}. Run each ⏱️ cell to start its timer, write the code, "
               "run the check cell for the time and the verdict; the reference opens only after a pass (or "
               "`give_up(...)`).")
    intro = nbformat.v4.new_markdown_cell(
        f"# Mock interview\n\n{english}" if lang.english() else
        "# 模拟面试 / Mock interview\n\n"
        f"随机抽取的 {k} 道题：{'、'.join(chosen)}。每题先运行 ⏱️ 单元格开始计时，写完运行检查单元格，"
        "看用时和判定；通过（或 `give_up(...)`）之后才能看参考答案。\n\n" + english,
        id="mock_intro")
    cells = [intro, copy.deepcopy(setup)]
    deps = []
    for name in chosen:
        deps += [d for d in _needs(nb, groups, name, provided) if d not in deps and d not in chosen]
    if deps:
        given = nbformat.v4.new_code_cell("\n\n\n".join(provided[d] for d in deps), id="mock_provided")
        given.metadata.update({"jupyter": {"source_hidden": True}, "editable": False, "deletable": False})
        cells.append(given)
    for name in chosen:
        cells += [copy.deepcopy(nb.cells[i]) for i in groups[name]]
    mock = nbformat.v4.new_notebook(cells=cells, metadata=copy.deepcopy(nb.metadata))
    folder = Path(folder) if folder else Path.cwd()
    path = folder / f"mock_interview_{datetime.datetime.now():%Y%m%d-%H%M%S}.ipynb"
    _write(mock, path)
    print(f"🎲 模拟面试已生成 / mock interview written: {path.name} ({', '.join(chosen)})")
    return path


if __name__ == "__main__":  # python -m tutor.drills [k]: a mock interview in the current folder
    import sys

    mock_interview(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
