"""Checks of chapter 07 (``solutions/copy_task.py``): the copy-task batch, its loss and its metric.

``make_copy_batch`` draws random content, which cannot match the reference's: its check judges the
properties of a batch instead (``CustomCheck``).
"""
import torch
import torch.nn.functional as F

from .. import guard
from ..engine.compare import learner_line
from ..engine.messages import define_mistakes, say
from ..engine.running import not_implemented, randn, refused
from ..engine.specs import Case, CheckResult, CustomCheck, FunctionCheck, wrong

MISTAKES = define_mistakes({
    "loss_includes_pad": ("损失把 PAD 位置也算进去了：用 ignore_index=pad_id，只在真实目标 token 上求平均",
                          "the loss counts PAD positions: use ignore_index=pad_id and average over real target tokens "
                          "only"),
    "loss_sum_not_mean": ("损失求和而不是求平均：应对非 PAD 位置取平均",
                          "the loss is summed instead of averaged over the non-PAD positions"),
    "em_whole_row": ("比较了整行（包括 EOS 之后的内容）：只比较到第一个 EOS（含）为止",
                     "the whole row was compared (including what follows EOS): compare up to and including the first "
                     "EOS only"),
    "em_token_accuracy": ("算成了逐 token 准确率：exact match 按行计分，一行中到 EOS 为止全部正确才算对",
                          "a per-token accuracy: exact match scores whole rows, a row counts only when every token up "
                          "to EOS is right"),
})


def copy_loss_variants(ref, case):
    logits, target = case["logits"], case["tgt_out"]
    flat = (logits.reshape(-1, logits.size(-1)), target.reshape(-1))
    return [wrong("loss_includes_pad", lambda: {"loss": F.cross_entropy(*flat)}),
            wrong("loss_sum_not_mean",
                  lambda: {"loss": F.cross_entropy(*flat, ignore_index=case["pad_id"], reduction="sum")})]


def exact_match_variants(ref, case):
    pred, target = case["pred"], case["tgt_out"]

    def whole_row():
        p, t = pred, target
        width = max(p.size(1), t.size(1))
        p = F.pad(p, (0, width - p.size(1)), value=case["pad_id"])
        t = F.pad(t, (0, width - t.size(1)), value=case["pad_id"])
        return {"score": float((p == t).all(dim=1).double().mean())}

    def token_accuracy():
        T = min(pred.size(1), target.size(1))
        real = target[:, :T] != case["pad_id"]
        return {"score": float(((pred[:, :T] == target[:, :T]) & real).sum() / real.sum())}

    return [wrong("em_whole_row", whole_row), wrong("em_token_accuracy", token_accuracy)]


# ---------------------------------------------------------------- the checks

def _copy_loss_cases():
    g = torch.Generator().manual_seed(14)
    return [Case("B=2 T=5 V=7, 有填充 / with padding",
                 {"logits": randn(g, 2, 5, 7, scale=2.0), "tgt_out": torch.tensor([[3, 4, 5, 2, 0], [6, 2, 0, 0, 0]])},
                 {"pad_id": 0}),
            Case("pad_id=6, B=1", {"logits": randn(g, 1, 4, 7), "tgt_out": torch.tensor([[3, 2, 6, 6]])},
                 {"pad_id": 6})]


def _exact_match_cases():
    tgt = torch.tensor([[3, 4, 2, 0], [5, 2, 0, 0], [6, 7, 8, 2], [4, 2, 0, 0]])
    cases = [Case("一行错 / one row wrong before EOS",
                  {"pred": torch.tensor([[3, 4, 2, 0], [5, 2, 0, 0], [6, 7, 3, 2], [4, 2, 0, 0]]), "tgt_out": tgt}),
             Case("EOS 之后不同 / differences after EOS only",
                  {"pred": torch.tensor([[3, 4, 2, 9], [5, 2, 7, 7], [6, 7, 8, 2], [4, 2, 3, 3]]), "tgt_out": tgt}),
             Case("pred 更短 / pred shorter than the target",
                  {"pred": torch.tensor([[3, 4, 2], [5, 2, 0], [6, 7, 8], [4, 9, 0]]), "tgt_out": tgt})]
    for c in cases:
        c.extra = {"eos_id": 2, "pad_id": 0}
    return cases


def _copy_batch_properties(batch, B, V, min_len, max_len):
    """None when a batch follows the copy-task contract, else the first broken property."""

    PAD, BOS, EOS = 0, 1, 2
    if not isinstance(batch, (tuple, list)) or len(batch) != 3:
        return "应返回 (src, tgt_in, tgt_out) 三个张量 / must return three tensors (src, tgt_in, tgt_out)"
    for name, t in zip(("src", "tgt_in", "tgt_out"), batch):
        if type(t) is not torch.Tensor or t.dtype != torch.long:
            return f"{name}: 应为 LongTensor / must be a LongTensor, got {getattr(t, 'dtype', type(t).__name__)}"
        if tuple(t.shape) != (B, max_len + 1):
            return f"{name}: 形状不对 / wrong shape: expected {(B, max_len + 1)}, got {tuple(t.shape)}"
    src, tgt_in, tgt_out = batch
    if not torch.equal(src, tgt_out):
        return "tgt_out 应等于 src / tgt_out must equal src"
    for r in range(B):
        eos = (src[r] == EOS).nonzero().flatten()
        if len(eos) != 1:
            return f"src 第 {r} 行应恰好有一个 EOS / row {r} of src must hold exactly one EOS: {src[r].tolist()}"
        L = int(eos[0])
        x = src[r, :L]
        if not min_len <= L <= max_len:
            return f"第 {r} 行长度 {L} 不在 [{min_len}, {max_len}] / row {r} length {L} outside [{min_len}, {max_len}]"
        if len(x) and (x.min() < 3 or x.max() >= V):
            return f"内容 token 应在 [3, {V}) / content tokens must lie in [3, {V}): row {r} {src[r].tolist()}"
        if (src[r, L + 1:] != PAD).any():
            return f"src 第 {r} 行 EOS 之后应全为 PAD / after EOS, row {r} of src must be PAD: {src[r].tolist()}"
        expected_in = torch.cat([torch.tensor([BOS]), x, torch.full((max_len - L,), PAD)])
        if not torch.equal(tgt_in[r], expected_in):
            return (f"tgt_in 第 {r} 行应为 [BOS] + x + PAD / row {r} of tgt_in must be [BOS] + x + PAD: "
                    f"expected {expected_in.tolist()}, got {tgt_in[r].tolist()}")
    return None


def _judge_copy_batch(fn):
    name = "make_copy_batch"
    if (problem := refused(name, fn)) is not None:
        return problem
    cases = [("B=64, V=10, len 2..6", (64, 10, 2, 6)), ("B=1, V=4, len 3..3", (1, 4, 3, 3)),
             ("B=32, V=20, len 1..8", (32, 20, 1, 8))]
    for label, (B, V, lo, hi) in cases:
        try:
            with guard.from_scratch():
                first = fn(B, V, lo, hi, generator=torch.Generator().manual_seed(0))
                again = fn(B, V, lo, hi, generator=torch.Generator().manual_seed(0))
        except NotImplementedError:
            return not_implemented(name, label)
        except Exception as exc:
            return CheckResult(name, False, label, f"{name}: 用例 case 「{label}」: "
                               f"{say('raised', error=type(exc).__name__, text=exc, line=learner_line(exc))}")
        problem = _copy_batch_properties(first, B, V, lo, hi)
        if problem is None and not all(torch.equal(a, b) for a, b in zip(first, again)):
            problem = "同一个 generator 种子应得到相同的批次 / the same generator seed must give the same batch"
        if problem is None and B > 8 and len({int((row == 2).nonzero()[0]) for row in first[0]}) < 2:
            problem = "长度应在 [min_len, max_len] 内随机变化 / lengths must vary within [min_len, max_len]"
        if problem is not None:
            return CheckResult(name, False, label, f"{name}: 用例 case 「{label}」: {problem}")
    return CheckResult(name, True, None, f"{name}: {say('all_passed', n=len(cases))}")


CustomCheck("make_copy_batch", judge=_judge_copy_batch)

FunctionCheck("copy_loss", cases=_copy_loss_cases, outputs=("loss",), grads=("logits",), variants=copy_loss_variants,
              call=lambda f, case, x: f(x["logits"], case["tgt_out"].clone(), case["pad_id"]),
              mistakes=("loss_includes_pad", "loss_sum_not_mean"))

FunctionCheck("exact_match", cases=_exact_match_cases, outputs=("score",), variants=exact_match_variants,
              call=lambda f, case, _: f(case["pred"].clone(), case["tgt_out"].clone(), 2, 0),
              mistakes=("em_whole_row", "em_token_accuracy"))
