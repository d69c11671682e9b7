"""Chapter 05 (part 1): padding and causal masks. Convention: bool, True = may attend."""
import torch


def make_pad_mask(tokens, pad_id=0):
    """Key-padding mask: which keys are real tokens. / 键填充掩码：哪些键是真实 token。

    ``tokens`` LongTensor ``(B, T)`` -> bool ``(B, 1, 1, T)``, True (= may attend) where the token
    is not ``pad_id``. / 输入 ``(B, T)`` 的 LongTensor，返回 ``(B, 1, 1, T)`` 的布尔张量，
    不是 ``pad_id`` 的位置为 True（= 可以看）。

    The two singleton axes broadcast over the heads ``H`` and the query positions ``T_q``: padding
    hides *keys* only, never query rows (a masked query row would see no key at all).
    / 两个长度为 1 的轴在头 ``H`` 和查询位置 ``T_q`` 上广播：只遮挡键，不遮挡查询行
    （被遮挡的查询行一个键都看不见）。
    """
    if tokens.dim() != 2:
        raise ValueError(f"tokens 应为 2 维 (B, T) / tokens must be 2-D (B, T); got {tuple(tokens.shape)}")
    ### BEGIN SOLUTION
    return (tokens != pad_id)[:, None, None, :]  # (B, T) -> (B, 1, 1, T)
    ### END SOLUTION


def make_subsequent_mask(T, device=None):
    """Causal (look-ahead) mask: query ``i`` may attend to keys ``j <= i``. / 因果掩码：查询 ``i`` 只能看键 ``j <= i``。

    Returns a bool ``(1, 1, T, T)`` tensor on ``device``, True (= may attend) on and below the
    diagonal, False above it. / 返回建在 ``device`` 上的 ``(1, 1, T, T)`` 布尔张量：对角线及以下为
    True（= 可以看），对角线以上为 False。

    Combined with a padding mask ``(B, 1, 1, T)`` by ``&``, it broadcasts to ``(B, 1, T, T)``.
    / 与填充掩码 ``(B, 1, 1, T)`` 用 ``&`` 组合，广播成 ``(B, 1, T, T)``。
    """
    ### BEGIN SOLUTION
    return torch.tril(torch.ones(T, T, dtype=torch.bool, device=device))[None, None]  # (1, 1, T, T)
    ### END SOLUTION
