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
# # 10 手撕练习库（drill bank）
#
# 面试里的“手撕 Transformer”是：给一张白纸，15 分钟写出注意力、多头注意力、LayerNorm、掩码……
# 本章把前面各章的组件变成 45 道**限时练习（drill）**：每道题只有函数签名、说明形状和约定的 docstring，
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
#    然后 File → Reload Notebook from Disk）；整章重来：`make reset CHAPTER=10_drills`。
# 6. 模拟面试：在新单元格里运行 `mock_interview()`，它在 `workspace/` 里生成一个按难度各抽一道题（易、中、难）的笔记本。
#
# 进度（哪些题通过了、尝试次数、最好用时）保存在 `workspace/progress.json`，一个普通的 JSON 文件，
# 可以直接打开看；只有在 `make lab` 的 `workspace/` 里运行时才会写入。各章检查的结果也记在这个文件里：
# 在任意一章运行 `import tutor; tutor.progress()`，看每章哪些评分单元格通过了、检查指出过哪些错误。
#
# 教师也可以把本章当作一次限时测验（nbgrader 作业 `10_drills`）：**本章共 45 分**，每道题 1 分，隐藏测试与各章相同。
#
# *English:* 45 timed drills, each a blank cell with a signature and a docstring (shapes and conventions
# only). Run ⏱️ to start the timer, write the cell, run the check for the verdict (with the named mistake)
# and the time. The 📖 cell shows the reference and the classic mistakes only after a pass or
# `give_up("name")`; `reset("name")` restores a blank cell; `mock_interview()` writes a notebook with 3 drills
# (easy, medium, hard); progress is kept in `workspace/progress.json`, with what the chapters' checks found
# (`tutor.progress()` shows both).

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
# ## 练习 3 · 缩放点积注意力（掩码、全遮挡行）/ scaled dot-product attention (mask, fully masked rows)
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
# ## 练习 19 · GQA 的 KV 头重复 / repeating KV heads for GQA
#
# 目标 / target: 3 min. 检查 / check: `repeat_kv`.

# %% tags=["selfstudy"]
start('repeat_kv')

# %% exercise="repeat_kv" drill=true
def repeat_kv(x, n_rep):
    """Key/value heads shared by groups of query heads.

    ``x (B, G, T, d_k)`` -> ``(B, G * n_rep, T, d_k)``: query head ``h`` uses KV head ``h // n_rep``
    (each KV head repeated ``n_rep`` times consecutively).

    中文：把 ``(B, G, T, d_k)`` 扩成 ``(B, G * n_rep, T, d_k)``，第 ``h`` 个查询头使用第 ``h // n_rep`` 个 KV 头。
    """

# %% grade_id="drill_repeat_kv" points=1 check="repeat_kv:repeat_kv" tags=["nbgrader"]

# %% check="repeat_kv:repeat_kv" tags=["selfstudy"]
finish('repeat_kv', _)

# %% tags=["selfstudy"]
reveal('repeat_kv')

# %% [markdown]
# ## 练习 20 · 分组查询注意力（RoPE、KV 缓存）/ grouped-query attention (RoPE, KV cache)
#
# 目标 / target: 20 min. 检查 / check: `GroupedQueryAttention`.

# %% tags=["selfstudy"]
start('GroupedQueryAttention')

# %% exercise="GroupedQueryAttention" drill=true
class GroupedQueryAttention(nn.Module):
    """Grouped-query self-attention with optional RoPE and KV cache (uses your ``repeat_kv``, ``apply_rope``, ``scaled_dot_product_attention``).

    ``GroupedQueryAttention(d_model, num_heads, num_kv_heads, rope=True, rope_base=10000.0, dropout=0.0)``;
    attributes ``W_q (d_model -> d_model)``, ``W_k``, ``W_v (d_model -> num_kv_heads * d_k)``, ``W_o (d_model -> d_model)``,
    all ``nn.Linear(..., bias=False)``; ``d_k = d_model // num_heads``; ``ValueError`` unless
    ``num_heads`` divides ``d_model`` and ``num_kv_heads`` divides ``num_heads``.
    ``forward(x (B, T, d_model), mask=None, cache=None) -> (out (B, T, d_model), cache)``; ``cache`` is
    ``None`` or ``(k, v)`` each ``(B, G, T_past, d_k)`` (after RoPE, before repeating); new tokens sit at
    positions ``T_past .. T_past+T-1``; the returned cache is the old one with the new keys/values
    appended on dim 2. ``mask`` bool broadcastable to ``(B, H, T, T_past+T)``, True = may attend.
    Equals ``F.scaled_dot_product_attention(..., enable_gqa=True)`` on the projected heads.

    中文：分组查询注意力（MHA：G = H；MQA：G = 1），可选 RoPE 与 KV 缓存；属性与形状如上；
    缓存里的 K 已做 RoPE、尚未重复；新 token 的位置从 ``T_past`` 开始；掩码 True = 可以看。
    """

# %% grade_id="drill_GroupedQueryAttention" points=1 check="GroupedQueryAttention:GroupedQueryAttention" tags=["nbgrader"]

# %% check="GroupedQueryAttention:GroupedQueryAttention" tags=["selfstudy"]
finish('GroupedQueryAttention', _)

# %% tags=["selfstudy"]
reveal('GroupedQueryAttention')

# %% [markdown]
# ## 练习 21 · SwiGLU 前馈网络 / SwiGLU FFN
#
# 目标 / target: 5 min. 检查 / check: `SwiGLU`.

# %% tags=["selfstudy"]
start('SwiGLU')

# %% exercise="SwiGLU" drill=true
class SwiGLU(nn.Module):
    """SwiGLU feed-forward (LLaMA).

    ``SwiGLU(d_model, d_ff)``; attributes ``gate_proj``, ``up_proj`` (``nn.Linear(d_model, d_ff, bias=False)``),
    ``down_proj`` (``nn.Linear(d_ff, d_model, bias=False)``).
    ``forward(x (..., d_model)) = down_proj(silu(gate_proj(x)) * up_proj(x))``, shape ``(..., d_model)``.

    中文：SwiGLU 前馈网络；属性如上；SiLU 只作用在 gate 分支上，公式如上。
    """

# %% grade_id="drill_SwiGLU" points=1 check="SwiGLU:SwiGLU" tags=["nbgrader"]

# %% check="SwiGLU:SwiGLU" tags=["selfstudy"]
finish('SwiGLU', _)

# %% tags=["selfstudy"]
reveal('SwiGLU')

# %% [markdown]
# ## 练习 22 · 滑动窗口因果掩码 / causal sliding-window mask
#
# 目标 / target: 5 min. 检查 / check: `make_sliding_window_mask`.

# %% tags=["selfstudy"]
start('make_sliding_window_mask')

# %% exercise="make_sliding_window_mask" drill=true
def make_sliding_window_mask(T, window, device=None):
    """Causal sliding-window mask.

    Returns bool ``(1, 1, T, T)``: query ``i`` may attend to key ``j`` iff ``i - window < j <= i``
    (``window`` keys including itself). ``window >= T`` gives the causal mask; ``ValueError`` for ``window < 1``.

    中文：因果滑动窗口掩码，布尔 ``(1, 1, T, T)``；查询 ``i`` 能看键 ``j`` 当且仅当 ``i - window < j <= i``；
    ``window < 1`` 时抛出 ``ValueError``。
    """

# %% grade_id="drill_make_sliding_window_mask" points=1 check="make_sliding_window_mask:make_sliding_window_mask" tags=["nbgrader"]

# %% check="make_sliding_window_mask:make_sliding_window_mask" tags=["selfstudy"]
finish('make_sliding_window_mask', _)

# %% tags=["selfstudy"]
reveal('make_sliding_window_mask')

# %% [markdown]
# ## 练习 23 · top-k 过滤 / top-k filtering
#
# 目标 / target: 5 min. 检查 / check: `top_k_filter`.

# %% tags=["selfstudy"]
start('top_k_filter')

# %% exercise="top_k_filter" drill=true
def top_k_filter(logits, k):
    """Top-k filtering.

    ``logits (..., V)`` -> ``(..., V)``: every logit ``>=`` the ``k``-th largest of its row is kept (ties at
    the boundary all kept), the others become ``-inf``. ``k=None`` or ``k >= V``: unchanged.

    中文：保留每行中不小于第 ``k`` 大的 logit（边界上的并列全部保留），其余置为 ``-inf``；``k`` 为 None 或不小于 V 时不变。
    """

# %% grade_id="drill_top_k_filter" points=1 check="top_k_filter:top_k_filter" tags=["nbgrader"]

# %% check="top_k_filter:top_k_filter" tags=["selfstudy"]
finish('top_k_filter', _)

# %% tags=["selfstudy"]
reveal('top_k_filter')

# %% [markdown]
# ## 练习 24 · top-p（核）过滤 / top-p (nucleus) filtering
#
# 目标 / target: 8 min. 检查 / check: `top_p_filter`.

# %% tags=["selfstudy"]
start('top_p_filter')

# %% exercise="top_p_filter" drill=true
def top_p_filter(logits, p):
    """Nucleus (top-p) filtering.

    ``logits (..., V)`` -> ``(..., V)``: keep the smallest set of most probable tokens whose probability
    mass is ``>= p`` (the token that crosses ``p`` is kept; the top token always); the others become
    ``-inf``. Sorting ties: ``torch.sort(..., descending=True, stable=True)``. ``p=None`` or ``p >= 1``: unchanged.

    中文：核采样过滤：按概率从大到小，保留累计概率首次 ``>= p`` 的最小集合（越过 ``p`` 的那个 token 保留），
    其余置为 ``-inf``；``p`` 为 None 或不小于 1 时不变。
    """

# %% grade_id="drill_top_p_filter" points=1 check="top_p_filter:top_p_filter" tags=["nbgrader"]

# %% check="top_p_filter:top_p_filter" tags=["selfstudy"]
finish('top_p_filter', _)

# %% tags=["selfstudy"]
reveal('top_p_filter')

# %% [markdown]
# ## 练习 25 · 温度 + top-k + top-p 的采样分布 / sampling distribution
#
# 目标 / target: 5 min. 检查 / check: `sampling_probs`.

# %% tags=["selfstudy"]
start('sampling_probs')

# %% exercise="sampling_probs" drill=true
def sampling_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """Sampling distribution (uses your ``top_k_filter``, ``top_p_filter``).

    ``logits (B, V)`` -> ``probs (B, V)``: divide the logits by ``temperature`` (> 0), then top-k, then
    top-p, then softmax; rows sum to 1, filtered tokens exactly 0.

    中文：采样分布：logits 先除以 ``temperature``，再 top-k、再 top-p，最后 softmax；每行和为 1，被过滤的 token 概率恰为 0。
    """

# %% grade_id="drill_sampling_probs" points=1 check="sampling_probs:sampling_probs" tags=["nbgrader"]

# %% check="sampling_probs:sampling_probs" tags=["selfstudy"]
finish('sampling_probs', _)

# %% tags=["selfstudy"]
reveal('sampling_probs')

# %% [markdown]
# ## 练习 26 · 采样下一个 token / sampling the next token
#
# 目标 / target: 5 min. 检查 / check: `sample_next_token`.

# %% tags=["selfstudy"]
start('sample_next_token')

# %% exercise="sample_next_token" drill=true
def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """One sampling step (uses your ``sampling_probs``).

    ``logits (B, V)`` -> LongTensor ``(B,)``. ``temperature == 0``: argmax (no random draw). Otherwise one
    ``torch.multinomial(probs, 1, generator=generator)`` call, so a fixed generator gives fixed tokens.

    中文：采样一步：``temperature == 0`` 时取 argmax；否则调用一次 ``torch.multinomial``（使用 ``generator``）。
    """

# %% grade_id="drill_sample_next_token" points=1 check="sample_next_token:sample_next_token" tags=["nbgrader"]

# %% check="sample_next_token:sample_next_token" tags=["selfstudy"]
finish('sample_next_token', _)

# %% tags=["selfstudy"]
reveal('sample_next_token')

# %% [markdown]
# ## 练习 27 · 带 KV 缓存的生成 / generation with a KV cache
#
# 目标 / target: 12 min. 检查 / check: `generate`.

# %% tags=["selfstudy"]
start('generate')

# %% exercise="generate" drill=true
def generate(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None, use_cache=True):
    """Autoregressive generation with or without a KV cache (uses your ``sample_next_token``).

    ``model`` a ``GPT`` (``model(idx) -> logits (B, T, V)``, ``model.forward_cached(idx, caches)
    -> (logits, caches)``); ``idx`` LongTensor ``(B, T0)``; returns ``(B, T0 + max_new_tokens)``. Each step
    samples from the last position's logits. ``use_cache=True`` runs the prompt once, then one token per
    step; the tokens must equal ``use_cache=False`` (the whole prefix re-run) exactly.

    中文：自回归生成。``use_cache=True`` 时 prompt 只跑一次、之后每步只送一个新 token；
    结果必须与不用缓存（每步重跑整个前缀）逐个相同。
    """

# %% grade_id="drill_generate" points=1 check="generate:generate" tags=["nbgrader"]

# %% check="generate:generate" tags=["selfstudy"]
finish('generate', _)

# %% tags=["selfstudy"]
reveal('generate')

# %% [markdown]
# ## 练习 28 · 束搜索 / beam search
#
# 目标 / target: 20 min. 检查 / check: `beam_search`.

# %% tags=["selfstudy"]
start('beam_search')

# %% exercise="beam_search" drill=true
def beam_search(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha=0.0):
    """Beam search with length normalisation.

    ``step_fn(ys LongTensor (N, t)) -> log_probs (N, V)``; ``prefix`` LongTensor ``(T0,)``.
    Each step keeps the ``beam_size`` best (beam, token) pairs by summed log-prob (``torch.topk`` over
    ``N * V``); a beam ending in ``eos_id`` is finished and never extended. Stop when no beam is alive,
    ``beam_size`` beams have finished, or after ``max_new_tokens`` steps. Score ``= logp_sum / n ** alpha``
    (``n`` generated tokens, EOS included). Returns ``(tokens (T0 + n,), score float)`` of the best
    candidate among finished and alive beams (ties: the first found).

    中文：带长度归一化的束搜索；以 EOS 结尾的束结束、不再扩展；得分 ``logp_sum / n ** alpha``；
    返回最好候选的完整序列（含前缀）和得分。
    """

# %% grade_id="drill_beam_search" points=1 check="beam_search:beam_search" tags=["nbgrader"]

# %% check="beam_search:beam_search" tags=["selfstudy"]
finish('beam_search', _)

# %% tags=["selfstudy"]
reveal('beam_search')

# %% [markdown]
# ## 练习 29 · softmax 反向传播 / softmax backward
#
# 目标 / target: 8 min. 检查 / check: `softmax_backward`.

# %% tags=["selfstudy"]
start('softmax_backward')

# %% exercise="softmax_backward" drill=true
def softmax_backward(y, grad_y, dim=-1):
    """Backward of softmax, by hand.

    ``y = softmax(x, dim)`` and ``grad_y`` (same shape) -> ``grad_x`` (same shape); equals autograd
    through ``torch.softmax``.

    中文：手写 softmax 的反向传播：给定输出 ``y`` 和上游梯度 ``grad_y``，返回 ``grad_x``，与 autograd 相等。
    """

# %% grade_id="drill_softmax_backward" points=1 check="softmax_backward:softmax_backward" tags=["nbgrader"]

# %% check="softmax_backward:softmax_backward" tags=["selfstudy"]
finish('softmax_backward', _)

# %% tags=["selfstudy"]
reveal('softmax_backward')

# %% [markdown]
# ## 练习 30 · LayerNorm 反向传播 / LayerNorm backward
#
# 目标 / target: 15 min. 检查 / check: `layer_norm_backward`.

# %% tags=["selfstudy"]
start('layer_norm_backward')

# %% exercise="layer_norm_backward" drill=true
def layer_norm_backward(x, weight, grad_out, eps=1e-5):
    """Backward of LayerNorm over the last axis, by hand.

    ``x (..., d)``, ``weight (d,)``, ``grad_out (..., d)`` -> ``(grad_x (..., d), grad_weight (d,), grad_bias (d,))``;
    equals autograd through ``F.layer_norm(x, (d,), weight, bias, eps)`` (biased variance).

    中文：手写 LayerNorm（最后一维，有偏方差）的反向传播，返回三个梯度，与 autograd 相等。
    """

# %% grade_id="drill_layer_norm_backward" points=1 check="layer_norm_backward:layer_norm_backward" tags=["nbgrader"]

# %% check="layer_norm_backward:layer_norm_backward" tags=["selfstudy"]
finish('layer_norm_backward', _)

# %% tags=["selfstudy"]
reveal('layer_norm_backward')

# %% [markdown]
# ## 练习 31 · 交叉熵（ignore_index、标签平滑）/ cross-entropy (ignore_index, label smoothing)
#
# 目标 / target: 10 min. 检查 / check: `cross_entropy`.

# %% tags=["selfstudy"]
start('cross_entropy')

# %% exercise="cross_entropy" drill=true
def cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0):
    """Cross-entropy with ``ignore_index`` and label smoothing.

    ``logits (..., C)`` (classes on the last axis), ``target`` LongTensor ``(...)`` -> scalar tensor: the mean
    over the positions whose target is not ``ignore_index``; smoothed target ``(1 - eps) * onehot + eps / C``.
    Equals ``F.cross_entropy(logits.reshape(-1, C), target.reshape(-1), ignore_index=..., label_smoothing=...)``.

    中文：带 ``ignore_index`` 和标签平滑的交叉熵；只在未被忽略的位置上求平均；平滑目标如上；与 ``F.cross_entropy`` 相等。
    """

# %% grade_id="drill_cross_entropy" points=1 check="cross_entropy:cross_entropy" tags=["nbgrader"]

# %% check="cross_entropy:cross_entropy" tags=["selfstudy"]
finish('cross_entropy', _)

# %% tags=["selfstudy"]
reveal('cross_entropy')

# %% [markdown]
# ## 练习 32 · 注意力的 FLOPs 与显存 / attention FLOPs and memory
#
# 目标 / target: 8 min. 检查 / check: `attention_flops_and_memory`.

# %% tags=["selfstudy"]
start('attention_flops_and_memory')

# %% exercise="attention_flops_and_memory" drill=true
def attention_flops_and_memory(n, d, H, num_kv_heads=None, batch=1, bytes_per_element=4):
    """Cost of one self-attention layer's forward pass.

    ``n`` tokens, width ``d``, ``H`` query heads, ``G = num_kv_heads or H`` KV heads, ``d_k = d // H``, ``batch``
    sequences. Returns ``(flops int, attn_bytes int)``: FLOPs of the matmuls only (a multiply-add counts 2:
    the Q/K/V/O projections, ``Q K^T`` and ``weights V``); ``attn_bytes`` the materialised attention matrices
    ``(batch, H, n, n)`` at ``bytes_per_element``.

    中文：一层自注意力前向的开销：只数矩阵乘法的 FLOPs（一次乘加算 2），以及显式存下的注意力矩阵占用的字节数。
    """

# %% grade_id="drill_attention_flops_and_memory" points=1 check="attention_flops_and_memory:attention_flops_and_memory" tags=["nbgrader"]

# %% check="attention_flops_and_memory:attention_flops_and_memory" tags=["selfstudy"]
finish('attention_flops_and_memory', _)

# %% tags=["selfstudy"]
reveal('attention_flops_and_memory')

# %% [markdown]
# ## 练习 33 · KV 缓存大小 / KV-cache size
#
# 目标 / target: 3 min. 检查 / check: `kv_cache_bytes`.

# %% tags=["selfstudy"]
start('kv_cache_bytes')

# %% exercise="kv_cache_bytes" drill=true
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len=1, batch=1, bytes_per_element=2):
    """Size of a KV cache in bytes (keys and values of every layer), an int; ``seq_len=1`` gives bytes per token.

    中文：KV 缓存的字节数（每层的 K 和 V），返回 int；``seq_len=1`` 即每个 token 的字节数。
    """

# %% grade_id="drill_kv_cache_bytes" points=1 check="kv_cache_bytes:kv_cache_bytes" tags=["nbgrader"]

# %% check="kv_cache_bytes:kv_cache_bytes" tags=["selfstudy"]
finish('kv_cache_bytes', _)

# %% tags=["selfstudy"]
reveal('kv_cache_bytes')

# %% [markdown]
# ## 练习 34 · BatchNorm 前向（训练模式）/ BatchNorm forward (training mode)
#
# 目标 / target: 5 min. 检查 / check: `batch_norm_forward`.

# %% tags=["selfstudy"]
start('batch_norm_forward')

# %% exercise="batch_norm_forward" drill=true
def batch_norm_forward(x, weight, bias, eps=1e-5):
    """BatchNorm in training mode, by hand.

    ``x (N, D)``, ``weight (D,)``, ``bias (D,)`` -> ``out (N, D)``: every feature normalised with the batch's
    statistics; equals ``F.batch_norm(x, None, None, weight, bias, training=True, eps=eps)``.

    中文：手写训练模式的 BatchNorm：每个特征用这一批的统计量归一化，再缩放、平移；与 ``F.batch_norm(..., training=True)`` 相等。
    """

# %% grade_id="drill_batch_norm_forward" points=1 check="batch_norm_forward:batch_norm_forward" tags=["nbgrader"]

# %% check="batch_norm_forward:batch_norm_forward" tags=["selfstudy"]
finish('batch_norm_forward', _)

# %% tags=["selfstudy"]
reveal('batch_norm_forward')

# %% [markdown]
# ## 练习 35 · BatchNorm 反向传播 / BatchNorm backward
#
# 目标 / target: 15 min. 检查 / check: `batch_norm_backward`.

# %% tags=["selfstudy"]
start('batch_norm_backward')

# %% exercise="batch_norm_backward" drill=true
def batch_norm_backward(x, weight, grad_out, eps=1e-5):
    """Backward of training-mode BatchNorm, by hand.

    ``x (N, D)``, ``weight (D,)``, ``grad_out (N, D)`` -> ``(grad_x (N, D), grad_weight (D,), grad_bias (D,))``;
    equals autograd through ``F.batch_norm(x, None, None, weight, bias, training=True, eps=eps)``.

    中文：手写训练模式 BatchNorm 的反向传播，返回三个梯度，与 autograd 相等。
    """

# %% grade_id="drill_batch_norm_backward" points=1 check="batch_norm_backward:batch_norm_backward" tags=["nbgrader"]

# %% check="batch_norm_backward:batch_norm_backward" tags=["selfstudy"]
finish('batch_norm_backward', _)

# %% tags=["selfstudy"]
reveal('batch_norm_backward')

# %% [markdown]
# ## 练习 36 · MLP 反向传播 / MLP backward
#
# 目标 / target: 10 min. 检查 / check: `mlp_backward`.

# %% tags=["selfstudy"]
start('mlp_backward')

# %% exercise="mlp_backward" drill=true
def mlp_backward(x, w1, b1, w2, b2, grad_out):
    """Backward of ``y = relu(x @ w1.T + b1) @ w2.T + b2``, by hand (``nn.Linear``'s weight layout).

    ``x (..., d_in)``, ``w1 (h, d_in)``, ``b1 (h,)``, ``w2 (d_out, h)``, ``b2 (d_out,)``, ``grad_out (..., d_out)``
    -> ``(grad_x, grad_w1, grad_b1, grad_w2, grad_b2)``, each of its input's shape; equals autograd.

    中文：手写两层 ReLU MLP 的反向传播，返回五个梯度（形状分别与对应输入相同），与 autograd 相等。
    """

# %% grade_id="drill_mlp_backward" points=1 check="mlp_backward:mlp_backward" tags=["nbgrader"]

# %% check="mlp_backward:mlp_backward" tags=["selfstudy"]
finish('mlp_backward', _)

# %% tags=["selfstudy"]
reveal('mlp_backward')

# %% [markdown]
# ## 练习 37 · 在线 softmax / online softmax
#
# 目标 / target: 8 min. 检查 / check: `online_softmax`.

# %% tags=["selfstudy"]
start('online_softmax')

# %% exercise="online_softmax" drill=true
def online_softmax(x):
    """Softmax over the last axis of ``x (..., n)`` in one pass over the elements (chapter 13): a running max and
    a running sum per row; no ``torch.softmax``, ``F.softmax`` or ``torch.logsumexp``. Equals ``torch.softmax(x, -1)``.

    中文：沿最后一维的一遍 softmax（第 13 章）：每行维护运行最大值与运行和。
    """

# %% grade_id="drill_online_softmax" points=1 check="online_softmax:online_softmax" tags=["nbgrader"]

# %% check="online_softmax:online_softmax" tags=["selfstudy"]
finish('online_softmax', _)

# %% tags=["selfstudy"]
reveal('online_softmax')

# %% [markdown]
# ## 练习 38 · 分块注意力（FlashAttention 前向）/ tiled attention (FlashAttention's forward)
#
# 目标 / target: 15 min. 检查 / check: `tiled_attention`.

# %% tags=["selfstudy"]
start('tiled_attention')

# %% exercise="tiled_attention" drill=true
def tiled_attention(q, k, v, block_size=64, causal=False):
    """``softmax(q k^T / sqrt(d)) v`` for ``q (..., T_q, d)``, ``k (..., T_k, d)``, ``v (..., T_k, d_v)`` ->
    ``(..., T_q, d_v)``, computed in blocks of at most ``block_size`` queries and keys, never holding a
    ``T_q x T_k`` matrix (chapter 13). ``causal=True`` (``T_q == T_k``): query i sees keys j <= i. ``ValueError``
    for ``block_size < 1`` or a causal call with ``T_q != T_k``.

    中文：分块计算的注意力（第 13 章），从不生成 ``T_q x T_k`` 的矩阵；``causal=True`` 时查询 i 只看 j <= i 的键。
    """

# %% grade_id="drill_tiled_attention" points=1 check="tiled_attention:tiled_attention" tags=["nbgrader"]

# %% check="tiled_attention:tiled_attention" tags=["selfstudy"]
finish('tiled_attention', _)

# %% tags=["selfstudy"]
reveal('tiled_attention')

# %% [markdown]
# ## 练习 39 · MoE 的 top-k 路由器 / MoE top-k router
#
# 目标 / target: 8 min. 检查 / check: `TopKRouter`.

# %% tags=["selfstudy"]
start('TopKRouter')

# %% exercise="TopKRouter" drill=true
class TopKRouter(nn.Module):
    """``TopKRouter(d_model, num_experts, top_k=2, normalize=True)``, attribute ``gate`` (``nn.Linear(d_model,
    num_experts, bias=False)``); ``forward(x (N, d_model)) -> (weights (N, k), indices (N, k), logits (N, E))``:
    a softmax over all experts, then the top k (largest first); ``normalize``: the k weights divided by their sum
    (chapter 13).

    中文：MoE 路由器（第 13 章）：先在全部专家上 softmax，再取前 k 个；``normalize`` 时把 k 个权重归一化。
    """

# %% grade_id="drill_TopKRouter" points=1 check="TopKRouter:TopKRouter" tags=["nbgrader"]

# %% check="TopKRouter:TopKRouter" tags=["selfstudy"]
finish('TopKRouter', _)

# %% tags=["selfstudy"]
reveal('TopKRouter')

# %% [markdown]
# ## 练习 40 · MoE 负载均衡损失 / MoE load-balancing loss
#
# 目标 / target: 5 min. 检查 / check: `load_balancing_loss`.

# %% tags=["selfstudy"]
start('load_balancing_loss')

# %% exercise="load_balancing_loss" drill=true
def load_balancing_loss(router_logits, expert_index, num_experts):
    """The Switch/Mixtral auxiliary loss ``N * sum_i f_i * P_i`` (chapter 13) for ``router_logits (T, N)`` and
    ``expert_index (T, k)``: ``f_i`` the fraction of tokens sent to expert i (counted), ``P_i`` the mean router
    probability of expert i. A scalar tensor.

    中文：负载均衡辅助损失（第 13 章）：f 来自计数，P 来自路由 softmax 概率的平均。
    """

# %% grade_id="drill_load_balancing_loss" points=1 check="load_balancing_loss:load_balancing_loss" tags=["nbgrader"]

# %% check="load_balancing_loss:load_balancing_loss" tags=["selfstudy"]
finish('load_balancing_loss', _)

# %% tags=["selfstudy"]
reveal('load_balancing_loss')

# %% [markdown]
# ## 练习 41 · INT8 逐通道对称量化 / symmetric INT8 per-channel quantization
#
# 目标 / target: 5 min. 检查 / check: `quantize_int8`.

# %% tags=["selfstudy"]
start('quantize_int8')

# %% exercise="quantize_int8" drill=true
def quantize_int8(w):
    """Symmetric INT8 quantization of ``w (out, in)`` with one scale per output channel (chapter 13): returns
    ``(q torch.int8 (out, in), scale (out, 1))`` with ``scale = absmax / 127`` per row (1 for a row of zeros) and
    ``q = round(w / scale)`` clamped to ``[-127, 127]``.

    中文：对称 INT8 逐输出通道量化（第 13 章）：每行 ``scale = 最大绝对值 / 127``，``q`` 四舍五入并截断到 [-127, 127]。
    """

# %% grade_id="drill_quantize_int8" points=1 check="quantize_int8:quantize_int8" tags=["nbgrader"]

# %% check="quantize_int8:quantize_int8" tags=["selfstudy"]
finish('quantize_int8', _)

# %% tags=["selfstudy"]
reveal('quantize_int8')

# %% [markdown]
# ## 练习 42 · PPO 裁剪目标 / PPO clipped objective
#
# 目标 / target: 8 min. 检查 / check: `ppo_clip_loss`.

# %% tags=["selfstudy"]
start('ppo_clip_loss')

# %% exercise="ppo_clip_loss" drill=true
def ppo_clip_loss(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
    """The PPO clipped objective, negated, as a scalar loss.

    ``logprobs``, ``old_logprobs`` ``(B, T-1)`` per-token log-probabilities (new and old policy); ``advantages``
    ``(B,)`` (one per sequence) or ``(B, T-1)``; ``mask`` bool ``(B, T-1)``. Average each sequence over its masked
    tokens, then average over the sequences.

    中文：PPO 裁剪目标取负；逐 token；先在每条序列的掩码 token 上平均，再在序列间平均。
    """

# %% grade_id="drill_ppo_clip_loss" points=1 check="ppo_clip_loss:ppo_clip_loss" tags=["nbgrader"]

# %% check="ppo_clip_loss:ppo_clip_loss" tags=["selfstudy"]
finish('ppo_clip_loss', _)

# %% tags=["selfstudy"]
reveal('ppo_clip_loss')

# %% [markdown]
# ## 练习 43 · GRPO 损失 / GRPO loss
#
# 目标 / target: 12 min. 检查 / check: `grpo_loss`.

# %% tags=["selfstudy"]
start('grpo_loss')

# %% exercise="grpo_loss" drill=true
def grpo_loss(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    """The GRPO loss (DeepSeekMath) as a scalar.

    ``logprobs``, ``old_logprobs``, ``ref_logprobs`` ``(B, T-1)`` (policy, old policy, frozen reference);
    ``rewards (B,)`` in consecutive groups of ``group_size``; ``mask`` bool ``(B, T-1)``. Group-normalised
    advantages (std unbiased, plus 1e-4), PPO's clipped ratio, the k3 KL estimator to the reference weighted by
    ``beta``; averaged as PPO's loss. No gradient into the reference.

    中文：GRPO 损失：组内标准化的优势（无偏 std 加 1e-4）、PPO 的裁剪比率、对参考模型的 k3 KL（乘 beta）；
    平均方式同 PPO；梯度不能流进参考模型。
    """

# %% grade_id="drill_grpo_loss" points=1 check="grpo_loss:grpo_loss" tags=["nbgrader"]

# %% check="grpo_loss:grpo_loss" tags=["selfstudy"]
finish('grpo_loss', _)

# %% tags=["selfstudy"]
reveal('grpo_loss')

# %% [markdown]
# ## 练习 44 · DPO 损失 / DPO loss
#
# 目标 / target: 5 min. 检查 / check: `dpo_loss`.

# %% tags=["selfstudy"]
start('dpo_loss')

# %% exercise="dpo_loss" drill=true
def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    """The DPO loss (Rafailov et al., 2023) as a scalar.

    Each argument ``(B,)``: a sequence's summed log-probability under the policy or the frozen reference, for
    the chosen and the rejected answer of each pair. Returns the mean over the pairs.

    中文：DPO 损失；四个参数都是每条序列的对数概率之和（策略 / 冻结的参考模型，选中 / 拒绝），返回批均值。
    """

# %% grade_id="drill_dpo_loss" points=1 check="dpo_loss:dpo_loss" tags=["nbgrader"]

# %% check="dpo_loss:dpo_loss" tags=["selfstudy"]
finish('dpo_loss', _)

# %% tags=["selfstudy"]
reveal('dpo_loss')

# %% [markdown]
# ## 练习 45 · LoRA 线性层 / LoRA linear layer
#
# 目标 / target: 10 min. 检查 / check: `LoRALinear`.

# %% tags=["selfstudy"]
start('LoRALinear')

# %% exercise="LoRALinear" drill=true
class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update (LoRA).

    ``LoRALinear(base, r=4, alpha=8)``: attributes ``base`` (frozen), ``A (r, in_features)``,
    ``B (out_features, r)``, ``scaling``. ``forward(x (..., in_features)) -> (..., out_features)``; a fresh layer
    equals its base; ``merge()`` folds the update into ``base.weight``, ``unmerge()`` takes it out; outputs stay
    the same through both.

    中文：LoRA 线性层：底座冻结，只训练 A、B；新建时输出与底座相同；merge() 并入权重，unmerge() 还原，输出不变。
    """

# %% grade_id="drill_LoRALinear" points=1 check="LoRALinear:LoRALinear" tags=["nbgrader"]

# %% check="LoRALinear:LoRALinear" tags=["selfstudy"]
finish('LoRALinear', _)

# %% tags=["selfstudy"]
reveal('LoRALinear')

# %% [markdown]
# ## 进度与模拟面试 / Progress and mock interview
#
# 下面的单元格列出每道题的状态和最好用时。想来一场模拟面试：选中它，按 `B` 在下面插入一个新单元格，
# 输入 `mock_interview()` 运行。它在 `workspace/` 里生成 `mock_interview_<时间>.ipynb`，按难度各抽一道题
# （目标 3 分钟以内、4–8 分钟、10 分钟以上各一道；依赖的组件已折叠提供）。
#
# *English:* the cell below lists every drill's status and best time. For a mock interview, select it,
# press `B` for a new cell below and run `mock_interview()`: it writes a notebook to `workspace/` with one
# easy, one medium and one hard drill (target ≤ 3, 4–8 and ≥ 10 minutes).

# %% tags=["selfstudy"]
progress()
