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
# # 01 缩放点积注意力（Scaled Dot-Product Attention）
#
# 注意力是 Transformer 的心脏。这一章从最底层写起：先用 NumPy 写一个数值稳定的 softmax 和一版注意力，
# 再用 PyTorch 写出支持掩码（mask）的 `scaled_dot_product_attention` 和它的模块版本。
#
# **本章共 10 分**，分布在 5 个评分单元格里：
#
# | 练习 | 评分单元格（grade_id） | 分值 |
# | --- | --- | --- |
# | `softmax`（NumPy，数值稳定） | `softmax_is_stable` | 2 |
# | `attention_numpy` | `attention_numpy_matches_reference` | 2 |
# | `scaled_dot_product_attention`（PyTorch） | `sdpa_matches_reference` | 3 |
# | 同上：掩码行为 | `sdpa_mask_blocks_keys` | 2 |
# | `ScaledDotProductAttention`（模块） | `sdpa_module_matches_reference` | 1 |
#
# **怎么做**：从上到下运行。遇到 `raise NotImplementedError()` 的单元格，把它换成你的实现，
# 然后运行紧跟其后的测试单元格。测试单元格里的 `assert` 是你能读懂的性质检查（形状、每行和为 1、
# 被遮挡的权重为 0……）；自学版还会打印 ✅/❌ 和诊断（它会把你的答案与参考实现在多组随机输入上比较，
# 并指出像“忘了除以 √d_k”这样的经典错误）。提交评分时，还有隐藏测试做同样的比较。
#
# **约定**（全课程统一，与 `torch.nn.functional.scaled_dot_product_attention` 一致）：
#
# - 张量批次维在前（batch-first）：`Q (..., T_q, d_k)`、`K (..., T_k, d_k)`、`V (..., T_k, d_v)`；
# - 掩码是布尔张量，**True = 可以看（may attend）**，可以广播到分数的形状 `(..., T_q, T_k)`；
# - 一行所有键都被遮挡时，这一行的权重和输出都是 0，而不是 NaN。

# %%
# Setup: imports, seeds, and warning filters (so that a library warning does not clutter a check's report).
import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tutor.plots import plot_attention, plot_mask_row, plot_scaling_experiment

warnings.filterwarnings("ignore")
np.random.seed(0)
torch.manual_seed(0)
np.set_printoptions(precision=3, suppress=True)
torch.set_printoptions(precision=3, sci_mode=False)
FINISH_FIRST = "完成上面的练习后再运行 / finish the exercise above first"

# %% [markdown]
# ## 1. 注意力在做什么：按相似度加权平均
#
# 对序列里的每个位置，注意力回答一个问题：**“我应该从其他位置取多少信息？”** 三个角色各司其职：
#
# - **查询（Query, Q）**：当前位置“想找什么”；
# - **键（Key, K）**：每个位置“能被怎样找到”，查询和每个键算相似度；
# - **值（Value, V）**：每个位置真正提供的“内容”，按相似度加权求和。
#
# 在自注意力（self-attention）里，Q、K、V 都是同一个输入 $X$ 经过三个不同线性变换得到的：
# $Q = XW_Q,\ K = XW_K,\ V = XW_V$（第 02 章实现这些投影）。本章只关心投影之后的核心运算：
#
# $$
# \mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}}\right) V
# $$
#
# 分四步：
#
# 1. **打分**：$S = QK^{\top} / \sqrt{d_k}$，`S[i, j]` 是查询 $i$ 与键 $j$ 的相似度；
# 2. **遮挡**（可选）：不允许看的位置在 softmax 之前排除掉；
# 3. **归一化**：对最后一维（键的那一维）做 softmax，得到权重 $A$，每行非负且和为 1；
# 4. **汇聚**：$\text{out} = AV$，输出的第 $i$ 行是值向量的加权平均。
#
# 一个值得记住的不变量：$A$ 的每一行是一个概率分布（行随机矩阵，row-stochastic），所以每个输出都是
# 值向量的**凸组合**，落在值向量围成的凸包里：注意力只会“混合”已有的值向量。
#
# 你可能会觉得注意力是线性的、非线性全靠 FFN。**权重一旦给定**，输出 $AV$ 对 $V$ 确实是线性的；
# 但权重 $A = \mathrm{softmax}(QK^{\top}/\sqrt{d_k})$ 本身由输入算出——分数是输入的二次式，再经过 softmax——
# 所以作为输入 $X$ 的函数，自注意力是非线性的：把输入放大一倍，输出并不跟着放大一倍。
# 注意力缺少的是对每个位置的特征**逐元素**做非线性变换，这由 FFN 负责（第 04 章）。下面用随机向量验证这两点：

# %%
X_lin = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))  # (T, d): one sequence, Q = K = V = X


def self_attention(X):
    """softmax(X X^T / sqrt(d)) X for one sequence (T, d) -> (T, d), no projections."""
    A = torch.softmax(X @ X.T / math.sqrt(X.size(-1)), dim=-1)  # (T, d) @ (d, T) -> (T, T)
    return A @ X                                                  # (T, T) @ (T, d) -> (T, d)


A_fixed = torch.softmax(X_lin @ X_lin.T / math.sqrt(8), dim=-1)  # (T, T): weights computed once, then held fixed
V1, V2 = torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(1))  # two value matrices (T, d)
print("fixed weights, linear in V: A(V1 + V2) == A V1 + A V2:",
      torch.allclose(A_fixed @ (V1 + V2), A_fixed @ V1 + A_fixed @ V2, atol=1e-6))
print("as a function of X, not linear: attention(2X) == 2 attention(X):",
      torch.allclose(self_attention(2 * X_lin), 2 * self_attention(X_lin), atol=1e-3),
      f"| max difference {(self_attention(2 * X_lin) - 2 * self_attention(X_lin)).abs().max().item():.2f}")

# %% [markdown]
# ## 2. 数值稳定的 softmax
#
# $$
# \mathrm{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}
# $$
#
# 直接照公式写会出问题：`float64` 下 $e^{710}$ 就溢出成 `inf`，`float32` 的界限约是 $e^{88.7}$，
# 半精度 `float16` 只到 $e^{11.1}$。`inf / inf` 得到 NaN。反过来，全部很负的输入（如 $-1000$）
# 会下溢成 0，`0 / 0` 同样是 NaN。
#
# 解决办法来自一个恒等式：对任意常数 $c$，
#
# $$
# \frac{e^{x_i - c}}{\sum_j e^{x_j - c}} = \frac{e^{-c}\, e^{x_i}}{e^{-c} \sum_j e^{x_j}} = \mathrm{softmax}(x)_i .
# $$
#
# 取 $c = \max_j x_j$：最大的指数恰好是 $e^0 = 1$，不会上溢；分母至少为 1，不会是 0。

# %%
def naive_softmax(x):
    """Textbook softmax without any shift: fine for small inputs, breaks for large ones."""
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


_limits = [math.log(np.finfo(t).max) for t in (np.float16, np.float32, np.float64)]
print("largest safe exponent  float16: {:.2f}  float32: {:.2f}  float64: {:.2f}".format(*_limits))
with np.errstate(over="ignore", invalid="ignore", under="ignore"):
    print("naive_softmax([1, 2, 3])          =", naive_softmax(np.array([1.0, 2.0, 3.0])))
    print("naive_softmax([1001, 1002, 1003]) =", naive_softmax(np.array([1001.0, 1002.0, 1003.0])))
    print("naive_softmax([-1000, -1000])     =", naive_softmax(np.array([-1000.0, -1000.0])))

# %% [markdown]
# 第一行正确；第二行本应与第一行**完全相同**（整体平移不改变 softmax），却得到 NaN；第三行本应是 `[0.5, 0.5]`。
#
# ### 练习 1：`softmax`（2 分）
#
# 写一个数值稳定的 softmax：支持任意维度的数组和 `axis` 参数，输出形状与输入相同。
# 提示：`np.max(x, axis=axis, keepdims=True)`，`keepdims=True` 让结果能与 `x` 广播。

# %% exercise="softmax"

# %% grade_id="softmax_is_stable" points=2 check="softmax:softmax"
# Visible tests: properties you can reason about. Hidden tests compare with the reference.
_x = np.array([[1.0, 2.0, 3.0], [1001.0, 1002.0, 1003.0], [-1000.0, -1000.0, -1000.0]])
_p = softmax(_x)
assert _p.shape == _x.shape, "输出形状应与输入相同 / the output shape must equal the input shape"
assert np.all(np.isfinite(_p)), "出现 inf 或 NaN：减去最大值了吗？ / got inf or NaN: did you subtract the max?"
assert np.allclose(_p.sum(axis=-1), 1.0), "每行之和应为 1 / each row must sum to 1"
assert np.allclose(_p[0], _p[1]), "softmax(x + c) 应等于 softmax(x) / softmax(x + c) must equal softmax(x)"
assert np.allclose(_p[2], 1 / 3), "相同的输入应得到均匀分布 / equal inputs must give a uniform distribution"
_col = softmax(np.log(np.array([[1.0, 1.0], [3.0, 1.0]])), axis=0)  # softmax(log a) = a / sum(a), column by column
assert np.allclose(_col, [[0.25, 0.5], [0.75, 0.5]]), \
    "axis=0 时每一列应是 softmax：减最大值和归一化要沿同一个 axis / with axis=0 each column must be a softmax: " \
    "subtract the max and normalise along the same axis"
assert np.allclose(softmax(_x[:2], axis=0), softmax(_x[:2].T).T), \
    "axis=0 应等于转置后按最后一维做 softmax / axis=0 must equal the softmax of the transpose along its last axis"

# %% [markdown]
# ### softmax 的反向传播（手推一次）
#
# 训练时梯度要穿过 softmax 往回传，面试也常让人手推它。设 $y = \mathrm{softmax}(x)$（一行），上游传来 $g = \partial L / \partial y$。
# 先求雅可比（Jacobian）：$\partial y_i / \partial x_j = y_i(\delta_{ij} - y_j)$，即 $J = \mathrm{diag}(y) - y y^{\top}$。于是
#
# $$
# \frac{\partial L}{\partial x_j} = \sum_i g_i\, y_i (\delta_{ij} - y_j) = y_j \Big(g_j - \sum_i g_i y_i\Big),
# \qquad \text{即} \qquad \frac{\partial L}{\partial x} = y \odot \big(g - \langle g, y \rangle\big).
# $$
#
# 只用到前向的输出 $y$，不必存 $x$，也不必建 $V \times V$ 的雅可比矩阵；$\langle g, y\rangle$ 是**每行**一个数（沿 softmax 的那一维求和，
# 保持维度以便广播）。下面用 PyTorch 的自动求导（autograd）验证这个公式，也验证完整的雅可比：

# %% demo=true
# Softmax backward by the formula, checked against autograd (float64).
_x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
_upstream = torch.randn(3, 5, dtype=torch.float64)                        # dL/dy from the layers above
_y = torch.softmax(_x, dim=-1)                                            # (3, 5)
_y.backward(_upstream)                                                    # autograd writes dL/dx into _x.grad
_y = _y.detach()
_formula = _y * (_upstream - (_upstream * _y).sum(dim=-1, keepdim=True))  # (3, 5): y * (g - <g, y>) row by row
_jacobians = torch.diag_embed(_y) - _y[:, :, None] * _y[:, None, :]       # (3, 5, 5): diag(y) - y y^T per row
_via_jacobian = (_jacobians @ _upstream[:, :, None])[:, :, 0]             # (3, 5, 5) @ (3, 5, 1) -> (3, 5)
print(f"max |formula - autograd|  = ~{(_formula - _x.grad).abs().max().item():.1e}")
print(f"max |Jacobian - autograd| = ~{(_via_jacobian - _x.grad).abs().max().item():.1e}")
print("each row of dL/dx sums to 0:", torch.allclose(_formula.sum(dim=-1), torch.zeros(3, dtype=torch.float64)))

# %% [markdown]
# 两个差都在 $10^{-16}$ 量级：float64 的舍入误差。每行梯度之和为 0 也不是巧合：softmax 对整行加同一个数不变，
# 沿这个方向改 $x$ 不改变损失。第 10 章的手撕练习库里有这道题（`softmax_backward`）。

# %% [markdown]
# ## 3. 一个能手算的例子（worked example）
#
# 在写完整的注意力之前，先手算一个例子，之后用它检验你的代码。三个二维 token，且令 $Q = K = V = X$：
#
# $$
# x_1 = (1, 0),\quad x_2 = (0, 1),\quad x_3 = (1, 1),\qquad d_k = 2 .
# $$
#
# **打分** $S = XX^{\top}/\sqrt{2}$：点积分别是 $x_1\cdot x_1 = 1,\ x_1\cdot x_2 = 0,\ x_1\cdot x_3 = 1,\ x_3 \cdot x_3 = 2$ 等，
#
# $$
# S = \frac{1}{\sqrt 2}\begin{pmatrix} 1 & 0 & 1 \\ 0 & 1 & 1 \\ 1 & 1 & 2 \end{pmatrix}
#   \approx \begin{pmatrix} 0.707 & 0 & 0.707 \\ 0 & 0.707 & 0.707 \\ 0.707 & 0.707 & 1.414 \end{pmatrix}.
# $$
#
# **softmax** 第 1 行：$e^{0.707} \approx 2.028,\ e^{0} = 1$，分母 $2.028 + 1 + 2.028 = 5.056$，
# 权重 $\approx (0.401,\ 0.198,\ 0.401)$。第 3 行：$e^{1.414} \approx 4.113$，分母 $8.169$，
# 权重 $\approx (0.248,\ 0.248,\ 0.503)$。第 2 行与第 1 行对称：$(0.198,\ 0.401,\ 0.401)$。
#
# **汇聚**：$y_1 = 0.401\,x_1 + 0.198\,x_2 + 0.401\,x_3 \approx (0.802,\ 0.599)$，
# 同理 $y_2 \approx (0.599,\ 0.802)$，$y_3 = (0.248 + 0.503)\,(1, 1) \approx (0.752,\ 0.752)$。
#
# 注意 $x_3$ 与自己的相似度最高（2 > 1），所以 $y_3$ 里它的权重最大；而 $x_1$ 对 $x_1$ 和 $x_3$ 一样“感兴趣”。
# 当 $Q = K$ 时分数矩阵是对称的——这正是实际模型用**不同**的 $W_Q$、$W_K$ 的原因之一：
# 注意力关系通常不对称（“i 关注 j”不代表“j 关注 i”）。

# %% [markdown]
# ## 4. NumPy 版注意力与掩码
#
# ### 形状追踪（shape trace）
#
# | 量 | 形状 | 说明 |
# | --- | --- | --- |
# | `Q` | `(..., T_q, d_k)` | `...` 是任意个批次维，例如 `(B, H)` |
# | `K` | `(..., T_k, d_k)` | 查询和键的特征维必须相同 |
# | `V` | `(..., T_k, d_v)` | 值的个数与键相同，$d_v$ 可以不等于 $d_k$ |
# | `K` 转置最后两维 | `(..., d_k, T_k)` | NumPy：`np.swapaxes(K, -1, -2)` |
# | `scores = Q @ Kᵀ / √d_k` | `(..., T_q, T_k)` | 每个查询对每个键一个分数 |
# | `weights = softmax(scores, axis=-1)` | `(..., T_q, T_k)` | **对键的维度**归一化：每行和为 1 |
# | `out = weights @ V` | `(..., T_q, d_v)` | |
#
# ### 掩码：在 softmax **之前**遮挡
#
# 掩码 `mask[..., i, j] = True` 表示查询 $i$ 可以看键 $j$。被遮挡的分数要在 softmax **之前**换成一个极小的数，
# 这样 softmax 会把剩下的权重重新归一化到和为 1。若在 softmax **之后**才把权重置 0，
# 那一行的和就小于 1 了（被遮挡位置“偷走”的概率质量没有还回去）。
#
# NumPy 版里用 `-1e9` 这样的大负数填充即可；然后把被遮挡位置的权重**再显式设为 0**：
# 对于有可见键的行，这一步什么都不改变（那里的权重本来就是 $e^{-10^9} = 0$）；
# 对于**所有键都被遮挡**的行，softmax 会给出均匀分布 $1/T_k$（每个分数都是同一个 $-10^9$），
# 这一步把它改成全 0——这一行“什么都看不到”，就不应该从任何位置取信息。第 6 节会专门讲这种行。
#
# ### 练习 2：`attention_numpy`（2 分）
#
# 返回 `(out, weights)`。用上你自己的 `softmax`。掩码可能是布尔数组，也可能是 0/1 整数数组（1 = 可以看）。

# %% exercise="attention_numpy"

# %% grade_id="attention_numpy_matches_reference" points=2 check="attention_numpy:attention_numpy"
# Visible tests: the worked example above (numbers computed by hand in section 3), shapes, masks.
_X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
_out, _w = attention_numpy(_X, _X, _X)
assert _out.shape == (3, 2) and _w.shape == (3, 3), "形状不对 / wrong shapes"
assert np.allclose(_w[0], [0.401, 0.198, 0.401], atol=1e-3), "手算例子第 1 行权重不符 / worked example row 1 differs"
assert np.allclose(_w[2], [0.248, 0.248, 0.503], atol=1e-3), "手算例子第 3 行权重不符 / worked example row 3 differs"
assert np.allclose(_out, [[0.802, 0.599], [0.599, 0.802], [0.752, 0.752]], atol=1e-3), \
    "手算例子输出不符 / worked example outputs differ"
_rng = np.random.default_rng(0)
_Q, _K, _V = _rng.normal(size=(2, 4, 8)), _rng.normal(size=(2, 5, 8)), _rng.normal(size=(2, 5, 3))
_m = np.ones((4, 5), dtype=bool)
_m[:, -2:] = False  # the last two keys are padding
_m[0] = False       # query 0 may attend to nothing
_out, _w = attention_numpy(_Q, _K, _V, _m)
assert _out.shape == (2, 4, 3) and _w.shape == (2, 4, 5), "T_q≠T_k、d_v≠d_k 时形状不对 / wrong shapes when T_q≠T_k, d_v≠d_k"
assert np.all(_w[..., -2:] == 0), "被遮挡的权重应为 0 / blocked weights must be 0"
assert np.allclose(_w[:, 1:].sum(axis=-1), 1.0), "有可见键的行之和应为 1 / visible rows must sum to 1"
assert np.all(_w[:, 0] == 0) and np.all(_out[:, 0] == 0), \
    "全被遮挡的行：权重和输出应为 0 / a fully masked row must give zero weights and output"

# %%
# Reproduce the worked example of section 3 with your attention_numpy and look at it.
try:
    X_demo = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    out_demo, w_demo = attention_numpy(X_demo, X_demo, X_demo)
    print("weights =\n", w_demo)
    print("out =\n", out_demo)
    plot_attention(w_demo, x_labels=["x1", "x2", "x3"], y_labels=["x1", "x2", "x3"],
                   title="Worked example: softmax(X X^T / sqrt(2))")
    plt.show()
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# ## 5. 为什么要除以 $\sqrt{d_k}$
#
# 设查询 $q$ 和键 $k$ 的各分量独立、均值 0、方差 1。点积 $q\cdot k = \sum_{i=1}^{d_k} q_i k_i$ 中每一项满足
# $\mathbb{E}[q_i k_i] = \mathbb{E}[q_i]\,\mathbb{E}[k_i] = 0$，
# $\mathrm{Var}(q_i k_i) = \mathbb{E}[q_i^2]\,\mathbb{E}[k_i^2] - 0 = 1$。$d_k$ 个独立项相加：
#
# $$
# \mathbb{E}[q\cdot k] = 0,\qquad \mathrm{Var}(q\cdot k) = d_k,\qquad
# \mathrm{Var}\!\left(\frac{q\cdot k}{\sqrt{d_k}}\right) = 1 .
# $$
#
# 所以 $d_k = 64$ 时，未缩放分数的标准差约为 8。分数差距一大，softmax 就**饱和（saturate）**：输出接近 one-hot。
# softmax 的导数是 $\partial p_i / \partial s_j = p_i(\delta_{ij} - p_j)$；当 $p$ 接近 one-hot 时，
# 每一项都接近 0（要么 $p_i \approx 0$，要么 $p_i \approx 1$ 使 $1 - p_i \approx 0$），梯度几乎消失，训练困难。
# 除以 $\sqrt{d_k}$ 把分数的方差拉回 1，不论 $d_k$ 多大，softmax 的“温度”都差不多。
#
# 两个常见误区：
#
# - **除以 $d_k$ 而不是 $\sqrt{d_k}$**：方差变成 $1/d_k$，分数几乎全相同，注意力退化成均匀平均，什么都“看不清”。
# - **认为缩放是为了防止溢出**：溢出由 softmax 减最大值解决；缩放解决的是**饱和**与**梯度**。
#
# 下面用随机向量验证：对每个 $d_k$，抽 500 个查询，每个查询配 10 个键。

# %% demo=true
def softmax_jacobian_norm(p):
    """Frobenius norm of d softmax / d scores = diag(p) - p p^T, for each row of p (N, T) -> (N,)."""
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (N, T, T)
    return jac.flatten(1).norm(dim=-1)


gen = torch.Generator().manual_seed(0)
d_ks = [4, 16, 64, 256, 1024]
n_samples, n_keys = 500, 10
stats = {key: [] for key in ("var_raw", "var_scaled", "max_raw", "max_scaled", "grad_raw", "grad_scaled")}
for d_k in d_ks:
    q = torch.randn(n_samples, 1, d_k, generator=gen)       # (N, 1, d_k)
    k = torch.randn(n_samples, n_keys, d_k, generator=gen)  # (N, T_k, d_k)
    raw = (q @ k.transpose(-2, -1)).squeeze(1)              # (N, 1, d_k) @ (N, d_k, T_k) -> (N, T_k)
    for tag, s in (("raw", raw), ("scaled", raw / math.sqrt(d_k))):
        p = torch.softmax(s, dim=-1)                        # (N, T_k)
        stats["var_" + tag].append(s.var().item())
        stats["max_" + tag].append(p.max(dim=-1).values.mean().item())
        stats["grad_" + tag].append(softmax_jacobian_norm(p).mean().item())

print(" d_k | Var(q.k)  Var(scaled) | max weight raw  scaled | grad norm raw  scaled")
for i, d_k in enumerate(d_ks):
    print(f"{d_k:4d} | {stats['var_raw'][i]:8.1f}  {stats['var_scaled'][i]:11.2f} | "
          f"{stats['max_raw'][i]:14.3f}  {stats['max_scaled'][i]:6.3f} | "
          f"{stats['grad_raw'][i]:13.4f}  {stats['grad_scaled'][i]:6.4f}")

plot_scaling_experiment(d_ks, stats["var_raw"], stats["var_scaled"], stats["max_raw"], stats["max_scaled"],
                        stats["grad_raw"], stats["grad_scaled"])
plt.show()

# %% [markdown]
# 左图：未缩放时方差紧贴 $y = d_k$ 这条线；缩放后稳定在 1 附近。中图：未缩放时最大权重随 $d_k$ 逼近 1（one-hot）；
# 缩放后与 $d_k$ 无关。右图：softmax 雅可比矩阵（Jacobian）的大小——未缩放时随 $d_k$ 迅速变小，这就是“梯度消失”。

# %% [markdown]
# ## 6. 掩码：约定、形状与“全被遮挡的行”
#
# ### 约定
#
# 约定在第 00 章第 2 节讲过：本课程与 `F.scaled_dot_product_attention` 一样，**True = 可以看**；`nn.MultiheadAttention`
# 的布尔掩码正相反。读别人的代码，先看掩码怎么用，就知道它的约定（那一节的表），混用两种约定不会报错，只会让掩码整个反过来。
#
# ### 加性掩码（additive mask）：公式不能照抄
#
# 掩码也可以写成加到分数上的矩阵：$\tilde M = (1 - M)\cdot(-\infty)$，再算 $\mathrm{softmax}(S + \tilde M)$，
# 其中 $M = 1$ 表示可以看。数学上的意思是“可以看的位置加 0，遮挡的位置加 $-\infty$”。可是在 IEEE 754 浮点数里
# $0 \cdot (-\infty) = \text{NaN}$：照字面写成代码，**每个可以看的位置**都变成 NaN，整行 softmax 全是 NaN。
# 这类公式要用 `torch.where` / `masked_fill` 来实现：`torch.where(mask, 0.0, float("-inf"))`，
# 或者把 $-\infty$ 换成一个有限的大负数（如 `torch.finfo(dtype).min`，$0 \cdot$ 有限数 $= 0$）。

# %%
M = torch.tensor([1.0, 1.0, 0.0])                  # (T_k,): 1 = may attend, the last key is blocked
s_row = torch.tensor([0.5, 1.0, -0.3])              # (T_k,): the scores of one query
literal = (1 - M) * float("-inf")                   # the formula typed in as is: 0 * -inf = nan
safe = torch.where(M.bool(), 0.0, float("-inf"))    # 0 where visible, -inf where blocked
finite = (1 - M) * torch.finfo(torch.float32).min   # a finite stand-in for -inf: 0 * finite = 0
for name, add in (("(1 - M) * (-inf)", literal), ("where(M, 0, -inf)", safe), ("(1 - M) * finfo.min", finite)):
    shown = ", ".join(f"{v + 0.0:.3g}" for v in add.tolist())  # + 0.0 turns -0.0 into 0.0
    print(f"{name:20s} -> additive mask [{shown}]  softmax {torch.softmax(s_row + add, dim=-1)}")

# %% [markdown]
# 第一行里，连可以看的两个位置也成了 NaN；后两种写法得到同样正确的权重。本课程的函数直接收布尔掩码、用 `masked_fill` 填充，
# 不需要先造一个加性掩码；读到别人的 $(1-M)\cdot(-\infty)$ 时，记得它只是数学记号。
#
# ### 两种掩码与它们的形状
#
# - **填充掩码（padding mask）**：一个批次里的句子长短不一，短句用 `<pad>` 补齐。任何查询都不应该从 `<pad>` **键**取信息。
#   它只依赖键的位置，形状 `(B, 1, 1, T_k)`，广播到 `(B, H, T_q, T_k)`：在图里是**整列**被遮挡。
# - **因果掩码（causal mask）**：解码器生成第 $i$ 个 token 时不能偷看后面的 token。查询 $i$ 只能看键 $0, 1, \dots, i$
#   （**包括自己**。常见误区是“只能看 0 到 $i-1$”——那样第 0 个位置什么都看不到）。
#   它是下三角矩阵，形状 `(1, 1, T, T)`。
# - 两者同时需要时取**与**（`&`）：只有“是真实 token 且不在未来”的键可以看。
#
# 第 05 章会把它们写成函数 `make_pad_mask`、`make_subsequent_mask`；这里先直接构造出来看一看。

# %%
tokens = ["I", "love", "you", "<pad>", "<pad>"]
T = len(tokens)
is_real = torch.tensor([[True, True, True, False, False]])                # (B=1, T): False = <pad>
pad_mask = is_real[:, None, None, :]                                     # (B, 1, 1, T_k)
causal_mask = torch.tril(torch.ones(T, T, dtype=torch.bool))[None, None]  # (1, 1, T_q, T_k)
both = pad_mask & causal_mask                                            # (B, 1, T_q, T_k) by broadcasting
print("pad_mask", tuple(pad_mask.shape), "| causal_mask", tuple(causal_mask.shape), "| both", tuple(both.shape))

plot_mask_row([pad_mask[0, 0].expand(T, T), causal_mask[0, 0], both[0, 0]],
              ["padding mask: blocks <pad> keys", "causal mask: no peeking ahead", "padding & causal"],
              x_labels=tokens, y_labels=tokens, title="Padding, causal and combined masks (True = may attend)")
plt.show()

# %% [markdown]
# 注意填充掩码遮挡的是**列**（键），不是行（查询）：`<pad>` 位置作为查询仍然会算出一个输出，后面计算损失时忽略它即可。
#
# ### 手算：因果掩码怎样改变每一行
#
# 取一个 3×3 的分数矩阵（直接当作已经缩放好的分数 $S$），加上因果掩码（下三角为 True = 可以看），即把 $j > i$ 的分数换成 $-\infty$：
#
# $$
# S = \begin{pmatrix} 1 & 2 & 3 \\ 1 & 1 & 1 \\ 2 & 0 & 1 \end{pmatrix}
# \quad\longrightarrow\quad
# S' = \begin{pmatrix} 1 & -\infty & -\infty \\ 1 & 1 & -\infty \\ 2 & 0 & 1 \end{pmatrix}.
# $$
#
# - 第 1 行只剩一个可见的键：$\mathrm{softmax}(1) = 1$，权重 $(1,\ 0,\ 0)$——不管被遮挡的分数 2、3 有多大；
# - 第 2 行两个可见的分数相等：$(0.5,\ 0.5,\ 0)$；
# - 第 3 行什么都没被遮挡：$e^2 \approx 7.389,\ e^0 = 1,\ e^1 \approx 2.718$，分母 $\approx 11.107$，
#   权重 $\approx (0.665,\ 0.090,\ 0.245)$。
#
# 对照一下不加掩码的第 1 行：$\mathrm{softmax}(1, 2, 3) \approx (0.090,\ 0.245,\ 0.665)$，三分之二的权重落在“未来”的第 3 个键上。
# 掩码在 softmax **之前**生效，剩下的可见键重新归一化，每行仍然和为 1。下面用 PyTorch 直接算一遍（不依赖你的练习）：

# %%
S_causal = torch.tensor([[1.0, 2.0, 3.0],
                         [1.0, 1.0, 1.0],
                         [2.0, 0.0, 1.0]])                     # (T_q, T_k): scores, taken as already scaled
allowed = torch.tril(torch.ones(3, 3, dtype=torch.bool))       # (T_q, T_k): True = may attend, lower triangle
print("no mask ->\n", torch.softmax(S_causal, dim=-1))
print("causal  ->\n", torch.softmax(S_causal.masked_fill(~allowed, float("-inf")), dim=-1))

# %% [markdown]
# ### 全被遮挡的行：NaN 从哪里来
#
# 若把 `<pad>` 查询所在的**行**也整行遮住（而不是只遮挡 `<pad>` 列），这些行就变成“全被遮挡”的行。
# 用 `masked_fill(~mask, float("-inf"))` 再直接 softmax：只要一行里还有一个可见的键，这没问题；可一旦整行都是 $-\infty$，
# softmax 要算 $e^{-\infty - (-\infty)}$，即 `exp(nan)`，结果整行 NaN；不加处理的话，NaN 会在反向传播里扩散到所有参数。
# 换成 `-1e9` 不再有 NaN，但整行变成均匀分布——这个查询会平均地从所有（包括 padding 的）位置取信息，同样不对。

# %%
scores_demo = torch.tensor([[0.5, 1.0, -0.3],
                            [0.2, 0.1, 0.4]])        # (T_q=2, T_k=3)
mask_demo = torch.tensor([[True, True, False],
                          [False, False, False]])    # query 1 may attend to nothing
print("fill with -inf  ->\n", torch.softmax(scores_demo.masked_fill(~mask_demo, float("-inf")), dim=-1))
print("fill with -1e9  ->\n", torch.softmax(scores_demo.masked_fill(~mask_demo, -1e9), dim=-1))
values_demo = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])  # (T_k=3, d_v=2)
print("F.scaled_dot_product_attention, output of query 1 (sees nothing):",
      F.scaled_dot_product_attention(torch.zeros(2, 2), torch.zeros(3, 2), values_demo, attn_mask=mask_demo)[1])

# %% [markdown]
# 本课程的约定：**这样的行权重全为 0，输出也为 0**。上面最后一行是 PyTorch 自己的 `F.scaled_dot_product_attention`
# 在同一个掩码下的输出：从 PyTorch 2.5 起（本课程固定的版本也是），它对全被遮挡的行输出 0（内部用 `_safe_softmax`）；
# 更早的版本在这里输出 NaN。推荐做法：
#
# 1. 用一个**有限的**极小值填充被遮挡的分数，例如 `torch.finfo(scores.dtype).min`（每种精度用自己的 `finfo`，
#    float16/float32/float64 都安全；float16 最大只能表示 65504，`masked_fill(..., -1e9)` 在半精度下直接报溢出错误，
#    转换成 float16 则变成 `-inf`）；
# 2. softmax 之后，再把被遮挡位置的权重置 0：`attn.masked_fill(~mask, 0.0)`。
#
# 这两步对正常的行没有任何影响，只改变全被遮挡的行，而且梯度里也不会出现 NaN。
#
# 决定结果的其实是第 2 步：第 1 步用 `-inf` 填充、第 2 步照样置 0，前向和反向的结果也都没有 NaN
# （`masked_fill` 的反向对被替换的位置只传回 0）。所以 `-inf` 加第 2 步同样正确，`finfo.min` 只是**更稳妥**：
# 中间结果里从不出现 NaN 或 $\infty$ 运算，`torch.autograd.detect_anomaly()` 这类 NaN 检查不会在 softmax 的反向里报警，
# 换到 float16 也不用改代码。

# %% [markdown]
# ## 7. PyTorch 版：`scaled_dot_product_attention`
#
# 形状与 NumPy 版相同，典型输入是多头注意力里的 `(B, H, T, d_k)`：
#
# ```
# Q (B, H, T_q, d_k) @ Kᵀ (B, H, d_k, T_k) -> scores (B, H, T_q, T_k)    # K.transpose(-2, -1)
# scores.masked_fill(~mask, finfo.min)       mask 广播: (B,1,1,T_k) / (1,1,T_q,T_k) / (B,1,T_q,T_k)
# attn = softmax(scores, dim=-1)             (B, H, T_q, T_k)   # dim=-1: over the keys
# attn = attn.masked_fill(~mask, 0.0)        fully masked rows -> zeros
# attn = dropout(attn)                       only when training
# out = attn @ V                             (B, H, T_q, T_k) @ (B, H, T_k, d_v) -> (B, H, T_q, d_v)
# ```
#
# 要点：
#
# - `K.transpose(-2, -1)` 只交换最后两维，对任意个批次维都成立；不要写 `K.T`（它会反转**所有**维度）。
# - softmax 必须在 `dim=-1`（键）上做。在 `dim=-2` 上做也会得到“和为 1”的数，只不过是每**列**和为 1——形状完全正确，
#   答案完全错误，这是最难发现的一类 bug。
# - 掩码可能是 0/1 整数张量，先 `mask.to(torch.bool)`，否则 `~mask` 会按位取反得到 `-1`、`-2`。
# - 注意力 dropout 作用在权重上，只在训练时生效；返回的 `attn` 就是乘到 `V` 上的那份权重。原论文只写了子层输出和
#   “嵌入 + 位置编码”上的 dropout（$P_{drop} = 0.1$），注意力权重上的 dropout 来自后来的实现（如 The Annotated Transformer，也取 0.1）。
#
# ### 练习 3：`scaled_dot_product_attention`（3 + 2 分）
#
# 不要调用 `F.scaled_dot_product_attention`——那正是你要实现的东西（评分时会检测）。

# %% exercise="scaled_dot_product_attention"

# %% grade_id="sdpa_matches_reference" points=3 check="scaled_dot_product_attention:scaled_dot_product_attention"
# Visible tests: shapes with T_q != T_k and d_v != d_k, rows sum to 1, the worked example.
_g = torch.Generator().manual_seed(1)
_Q = torch.randn(2, 3, 4, 8, generator=_g)  # (B, H, T_q, d_k)
_K = torch.randn(2, 3, 5, 8, generator=_g)  # (B, H, T_k, d_k)
_V = torch.randn(2, 3, 5, 6, generator=_g)  # (B, H, T_k, d_v)
_out, _attn = scaled_dot_product_attention(_Q, _K, _V)
assert _out.shape == (2, 3, 4, 6), f"out 形状应为 (2, 3, 4, 6) / out must be (2, 3, 4, 6), got {tuple(_out.shape)}"
assert _attn.shape == (2, 3, 4, 5), f"attn 形状应为 (2, 3, 4, 5) / attn must be (2, 3, 4, 5), got {tuple(_attn.shape)}"
assert torch.allclose(_attn.sum(-1), torch.ones(2, 3, 4)), "每个查询的权重之和应为 1（softmax 的维度？）/ each query's weights must sum to 1 (softmax dim?)"
assert torch.allclose(_out, _attn @ _V, atol=1e-6), "out 应等于 attn @ V / out must equal attn @ V"
_X = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
_out, _attn = scaled_dot_product_attention(_X, _X, _X)
assert torch.allclose(_attn[2], torch.tensor([0.248, 0.248, 0.503]), atol=1e-3), \
    "手算例子不符（缩放对吗？）/ worked example differs (is the scaling right?)"

# %% grade_id="sdpa_mask_blocks_keys" points=2
# Visible tests of the mask contract: True = may attend; a fully masked row gives zeros, not NaN (also in gradients).
_g = torch.Generator().manual_seed(2)
_Q = torch.randn(2, 2, 4, 8, generator=_g, requires_grad=True)
_K = torch.randn(2, 2, 5, 8, generator=_g)
_V = torch.randn(2, 2, 5, 8, generator=_g)
_pad = torch.tensor([[True, True, True, False, False],
                     [True, True, True, True, True]])[:, None, None, :]  # (B, 1, 1, T_k)
_out, _attn = scaled_dot_product_attention(_Q, _K, _V, _pad)
assert torch.all(_attn[0, :, :, 3:] == 0), "被遮挡的键权重应为 0（约定：True = 可以看）/ blocked keys must get weight 0 (True = may attend)"
assert torch.allclose(_attn.sum(-1), torch.ones(2, 2, 4)), (
    "遮挡后每行仍应和为 1：在 softmax 之前把被遮挡的分数设为很大的负数（设为 0 仍会分到权重），softmax 之后不要再改权重 / "
    "rows must still sum to 1: before the softmax set blocked scores to a large negative number (0 still gets weight), "
    "and leave the weights alone after it")
_causal = torch.tril(torch.ones(4, 5, dtype=torch.bool))               # (T_q, T_k): query i sees keys 0..i
_, _attn = scaled_dot_product_attention(_Q, _K, _V, _causal)
assert torch.allclose(_attn[..., 0, 0], torch.ones(2, 2)), "因果掩码下第 0 个查询只能看自己 / under a causal mask query 0 sees only key 0"
_int_mask = _causal.long()                                              # 0/1 masks are accepted too
_, _attn_int = scaled_dot_product_attention(_Q, _K, _V, _int_mask)
assert torch.allclose(_attn_int, _attn), "0/1 整数掩码应与布尔掩码等价 / a 0/1 mask must act like the bool mask"
_none = torch.ones(4, 5, dtype=torch.bool)
_none[1] = False                                                        # query 1 sees nothing
_out, _attn = scaled_dot_product_attention(_Q, _K, _V, _none)
assert not torch.isnan(_out).any(), "全被遮挡的行出现 NaN / a fully masked row gave NaN"
assert torch.all(_attn[..., 1, :] == 0) and torch.all(_out[..., 1, :] == 0), \
    "全被遮挡的行：权重和输出应为 0 / a fully masked row must give zero weights and output"
_out.sum().backward()
assert not torch.isnan(_Q.grad).any(), "梯度中出现 NaN / NaN in the gradient"

# %% [markdown]
# ## 8. 看一看注意力权重
#
# 把第 6 节的句子换成随机向量（固定种子），用你的函数配合“填充 & 因果”掩码算一次注意力，画成热力图（heatmap）。
# 行是查询，列是键：每行和为 1；右上三角（未来）和 `<pad>` 两列都是 0。
# 第 0 行只能看自己，所以权重恰好是 1。

# %%
try:
    x_demo = torch.randn(1, 1, T, 8, generator=torch.Generator().manual_seed(3))  # (B, H, T, d_k)
    _, attn_demo = scaled_dot_product_attention(x_demo, x_demo, x_demo, both)       # attn: (B, H, T, T)
    plot_attention(attn_demo[0, 0], x_labels=tokens, y_labels=tokens, title="Self-attention with padding & causal mask")
    plt.show()
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# 再看“全被遮挡的行”：与第 6 节相同的分数和掩码，这次通过你的实现。第 1 行应是全 0，而不是 NaN 或 $1/3$。
# 顺便和 PyTorch 内置的 `F.scaled_dot_product_attention` 对比输出（这里只是在**你的函数之外**调用它做对照）。

# %%
try:
    q_demo = torch.randn(1, 2, 4, generator=torch.Generator().manual_seed(4))  # (B, T_q, d_k)
    k_demo = torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(5))  # (B, T_k, d_k)
    v_demo = torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(6))  # (B, T_k, d_v)
    out_mine, attn_mine = scaled_dot_product_attention(q_demo, k_demo, v_demo, mask_demo)
    out_torch = F.scaled_dot_product_attention(q_demo, k_demo, v_demo, attn_mask=mask_demo)
    print("your weights:\n", attn_mine[0])
    print("your output:\n", out_mine[0])
    print("same output as F.scaled_dot_product_attention:", torch.allclose(out_mine, out_torch, atol=1e-6))
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# ## 9. 模块版：`ScaledDotProductAttention`
#
# 在模型里，我们希望注意力像其他层一样是一个 `nn.Module`：`model.train()` / `model.eval()` 会自动切换 dropout。
# 模块本身没有可学习参数，只保存 dropout 概率，`forward` 调用你上面写的函数，并把 `self.training` 传进去。
#
# ### 练习 4：`ScaledDotProductAttention`（1 分）

# %% exercise="ScaledDotProductAttention"

# %% grade_id="sdpa_module_matches_reference" points=1 check="ScaledDotProductAttention:ScaledDotProductAttention"
# Visible tests: no parameters; eval mode is deterministic; dropout acts only in training mode.
_g = torch.Generator().manual_seed(7)
_Q, _K, _V = (torch.randn(2, 3, 6, 8, generator=_g) for _ in range(3))
_layer = ScaledDotProductAttention(dropout=0.5)
assert isinstance(_layer, nn.Module), "应继承 nn.Module / must subclass nn.Module"
assert sum(p.numel() for p in _layer.parameters()) == 0, "注意力本身没有参数 / attention itself has no parameters"
_layer.eval()
_out1, _attn1 = _layer(_Q, _K, _V)
_out2, _ = _layer(_Q, _K, _V)
assert torch.equal(_out1, _out2), "eval 模式下应是确定性的 / eval mode must be deterministic"
assert torch.allclose(_attn1.sum(-1), torch.ones(2, 3, 6)), "eval 模式下每行和为 1 / rows sum to 1 in eval mode"
_layer.train()
torch.manual_seed(0)
_, _attn_train = _layer(_Q, _K, _V)
assert (_attn_train == 0).any(), "训练模式下 dropout=0.5 应把部分权重置 0 / dropout=0.5 must zero some weights in training"

# %% [markdown]
# ## 10. 复杂度：为什么长序列贵
#
# - **时间**（按乘加次数 multiply-adds 计，$d = d_{\text{model}}$，即所有头的维度之和）：$QK^{\top}$ 与 $AV$ 各需
#   $T_q \cdot T_k \cdot d$ 次，自注意力（$T_q = T_k = n$）合计 $2n^2 d$；Q、K、V、O 四个投影合计 $4nd^2$；
#   一层里还有 FFN（$d_{\text{ff}} = 4d$），两个线性层合计 $8nd^2$。
#   - 只看注意力子层：$2n^2 d > 4nd^2 \iff n > 2d$，这时 $n^2$ 项才占主导；
#   - 看整个编码器层：$2n^2 d > 12nd^2 \iff n > 6d$。$n^2$ 项在一层里的占比是 $n / (n + 6d)$。
#
#   例如 $n = 4096,\ d = 1024$（$n = 4d$）：$n^2$ 项约 34 G 次，投影与 FFN 约 51 G 次，整层看仍是后者更多。
#   像 $n = 512,\ d = 768$ 这样 $n < d$ 的配置，$n^2$ 项只占一成左右。想用它举例说明“$n^2$ 是瓶颈”就会举反——
#   这个例子恰恰说明了相反的结论。第 06 章第 9 节把这些公式用到原论文的整个 base 模型上。
# - **显存**：权重矩阵有 $B \cdot H \cdot T_q \cdot T_k$ 个元素，要为反向传播保存下来，是 $O(n^2)$。
#   长度翻倍，$n^2$ 部分的计算和这部分显存都约变成 4 倍。
#
# 用几组配置算一算（一层编码器，单个样本）：

# %%
print("    n     d | 2n^2 d (attention) | 4nd^2 (proj.) | 8nd^2 (FFN) | n^2 share of the layer")
for n, d in ((512, 768), (2048, 1024), (4096, 1024), (6144, 1024), (16384, 1024)):
    quad, proj, ffn = 2 * n * n * d, 4 * n * d * d, 8 * n * d * d
    print(f"{n:5d} {d:5d} | {quad / 1e9:16.1f} G | {proj / 1e9:11.1f} G | {ffn / 1e9:9.1f} G | "
          f"{quad / (quad + proj + ffn):6.1%}")

# %% [markdown]
# 第 2 行 $n = 2d$：注意力子层里 $2n^2 d$ 与 $4nd^2$ 正好相等。第 4 行 $n = 6d$：整层正好对半。$n = 16384$ 时 $n^2$ 项才占到七成以上。
#
# ### 与 RNN、CNN 比较
#
# 原论文（*Attention Is All You Need*，表 1）从三个角度比较了几种层（$n$ 序列长度，$d$ 表示维度，$k$ 卷积核宽，$r$ 受限注意力的邻域大小）：
#
# | 层类型 | 每层计算量 | 串行操作数（sequential operations） | 最大路径长度（maximum path length） |
# | --- | --- | --- | --- |
# | 自注意力（self-attention） | $O(n^2 \cdot d)$ | $O(1)$ | $O(1)$ |
# | 循环层（recurrent） | $O(n \cdot d^2)$ | $O(n)$ | $O(n)$ |
# | 卷积层（convolutional） | $O(k \cdot n \cdot d^2)$ | $O(1)$ | $O(\log_k n)$（空洞卷积）或 $O(n/k)$（连续核） |
# | 受限自注意力（restricted，只看邻近 $r$ 个位置） | $O(r \cdot n \cdot d)$ | $O(1)$ | $O(n/r)$ |
#
# - **每层计算量**：$n < d$ 时 $n^2 d < n d^2$，自注意力比 RNN 还便宜——机器翻译的句子通常几十个 token，而 $d = 512$，
#   这正是论文成立的场景；$n \gg d$ 时反过来，才需要受限 / 稀疏注意力把 $n^2$ 降成 $r \cdot n$。
# - **串行操作数**：RNN 必须按时间步一步步算，训练时无法在序列维上并行；注意力和卷积都是几次大矩阵乘法，可以完全并行。
# - **最大路径长度**：任意两个位置之间的信息要经过几步。RNN 要传 $O(n)$ 步，长程依赖容易被稀释；
#   卷积要叠 $O(n/k)$ 层（空洞卷积 $O(\log_k n)$ 层）感受野才能覆盖整个序列；自注意力一步直达，$O(1)$。
#   受限自注意力用更长的路径 $O(n/r)$ 换取更少的计算。
#
# 最后看显存。下表是**单个头、单个样本**的注意力权重矩阵在半精度（2 字节）下的大小：

# %%
print("     n |   n^2 elements | fp16 size per head")
for n in (512, 1024, 2048, 4096, 16384):
    print(f"{n:6d} | {n * n:14,d} | {n * n * 2 / 2**20:8.1f} MiB")

# %% [markdown]
# $n = 16384$ 时单头就要 512 MiB，8 个头约 4 GiB，还没算梯度和其他激活。
# FlashAttention 这类实现的计算量仍是 $O(n^2)$，但分块计算、不把整个 $n\times n$ 矩阵写回显存，
# 使额外显存降到 $O(n)$；稀疏 / 局部 / 线性注意力则用近似换取更低的计算量。

# %% [markdown]
# ## 11. 面试要点（Q&A）
#
# **Q1：写出缩放点积注意力，并说出每一步的形状。**
# $\mathrm{softmax}(QK^{\top}/\sqrt{d_k})V$；`(B,H,T_q,d_k) @ (B,H,d_k,T_k) -> (B,H,T_q,T_k)`，
# softmax 在最后一维，`@ (B,H,T_k,d_v) -> (B,H,T_q,d_v)`。
#
# **Q2：为什么除以 $\sqrt{d_k}$？为什么不是 $d_k$？**
# 分量独立、方差为 1 时 $\mathrm{Var}(q\cdot k) = d_k$；分数太大会让 softmax 饱和成 one-hot，梯度接近 0。
# 除以 $\sqrt{d_k}$ 使方差回到 1。除以 $d_k$ 会让方差变成 $1/d_k$，注意力退化成均匀平均。
#
# **Q3：softmax 怎样做到数值稳定？**
# 先减去每行的最大值；softmax 对整体平移不变，最大指数变成 $e^0$，不会上溢，分母 ≥ 1 也不会是 0。
#
# **Q4：掩码加在 softmax 之前还是之后？**
# 之前。之后再置 0 的话，那一行的权重和小于 1，没有重新归一化。
#
# **Q5：`-inf` 和 `-1e9` 有什么区别？整行都被遮挡会怎样？**
# 正常行两者结果相同。整行被遮挡时 `-inf` 得到 NaN（并在反向传播中扩散），`-1e9` 得到均匀分布（偷偷看了 padding）；
# `-1e9` 在 float16 里还放不下（最大 65504）。稳妥做法：用 `finfo.min` 填充，softmax 后把被遮挡权重置 0
# （关键是置 0 这一步：`-inf` 填充后同样置 0 也不出 NaN，只是中间会先算出 NaN）。
#
# **Q6：padding mask 和 causal mask 的形状、作用？**
# padding：`(B,1,1,T_k)`，遮挡 `<pad>` 键（整列）；causal：`(1,1,T,T)` 下三角，查询 $i$ 只看 $0..i$，训练时并行计算所有位置又不偷看未来，
# 推理逐个生成时同样要用。两者同时用时取 `&`。
#
# **Q7：你的掩码里 True 表示什么？** 先说清约定：本课程与 `F.scaled_dot_product_attention` 是 True = 可以看；
# `nn.MultiheadAttention` 的布尔掩码相反（True = 遮挡）。混用约定会让模型只看 padding。
#
# **Q8：注意力的时间、空间复杂度？** 时间 $O(n^2 d)$（乘加 $2n^2 d$），加投影 $O(nd^2)$（$4nd^2$）；权重矩阵显存 $O(B H n^2)$，$n$ 翻倍约 4 倍。
# 注意力子层里 $n > 2d$、整层（含 FFN 的 $8nd^2$）里 $n > 6d$ 时 $n^2$ 项才占主导。与 RNN 比：每层 $O(n^2 d)$ 对 $O(nd^2)$，
# 串行步数 $O(1)$ 对 $O(n)$，路径长度 $O(1)$ 对 $O(n)$。长序列用 FlashAttention（显存 $O(n)$、计算不变）、稀疏或线性注意力（近似）。
#
# **Q9：为什么 Q 和 K 用不同的投影？** 若 $Q = K$，分数矩阵对称，表达不了“i 关注 j 但 j 不关注 i”；不同投影让“提问”和“被检索”解耦。
#
# **Q10：注意力的输出有什么性质？它是线性的吗？** 每行权重是概率分布，输出是值向量的凸组合。权重给定时输出对 $V$ 线性，
# 但权重由 softmax(q·k) 从输入算出，所以自注意力作为输入的函数是非线性的；它缺的是逐位置、逐元素的非线性，由 FFN 补上。
#
# **Q11：注意力 dropout 加在哪里？** 加在 softmax 之后的权重上，只在训练时生效（`model.eval()` 关闭）。
#
# 下一章：把 $d_{\text{model}}$ 拆成多个头，每个头在自己的子空间里做这一章的注意力——多头注意力（Multi-Head Attention）。
