# %%
import math
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")
torch.manual_seed(0)
np.random.seed(0)
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2  # the copy task's token ids (chapter 07)
from tutor.drills import finish, give_up, mock_interview, progress, reset, reveal, start

# %% [markdown]
# # 09 手撕练习库（drill bank）
#
# 面试里的“手撕 Transformer”是：给一张白纸，15 分钟写出注意力、多头注意力、LayerNorm、掩码……
# 本章把前面各章的组件变成 18 道**限时练习（drill）**：每道题只有函数签名、说明形状和约定的 docstring，
# 没有提示、没有伪代码。写完后，检查（check）用和各章评分完全相同的引擎判定，并**说出错误的名字**
# （例如“忘了除以 √d_k”“拆头时没有 transpose”），而不是只说 “value mismatch”。
#
# **怎么练（自学）：**
#
# 1. 运行题目上方的 ⏱️ 单元格：计时开始（`start`）。
# 2. 在下面的单元格里写出实现（只写这一格；可以调用本章前面各题你自己写的函数）。
# 3. 运行检查单元格：✅/❌ 判定、具体错在哪、用时（`finish`）。
# 4. 通过之后，运行 📖 单元格（`reveal`）看参考答案和这道题的常见错误；想放弃时，在新单元格里运行
#    `give_up("题目名")`——没有通过、也没有放弃之前，参考答案不会显示。
# 5. 想重写一道题：在新单元格里运行 `reset("题目名")`（恢复空白单元格，旧文件备份在 `workspace/backup/`，
#    然后 File → Reload Notebook from Disk）；整章重来：`make reset CHAPTER=09_drills`。
# 6. 模拟面试：在新单元格里运行 `mock_interview()`，它在 `workspace/` 里生成一个随机抽 3 道题的笔记本。
#
# 进度（哪些题通过了、尝试次数、最好用时）保存在 `workspace/drills_progress.json`，一个普通的 JSON 文件，
# 可以直接打开看；只有在 `make lab` 的 `workspace/` 里运行时才会写入。
#
# 教师也可以把本章当作一次限时测验（nbgrader 作业 `09_drills`）：**本章共 18 分**，每道题 1 分，隐藏测试与各章相同。
#
# *English:* 18 timed drills, each a blank cell with a signature and a docstring (shapes and conventions
# only). Run ⏱️ to start the timer, write the cell, run the check for the verdict (with the named mistake)
# and the time. The 📖 cell shows the reference and the classic mistakes only after a pass or
# `give_up("name")`; `reset("name")` restores a blank cell; `mock_interview()` writes a notebook with 3
# random drills; progress is kept in `workspace/drills_progress.json`.

# %% [markdown]
# ## 练习 1 · 数值稳定的 softmax / stable softmax
#
# 目标 / target: 5 min. 检查 / check: `softmax`.

# %% tags=["selfstudy"]
start('softmax')

# %% exercise="softmax" drill=true
def softmax(x, axis=-1):
    """Numerically stable softmax of a NumPy array along ``axis``.

    ``x`` np.ndarray of any shape -> np.ndarray of the same shape; along ``axis`` the values are
    positive and sum to 1, also for inputs such as ``[1000, 1001]`` (no inf, no NaN).

    中文：沿 ``axis`` 的数值稳定 softmax；输入任意形状的 NumPy 数组，输出同形，沿 ``axis`` 为正、和为 1，
    ``[1000, 1001]`` 这样的大输入也不能出现 inf 或 NaN。
    """

# %% grade_id="drill_softmax" points=1 check="softmax:softmax" tags=["nbgrader"]

# %% check="softmax:softmax" tags=["selfstudy"]
finish('softmax', _)

# %% tags=["selfstudy"]
reveal('softmax')

# %% [markdown]
# ## 练习 2 · NumPy 注意力 / attention in NumPy
#
# 目标 / target: 8 min. 检查 / check: `attention_numpy`.

# %% tags=["selfstudy"]
start('attention_numpy')

# %% exercise="attention_numpy" drill=true
def attention_numpy(Q, K, V, mask=None):
    """Scaled dot-product attention in NumPy (uses your ``softmax`` above).

    Q ``(..., T_q, d_k)``, K ``(..., T_k, d_k)``, V ``(..., T_k, d_v)``; ``mask`` optional, bool or
    0/1, broadcastable to ``(..., T_q, T_k)``, True = may attend.
    Returns ``(out (..., T_q, d_v), weights (..., T_q, T_k))``; blocked weights are 0; a query row
    with no visible key gets zero weights and a zero output (never NaN).

    中文：NumPy 版缩放点积注意力（调用上面你写的 ``softmax``）。形状如上；掩码 True（或 1）= 可以看；被遮挡的权重为 0；
    一个键都看不见的查询行权重和输出全为 0（不能是 NaN）。返回 ``(out, weights)``。
    """

# %% grade_id="drill_attention_numpy" points=1 check="attention_numpy:attention_numpy" tags=["nbgrader"]

# %% check="attention_numpy:attention_numpy" tags=["selfstudy"]
finish('attention_numpy', _)

# %% tags=["selfstudy"]
reveal('attention_numpy')

# %% [markdown]
# ## 练习 3 · 缩放点积注意力（掩码、全屏蔽行）/ scaled dot-product attention (mask, fully masked rows)
#
# 目标 / target: 10 min. 检查 / check: `scaled_dot_product_attention`.

# %% tags=["selfstudy"]
start('scaled_dot_product_attention')

# %% exercise="scaled_dot_product_attention" drill=true
def scaled_dot_product_attention(Q, K, V, mask=None, dropout_p=0.0, training=False):
    """softmax(Q K^T / sqrt(d_k)) V in PyTorch, from scratch (no ``F.scaled_dot_product_attention``).

    Q ``(..., T_q, d_k)``, K ``(..., T_k, d_k)``, V ``(..., T_k, d_v)``; ``mask`` optional, bool
    (0/1 accepted), broadcastable to ``(..., T_q, T_k)``, True = may attend.
    Returns ``(out (..., T_q, d_v), attn (..., T_q, T_k))``. Blocked weights are exactly 0; a
    fully blocked query row gives zero weights and a zero output, never NaN (gradients included).
    Dropout on the weights only when ``training``; ``attn`` is the weights that multiplied V.

    中文：从零实现缩放点积注意力（不许调用 ``F.scaled_dot_product_attention``）。形状如上；掩码 True = 可以看，
    可广播到 ``(..., T_q, T_k)``；被遮挡的权重恰为 0；整行被遮挡时权重和输出全 0，前向和梯度都没有 NaN；
    只在 ``training`` 时对权重做 dropout，返回的 ``attn`` 就是乘到 V 上的权重。
    """

# %% grade_id="drill_scaled_dot_product_attention" points=1 check="scaled_dot_product_attention:scaled_dot_product_attention" tags=["nbgrader"]

# %% check="scaled_dot_product_attention:scaled_dot_product_attention" tags=["selfstudy"]
finish('scaled_dot_product_attention', _)

# %% tags=["selfstudy"]
reveal('scaled_dot_product_attention')

# %% [markdown]
# ## 练习 4 · 多头注意力 / multi-head attention
#
# 目标 / target: 15 min. 检查 / check: `MultiHeadAttention`.

# %% tags=["selfstudy"]
start('MultiHeadAttention')

# %% exercise="MultiHeadAttention" drill=true
class MultiHeadAttention(nn.Module):
    """Multi-head attention (uses your ``scaled_dot_product_attention`` above).

    ``MultiHeadAttention(d_model, num_heads, dropout=0.0)``; attributes ``W_q, W_k, W_v, W_o``
    (each ``nn.Linear(d_model, d_model)``), ``num_heads``, ``d_k = d_model // num_heads``;
    ``ValueError`` when ``d_model % num_heads != 0``.
    ``forward(x_q (B, T_q, d_model), x_kv (B, T_k, d_model), mask=None)
    -> (out (B, T_q, d_model), attn (B, H, T_q, T_k))``; ``mask`` bool broadcastable to
    ``(B, H, T_q, T_k)``, True = may attend; ``attn`` holds every head's weights.

    中文：多头注意力（调用上面你写的 ``scaled_dot_product_attention``）。属性名与形状如上；
    ``d_model`` 不能被 ``num_heads`` 整除时抛出 ``ValueError``；返回输出和每个头的注意力权重。
    """

# %% grade_id="drill_MultiHeadAttention" points=1 check="MultiHeadAttention:MultiHeadAttention" tags=["nbgrader"]

# %% check="MultiHeadAttention:MultiHeadAttention" tags=["selfstudy"]
finish('MultiHeadAttention', _)

# %% tags=["selfstudy"]
reveal('MultiHeadAttention')

# %% [markdown]
# ## 练习 5 · 正弦位置编码表 / sinusoidal positional encoding
#
# 目标 / target: 8 min. 检查 / check: `sinusoidal_positional_encoding`.

# %% tags=["selfstudy"]
start('sinusoidal_positional_encoding')

# %% exercise="sinusoidal_positional_encoding" drill=true
def sinusoidal_positional_encoding(max_len, d_model):
    """The sinusoidal positional-encoding table, a tensor ``(max_len, d_model)``.

    ``PE[pos, 2i] = sin(pos / 10000^(2i/d_model))``, ``PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model))``:
    even columns sin, odd columns cos. An odd ``d_model`` works (its last column is a sin).
    Default dtype (``torch.get_default_dtype()``).

    中文：正弦位置编码表 ``(max_len, d_model)``，公式如上：偶数列 sin、奇数列 cos；
    ``d_model`` 为奇数也要能用（最后一列是 sin）；使用默认浮点类型。
    """

# %% grade_id="drill_sinusoidal_positional_encoding" points=1 check="sinusoidal_positional_encoding:sinusoidal_positional_encoding" tags=["nbgrader"]

# %% check="sinusoidal_positional_encoding:sinusoidal_positional_encoding" tags=["selfstudy"]
finish('sinusoidal_positional_encoding', _)

# %% tags=["selfstudy"]
reveal('sinusoidal_positional_encoding')

# %% [markdown]
# ## 练习 6 · 位置编码模块 / positional-encoding module
#
# 目标 / target: 5 min. 检查 / check: `PositionalEncoding`.

# %% tags=["selfstudy"]
start('PositionalEncoding')

# %% exercise="PositionalEncoding" drill=true
class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table to a batch (uses your ``sinusoidal_positional_encoding``).

    ``PositionalEncoding(d_model, max_len=5000, dropout=0.0)``; buffer ``pe (1, max_len, d_model)``,
    attribute ``dropout`` (``nn.Dropout``).
    ``forward(x (B, T, d_model)) -> dropout(x + pe[:, :T])`` of shape ``(B, T, d_model)``;
    ``ValueError`` when ``T > max_len``.

    中文：位置编码模块。buffer ``pe`` 形状 ``(1, max_len, d_model)``；``forward`` 返回
    ``dropout(x + pe[:, :T])``；``T > max_len`` 时抛出 ``ValueError``。
    """

# %% grade_id="drill_PositionalEncoding" points=1 check="PositionalEncoding:PositionalEncoding" tags=["nbgrader"]

# %% check="PositionalEncoding:PositionalEncoding" tags=["selfstudy"]
finish('PositionalEncoding', _)

# %% tags=["selfstudy"]
reveal('PositionalEncoding')

# %% [markdown]
# ## 练习 7 · 旋转位置编码 RoPE / rotary position embedding
#
# 目标 / target: 10 min. 检查 / check: `apply_rope`.

# %% tags=["selfstudy"]
start('apply_rope')

# %% exercise="rope_frequencies,apply_rope" drill=true
def rope_frequencies(d, base=10000.0):
    """RoPE frequencies ``theta_i = base^(-2i/d)``, i = 0 .. d/2-1: a 1-D tensor ``(d/2,)``,
    default dtype; ``ValueError`` when ``d`` is odd.

    中文：RoPE 的旋转频率 ``theta_i = base^(-2i/d)``，形状 ``(d/2,)``，默认浮点类型；``d`` 为奇数时抛出 ``ValueError``。
    """


def apply_rope(x, positions=None, base=10000.0):
    """Rotary position embedding of queries or keys.

    ``x (..., T, d)``, ``d`` even (e.g. ``(B, H, T, d_k)``); ``positions`` optional, broadcastable
    to ``(..., T)`` (default ``arange(T)``). Returns a tensor shaped like ``x``.
    Pair ``i`` is the adjacent features ``(2i, 2i+1)``, rotated by the angle ``position * theta_i``
    (``theta`` from ``rope_frequencies``), counter-clockwise:
    ``(x[2i], x[2i+1]) -> (x[2i] cos - x[2i+1] sin, x[2i] sin + x[2i+1] cos)``.

    中文：对 Q 或 K 做旋转位置编码。``x`` 形状 ``(..., T, d)``，``d`` 为偶数；``positions`` 默认 ``arange(T)``；
    相邻的 ``(2i, 2i+1)`` 两个特征为一对，按 ``position * theta_i`` 逆时针旋转（公式如上）；输出与 ``x`` 同形。
    """

# %% grade_id="drill_apply_rope" points=1 check="apply_rope:apply_rope" tags=["nbgrader"]

# %% check="apply_rope:apply_rope" tags=["selfstudy"]
finish('apply_rope', _)

# %% tags=["selfstudy"]
reveal('apply_rope')

# %% [markdown]
# ## 练习 8 · 前馈网络 / feed-forward network
#
# 目标 / target: 5 min. 检查 / check: `FeedForward`.

# %% tags=["selfstudy"]
start('FeedForward')

# %% exercise="FeedForward" drill=true
class FeedForward(nn.Module):
    """Position-wise feed-forward network.

    ``FeedForward(d_model, d_ff, dropout=0.0, activation="relu")``; attributes ``fc1``
    (``nn.Linear(d_model, d_ff)``), ``fc2`` (``nn.Linear(d_ff, d_model)``), ``dropout``;
    ``activation`` is ``"relu"`` or ``"gelu"`` (exact, erf), any other name raises ``ValueError``.
    ``forward(x (..., d_model)) -> fc2(dropout(activation(fc1(x)))) (..., d_model)``.

    中文：逐位置前馈网络。属性 ``fc1``、``fc2``、``dropout``；``activation`` 只能是 ``"relu"`` 或
    ``"gelu"``（精确的 erf 版本），其他名字抛出 ``ValueError``；输出形状与输入相同。
    """

# %% grade_id="drill_FeedForward" points=1 check="FeedForward:FeedForward" tags=["nbgrader"]

# %% check="FeedForward:FeedForward" tags=["selfstudy"]
finish('FeedForward', _)

# %% tags=["selfstudy"]
reveal('FeedForward')

# %% [markdown]
# ## 练习 9 · LayerNorm
#
# 目标 / target: 8 min. 检查 / check: `LayerNorm`.

# %% tags=["selfstudy"]
start('LayerNorm')

# %% exercise="LayerNorm" drill=true
class LayerNorm(nn.Module):
    """Layer normalisation over the last axis, from scratch (no ``F.layer_norm``).

    ``LayerNorm(d_model, eps=1e-5)``; parameters ``weight`` (ones) and ``bias`` (zeros), ``(d_model,)``.
    ``forward(x (..., d_model)) -> (x - mean) / sqrt(var + eps) * weight + bias``, mean and biased
    variance over the last axis; equals ``nn.LayerNorm(d_model, eps)``.

    中文：从零实现 LayerNorm（不许用 ``F.layer_norm``）。参数 ``weight``、``bias``；在最后一维上求均值和
    有偏方差，公式如上；结果等于 ``nn.LayerNorm(d_model, eps)``。
    """

# %% grade_id="drill_LayerNorm" points=1 check="LayerNorm:LayerNorm" tags=["nbgrader"]

# %% check="LayerNorm:LayerNorm" tags=["selfstudy"]
finish('LayerNorm', _)

# %% tags=["selfstudy"]
reveal('LayerNorm')

# %% [markdown]
# ## 练习 10 · RMSNorm
#
# 目标 / target: 5 min. 检查 / check: `RMSNorm`.

# %% tags=["selfstudy"]
start('RMSNorm')

# %% exercise="RMSNorm" drill=true
class RMSNorm(nn.Module):
    """Root-mean-square normalisation (Llama).

    ``RMSNorm(d_model, eps=1e-6)``; parameter ``weight`` (ones, ``(d_model,)``), no bias.
    ``forward(x (..., d_model)) -> x / sqrt(mean(x**2, last axis) + eps) * weight``;
    equals ``nn.RMSNorm(d_model, eps)``.

    中文：均方根归一化。参数 ``weight``（全 1），没有 bias；公式如上；结果等于 ``nn.RMSNorm(d_model, eps)``。
    """

# %% grade_id="drill_RMSNorm" points=1 check="RMSNorm:RMSNorm" tags=["nbgrader"]

# %% check="RMSNorm:RMSNorm" tags=["selfstudy"]
finish('RMSNorm', _)

# %% tags=["selfstudy"]
reveal('RMSNorm')

# %% [markdown]
# ## 练习 11 · 残差 + LayerNorm（Post-LN）/ residual + LayerNorm (Post-LN)
#
# 目标 / target: 3 min. 检查 / check: `ResidualLayerNorm`.

# %% tags=["selfstudy"]
start('ResidualLayerNorm')

# %% exercise="ResidualLayerNorm" drill=true
class ResidualLayerNorm(nn.Module):
    """Post-LN sublayer connection (uses your ``LayerNorm``).

    ``ResidualLayerNorm(d_model, eps=1e-5)``; attribute ``ln`` (a ``LayerNorm``).
    ``forward(x (..., d_model), sublayer_out (..., d_model)) -> ln(x + sublayer_out)``.

    中文：Post-LN 残差连接。属性 ``ln``；``forward(x, sublayer_out)`` 返回 ``ln(x + sublayer_out)``。
    """

# %% grade_id="drill_ResidualLayerNorm" points=1 check="ResidualLayerNorm:ResidualLayerNorm" tags=["nbgrader"]

# %% check="ResidualLayerNorm:ResidualLayerNorm" tags=["selfstudy"]
finish('ResidualLayerNorm', _)

# %% tags=["selfstudy"]
reveal('ResidualLayerNorm')

# %% [markdown]
# ## 练习 12 · Pre-LN 残差子层 / Pre-LN residual sublayer
#
# 目标 / target: 3 min. 检查 / check: `PreLNResidual`.

# %% tags=["selfstudy"]
start('PreLNResidual')

# %% exercise="PreLNResidual" drill=true
class PreLNResidual(nn.Module):
    """Pre-LN sublayer connection (uses your ``LayerNorm``).

    ``PreLNResidual(d_model, eps=1e-5)``; attribute ``ln`` (a ``LayerNorm``).
    ``forward(x (..., d_model), sublayer)`` where ``sublayer`` is a callable
    ``(..., d_model) -> (..., d_model)``; returns ``x + sublayer(ln(x))``.

    中文：Pre-LN 残差连接。属性 ``ln``；``sublayer`` 是一个可调用对象；返回 ``x + sublayer(ln(x))``。
    """

# %% grade_id="drill_PreLNResidual" points=1 check="PreLNResidual:PreLNResidual" tags=["nbgrader"]

# %% check="PreLNResidual:PreLNResidual" tags=["selfstudy"]
finish('PreLNResidual', _)

# %% tags=["selfstudy"]
reveal('PreLNResidual')

# %% [markdown]
# ## 练习 13 · 填充掩码 / padding mask
#
# 目标 / target: 3 min. 检查 / check: `make_pad_mask`.

# %% tags=["selfstudy"]
start('make_pad_mask')

# %% exercise="make_pad_mask" drill=true
def make_pad_mask(tokens, pad_id=0):
    """Key-padding mask.

    ``tokens`` LongTensor ``(B, T)`` -> bool ``(B, 1, 1, T)``, True (= may attend) where the token
    is not ``pad_id``.

    中文：键填充掩码。输入 ``(B, T)``，返回布尔 ``(B, 1, 1, T)``，不是 ``pad_id`` 的位置为 True（= 可以看）。
    """

# %% grade_id="drill_make_pad_mask" points=1 check="make_pad_mask:make_pad_mask" tags=["nbgrader"]

# %% check="make_pad_mask:make_pad_mask" tags=["selfstudy"]
finish('make_pad_mask', _)

# %% tags=["selfstudy"]
reveal('make_pad_mask')

# %% [markdown]
# ## 练习 14 · 因果掩码 / causal mask
#
# 目标 / target: 3 min. 检查 / check: `make_subsequent_mask`.

# %% tags=["selfstudy"]
start('make_subsequent_mask')

# %% exercise="make_subsequent_mask" drill=true
def make_subsequent_mask(T, device=None):
    """Causal mask: query ``i`` may attend to keys ``j <= i``.

    Returns bool ``(1, 1, T, T)`` on ``device``, True (= may attend) on and below the diagonal.

    中文：因果掩码。返回建在 ``device`` 上的布尔 ``(1, 1, T, T)``，对角线及以下为 True（= 可以看）。
    """

# %% grade_id="drill_make_subsequent_mask" points=1 check="make_subsequent_mask:make_subsequent_mask" tags=["nbgrader"]

# %% check="make_subsequent_mask:make_subsequent_mask" tags=["selfstudy"]
finish('make_subsequent_mask', _)

# %% tags=["selfstudy"]
reveal('make_subsequent_mask')

# %% [markdown]
# ## 练习 15 · 编码器层 / encoder layer
#
# 目标 / target: 10 min. 检查 / check: `EncoderLayer`.

# %% tags=["selfstudy"]
start('EncoderLayer')

# %% exercise="EncoderLayer" drill=true
class EncoderLayer(nn.Module):
    """One Post-LN Transformer encoder layer (uses your ``MultiHeadAttention``, ``FeedForward``, ``ResidualLayerNorm``).

    ``EncoderLayer(d_model, num_heads, d_ff, dropout=0.1)``; attributes ``self_attn``
    (``MultiHeadAttention``), ``ffn`` (``FeedForward``, ReLU), ``norm1``, ``norm2``
    (``ResidualLayerNorm``), ``dropout`` (``nn.Dropout``); every part gets the same dropout probability.
    ``forward(x (B, T, d_model), src_mask=None) -> (x (B, T, d_model), attn (B, H, T, T))``:
    self-attention, then the FFN, each ``norm_k(input, dropout(sublayer(input)))`` (Post-LN);
    ``src_mask`` bool, True = may attend. Equals ``nn.TransformerEncoderLayer(..., batch_first=True)``.

    中文：一个 Post-LN 编码器层。属性如上；先自注意力、后 FFN，每个子层都是 ``norm_k(输入, dropout(子层(输入)))``；
    掩码 True = 可以看；结果等于 ``nn.TransformerEncoderLayer(..., batch_first=True)``。
    """

# %% grade_id="drill_EncoderLayer" points=1 check="EncoderLayer:EncoderLayer" tags=["nbgrader"]

# %% check="EncoderLayer:EncoderLayer" tags=["selfstudy"]
finish('EncoderLayer', _)

# %% tags=["selfstudy"]
reveal('EncoderLayer')

# %% [markdown]
# ## 练习 16 · 解码器层 / decoder layer
#
# 目标 / target: 12 min. 检查 / check: `DecoderLayer`.

# %% tags=["selfstudy"]
start('DecoderLayer')

# %% exercise="DecoderLayer" drill=true
class DecoderLayer(nn.Module):
    """One Post-LN Transformer decoder layer (uses your ``MultiHeadAttention``, ``FeedForward``, ``ResidualLayerNorm``).

    ``DecoderLayer(d_model, num_heads, d_ff, dropout=0.1)``; attributes ``self_attn``, ``cross_attn``
    (``MultiHeadAttention``), ``ffn`` (``FeedForward``, ReLU), ``norm1``, ``norm2``, ``norm3``
    (``ResidualLayerNorm``), ``dropout``.
    ``forward(y (B, T_t, d_model), memory (B, T_s, d_model), tgt_mask=None, memory_mask=None)
    -> (y (B, T_t, d_model), (self_attn_w (B, H, T_t, T_t), cross_attn_w (B, H, T_t, T_s)))``:
    masked self-attention (``tgt_mask``), cross-attention to ``memory`` (``memory_mask``, the source
    padding mask), the FFN; each Post-LN as in ``EncoderLayer``. Masks bool, True = may attend.
    Equals ``nn.TransformerDecoderLayer(..., batch_first=True)``.

    中文：一个 Post-LN 解码器层。三个子层依次为掩码自注意力（``tgt_mask``）、对 ``memory`` 的交叉注意力
    （``memory_mask``，源序列的填充掩码）、FFN，每个都按 Post-LN 处理；掩码 True = 可以看。
    """

# %% grade_id="drill_DecoderLayer" points=1 check="DecoderLayer:DecoderLayer" tags=["nbgrader"]

# %% check="DecoderLayer:DecoderLayer" tags=["selfstudy"]
finish('DecoderLayer', _)

# %% tags=["selfstudy"]
reveal('DecoderLayer')

# %% [markdown]
# ## 练习 17 · 忽略 PAD 的交叉熵 / cross-entropy that ignores PAD
#
# 目标 / target: 5 min. 检查 / check: `copy_loss`.

# %% tags=["selfstudy"]
start('copy_loss')

# %% exercise="copy_loss" drill=true
def copy_loss(logits, tgt_out, pad_id=PAD_ID):
    """Cross-entropy over the non-PAD positions.

    ``logits (B, T, V)``, ``tgt_out`` LongTensor ``(B, T)``; returns a scalar tensor: the mean
    cross-entropy over the positions whose target is not ``pad_id``.

    中文：只在目标不是 ``pad_id`` 的位置上求平均的交叉熵；``logits (B, T, V)``，``tgt_out (B, T)``，返回标量张量。
    """

# %% grade_id="drill_copy_loss" points=1 check="copy_loss:copy_loss" tags=["nbgrader"]

# %% check="copy_loss:copy_loss" tags=["selfstudy"]
finish('copy_loss', _)

# %% tags=["selfstudy"]
reveal('copy_loss')

# %% [markdown]
# ## 练习 18 · 序列完全匹配率 / sequence exact match
#
# 目标 / target: 5 min. 检查 / check: `exact_match`.

# %% tags=["selfstudy"]
start('exact_match')

# %% exercise="exact_match" drill=true
def exact_match(pred, tgt_out, eos_id=EOS_ID, pad_id=PAD_ID):
    """Fraction of rows decoded exactly.

    ``pred`` LongTensor ``(B, T')`` starting with BOS (greedy output), ``tgt_out`` ``(B, T)``
    (tokens, EOS, then PAD). A row counts when the tokens of ``pred`` after its BOS, up to and
    including the target's first EOS, equal the target's. Returns a Python float in [0, 1].

    中文：完全解码正确的行所占比例。``pred`` 以 BOS 开头；去掉 BOS 后，到目标的第一个 EOS（含）为止都相同才算这一行对；
    返回 [0, 1] 内的 Python float。
    """

# %% grade_id="drill_exact_match" points=1 check="exact_match:exact_match" tags=["nbgrader"]

# %% check="exact_match:exact_match" tags=["selfstudy"]
finish('exact_match', _)

# %% tags=["selfstudy"]
reveal('exact_match')

# %% [markdown]
# ## 进度与模拟面试 / Progress and mock interview
#
# 下面的单元格列出每道题的状态和最好用时。想来一场模拟面试：把下一格的 `#` 去掉再运行，
# 它在 `workspace/` 里生成 `mock_interview_<时间>.ipynb`，随机抽 3 道题（依赖的组件已折叠提供）。
#
# *English:* the cell below lists every drill's status and best time; uncomment the next one for a
# mock interview notebook with 3 random drills in `workspace/`.

# %% tags=["selfstudy"]
progress()

# %% tags=["selfstudy"]
# mock_interview()
