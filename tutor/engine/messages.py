"""Every learner-facing line of the engine, and the explanation of every known mistake.

``MESSAGES[key] = (中文, English)``: ``say(key, **values)`` renders ``"中文 / English"`` with the
values filled in, so a wording change is one edit here. Lines that tag each number in both languages
("期望 expected (2, 6)") keep the tags in the English half.

``MISTAKES[id] = (中文, English)``: each topic module (``tutor.checks.attention``, ...) declares the
mistakes its checks name with ``define_mistakes({...})``, right beside the bugs that make them; an
id defined twice is refused. ``explain(id)`` is the line a learner reads.
"""
import re

from .. import lang

MESSAGES = {
    # how a check ends
    "not_implemented": ("尚未实现", "not implemented yet"),
    "all_passed": ("{n} 个用例全部通过", "all {n} cases passed"),
    "case": ("{name}: 用例 case {i}/{n} 「{label}」{described}", ""),  # tagged in both languages already
    "raised": ("运行出错", "raised {error}: {text}{line}"),
    "required_inputs": ("契约要求这个用例的输入也能运行", "the contract requires these inputs to work: {shapes}"),
    "not_returned": ("{key}: 没有返回", "not returned{graph}"),
    "no_graph": (" —— 输出没有自动求导图", "the output has no autograd graph (no_grad / inference_mode)"),
    "must_return": ("{call} 应返回", "must return ({names}), got {got}"),
    # building the learner's module
    "construct_failed": ("构造 {call} 失败", "constructing {call} failed: {error}: {text}{line}"),
    "not_a_module": ("{call} 应是 nn.Module", "must be an nn.Module, got {got}"),
    "not_a_subclass": ("{call} 应是 {base} 的子类", "must be a {base} subclass; its bases: {got}"),
    "state_dict_keys": ("state_dict 与契约不符",
                        "state_dict does not follow the contract: 缺少 missing {missing}{extra}"
                        " —— 请使用契约中的属性名 / use the contract's attribute names"),
    "load_failed": ("加载参考权重失败（形状不符）", "loading the reference weights failed (shape mismatch): {error}"),
    # comparing one output
    "must_be_float": ("{key}: 应为 Python float", "must be a Python float, got {got}"),
    "text_differs": ("{key}: 期望", "expected {expected}, 得到 / got {got}"),
    "expected_got": ("{key}: 期望", "expected {expected}, 得到 / got {got}"),
    "must_be_tensor": ("{key}: 应为 torch.Tensor", "must be a plain torch.Tensor, got {got}"),
    "wrong_dtype": ("{key}: dtype 应为", "must be {expected}, got {got}"),
    "must_be_floating": ("{key}: 应为浮点张量", "must be a floating-point tensor, got {got}"),
    "wrong_device": ("{key}: 设备不对", "must be on device {expected}, got {got}"),
    "must_be_numpy": ("{key}: 应为 NumPy 数组", "must be a NumPy array, got {got}"),
    "wrong_shape": ("{key}: 形状不对", "wrong shape: 期望 expected {expected}, 得到 got {got}"),
    "elements_differ": ("{key}: {count} 个元素不同", "elements differ, first at {idx}: expected {expected}, got {got}"),
    "nan": ("{key}: 出现 NaN", "contains NaN, first at {idx} (expected {expected})"),
    "max_error": ("{key}: 超出容差最多的元素", "max error beyond the tolerance {error} at {idx}: expected {expected}, "
                  "got {got}"),
    # the diagnosis
    "diagnosis": ("诊断", "diagnosis [{id}]: {zh} / {en}"),
    "more": ("不止一处与契约不同", "more than one thing differs from the contract"),
    "differ_otherwise": ("{cases} 另有不同", "differ in yet another way"),
    "cases": ("用例 {numbers}", "{case} {numbers}"),
    "only_cases": ("只在用例 {numbers}", "only on {case} {numbers}"),
    "mistakes_at_once": ("{n} 个错误同时存在", "{n} mistakes at once:"),
    "parts_alone": ("逐个部件单独测试（同样的权重）", "each part of your {name} tested alone (same weights):"),
    "places": ("{n} 处", "places"),
    "where_part": ("定位", "where: 你的 {name} 的 {places}（{kind}）/ your {name}'s {places} ({kind}):"),
    "where_wiring": ("定位", "where: 你的 {name} 连接各部件的方式 / how your {name} connects its parts:"),
    "not_known": ("不是已知错误", "not a known mistake: {reason}"),
    "parts_do_not_explain": ("上面的部件解释不了全部差别", "the parts above do not explain the whole difference"),
    # cost
    "cost_broken": ("{name}: 结果都对，但开销不符合契约", "every output is right, but the cost breaks the contract"),
    "total": ("{shown}（共", "total {total}）"),
}


# The English edition's line where the generic reduction of the bilingual one (``lang.english_only``) would
# lose a subject the Chinese half carries, or where the English half tags its values in Chinese.
ENGLISH = {
    "must_return": "{call} must return ({names}), got {got}",
    "not_a_module": "{call} must be an nn.Module, got {got}",
    "not_a_subclass": "{call} must be a {base} subclass; its bases: {got}",
    "state_dict_keys": "state_dict does not follow the contract: missing {missing}{extra}; use the contract's "
                       "attribute names",
    "places": "{n} places",
    "where_part": "where: your {name}'s {places} ({kind}):",
    "where_wiring": "where: how your {name} connects its parts:",
    "total": "{shown} (total {total})",
    "differ_otherwise": "{cases} differ in yet another way",
}


def say(key, /, **values):
    """The line ``key`` of ``MESSAGES`` with ``values`` filled in: ``"中文 / English"`` (``"中文）/ English"``
    after a full-width parenthesis; the Chinese alone where the English half is empty). In the English
    edition (``tutor.lang``) the English alone: ``ENGLISH[key]``, or the bilingual line reduced by
    ``lang.english_only`` (which keeps a ``"{key}: "`` subject the two halves share)."""
    zh, en = MESSAGES[key]
    line = zh if not en else lang.bilingual(zh, en)
    if lang.english():
        return lang.english_only(ENGLISH.get(key, line).format(**values))
    return line.format(**values)


MISTAKES = {}  # mistake id -> (中文, English), declared by the topic modules


MARKDOWN = re.compile(r"`|(?<! )\*\*|\*\*(?! )")  # inline code, or ** not spaced like Python's power


def define_mistakes(table):
    """Declare the mistakes of one topic (``{id: (中文, English)}``); returns ``table``. The text is
    plain: no Markdown (a learner reads it in plain-text output as well as on a page)."""
    for mid, text in table.items():
        if mid in MISTAKES:
            raise ValueError(f"mistake {mid!r} is explained twice")
        zh, en = text
        if not (zh and en and zh != en):
            raise ValueError(f"mistake {mid!r}: explain it in 中文 and in English")
        if MARKDOWN.search(zh + en):
            raise ValueError(f"mistake {mid!r}: plain text, no Markdown (`code`, **bold**)")
        MISTAKES[mid] = text
    return table


def explain(mistake_id):
    """One line: ``诊断 / diagnosis [id]: 中文 / English`` (``diagnosis [id]: English`` in the English edition)."""
    zh, en = MISTAKES[mistake_id]
    if lang.english():
        return f"diagnosis [{mistake_id}]: {en}"
    return say("diagnosis", id=mistake_id, zh=zh, en=en)
