"""Chapter 04: position-wise feed-forward network, LayerNorm, residual connections
(bonus: RMSNorm, Pre-LN)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class FeedForward(nn.Module):
    """Position-wise feed-forward network: ``fc2(dropout(activation(fc1(x))))``.

    ``FeedForward(d_model, d_ff, dropout=0.0, activation="relu")`` with attributes
    ``fc1`` (``nn.Linear(d_model, d_ff)``), ``fc2`` (``nn.Linear(d_ff, d_model)``), ``dropout``.
    ``activation`` is ``"relu"`` or ``"gelu"`` (exact, erf-based, as ``F.gelu``); any other name
    raises ``ValueError``. ``forward(x (..., d_model)) -> (..., d_model)``: the same two-layer
    MLP applied to every position independently.

    Parameters: ``2 * d_model * d_ff + d_ff + d_model``.

    中文：逐位置前馈网络。属性 ``fc1``、``fc2``、``dropout``；``activation`` 只接受 ``"relu"`` 或
    ``"gelu"``（精确版），其他名字抛出 ``ValueError``；同一个两层 MLP 独立作用在每个位置上。
    """

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        ### BEGIN SOLUTION
        activations = {"relu": F.relu, "gelu": F.gelu}
        if activation not in activations:
            raise ValueError(
                f"未知激活函数 {activation!r}，可选 'relu' 或 'gelu' / "
                f"unknown activation {activation!r}, expected 'relu' or 'gelu'"
            )
        self.activation = activations[activation]
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        return self.fc2(self.dropout(self.activation(self.fc1(x))))  # (..., d_model) -> (..., d_ff) -> (..., d_model)
        ### END SOLUTION


class LayerNorm(nn.Module):
    """Layer normalisation over the last (feature) axis, equal to ``nn.LayerNorm(d_model, eps)``.

    ``LayerNorm(d_model, eps=1e-5)`` with parameters ``weight`` (ones) and ``bias`` (zeros),
    each of shape ``(d_model,)``. ``forward(x (..., d_model))``:
    ``(x - mean) / sqrt(var + eps) * weight + bias`` where mean and var are taken over the last
    axis, per position (not over the batch, as BatchNorm does).

    Hints: biased variance (``unbiased=False``, divide by d_model); eps goes inside the root.

    中文：沿最后一维（特征维）的层归一化，与 ``nn.LayerNorm(d_model, eps)`` 相等；参数 ``weight``（全 1）、
    ``bias``（全 0）；方差有偏（除以 ``d_model``），``eps`` 在根号里；每个位置单独统计，与批次无关。
    """

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        ### BEGIN SOLUTION
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        ### END SOLUTION

    def forward(self, x):
        if x.size(-1) != self.weight.numel():
            raise ValueError(
                f"最后一维应为 d_model={self.weight.numel()}，得到形状 {tuple(x.shape)} / "
                f"last dim must be d_model={self.weight.numel()}, got shape {tuple(x.shape)}"
            )
        ### BEGIN SOLUTION
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        var = x.var(dim=-1, keepdim=True, unbiased=False)  # (..., 1)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
        ### END SOLUTION


class ResidualLayerNorm(nn.Module):
    """Post-LN sublayer connection (original Transformer): ``ln(x + sublayer_out)``.

    ``ResidualLayerNorm(d_model, eps=1e-5)`` with attribute ``ln`` (a ``LayerNorm``).
    ``forward(x, sublayer_out) -> ln(x + sublayer_out)``; both ``(..., d_model)``. It takes the
    sublayer's *output* (already computed, dropout already applied by the caller).

    中文：Post-LN 子层连接，属性 ``ln``（一个 ``LayerNorm``）；接收子层**已经算好的输出**
    （dropout 由调用者做完），返回 ``ln(x + sublayer_out)``。
    """

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        ### BEGIN SOLUTION
        self.ln = LayerNorm(d_model, eps)
        ### END SOLUTION

    def forward(self, x, sublayer_out):
        ### BEGIN SOLUTION
        return self.ln(x + sublayer_out)
        ### END SOLUTION


class RMSNorm(nn.Module):
    """Bonus: root-mean-square normalisation (Llama, T5), equal to ``nn.RMSNorm(d_model, eps)``.

    ``RMSNorm(d_model, eps=1e-6)`` with parameter ``weight`` (ones, ``(d_model,)``), no bias.
    ``forward(x (..., d_model)) -> x / sqrt(mean(x**2, last axis) + eps) * weight``: no mean
    subtraction, so it is cheaper than LayerNorm and keeps the vector's direction.
    """

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        ### BEGIN SOLUTION
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # (..., 1)
        return x / rms * self.weight
        ### END SOLUTION


class PreLNResidual(nn.Module):
    """Bonus: Pre-LN sublayer connection (GPT-2, most modern models): ``x + sublayer(ln(x))``.

    ``PreLNResidual(d_model, eps=1e-5)`` with attribute ``ln`` (a ``LayerNorm``).
    ``forward(x, sublayer)``: unlike ``ResidualLayerNorm``, it takes the sublayer as a
    *callable* (e.g. ``lambda h: mha(h, h, mask)[0]``), because the normalisation comes before
    the sublayer. The residual path from input to output stays un-normalised, which is why deep
    Pre-LN stacks train without warmup (they need one final LayerNorm after the last layer).
    """

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        ### BEGIN SOLUTION
        self.ln = LayerNorm(d_model, eps)
        ### END SOLUTION

    def forward(self, x, sublayer):
        ### BEGIN SOLUTION
        return x + sublayer(self.ln(x))
        ### END SOLUTION
