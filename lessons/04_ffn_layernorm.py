# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 前馈网络、残差连接与层归一化（FFN, Residual, LayerNorm）
#
# 编码器和解码器的每一层都是“子层（sublayer）+ 残差连接 + 层归一化”的重复：子层是注意力或前馈网络。
# 这一章实现注意力之外的三个零件：逐位置前馈网络（position-wise feed-forward network, FFN）、
# 从零写的层归一化（layer normalization, LayerNorm），以及原论文的“残差 + 归一化”（Post-LN）。
# 选做部分：RMSNorm 和 Pre-LN。
#
# **本章共 11 分**，三个练习，5 个评分单元格：
#
# | 练习 | 评分单元格（grade_id） | 检查什么 | 分值 |
# | --- | --- | --- | --- |
# | `FeedForward` | `ffn_rejects_unknown_activation` | 未知激活函数名报清楚的错 | 1 |
# | 同上 | `ffn_matches_reference` | 形状、参数量、逐位置、ReLU/GELU、与参考实现一致 | 3 |
# | `LayerNorm`（从零实现） | `layernorm_normalises_last_axis` | 参数、沿最后一维归一化、与批次无关 | 2 |
# | 同上 | `layernorm_matches_reference` | 与 `nn.LayerNorm` 相等（非默认权重、小方差输入） | 3 |
# | `ResidualLayerNorm`（Post-LN） | `residual_layernorm_matches_reference` | `ln(x + sublayer_out)`，与参考实现一致 | 2 |
#
# 选做练习（不计分，立即给出 ✅/❌）：`RMSNorm`、`PreLNResidual`。
#
# 从零实现的意思：`LayerNorm` 里不能调用 `nn.LayerNorm` / `F.layer_norm`（评分时会检测），要自己算均值和方差。

# %%
# Setup: imports, seeds, and warning filters (so that a library warning does not clutter a check's report).
import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tutor.plots import plot_activations, plot_norm_axes, plot_norm_stability, plot_residual_variants

warnings.filterwarnings("ignore")
np.random.seed(0)
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
FINISH_FIRST = "完成上面的练习后再运行 / finish the exercise above first"

# %% [markdown]
# ## 1. 逐位置前馈网络（Position-wise FFN）
#
# $$
# \mathrm{FFN}(x) = \sigma(x W_1 + b_1)\, W_2 + b_2,\qquad
# W_1 \in \mathbb{R}^{d_{\text{model}} \times d_{\text{ff}}},\ W_2 \in \mathbb{R}^{d_{\text{ff}} \times d_{\text{model}}},
# $$
#
# $\sigma$ 是激活函数（原论文 ReLU，BERT/GPT 用 GELU）。“逐位置”指**同一个**两层 MLP 独立地作用在每个 token 上，
# 位置之间不交换任何信息（等价于卷积核大小为 1 的一维卷积）。典型配置 $d_{\text{ff}} = 4\, d_{\text{model}}$：先升维、再降维。
#
# **为什么注意力之后还要 FFN？** 注意力负责“在位置之间搬运信息”：每个输出是值向量的加权平均（凸组合）。
# 对单个 token 来说，值向量经过的 $W_V$、$W_O$ 都是线性的，softmax 的非线性只出现在“权重怎么分配”上。
# 没有 FFN，堆多少层注意力，每个位置上的特征变换都缺少逐元素的非线性。FFN 负责“在每个位置上加工特征”，
# 两者一个管交互、一个管变换。（也有研究把 FFN 看成键值记忆：$W_1$ 的每一列像一个“键”，$W_2$ 的对应行是“值”。）
#
# **参数量**：两个线性层 $d_{\text{model}} d_{\text{ff}} + d_{\text{ff}}$ 和 $d_{\text{ff}} d_{\text{model}} + d_{\text{model}}$，共
# $2\, d_{\text{model}}\, d_{\text{ff}} + d_{\text{ff}} + d_{\text{model}}$。$d_{\text{model}} = 512,\ d_{\text{ff}} = 2048$ 时为 2,099,712
# （常说的“约 $8 d_{\text{model}}^2 \approx 2.1$M”不计偏置），约是同层多头注意力（$4d^2 + 4d = 1{,}050{,}624$）的两倍——
# Transformer 的参数大头在 FFN。
#
# **形状追踪**（$B = 2,\ T = 10,\ d_{\text{model}} = 512,\ d_{\text{ff}} = 2048$）：
#
# | 步骤 | 形状 |
# | --- | --- |
# | 输入 `x` | `(2, 10, 512)` |
# | `fc1(x)`：`nn.Linear(512, 2048)` 只作用在最后一维 | `(2, 10, 2048)` |
# | 激活、dropout | `(2, 10, 2048)` |
# | `fc2(...)`：`nn.Linear(2048, 512)` | `(2, 10, 512)` |
#
# `nn.Linear` 对任意前导维度 `(..., in)` 都适用，所以不需要把 `(B, T)` 展平。
#
# **dropout 放在哪？** 本课程（和 `nn.TransformerEncoderLayer`）在激活之后、`fc2` 之前放一个 dropout；
# `fc2` 之后、残差相加之前的那个 dropout 属于第 05 章的层，不在 FFN 里（若在 FFN 里 `fc2` 之后再放一个，
# 就和层里的那个重复了）。

# %% [markdown]
# ### ReLU 与 GELU
#
# $\mathrm{ReLU}(x) = \max(0, x)$；$\mathrm{GELU}(x) = x\,\Phi(x)$，$\Phi$ 是标准正态分布的累积分布函数：
# 负半轴不是硬截断，而是平滑地趋于 0（在 $x \approx -0.75$ 处有一个小的负值谷）。
# `F.gelu` 默认用精确的 erf 公式；GPT-2 用的是 tanh 近似 `F.gelu(x, approximate="tanh")`，
# 两者最大相差约 $4.7 \times 10^{-4}$（在 $x \approx \pm 2.7$ 处，下面实测）。
# 本课程的 `"gelu"` 指精确版本。今天的大模型（Llama、Qwen）多用 SwiGLU：$\big(\mathrm{SiLU}(x W_1) \odot x W_3\big) W_2$，三个矩阵，
# 原始 LLaMA 为了与 $d_{\text{ff}} = 4 d_{\text{model}}$ 的普通 FFN 参数量相当，把 $d_{\text{ff}}$ 取为约 $\tfrac{8}{3} d_{\text{model}}$；
# 后来的模型常取得更宽（Llama 3 8B 是 $3.5\,d_{\text{model}}$）。

# %%
xs = torch.linspace(-4, 4, 401)
gelu_exact, gelu_tanh = F.gelu(xs), F.gelu(xs, approximate="tanh")
print("largest |GELU(erf) - GELU(tanh)| on [-4, 4]:", f"{(gelu_exact - gelu_tanh).abs().max().item():.1e}")
print("minimum of GELU:", f"{gelu_exact.min().item():.4f} at x = {xs[gelu_exact.argmin()].item():.2f}")
plot_activations(xs, {"ReLU": F.relu(xs), "GELU (exact, erf)": gelu_exact, "GELU (tanh approx.)": gelu_tanh})
plt.show()

# %% [markdown]
# ## 2. 练习：`FeedForward`（4 分）
#
# 要求：
#
# - `FeedForward(d_model, d_ff, dropout=0.0, activation="relu")`，属性 `fc1`（`nn.Linear(d_model, d_ff)`）、`fc2`（`nn.Linear(d_ff, d_model)`）、`dropout`；
# - `activation` 取 `"relu"` 或 `"gelu"`（精确版，同 `F.gelu`）；其他名字在构造时抛出 `ValueError`，信息里写出收到的名字和可选值；
# - `forward(x)`：`fc2(dropout(activation(fc1(x))))`，`x (..., d_model) -> (..., d_model)`。

# %% exercise="FeedForward"

# %% grade_id="ffn_rejects_unknown_activation" points=1
# Visible tests: an unknown activation name raises a clear ValueError at construction time.
try:
    FeedForward(8, 32, activation="swish")
except ValueError as err:
    print("ValueError:", err)
else:
    raise AssertionError("activation='swish' 应抛出 ValueError / activation='swish' must raise ValueError")
for _act in ("relu", "gelu"):
    assert isinstance(FeedForward(8, 32, activation=_act), nn.Module), f"'{_act}' 应被接受 / '{_act}' must be accepted"

# %% grade_id="ffn_matches_reference" points=3 check="FeedForward:FeedForward"
# Visible tests: attributes, parameter count, shapes, position-wise behaviour, ReLU vs GELU.
_g = torch.Generator().manual_seed(0)
_ffn = FeedForward(16, 64).eval()
assert isinstance(getattr(_ffn, "fc1", None), nn.Linear) and (_ffn.fc1.in_features, _ffn.fc1.out_features) == (16, 64), \
    "fc1 应为 nn.Linear(d_model, d_ff) / fc1 must be nn.Linear(d_model, d_ff)"
assert isinstance(getattr(_ffn, "fc2", None), nn.Linear) and (_ffn.fc2.in_features, _ffn.fc2.out_features) == (64, 16), \
    "fc2 应为 nn.Linear(d_ff, d_model) / fc2 must be nn.Linear(d_ff, d_model)"
_n = sum(p.numel() for p in _ffn.parameters())
assert _n == 2 * 16 * 64 + 64 + 16, f"参数量应为 2*d_model*d_ff + d_ff + d_model = 2128 / expected 2128 parameters, got {_n}"
_x = torch.randn(2, 5, 16, generator=_g)                   # (B, T, d_model)
with torch.no_grad():
    _y = _ffn(_x)
    assert _y.shape == (2, 5, 16), f"输出形状应为 (2, 5, 16) / output shape must be (2, 5, 16), got {tuple(_y.shape)}"
    _perm = torch.tensor([4, 0, 3, 1, 2])
    assert torch.allclose(_ffn(_x[:, _perm]), _y[:, _perm], atol=1e-6), \
        "FFN 应逐位置独立：打乱位置，输出同样打乱 / the FFN must be position-wise: shuffled positions, shuffled outputs"
    assert torch.allclose(_ffn(_x[0, 2]), _y[0, 2], atol=1e-6), "单个 token (d_model,) 也应可用 / one token (d_model,) must work"
    assert torch.allclose(_y, _ffn.fc2(torch.relu(_ffn.fc1(_x))), atol=1e-6), \
        "默认激活应为 ReLU：fc2(relu(fc1(x))) / the default activation must be ReLU"
    _gelu = FeedForward(16, 64, activation="gelu").eval()
    _gelu.load_state_dict(_ffn.state_dict())
    assert torch.allclose(_gelu(_x), _ffn.fc2(F.gelu(_ffn.fc1(_x))), atol=1e-6), \
        "activation='gelu' 应为 fc2(gelu(fc1(x)))（精确 GELU）/ activation='gelu' must give fc2(gelu(fc1(x))) (exact GELU)"

# %% [markdown]
# ### FFN 的反向传播（手推一次）
#
# 面试常让人不用 autograd 写一个两层 MLP 的反向。取上面 FFN 的默认形式（ReLU），用 `nn.Linear` 的权重布局
# （`weight` 是 `(out, in)`，所以前向是 $x W^{\top}$）：
#
# $$
# z = x W_1^{\top} + b_1,\qquad a = \mathrm{ReLU}(z),\qquad y = a W_2^{\top} + b_2 .
# $$
#
# 上游梯度 $g = \partial L / \partial y$，链式法则从后往前走：
#
# - 第二层：$\partial L/\partial W_2 = g^{\top} a$，$\partial L/\partial b_2 = \sum_{\text{样本}} g$，$\partial L/\partial a = g\, W_2$；
# - ReLU：$\partial L/\partial z = \partial L/\partial a \odot \mathbb{1}[z > 0]$，乘的是 0/1 掩码，不是激活值 $a$。
#   $a > 0$ 和 $z > 0$ 是同一个掩码，用哪个算都对；
# - 第一层：$\partial L/\partial W_1 = (\partial L/\partial z)^{\top} x$，$\partial L/\partial b_1 = \sum_{\text{样本}} \partial L/\partial z$，
#   $\partial L/\partial x = (\partial L/\partial z)\, W_1$。
#
# 规律：权重的梯度是“上游梯度的转置 × 这一层的输入”，形状与权重相同；偏置的梯度是上游梯度在所有样本上**求和**
# （每个样本用的是同一个偏置）。输入是 `(B, T, d)` 时，把 `B·T` 个位置都当作样本。
#
# **形状追踪**（$N = 6$ 个样本，$d_{\text{in}} = 4$，$h = 8$，$d_{\text{out}} = 3$）：
#
# | 梯度 | 怎么算 | 形状 |
# | --- | --- | --- |
# | `grad_w2` | `g.T @ a`：`(3, 6) @ (6, 8)` | `(3, 8)`，同 `w2` |
# | `grad_b2` | `g.sum(0)` | `(3,)` |
# | `grad_a` | `g @ w2`：`(6, 3) @ (3, 8)` | `(6, 8)` |
# | `grad_z` | `grad_a * (z > 0)` | `(6, 8)` |
# | `grad_w1` | `grad_z.T @ x`：`(8, 6) @ (6, 4)` | `(8, 4)`，同 `w1` |
# | `grad_b1` | `grad_z.sum(0)` | `(8,)` |
# | `grad_x` | `grad_z @ w1`：`(6, 8) @ (8, 4)` | `(6, 4)`，同 `x` |
#
# 常见错误：忘了 ReLU 的掩码；乘的是激活值 $a$ 而不是掩码；写成 `x.T @ grad_z`（形状 `(4, 8)`：那是 $xW$ 写法里
# $W$ 的布局，`nn.Linear` 的权重是它的转置）；偏置的梯度取了平均，或者没有求和。下面用 autograd 验证（float64）：

# %% demo=true
# MLP backward by hand, checked against autograd through F.linear and F.relu (float64).
_g = torch.Generator().manual_seed(3)
_x = torch.randn(6, 4, generator=_g, dtype=torch.float64, requires_grad=True)        # (N, d_in)
_w1 = torch.randn(8, 4, generator=_g, dtype=torch.float64, requires_grad=True)       # nn.Linear(4, 8).weight: (out, in)
_b1 = torch.randn(8, generator=_g, dtype=torch.float64, requires_grad=True)
_w2 = torch.randn(3, 8, generator=_g, dtype=torch.float64, requires_grad=True)       # nn.Linear(8, 3).weight
_b2 = torch.randn(3, generator=_g, dtype=torch.float64, requires_grad=True)
_upstream = torch.randn(6, 3, generator=_g, dtype=torch.float64)                     # dL/dy
F.linear(F.relu(F.linear(_x, _w1, _b1)), _w2, _b2).backward(_upstream)              # autograd fills the .grad fields
with torch.no_grad():
    _z = _x @ _w1.T + _b1                                                            # (6, 4) @ (4, 8) -> (6, 8)
    _a = _z.clamp(min=0)                                                             # ReLU
    _grad_z = (_upstream @ _w2) * (_z > 0)                                           # (6, 3) @ (3, 8) -> (6, 8), masked
    _mine = {"x": _grad_z @ _w1,                                                     # (6, 8) @ (8, 4) -> (6, 4)
             "w1": _grad_z.T @ _x,                                                   # (8, 6) @ (6, 4) -> (8, 4)
             "b1": _grad_z.sum(dim=0),                                               # (8,)
             "w2": _upstream.T @ _a,                                                 # (3, 6) @ (6, 8) -> (3, 8)
             "b2": _upstream.sum(dim=0)}                                             # (3,)
for _name, _leaf in (("x", _x), ("w1", _w1), ("b1", _b1), ("w2", _w2), ("b2", _b2)):
    print(f"dL/d{_name:<2} {str(tuple(_leaf.grad.shape)):>6}: max |formula - autograd| = "
          f"~{(_mine[_name] - _leaf.grad).abs().max().item():.1e}")
print(f"hidden units the ReLU mask zeroes: {int((_z <= 0).sum())} of {_z.numel()}")

# %% [markdown]
# 差都在 $10^{-15}$ 以下。被掩码置零的那些隐藏单元，梯度一点也传不回去：这就是“ReLU 死区”。
# 第 10 章的手撕练习库里有这道题（`mlp_backward`）。

# %% [markdown]
# ## 3. 残差连接（Residual Connection）
#
# $$
# y = x + F(x)
# $$
#
# 子层 $F$ 只需要学习“在 $x$ 的基础上改多少”（残差），而不是整个映射；$F \equiv 0$ 时整层就是恒等映射，所以加深网络至少不会更差。
# 反向传播时
#
# $$
# \frac{\partial y}{\partial x} = I + \frac{\partial F}{\partial x},
# $$
#
# 恒等项 $I$ 让梯度可以**不经过任何权重**直接流回底层，缓解梯度消失，深层网络才训练得动；
# 同时底层的信息（比如词嵌入和位置编码）也能直接传到高层。
#
# 代价是形状约束：$x$ 和 $F(x)$ 必须同形，所以 Transformer 所有子层的输入输出都是 $d_{\text{model}}$ 维，FFN 也要降回 $d_{\text{model}}$。

# %% [markdown]
# ## 4. 层归一化（LayerNorm）
#
# 对**每个 token 的特征向量**（最后一维，$d_{\text{model}}$ 个数）单独归一化：
#
# $$
# \mu = \frac{1}{d}\sum_{j=1}^{d} x_j,\qquad
# \sigma^2 = \frac{1}{d}\sum_{j=1}^{d} (x_j - \mu)^2,\qquad
# \mathrm{LN}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta .
# $$
#
# - $\gamma$（`weight`，初始全 1）、$\beta$（`bias`，初始全 0）是每个特征一个的可学习参数，让模型能恢复需要的尺度和偏移；
# - $\epsilon$（默认 $10^{-5}$）在**根号里面**，防止方差接近 0 时除以 0；
# - 方差是**有偏**的（除以 $d$，不是 $d - 1$）——和 `nn.LayerNorm` 一致。注意 `torch.var` 默认是无偏的（除以 $d-1$）。
#
# 照着常见的简写 $\gamma\,(x - \mu)/\sigma + \beta$ 实现时，很容易把 $\epsilon$ 漏掉：公式上没错，实现时不能省——
# 常数向量（比如一整行相同的 padding 嵌入）的 $\sigma = 0$，不加 $\epsilon$ 就是 $0/0$（下面实测）。
#
# **形状追踪**（`x (B, T, d)`）：`mean = x.mean(-1, keepdim=True)` 是 `(B, T, 1)`，`var` 同样 `(B, T, 1)`，
# `(x - mean) / sqrt(var + eps)` 广播回 `(B, T, d)`，再乘 `weight (d,)`、加 `bias (d,)`（在最后一维广播）。
# `keepdim=True` 不能丢：`(B, T)` 与 `(B, T, d)` 无法按预期广播。
#
# ### LayerNorm 与 BatchNorm：统计量沿哪些轴？
#
# 同一个 `(B, T, d)` 张量：LayerNorm 给**每个 token** 一组 $(\mu, \sigma^2)$，沿特征维 $d$ 统计；
# BatchNorm 给**每个特征**一组，沿批次和时间 $(B, T)$ 统计。下图里同一种颜色的格子共用一组统计量：

# %%
plot_norm_axes(batch=3, seq_len=4, d_model=6)
plt.show()

# %% [markdown]
# 为什么 Transformer 用 LayerNorm：
#
# | | BatchNorm | LayerNorm |
# | --- | --- | --- |
# | 统计量 | 每个特征，跨样本和位置 | 每个 token，跨特征 |
# | 依赖批次大小 | 是（批次小时估计不准） | 否（批次为 1 也一样） |
# | 训练 / 推理 | 训练用批统计量，推理用滑动平均（running mean/var），两种行为 | 完全相同，没有滑动统计量 |
# | 变长序列、padding | padding 混进统计量，长度不一要特殊处理 | 每个 token 自己算，互不影响 |
# | 常见于 | CNN（图像） | Transformer、RNN（序列） |
#
# 自回归生成时一次只来一个 token，BatchNorm 没法在“一个 token 的批”上算出可靠的统计量，LayerNorm 没有这个问题。
#
# ### 四个容易写错的细节
#
# 下面分别看每个细节能造成多大差别（只演示差别本身，不是完整实现）：

# %%
torch.manual_seed(0)
v = torch.randn(4)
print("biased var (divide by d):   ", f"{v.var(unbiased=False).item():.4f}",
      "| unbiased (divide by d-1):", f"{v.var().item():.4f}", "| ratio d/(d-1) =", f"{4 / 3:.4f}")

quiet = 1e-3 * torch.randn(8)                              # a feature vector with tiny variance
var, eps = quiet.var(unbiased=False), 1e-5
print("tiny-variance input: 1/sqrt(var + eps) =", f"{(1 / torch.sqrt(var + eps)).item():.1f}",
      "| 1/(sqrt(var) + eps) =", f"{(1 / (torch.sqrt(var) + eps)).item():.1f}")

x3 = torch.randn(2, 3, 8) * 5 + 2                          # (B, T, d)
per_token = x3.mean(dim=-1, keepdim=True)                  # (B, T, 1): LayerNorm's mean
per_feature = x3.mean(dim=(0, 1), keepdim=True)            # (1, 1, d): what BatchNorm would use
print("mean over the last axis:", tuple(per_token.shape), "| over (B, T):", tuple(per_feature.shape))

# %%
# Constant row: (x - mean) is exactly 0, so the right output is 0 (then + beta).
flat = torch.full((8,), 2.0)                               # (d,)
centred, flat_var = flat - flat.mean(), flat.var(unbiased=False)
print("constant row: no eps ->", (centred / flat_var.sqrt())[:3], "| eps inside ->", (centred / (flat_var + eps).sqrt())[:3])

# %% [markdown]
# - 无偏方差把方差放大 $d/(d-1)$ 倍，$d$ 小时差别明显，$d = 512$ 时约 0.2%——数值上“差不多”，但与 `nn.LayerNorm` 不相等；
# - 方差很小（但不为 0）时，$\epsilon$ 放在根号里还是外，结果差好几倍（见上面打印的两个数）：$\epsilon$ 相对 $\sigma$ 的比例不同；
# - 沿错的轴求均值（比如 `dim=0` 或 `dim=(0, 1)`）形状照样能广播，程序不报错，但做的是 BatchNorm 式的统计，而且结果依赖批次里的其他样本；
# - 常数向量（例如一整行相同的 padding 嵌入）的 $x - \mu = 0$，$\epsilon$ 放在根号里外都得到 0（再加 $\beta$）。
#   真正的危险是**完全不加** $\epsilon$：方差为 0，得到 $0/0 =$ NaN（上面最后一行）；接近常数的输入 $\sigma$ 极小，
#   舍入误差和反向传播的梯度都按 $1/\sigma$ 放大。

# %% [markdown]
# ## 5. 练习：`LayerNorm`（5 分）
#
# 要求：
#
# - `LayerNorm(d_model, eps=1e-5)`，参数 `weight`（全 1）、`bias`（全 0），形状都是 `(d_model,)`，用 `nn.Parameter` 注册；
# - `forward(x)`：`x (..., d_model)`，沿最后一维归一化，结果与 `nn.LayerNorm(d_model, eps)` 相等；
# - 不调用 `nn.LayerNorm`、`F.layer_norm`。

# %% exercise="LayerNorm"

# %% grade_id="layernorm_normalises_last_axis" points=2
# Visible tests: the parameters, zero mean and unit (biased) variance per token, no dependence on the rest of the batch.
_ln = LayerNorm(8)
assert isinstance(getattr(_ln, "weight", None), nn.Parameter) and torch.equal(_ln.weight.data, torch.ones(8)), \
    "weight 应为全 1 的 nn.Parameter，形状 (d_model,) / weight must be an nn.Parameter of ones, shape (d_model,)"
assert isinstance(getattr(_ln, "bias", None), nn.Parameter) and torch.equal(_ln.bias.data, torch.zeros(8)), \
    "bias 应为全 0 的 nn.Parameter，形状 (d_model,) / bias must be an nn.Parameter of zeros, shape (d_model,)"
_x = torch.randn(3, 4, 8, generator=torch.Generator().manual_seed(0)) * 3 + 1   # (B, T, d_model)
with torch.no_grad():
    _y = _ln(_x)
    assert _y.shape == _x.shape, f"输出形状应与输入相同 / output must keep the shape {tuple(_x.shape)}, got {tuple(_y.shape)}"
    assert torch.allclose(_y.mean(-1), torch.zeros(3, 4), atol=1e-5), \
        "每个 token 沿最后一维的均值应为 0（沿错了轴？）/ each token must have mean 0 over the last axis (wrong axis?)"
    assert torch.allclose(_y.var(-1, unbiased=False), torch.ones(3, 4), atol=1e-3), \
        "每个 token 的有偏方差应约为 1（用了无偏方差？）/ each token's biased variance must be about 1 (unbiased variance?)"
    assert torch.allclose(_ln(_x[1:2]), _y[1:2], atol=1e-6), \
        "结果不应依赖批次里的其他样本（这是 BatchNorm 的行为）/ a sample's output must not depend on the others (that is BatchNorm)"

# %% grade_id="layernorm_matches_reference" points=3 check="LayerNorm:LayerNorm"
# Visible tests (float64): equality with nn.LayerNorm after copying non-default weights; small-variance inputs
# (eps placement); a 2-D input; a non-default eps.
_g = torch.Generator().manual_seed(1)
_ln, _ref = LayerNorm(8).double(), nn.LayerNorm(8).double()
with torch.no_grad():
    _ln.weight.copy_(torch.randn(8, generator=_g))
    _ln.bias.copy_(torch.randn(8, generator=_g))
    _ref.load_state_dict(_ln.state_dict())
    for _name, _x in (("normal", torch.randn(2, 5, 8, generator=_g, dtype=torch.float64)),
                      ("small variance (eps inside the root?)",
                       1e-3 * torch.randn(2, 5, 8, generator=_g, dtype=torch.float64) + 4.0),
                      ("2-D (T, d_model)", torch.randn(5, 8, generator=_g, dtype=torch.float64))):
        _err = (_ln(_x) - _ref(_x)).abs().max().item()
        assert _err < 1e-8, f"与 nn.LayerNorm 不一致（{_name}），最大误差 {_err:.2e} / differs from nn.LayerNorm ({_name}): max error {_err:.2e}"
    _x = 1e-2 * torch.randn(2, 5, 8, generator=_g, dtype=torch.float64)  # variance 1e-4, comparable to eps = 1e-4
    _err = (LayerNorm(8, eps=1e-4).double()(_x) - nn.LayerNorm(8, eps=1e-4).double()(_x)).abs().max().item()
    assert _err < 1e-8, f"eps 参数应被使用（eps=1e-4 时误差 {_err:.2e}）/ the eps argument must be used (error {_err:.2e} with eps=1e-4)"

# %% [markdown]
# ### LayerNorm 的反向传播（手推一次）
#
# 面试常考，也是理解“为什么归一化让训练更稳”的一步。沿最后一维（$d$ 个数）：$\mu = \frac1d\sum_k x_k$，
# $\sigma = \sqrt{\frac1d\sum_k (x_k-\mu)^2 + \epsilon}$，$\hat x = (x - \mu)/\sigma$，输出 $\gamma \odot \hat x + \beta$。上游梯度 $g^{\text{out}}$。
#
# - 参数的梯度最简单：$\partial L/\partial \beta = \sum g^{\text{out}}$，$\partial L/\partial \gamma = \sum g^{\text{out}} \odot \hat x$（对所有前导维求和）。
# - 对 $x$：令 $g = g^{\text{out}} \odot \gamma$（先穿过仿射）。$\hat x$ 通过三条路依赖 $x_j$：直接的 $x_j$、$\mu$、$\sigma$。
#   用 $\partial \mu/\partial x_j = 1/d$ 和 $\partial \sigma/\partial x_j = \hat x_j/(d\,\sigma)$ 整理得
#
# $$
# \frac{\partial L}{\partial x} = \frac{1}{\sigma}\Big(g - \overline{g} - \hat x \odot \overline{g \odot \hat x}\Big),
# $$
#
# 其中上划线是沿最后一维的平均。三项各有含义：$g$ 是直接的路；减去 $\overline{g}$ 来自均值（整体平移输入，输出不变）；
# 减去 $\hat x\,\overline{g\hat x}$ 来自方差（整体放缩输入，输出也几乎不变）。常见错误正是漏掉后两项之一，或忘了先乘 $\gamma$。
# 下面用 autograd 验证（float64）：

# %% demo=true
# LayerNorm backward by the formula, checked against autograd through F.layer_norm (float64).
_g = torch.Generator().manual_seed(2)
_x = torch.randn(2, 4, 6, generator=_g, dtype=torch.float64, requires_grad=True)
_gamma = (1 + 0.3 * torch.randn(6, generator=_g, dtype=torch.float64)).requires_grad_(True)
_beta = torch.randn(6, generator=_g, dtype=torch.float64, requires_grad=True)
_upstream = torch.randn(2, 4, 6, generator=_g, dtype=torch.float64)              # dL/d(output)
F.layer_norm(_x, (6,), _gamma, _beta, eps=1e-5).backward(_upstream)             # autograd fills the .grad fields
with torch.no_grad():
    _centred = _x - _x.mean(dim=-1, keepdim=True)                               # (2, 4, 6)
    _sigma = (_centred.pow(2).mean(dim=-1, keepdim=True) + 1e-5).sqrt()         # (2, 4, 1), biased variance
    _normed = _centred / _sigma                                                 # x-hat
    _gx = _upstream * _gamma                                                    # through the affine first
    _dx = (_gx - _gx.mean(-1, keepdim=True) - _normed * (_gx * _normed).mean(-1, keepdim=True)) / _sigma
    _dgamma, _dbeta = (_upstream * _normed).sum(dim=(0, 1)), _upstream.sum(dim=(0, 1))  # (6,) each
for _name, _mine, _auto in (("dL/dx", _dx, _x.grad), ("dL/dgamma", _dgamma, _gamma.grad), ("dL/dbeta", _dbeta, _beta.grad)):
    print(f"{_name:>9}: max |formula - autograd| = ~{(_mine - _auto).abs().max().item():.1e}")
print("dL/dx sums to 0 along the last axis:", torch.allclose(_dx.sum(-1), torch.zeros(2, 4, dtype=torch.float64)))

# %% [markdown]
# 差都在 $10^{-15}$ 以下。$\partial L/\partial x$ 沿最后一维之和为 0，与上面“整体平移输入，输出不变”一致。
# 第 10 章的手撕练习库里有这道题（`layer_norm_backward`）。

# %% [markdown]
# ### BatchNorm 的前向与反向：同一个公式，换一个轴
#
# BatchNorm 的前向和反向也是常考的手撕题（CS231n 的作业就是它）。输入 `x (N, D)`：$N$ 个样本、$D$ 个特征，
# 训练时每个**特征**用这一批的统计量：
#
# $$
# \mu_j = \frac1N \sum_{i} x_{ij},\qquad \sigma_j^2 = \frac1N\sum_i (x_{ij} - \mu_j)^2,\qquad
# \hat x_{ij} = \frac{x_{ij} - \mu_j}{\sqrt{\sigma_j^2 + \epsilon}},\qquad y_{ij} = \gamma_j \hat x_{ij} + \beta_j .
# $$
#
# 和 LayerNorm 只差统计的轴：LayerNorm 沿特征（最后一维），BatchNorm 沿批次（第 0 维）。方差同样是**有偏**的（除以 $N$）：
# PyTorch 训练时用它归一化，无偏方差（除以 $N - 1$）只用来更新 `running_var`。推理时用滑动平均，那是另一回事，这里只写训练模式。
#
# 反向就是上面 LayerNorm 的公式，把“沿最后一维的平均”换成“沿批次的平均”：
#
# $$
# \frac{\partial L}{\partial x} = \frac{1}{\sigma}\Big(g - \overline{g} - \hat x \odot \overline{g \odot \hat x}\Big),\qquad g = g^{\text{out}} \odot \gamma ,
# $$
#
# 上划线是沿第 0 维（每个特征各自）的平均；$\partial L/\partial \gamma = \sum_i g^{\text{out}} \odot \hat x$、
# $\partial L/\partial \beta = \sum_i g^{\text{out}}$ 也沿第 0 维求和，形状 `(D,)`。
# 一个样本的 $x_{ij}$ 通过这一批的 $\mu_j$、$\sigma_j$ 影响**同一批所有样本**的输出，所以只写直接的那一项 $g/\sigma$ 是错的：漏掉的两项正来自批统计量。
#
# **形状追踪**（$N = 8,\ D = 5$）：`mean`、`var`、`sigma` 沿第 0 维、`keepdim=True`，是 `(1, 5)`；`x_hat`、`g`、`grad_x` 是 `(8, 5)`；
# `grad_weight`、`grad_bias` 把第 0 维求和掉，是 `(5,)`（不要 `keepdim`：梯度的形状与参数相同）。
#
# 常见错误：无偏方差；沿最后一维求统计量（那是 LayerNorm）；`grad_x` 只剩 $g/\sigma$；`grad_bias` 沿错的轴求和（得到每个样本一个数）；
# eps 写死成别的值，或者在反向的某一项里漏掉。下面用 `F.batch_norm(training=True)` 和 autograd 验证（float64）：

# %% demo=true
# BatchNorm (training mode) forward and backward by the formulas, checked against F.batch_norm and autograd (float64).
_g = torch.Generator().manual_seed(4)
_x = (2 * torch.randn(8, 5, generator=_g, dtype=torch.float64) + 1).requires_grad_(True)     # (N, D)
_gamma = (1 + 0.3 * torch.randn(5, generator=_g, dtype=torch.float64)).requires_grad_(True)
_beta = torch.randn(5, generator=_g, dtype=torch.float64, requires_grad=True)
_upstream = torch.randn(8, 5, generator=_g, dtype=torch.float64)                          # dL/d(output)
_out = F.batch_norm(_x, None, None, _gamma, _beta, training=True, eps=1e-5)               # no running statistics
_out.backward(_upstream)
with torch.no_grad():
    _mean = _x.mean(dim=0, keepdim=True)                                                  # (1, 5): one per feature
    _sigma = (_x.var(dim=0, keepdim=True, unbiased=False) + 1e-5).sqrt()                  # (1, 5), biased variance
    _normed = (_x - _mean) / _sigma                                                       # (8, 5)
    _gx = _upstream * _gamma                                                              # through the affine first
    _dx = (_gx - _gx.mean(0, keepdim=True) - _normed * (_gx * _normed).mean(0, keepdim=True)) / _sigma
    _dgamma, _dbeta = (_upstream * _normed).sum(dim=0), _upstream.sum(dim=0)              # (5,) each
    _unbiased = (_x - _mean) / (_x.var(dim=0, keepdim=True) + 1e-5).sqrt() * _gamma + _beta  # divides by N - 1
    print(f"  forward: max |formula - F.batch_norm| = ~{(_normed * _gamma + _beta - _out).abs().max().item():.1e}")
for _name, _mine, _auto in (("dL/dx", _dx, _x.grad), ("dL/dgamma", _dgamma, _gamma.grad), ("dL/dbeta", _dbeta, _beta.grad)):
    print(f"{_name:>9}: max |formula - autograd| = ~{(_mine - _auto).abs().max().item():.1e}")
print("dL/dx sums to 0 over the batch:", torch.allclose(_dx.sum(0), torch.zeros(5, dtype=torch.float64)))
print(f"unbiased variance instead: max |difference| = {(_unbiased - _out).abs().max().item():.2f}")

# %% [markdown]
# 公式与 PyTorch 的差都在 $10^{-15}$ 以下；换成无偏方差，$N = 8$ 时输出差到上面最后一行那么多。$\partial L/\partial x$ 沿批次之和为 0：
# 整批一起平移，批均值跟着平移，输出不变。第 10 章的手撕练习库里有这两道题（`batch_norm_forward`、`batch_norm_backward`）。

# %% [markdown]
# ## 6. 残差与归一化的两种组合：Post-LN 与 Pre-LN
#
# $$
# \text{Post-LN（原论文、BERT）：}\ y = \mathrm{LN}\big(x + F(x)\big),\qquad
# \text{Pre-LN（GPT-2、Llama 等）：}\ y = x + F\big(\mathrm{LN}(x)\big) .
# $$

# %%
plot_residual_variants()
plt.show()

# %% [markdown]
# - **Post-LN**：每个子层之后都归一化，隐藏状态的尺度始终受控；但从输出到输入的“恒等路径”上串着每一层的 LN，
#   梯度每经过一层都要被 LN 的雅可比矩阵重新缩放。Xiong et al. (2020) 证明：初始化时 Post-LN 靠近输出的层梯度最大，
#   且不随层数变小，直接用大学习率容易不稳定，所以原论文需要学习率预热（warmup）。调好之后 Post-LN 的最终效果常常不差。
# - **Pre-LN**：LN 挪到子层的入口，残差路径 $x \to x + F(\cdot)$ 上没有任何归一化，梯度有一条真正的恒等通路；
#   训练更稳，可以少用或不用预热，深层模型（GPT-2/3、Llama）几乎都用它。代价：残差流的尺度随层数增长，
#   所以**最后一层之后要再加一个 LN**；而且深层的子层对残差流的相对贡献变小。
# - 现代大模型的常见组合是 **Pre-LN + RMSNorm**。
#
# BERT 用的是 **Post-LN**（和原论文一样）；GPT-2 起才改成 Pre-LN。
#
# 下面做一个小实验：24 层随机初始化的残差块（子层是 FFN，LN 不带参数），输入随机向量，损失取输出的一个固定线性读出。
# 比较两种结构的（1）每层之后隐藏状态的尺度，（2）每层权重的梯度大小，（3）不同深度时最后一层的梯度。
# 权重用 Xavier 正态初始化（`nn.init.xavier_normal_`，标准差 $\sqrt{2/(\text{fan\_in} + \text{fan\_out})}$），偏置取 0，
# 全部由 `seed` 决定，所以单独重跑这个单元格，数字也不变。
#
# 顺带分清两种初始化：标准差 $\sqrt{2/\text{fan\_in}}$（方阵时即 $\mathcal{N}(0,\ 2/d_{\text{model}})$）是 He（Kaiming）初始化，
# 为 ReLU 设计；Xavier 正态初始化的标准差是 $\sqrt{2/(\text{fan\_in} + \text{fan\_out})}$，$d_{\text{model}} \times d_{\text{model}}$ 的矩阵上
# 是 $\sqrt{2/(d + d)} = \sqrt{1/d}$（均匀版的区间是 $\pm\sqrt{6/(2d)}$），方差只有 He 的一半。

# %% demo=true
def stack_stats(variant, num_layers, d=64, seed=1):
    """RMS of the hidden state after each layer and grad norm of each layer's fc2 weight, at initialisation.

    Every number depends only on the arguments: the weights are drawn from ``gen`` (seeded by ``seed``),
    the biases are zero, the input and the readout have their own fixed generators.
    """
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(8, 16, d, generator=torch.Generator().manual_seed(2))   # (B, T, d)
    readout = torch.randn(d, generator=torch.Generator().manual_seed(3))    # (d,)
    rms, weights = [], []
    for _ in range(num_layers):
        fc1, fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        for fc in (fc1, fc2):                                               # overwrite nn.Linear's own (global-RNG) init
            nn.init.xavier_normal_(fc.weight, generator=gen)
            nn.init.zeros_(fc.bias)
        sublayer = lambda h, fc1=fc1, fc2=fc2: fc2(torch.relu(fc1(h)))     # (B, T, d) -> (B, T, d)
        if variant == "post":
            x = F.layer_norm(x + sublayer(x), (d,))                         # LN(x + F(x))
        else:
            x = x + sublayer(F.layer_norm(x, (d,)))                         # x + F(LN(x))
        rms.append(x.detach().pow(2).mean().sqrt().item())
        weights.append(fc2.weight)
    if variant == "pre":
        x = F.layer_norm(x, (d,))                                           # the final LN of a Pre-LN stack
    (x @ readout).mean().backward()                                         # (B, T, d) @ (d,) -> (B, T) -> scalar
    return rms, [w.grad.norm().item() for w in weights]


act_post, grad_post = stack_stats("post", 24)
act_pre, grad_pre = stack_stats("pre", 24)
depths = [1, 2, 4, 8, 16, 32, 64]
last_post = [stack_stats("post", L)[1][-1] for L in depths]
last_pre = [stack_stats("pre", L)[1][-1] for L in depths]


def versus(first, last, digits):
    """'first -> last (x ratio)' for one printed comparison."""
    return f"{first:.{digits}f} -> {last:.{digits}f} (x{last / first:.2f})"


print("(1) hidden-state RMS, layer 1 -> 24:   Post-LN", versus(act_post[0], act_post[-1], 2),
      "| Pre-LN", versus(act_pre[0], act_pre[-1], 2))
print("(2) grad norm, layer 1 -> 24:          Post-LN", versus(grad_post[0], grad_post[-1], 1),
      "| Pre-LN", versus(grad_pre[0], grad_pre[-1], 1))
print("(3) last layer's grad norm, L 1 -> 64: Post-LN", versus(last_post[0], last_post[-1], 1),
      "| Pre-LN", versus(last_pre[0], last_pre[-1], 1))
ratios = {v: [last[-1] / last[0]] + [stack_stats(v, 64, seed=s)[1][-1] / stack_stats(v, 1, seed=s)[1][-1] for s in (2, 3, 4)]
          for v, last in (("post", last_post), ("pre", last_pre))}          # the ratio of (3) for seeds 1..4
print("(3) the same ratio for seeds 1-4:      Post-LN", f"x{min(ratios['post']):.2f} - x{max(ratios['post']):.2f}",
      "| Pre-LN", f"x{min(ratios['pre']):.2f} - x{max(ratios['pre']):.2f}")
plot_norm_stability(act_post, act_pre, grad_post, grad_pre, depths, last_post, last_pre)
plt.show()

# %% [markdown]
# 读图：
#
# 1. Post-LN 每层之后尺度都被拉回 1；Pre-LN 的残差流随层数单调变大（第 (1) 行括号里的倍数），所以需要最后那个 LN。
# 2. 同一个 24 层的栈里，Post-LN 的梯度越靠近输出越大，最上层是最底层的好几倍（第 (2) 行）；Pre-LN 各层的梯度大小接近。
# 3. 栈越深，Post-LN 最后一层的梯度不但不减小，反而**变大**；Pre-LN 的则随深度一路下降（第 (3) 行的两个倍数方向相反）。
#    变大的幅度不算惊人：层数从 1 到 64，4 个随机种子下都是 1.5–1.7 倍（最后一行），方向却每次都一样；Pre-LN 每次都降到约三分之一。
#
# 这与 Xiong et al. (2020) 的分析一致：Post-LN 在初始化时上层梯度大，直接用大学习率易发散，需要预热；
# Pre-LN 的梯度分布均匀，可以去掉预热。这只是初始化时的快照（随机权重、没有训练），说明的是趋势，不是训练效果的比较。

# %% [markdown]
# ## 7. 练习：`ResidualLayerNorm`（Post-LN，2 分）
#
# 原论文的每个子层写作 $\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$。实现一个小模块，第 05 章的编码器层和解码器层会直接用它：
#
# - `ResidualLayerNorm(d_model, eps=1e-5)`，属性 `ln`——用你上面写的 `LayerNorm`；
# - `forward(x, sublayer_out)` 返回 `ln(x + sublayer_out)`。它接收子层**已经算好的输出**（dropout 也由调用者做完），
#   而不是子层本身。
#
# 常见错误：写成 `x + ln(sublayer_out)`（归一化放错地方）、`ln(sublayer_out)`（丢了残差）、`ln(x) + sublayer_out`（半个 Pre-LN）。

# %% exercise="ResidualLayerNorm"

# %% grade_id="residual_layernorm_matches_reference" points=2 check="ResidualLayerNorm:ResidualLayerNorm"
# Visible tests: the ln attribute, and LN(x + sublayer_out) rather than the classic wrong arrangements.
_g = torch.Generator().manual_seed(2)
# The expected values use the module's own ln, so a mistake in LayerNorm does not fail this cell too.
_res = ResidualLayerNorm(8)
assert isinstance(getattr(_res, "ln", None), nn.Module) and tuple(_res.ln.weight.shape) == (8,), \
    "属性 ln 应为一个 LayerNorm(d_model) / attribute ln must be a LayerNorm(d_model)"
_x = torch.randn(2, 5, 8, generator=_g)                    # (B, T, d_model): the sublayer's input
_s = torch.randn(2, 5, 8, generator=_g)                    # (B, T, d_model): the sublayer's output
with torch.no_grad():
    _y = _res(_x, _s)
    assert _y.shape == (2, 5, 8), f"输出形状应为 (2, 5, 8) / output shape must be (2, 5, 8), got {tuple(_y.shape)}"
    assert not torch.allclose(_y, _res.ln(_s), atol=1e-3), \
        "丢了残差：结果等于 LN(sublayer_out) / missing residual: the result equals LN(sublayer_out)"
    assert not torch.allclose(_y, _x + _res.ln(_s), atol=1e-3), \
        "归一化放错了位置：x + LN(sublayer_out) 不是 Post-LN / wrong place for the norm: x + LN(sublayer_out) is not Post-LN"
    assert torch.allclose(_y, _res.ln(_x + _s), atol=1e-6), \
        "应为 ln(x + sublayer_out) / must return ln(x + sublayer_out)"

# %% [markdown]
# ## 8. 选做一：RMSNorm
#
# RMSNorm（Zhang & Sennrich, 2019；T5、Llama、Qwen 采用）去掉了减均值和 $\beta$，只按均方根（root mean square）缩放：
#
# $$
# \mathrm{RMSNorm}(x) = \gamma \odot \frac{x}{\sqrt{\frac{1}{d}\sum_{j} x_j^2 + \epsilon}} .
# $$
#
# 它不做“重新居中”（re-centering），只做“重新缩放”（re-scaling）。注意分母是二阶原点矩的平方根，不是方差：
# 只有当均值恰好为 0 时两者才相同（把它理解成“只归一化方差”是常见的误解）。少算一个均值、少一组参数，速度更快，效果与 LayerNorm 相当。
#
# 实现 `RMSNorm(d_model, eps=1e-6)`：参数 `weight`（全 1），没有 `bias`；结果应与 `nn.RMSNorm(d_model, eps=1e-6)` 相等。下面的检查不计分。

# %% exercise="RMSNorm"

# %% check="RMSNorm:RMSNorm"

# %% [markdown]
# ## 9. 选做二：`PreLNResidual`
#
# Pre-LN 的一个子层连接 $x + F(\mathrm{LN}(x))$。和 `ResidualLayerNorm` 不同，这里的归一化在子层**之前**，
# 所以模块必须接收子层本身（一个可调用对象），例如 `lambda h: mha(h, h, mask)[0]` 或一个 `FeedForward`：
#
# - `PreLNResidual(d_model, eps=1e-5)`，属性 `ln`（你的 `LayerNorm`）；
# - `forward(x, sublayer)` 返回 `x + sublayer(ln(x))`。
#
# 下面的检查不计分。

# %% exercise="PreLNResidual"

# %% check="PreLNResidual:PreLNResidual"

# %% [markdown]
# ## 10. 把零件拼起来
#
# 一个 Post-LN 的“FFN 子层”就是 `ResidualLayerNorm` 包住 `FeedForward`；第 05 章的编码器层再在前面加一个注意力子层。

# %%
try:
    torch.manual_seed(0)
    ffn, add_norm = FeedForward(16, 64).eval(), ResidualLayerNorm(16)
    h = torch.randn(2, 5, 16)                                           # (B, T, d_model)
    with torch.no_grad():
        out = add_norm(h, ffn(h))                                       # (B, T, d_model)
    print("input", tuple(h.shape), "-> FFN sublayer with Post-LN ->", tuple(out.shape),
          "| per-token mean ~ 0:", torch.allclose(out.mean(-1), torch.zeros(2, 5), atol=1e-5))
    print("parameters: FFN", sum(p.numel() for p in ffn.parameters()), "+ LayerNorm",
          sum(p.numel() for p in add_norm.parameters()), "(= 2 * d_model)")
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# ## 11. 易错点清单
#
# | 错误 | 现象 |
# | --- | --- |
# | LayerNorm 沿错的轴（`dim=0`、`dim=(0, 1)`、`dim=1`） | 不报错；变成 BatchNorm 式统计，结果依赖批次里的其他样本 |
# | 用了无偏方差（`torch.var` 默认 `unbiased=True`） | 与 `nn.LayerNorm` 差 $d/(d-1)$ 倍的方差，$d$ 小时明显 |
# | $\epsilon$ 放在根号外：`(x - μ) / (σ + ε)` | 方差小（但不为 0）时结果差好几倍，与 `nn.LayerNorm` 不等；常数输入两者都给 $\beta$ |
# | 完全不加 $\epsilon$ | 常数向量（如相同的 padding 行）得 $0/0 =$ NaN；接近常数的输入把舍入误差和梯度按 $1/\sigma$ 放大 |
# | 求均值时忘了 `keepdim=True` | 广播报错，或 `(B, T)` 错配到 `(B, T, d)` 的后两维 |
# | 忘了 $\gamma, \beta$，或把它们设成不可训练的普通张量 | 默认初始化下看不出错，加载权重 / 训练后就不同 |
# | 丢了残差：`LN(F(x))` | 深层时梯度难以回传，底层信息丢失 |
# | 归一化位置错：`x + LN(F(x))`、`LN(x) + F(x)` | 既不是 Post-LN 也不是 Pre-LN |
# | Pre-LN 的栈最后没有 LN | 输出尺度随层数增长，进入输出层前没有归一化 |
# | FFN 没降回 `d_model` | 残差相加时形状不匹配 |
# | FFN 用错激活（tanh 近似的 GELU 当成精确 GELU） | 激活值最多差约 $4.7 \times 10^{-4}$，与参考实现或预训练权重对不上 |
# | 未知激活名默默回退到 ReLU | 配置写错也不会被发现；应抛出 `ValueError` |

# %% [markdown]
# ## 12. 面试要点（Q&A）
#
# **Q1：FFN 的作用是什么？为什么需要它？** 注意力在位置之间做加权平均（交互），对单个 token 的特征变换是线性的；
# FFN 对每个位置独立做两层非线性变换（加工）。两者互补。FFN 也被看作键值记忆，存储了大量知识。
#
# **Q2：FFN 的结构和参数量？** `Linear(d, 4d) → ReLU/GELU → Linear(4d, d)`，逐位置共享权重；参数 $2 d\, d_{\text{ff}} + d_{\text{ff}} + d$，
# $d = 512$ 时约 2.1M，约是注意力的两倍。SwiGLU 版本有三个矩阵，$d_{\text{ff}} \approx \tfrac{8}{3} d$。
#
# **Q3：为什么叫 position-wise？** 同一组权重独立作用于每个位置，不跨位置交互，等价于 kernel size 为 1 的卷积。
#
# **Q4：残差连接的作用？** 梯度有恒等通路（$\partial y / \partial x = I + \partial F / \partial x$），缓解梯度消失；子层只学残差，易于优化；
# 底层信息直达高层。要求子层输入输出同形。
#
# **Q5：写出 LayerNorm 的公式，它和 BatchNorm 的区别？** $\gamma (x - \mu)/\sqrt{\sigma^2 + \epsilon} + \beta$，统计量沿特征维、每个 token 一组；
# BatchNorm 沿批次（和时间）维、每个特征一组，依赖批次大小，训练和推理行为不同；序列变长、padding、小批次、逐 token 生成都让 BatchNorm 不合适。
#
# **Q6：LayerNorm 的方差是有偏还是无偏？$\epsilon$ 放哪？** 有偏（除以 $d$），$\epsilon$ 在根号里：$\sqrt{\sigma^2 + \epsilon}$。
#
# **Q7：Pre-LN 和 Post-LN 的区别？** Post-LN：$\mathrm{LN}(x + F(x))$，原论文和 BERT，初始化时上层梯度大，需要预热，深了难训；
# Pre-LN：$x + F(\mathrm{LN}(x))$，GPT-2 之后的主流，残差路径上是纯恒等映射，训练稳定、可不用预热，需要在栈的最后加一个 LN。
#
# **Q8：RMSNorm 和 LayerNorm 的区别？** RMSNorm 不减均值、没有 $\beta$，只除以均方根 $\sqrt{\mathrm{mean}(x^2) + \epsilon}$；
# 计算更省，效果相近，Llama、T5 等采用。
#
# **Q9：为什么 LayerNorm 要有可学习的 $\gamma$、$\beta$？** 归一化把每个 token 强行变成均值 0、方差 1，可能损失表达力；
# $\gamma$、$\beta$ 让模型能学回合适的尺度和偏移（需要时甚至能近似抵消归一化）。
#
# **Q10：GELU 和 ReLU 的区别？** GELU $= x\,\Phi(x)$ 平滑、在负半轴有小的非零输出和梯度，BERT/GPT 采用；ReLU 在 0 处不可导、负半轴梯度为 0。
#
# 下一章：用第 02 章的多头注意力、这一章的 FFN 和 `ResidualLayerNorm` 组装编码器层和解码器层，并加上掩码。
