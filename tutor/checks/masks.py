"""Checks of chapter 05's masks (``solutions/masks.py``): the padding mask and the causal mask."""
import torch

from ..engine.messages import define_mistakes
from ..engine.specs import Case, FunctionCheck, wrong

MISTAKES = define_mistakes({
    "pad_mask_queries": ("填充掩码把查询行也遮挡了：它只遮挡键，形状 (B, 1, 1, T)；遮挡查询行会产生没有可见键的行",
                         "the padding mask also hides query rows: it hides keys only, shape (B, 1, 1, T); hiding query "
                         "rows leaves rows with no visible key"),
    "pad_mask_inverted": ("填充掩码反了：True 表示真实 token（可以看），PAD 位置为 False",
                          "the padding mask is inverted: True marks real tokens (may attend), PAD positions are False"),
    "causal_diagonal_hidden": ("因果掩码差一：对角线被遮挡了，每个位置应能看到自己（tril 含对角线）",
                               "causal mask off by one: the diagonal is hidden; each position must see itself (tril "
                               "with the diagonal)"),
    "causal_next_visible": ("因果掩码差一：下一个 token 可见，模型能偷看答案（应是 tril，diagonal=0）",
                            "causal mask off by one: the next token is visible, the model can peek at the answer (tril "
                            "with diagonal=0)"),
    "causal_inverted": ("因果掩码反了：True = 可以看，应是下三角（含对角线）为 True",
                        "causal mask inverted: True = may attend, the lower triangle (with the diagonal) is True"),
})


def pad_mask_variants(ref, case):
    keep = case["tokens"] != case["pad_id"]  # (B, T)
    return [wrong("pad_mask_queries", lambda: {"mask": keep[:, None, :, None]}),
            wrong("pad_mask_queries", lambda: {"mask": keep[:, None, :, None] & keep[:, None, None, :]}),
            wrong("pad_mask_inverted", lambda: {"mask": ~keep[:, None, None, :]})]


def subsequent_mask_variants(ref, case):
    ones = torch.ones(case["T"], case["T"], dtype=torch.bool)
    return [wrong("causal_diagonal_hidden", lambda: {"mask": torch.tril(ones, -1)[None, None]}),
            wrong("causal_next_visible", lambda: {"mask": torch.tril(ones, 1)[None, None]}),
            wrong("causal_inverted", lambda: {"mask": torch.triu(ones, 1)[None, None]}),
            wrong("causal_inverted", lambda: {"mask": torch.triu(ones)[None, None]})]


def _pad_mask_cases():
    return [Case("pad_id=0, B=2 T=6", {"tokens": torch.tensor([[5, 3, 4, 0, 0, 0], [7, 7, 8, 9, 3, 0]])},
                 {"pad_id": 0}),
            Case("pad_id=9, B=1 T=4", {"tokens": torch.tensor([[9, 4, 9, 9]])}, {"pad_id": 9}),
            Case("无填充 / no padding, B=3 T=2", {"tokens": torch.tensor([[1, 2], [3, 4], [5, 6]])}, {"pad_id": 0})]


FunctionCheck("make_pad_mask", cases=_pad_mask_cases, outputs=("mask",), variants=pad_mask_variants,
              call=lambda f, case, _: f(case["tokens"].clone(), case["pad_id"]),
              mistakes=("pad_mask_inverted", "pad_mask_queries"))

FunctionCheck("make_subsequent_mask", cases=lambda: [Case(f"T={T}", {}, {"T": T}) for T in (4, 1, 7)],
              outputs=("mask",), call=lambda f, case, _: f(case["T"]), variants=subsequent_mask_variants,
              mistakes=("causal_diagonal_hidden", "causal_next_visible", "causal_inverted"))
