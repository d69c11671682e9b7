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
# # 03 位置编码（Positional Encoding）
#
# 注意力只看“内容像不像”，不看“谁在前谁在后”。这一章先用实验说明这一点，再实现原论文的
# 正弦位置编码（sinusoidal positional encoding），最后在选做部分实现可学习位置编码（learned positional embedding）
# 和今天大模型最常用的旋转位置编码 RoPE（Rotary Position Embedding），并介绍 ALiBi 和 T5 的相对位置偏置。
#
# **本章共 8 分**，两个练习，3 个评分单元格：
#
# | 练习 | 评分单元格（grade_id） | 检查什么 | 分值 |
# | --- | --- | --- | --- |
# | `sinusoidal_positional_encoding` | `pe_table_values` | 形状、第 0 行、可以手算的几个值 | 2 |
# | 同上 | `pe_table_matches_reference` | 奇数 `d_model`、sin/cos 成对、与参考实现数值一致 | 3 |
# | `PositionalEncoding`（模块） | `pe_module_matches_reference` | buffer、切片到 `T`、`T > max_len` 报错、dropout、与参考实现一致 | 3 |
#
# 选做练习（不计分，自学版和发布版都会立即给出 ✅/❌）：`LearnedPositionalEmbedding`、`rope_frequencies` + `apply_rope`。
#
# 本章的置换实验用到第 02 章的 `MultiHeadAttention`（和它依赖的第 01 章 `scaled_dot_product_attention`）。
# 下面以折叠的只读单元格提供参考实现，所以即使前两章没做完，这一章也能从头跑到尾。

# %%
# Setup: imports, seeds, and warning filters (so that a library warning does not clutter a check's report).
import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tutor.plots import plot_pe_similarity, plot_permutation_demo, plot_positional_encoding, plot_rope_scores

warnings.filterwarnings("ignore")
np.random.seed(0)
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
FINISH_FIRST = "完成上面的练习后再运行 / finish the exercise above first"

# %% [markdown]
# 第 01、02 章的参考实现（提供给你使用，不计分）：

# %% provided="earlier"

# %% [markdown]
# ## 1. 为什么需要位置编码：注意力对顺序“视而不见”
#
# 设输入 $X \in \mathbb{R}^{T \times d}$，$P$ 是一个 $T \times T$ 的置换矩阵（permutation matrix，把 token 重新排序）。
# 自注意力的分数是 $QK^\top = X W_Q W_K^\top X^\top$，打乱之后变成
#
# $$
# (PX) W_Q W_K^\top (PX)^\top = P\,(QK^\top)\,P^\top ,
# $$
#
# softmax 逐行计算，先重排再做 softmax 与先做 softmax 再重排结果相同，所以权重变成 $P A P^\top$，输出变成
#
# $$
# \mathrm{Attn}(PX) = P A P^\top \cdot P V = P\,\mathrm{Attn}(X) .
# $$
#
# 也就是说：**把输入打乱，输出只是跟着同样打乱**，每个 token 得到的向量一模一样。
# 这叫置换等变（permutation-equivariant），不是置换不变（permutation-invariant）：
# 权重矩阵的行和列都跟着换了位置（$PAP^\top$），只是每对 token 之间的权重数值不变；
# 真正“不变”的是对所有位置求和或求平均后的结果。
#
# 后果：“猫 吃 鱼”和“鱼 吃 猫”里，“猫”这个 token 得到完全相同的表示，模型无从知道谁吃谁。
# 下面用第 02 章的多头注意力验证：4 个 token `the cat eats fish` 打乱成 `the fish eats cat`。
# 再给每个**位置**加一个固定的随机向量（相当于一张还没训练的可学习位置表）——只要向量随位置不同，对称性就被打破。
# 这里故意不用正弦表（它第 2 节才出场）：打破对称靠的是“每个位置一个不同的向量”，与向量怎么来的无关。

# %%
torch.manual_seed(0)
tokens = ["the", "cat", "eats", "fish"]
perm = torch.tensor([0, 3, 2, 1])                      # shuffled sequence = x[perm]: "the fish eats cat"
inverse = torch.argsort(perm)                          # where each original token sits after the shuffle
d_model_demo = 16
embed = nn.Embedding(len(tokens), d_model_demo)        # one vector per token (same word -> same vector)
position_table = torch.randn(len(tokens), d_model_demo)  # one fixed vector per position, like an untrained learned PE
mha_demo = MultiHeadAttention(d_model_demo, num_heads=2).eval()

with torch.no_grad():
    x = embed(torch.arange(len(tokens)))[None]         # (1, T, d_model)
    x_perm = x[:, perm]                                # (1, T, d_model), tokens shuffled
    out, attn = mha_demo(x, x)                         # (1, T, d_model), (1, H, T, T)
    out_perm, attn_perm = mha_demo(x_perm, x_perm)
    err_no_pe = (out - out_perm[:, inverse]).abs().amax(-1)[0]          # (T,) per original token
    x_pos, x_perm_pos = x + position_table, x_perm + position_table     # position vectors follow the slot, not the token
    out_pos, _ = mha_demo(x_pos, x_pos)
    out_perm_pos, _ = mha_demo(x_perm_pos, x_perm_pos)
    err_pe = (out_pos - out_perm_pos[:, inverse]).abs().amax(-1)[0]     # (T,)

print("no position information: max |out(x)[t] - out(x[perm])[new place of t]| =", f"{err_no_pe.max().item():.1e}")
print("weights of the shuffled input == P A P^T:", torch.allclose(attn_perm, attn[:, :, perm][:, :, :, perm], atol=1e-6))
print("with one vector per position:  max change per token =", [round(v, 3) for v in err_pe.tolist()])
plot_permutation_demo(tokens, perm.tolist(), attn[0, 0], attn_perm[0, 0], err_no_pe, err_pe)
plt.show()

# %% [markdown]
# 左边两张图是头 0 的权重：数值一样，只是行列跟着 token 搬了家。右边：没有位置信息时每个 token 的输出变化是 0（浮点误差级），
# 给每个位置加上各自的随机向量后，同一个 token 换了位置，输出就变了——连没有挪动的 `the` 也变了，因为它看到的“邻居排列”变了。
#
# 两点补充：
#
# - RNN、CNN 天生按顺序或局部窗口处理，自带位置信息；Transformer 为了并行丢掉了顺序，必须显式补回来。
# - 带因果掩码（causal mask）的解码器不再严格置换等变：第 $t$ 个 token 只能看到前 $t$ 个，这本身泄露了一些位置信息，
#   所以有研究发现纯解码器模型不加位置编码（NoPE）也能学到一定的顺序。编码器（双向注意力）则完全没有这条线索。

# %% [markdown]
# ## 2. 正弦位置编码的公式
#
# 原论文（Vaswani et al., 2017）给位置 $pos \in \{0, \dots, T-1\}$ 一个 $d_{\text{model}}$ 维向量，**加**到词嵌入上：
#
# $$
# \mathrm{PE}[pos,\ 2i] = \sin\!\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right),\qquad
# \mathrm{PE}[pos,\ 2i+1] = \cos\!\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right),
# \qquad i = 0, 1, \dots, \left\lceil d_{\text{model}}/2 \right\rceil - 1 .
# $$
#
# 这里 $i$ 是**第几对**维度，不是列号：第 $2i$ 列（偶数列）放 sin，第 $2i+1$ 列（奇数列）放 cos，
# **同一对的两列共用一个频率** $\omega_i = 10000^{-2i/d_{\text{model}}}$。
#
# - $i = 0$：$\omega_0 = 1$，波长 $2\pi$，每个位置都变化很大（高频，区分相邻位置）；
# - $i$ 越大频率越低，最后一对的波长接近 $10000 \cdot 2\pi$（低频，区分相距很远的位置）。
#   波长从 $2\pi$ 到 $10000 \cdot 2\pi$ 成几何级数，像一个“多刻度的钟表”。
#
# **手算一个例子**：$d_{\text{model}} = 8$，四对维度的频率是 $10000^{-0/8}, 10000^{-2/8}, 10000^{-4/8}, 10000^{-6/8}$，
# 即 $1,\ 0.1,\ 0.01,\ 0.001$。位置 $pos = 3$：
#
# $$
# \mathrm{PE}[3] = \big[\sin 3,\ \cos 3,\ \sin 0.3,\ \cos 0.3,\ \sin 0.03,\ \cos 0.03,\ \sin 0.003,\ \cos 0.003\big] .
# $$
#
# （容易犯的错：把公式里的 $i$ 当成列号，以为第 1 列是 $\sin(3/10000^{2/8})$。$i$ 数的是第几**对**：第 1 列是第 0 对的 $\cos 3$，第 2 列才是 $\sin 0.3$。）
#
# **实现技巧**：频率写成 $\exp\!\big(2i \cdot (-\ln 10000 / d_{\text{model}})\big)$，
# 其中 $2i$ 正好是 `torch.arange(0, d_model, 2)`（偶数列的列号）。位置 `(max_len, 1)` 乘频率 `(⌈d/2⌉,)`，
# 广播得到角度表，再分别填进偶数列和奇数列。$d_{\text{model}}$ 为奇数时偶数列比奇数列多一列，cos 那一半要少取一列。
#
# **两个最常见的错误**，形状都对、程序都不报错：
#
# - **sin 和 cos 对调**（偶数列放了 cos）：第 0 行会变成 `[1, 0, 1, 0, …]` 而不是 `[0, 1, 0, 1, …]`；
# - **频率差 2 倍**：用“对号” $i$ 写成 $10000^{i/d}$，或用“列号” $j$ 写成 $10000^{2j/d}$。前者频率衰减太慢，后者太快，
#   最低频率都不再是 $1/10000$。

# %% [markdown]
# ## 3. 形状追踪
#
# 以 `max_len = 5000, d_model = 512`、输入 `x (B=2, T=100, 512)` 为例：
#
# | 步骤 | 形状 |
# | --- | --- |
# | `position = arange(max_len)[:, None]` | `(5000, 1)` |
# | `div_term = exp(arange(0, d_model, 2) * (-ln 10000 / d_model))` | `(256,)` |
# | `angles = position * div_term`（广播） | `(5000, 256)` |
# | `pe[:, 0::2] = sin(angles)`，`pe[:, 1::2] = cos(angles)` | `pe (5000, 512)` |
# | 模块里 `register_buffer("pe", pe.unsqueeze(0))` | `(1, 5000, 512)` |
# | `forward`：`x + self.pe[:, :T]` | `(2, 100, 512) + (1, 100, 512) -> (2, 100, 512)` |
#
# 表只算一次（`__init__` 里），`forward` 只做切片和加法；前面的 `1` 让同一张表广播到整个批次。

# %% [markdown]
# ## 4. 练习：`sinusoidal_positional_encoding`（5 分）
#
# 要求：
#
# - `sinusoidal_positional_encoding(max_len, d_model)` 返回 `(max_len, d_model)` 的张量，默认浮点类型（float32）；
# - 偶数列 sin、奇数列 cos，同一对共用频率 $10000^{-2i/d_{\text{model}}}$；
# - `d_model` 为奇数时也要能用（最后一列是 sin）。
#
# 提示见函数的文档字符串。

# %% exercise="sinusoidal_positional_encoding"

# %% grade_id="pe_table_values" points=2
# Visible tests: the shape, row 0, and the hand-computed row pos = 3 of a d_model = 8 table (frequencies 1, 0.1, 0.01, 0.001).
_pe = sinusoidal_positional_encoding(50, 8)
assert isinstance(_pe, torch.Tensor), "应返回 torch.Tensor / must return a torch.Tensor"
assert _pe.shape == (50, 8), f"形状应为 (max_len, d_model) = (50, 8) / shape must be (50, 8), got {tuple(_pe.shape)}"
assert _pe.dtype == torch.get_default_dtype(), f"应为默认浮点类型 / must have the default dtype, got {_pe.dtype}"
assert torch.allclose(_pe[0], torch.tensor([0.0, 1.0] * 4)), \
    f"位置 0 应为 [0, 1, 0, 1, ...]（偶数列 sin，奇数列 cos）/ row 0 must be [0, 1, 0, 1, ...]; got {_pe[0].tolist()}"
_expected = torch.tensor([f(3 * w) for w in (1.0, 0.1, 0.01, 0.001) for f in (math.sin, math.cos)])
assert torch.allclose(_pe[3], _expected, atol=1e-6), \
    f"位置 3 应为 [sin 3, cos 3, sin 0.3, cos 0.3, ...] / row 3 must be {_expected.tolist()}; got {_pe[3].tolist()}"

# %% grade_id="pe_table_matches_reference" points=3 check="sinusoidal_positional_encoding:sinusoidal_positional_encoding"
# Visible tests: an odd d_model, the sin/cos pairs, the range of values, the lowest frequency.
_pe = sinusoidal_positional_encoding(10, 7)
assert _pe.shape == (10, 7), f"d_model 为奇数时形状应为 (10, 7) / odd d_model: shape must be (10, 7), got {tuple(_pe.shape)}"
assert torch.allclose(_pe[:, 6], torch.sin(torch.arange(10.0) * 10000 ** (-6 / 7)), atol=1e-6), \
    "d_model=7 时最后一列应是第 3 对的 sin / with d_model=7 the last column is the sin of pair 3"
_pe = sinusoidal_positional_encoding(100, 64)
assert torch.allclose(_pe[:, 0::2] ** 2 + _pe[:, 1::2] ** 2, torch.ones(100, 32), atol=1e-5), \
    "每对 (2i, 2i+1) 应共用一个频率：sin² + cos² = 1 / each pair must share one frequency: sin^2 + cos^2 = 1"
assert _pe.abs().max() <= 1.0 + 1e-6, "所有值应在 [-1, 1] 内 / all values must lie in [-1, 1]"
assert torch.allclose(_pe[:, 62], torch.sin(torch.arange(100.0) * 10000 ** (-62 / 64)), atol=1e-5), \
    "最后一对的频率应为 10000^(-62/64)（频率差 2 倍？）/ the last pair's frequency must be 10000^(-62/64) (off by a factor 2?)"

# %% [markdown]
# ## 5. 看一看这张表
#
# 左图每一行是一个位置的编码向量，每一列是一个维度；右图取出几列画成曲线。
# 越往右（维度越高）颜色变化越慢：低维是高频，高维是低频。每个位置在所有频率上的“相位组合”都不同，所以每一行都独一无二。

# %%
try:
    pe_table = sinusoidal_positional_encoding(100, 64)               # (max_len, d_model)
    plot_positional_encoding(pe_table)
    plt.show()
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# ## 6. 为什么是 sin 和 cos：相对位置是一次旋转
#
# 看第 $i$ 对维度 $\big(\sin(\omega_i\, pos),\ \cos(\omega_i\, pos)\big)$。由和角公式，
#
# $$
# \begin{pmatrix} \sin(\omega_i (pos + k)) \\ \cos(\omega_i (pos + k)) \end{pmatrix}
# = \begin{pmatrix} \cos(\omega_i k) & \sin(\omega_i k) \\ -\sin(\omega_i k) & \cos(\omega_i k) \end{pmatrix}
# \begin{pmatrix} \sin(\omega_i\, pos) \\ \cos(\omega_i\, pos) \end{pmatrix} .
# $$
#
# 所以 $\mathrm{PE}[pos + k] = M_k\, \mathrm{PE}[pos]$，$M_k$ 是由 $2 \times 2$ 旋转块组成的分块对角矩阵，**只依赖偏移 $k$，与 $pos$ 无关**。
# 这是论文选 sin/cos 的理由：“偏移 $k$”是一个固定的线性变换，模型（的线性层）有机会学会利用相对位置。
# 只用 sin（不配 cos）就没有这个性质。
#
# 推论：两个位置编码的点积
#
# $$
# \mathrm{PE}[p] \cdot \mathrm{PE}[p + k] = \sum_i \big(\sin a \sin b + \cos a \cos b\big) = \sum_i \cos(\omega_i k)
# $$
#
# 只取决于偏移 $k$，并且对 $k$ 和 $-k$ 相同：**原始的** PE 向量之间的点积分不出前后。但注意力里相乘的不是原始 PE，
# 而是投影之后的查询 $\mathrm{PE}[p]\,W_Q$ 和键 $\mathrm{PE}[p+k]\,W_K$：$W_Q W_K^{\top}$ 一般不对称，
# 分数对 $+k$ 和 $-k$ 就不同了，模型可以学会分方向。下面用你的表验证这三件事（投影用随机的 $W_Q$、$W_K$）：

# %%
def rotation_for_offset(k, d_model):
    """Block-diagonal M_k with PE[pos + k] = M_k @ PE[pos] (pairs (sin, cos) share frequency w_i)."""
    w = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))  # (d_model/2,)
    c, s = torch.cos(w * k), torch.sin(w * k)
    blocks = [torch.tensor([[c[i], s[i]], [-s[i], c[i]]]) for i in range(d_model // 2)]
    return torch.block_diag(*blocks)                                              # (d_model, d_model)


try:
    pe_table = sinusoidal_positional_encoding(100, 64).double()                  # (100, 64)
    M5 = rotation_for_offset(5, 64).double()
    print("PE[pos + 5] == M_5 @ PE[pos] for every pos:",
          torch.allclose(pe_table[5:], pe_table[:-5] @ M5.T, atol=1e-5))
    sim = pe_table @ pe_table.T                                                  # (100, 100): PE[i] . PE[j]
    print("PE[10].PE[17] =", f"{sim[10, 17].item():.4f}", "| PE[50].PE[57] =", f"{sim[50, 57].item():.4f}",
          "| PE[50].PE[43] =", f"{sim[50, 43].item():.4f}")
    W_q_demo, W_k_demo = torch.randn(2, 64, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    q_pe, k_pe = pe_table @ W_q_demo, pe_table @ W_k_demo                        # (100, 64) @ (64, 16) -> (100, 16)
    print("after random W_Q, W_K: q[50].k[57] =", f"{(q_pe[50] @ k_pe[57]).item():.4f}",
          "| q[50].k[43] =", f"{(q_pe[50] @ k_pe[43]).item():.4f}")
    plot_pe_similarity(sim)
    plt.show()
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# 左图：相同颜色沿对角线方向延伸（托普利茨结构，Toeplitz），右图：从不同起点出发，点积随偏移的曲线完全重合，
# 而且偏移越大点积总体越小（不单调，有起伏）。
#
# 正弦编码的其他优点与局限：
#
# - **没有参数**：直接算出来，不占训练；
# - **任意长度都能算**：表可以算到任意位置。但“能算”不等于“能用”：模型只在训练长度内见过这些向量，
#   远超训练长度时效果通常明显变差，所以说它“外推能力强”是夸大了；
# - 原始 PE 的点积分不出方向（$k$ 与 $-k$ 相同），但经过 $W_Q$、$W_K$ 之后可以（上面最后一行）；真正的局限是位置向量和词向量
#   **相加**后一起进注意力，位置和内容在 $q \cdot k$ 里混在一起，相对位置只能间接地学（这正是 RoPE 想解决的，见选做部分）。

# %% [markdown]
# ## 7. 练习：`PositionalEncoding` 模块（3 分）
#
# 把表包进一个 `nn.Module`：
#
# - `PositionalEncoding(d_model, max_len=5000, dropout=0.0)`；在 `__init__` 里算好表，
#   用 `self.register_buffer("pe", table.unsqueeze(0))` 存成 `(1, max_len, d_model)` 的 **buffer**；属性 `dropout`（`nn.Dropout`）；
# - `forward(x)`：`x (B, T, d_model)` 加上 `pe[:, :T]`，再做 dropout；
# - `T > max_len` 时抛出写清原因的 `ValueError`（这一段检查已经写在 `forward` 里了，读一读它）。
#
# **为什么是 buffer？** 三种存法的区别：
#
# | 存法 | 会被训练？ | 在 `state_dict` 里？ | `.to(device)` / `.double()` 跟着走？ |
# | --- | --- | --- | --- |
# | `nn.Parameter` | 会（不应该：正弦表是固定的） | 是 | 是 |
# | `register_buffer` | 不会 | 是 | 是 |
# | 普通属性 `self.pe = table` | 不会 | 否 | **否**：模型搬到 GPU，表还留在 CPU，`forward` 报设备不一致 |
#
# **为什么要切片 `[:, :T]`？** 表按 `max_len` 建，每个批次的长度 `T` 不同；不切片直接相加，形状 `(B, T, d)` 和 `(1, max_len, d)` 无法广播。
# 切片只解决 `T ≤ max_len` 的情况——`T > max_len` 时 `pe[:, :T]` 只有 `max_len` 行，相加时报一个难懂的广播错误
# （别以为有了切片就能处理任意长的序列：它解决不了）。要么在构造时把 `max_len` 设大一些，要么像这里一样尽早给出清楚的报错。
#
# 第 06 章会把词嵌入乘以 $\sqrt{d_{\text{model}}}$ 再加位置编码。那里的参考实现用 Xavier 均匀初始化（`nn.init.xavier_uniform_`）
# 初始化嵌入矩阵（$V \times d_{\text{model}}$），元素标准差只有 $\sqrt{2/(V + d_{\text{model}})}$（$V = 1000,\ d = 512$ 时约 0.036），
# 乘 $\sqrt{d_{\text{model}}}$ 后才和位置编码（每个元素在 $[-1, 1]$，均方根约 0.71）同一量级，位置编码不会盖过词义。
# 注意 `nn.Embedding` 的默认初始化是 $\mathcal{N}(0, 1)$，数值并不小；在那种初始化下再放大，反而是词向量盖过位置编码（第 06 章有实测）。
# dropout 作用在“嵌入 + 位置编码”之和上（原论文 $P_{drop} = 0.1$）。

# %% exercise="PositionalEncoding"

# %% grade_id="pe_module_matches_reference" points=3 check="PositionalEncoding:PositionalEncoding"
# Visible tests: the buffer, the slice to T, the error for T > max_len, dropout only in training.
_pos = PositionalEncoding(16, max_len=50)
assert isinstance(getattr(_pos, "pe", None), torch.Tensor) and _pos.pe.shape == (1, 50, 16), \
    "属性 pe 应是形状 (1, max_len, d_model) 的张量 / attribute pe must be a tensor of shape (1, max_len, d_model)"
assert "pe" in dict(_pos.named_buffers()), "pe 应用 register_buffer 注册 / pe must be registered with register_buffer"
assert len(list(_pos.parameters())) == 0, "正弦位置编码没有可训练参数 / the sinusoidal encoding has no trainable parameters"
assert torch.allclose(_pos.pe[0], sinusoidal_positional_encoding(50, 16)), \
    "pe[0] 应等于 sinusoidal_positional_encoding(max_len, d_model) / pe[0] must equal the table"
_x = torch.randn(3, 7, 16)                                  # (B, T, d_model)
_y = _pos(_x)
assert _y.shape == (3, 7, 16), f"输出形状应与输入相同 (3, 7, 16) / output must keep the shape (3, 7, 16), got {tuple(_y.shape)}"
assert torch.allclose(_y - _x, _pos.pe[:, :7].expand(3, 7, 16), atol=1e-6), \
    "forward 应为 x + pe[:, :T]（同一张表加到每个样本）/ forward must return x + pe[:, :T] for every sample"
try:
    _pos(torch.zeros(1, 51, 16))
except ValueError as err:
    print("T > max_len -> ValueError:", err)
else:
    raise AssertionError("T=51 > max_len=50 应抛出 ValueError / T > max_len must raise ValueError")
assert _pos.double().pe.dtype == torch.float64, ".double() 应带上 pe（buffer 的好处）/ .double() must convert pe (a buffer)"
_drop = PositionalEncoding(16, max_len=50, dropout=0.5)
assert torch.equal(_drop.eval()(_x), _drop(_x)), "eval 模式下 dropout 不起作用 / dropout must be off in eval mode"
torch.manual_seed(0)
assert (_drop.train()(torch.ones(2, 10, 16)) == 0).any(), \
    "训练模式下 dropout=0.5 应把部分元素置零 / in training mode dropout=0.5 must zero some elements"

# %% [markdown]
# ## 8. 易错点清单
#
# | 错误 | 现象 |
# | --- | --- |
# | sin、cos 对调（偶数列放 cos） | 第 0 行是 `[1, 0, 1, 0, …]`；形状对，数值错 |
# | 频率差 2 倍：$10000^{i/d}$（$i$ 是对号）或 $10000^{2j/d}$（$j$ 是列号） | 频谱整体偏移，与论文和预训练模型不一致 |
# | 每一列各用一个频率（奇数列没有和偶数列共用频率） | sin/cos 不再成对，“偏移 = 旋转”的性质消失 |
# | `forward` 里没有切片 `[:, :T]` | `(B, T, d) + (1, max_len, d)` 广播报错 |
# | 切片写成 `pe[:T]`（切了批次维） | 形状 `(1, max_len, d)` 的第 0 维只有 1，切了等于没切 |
# | `T > max_len` 不检查 | 难懂的广播报错；应构造时设够 `max_len`，或给出清楚的 `ValueError` |
# | 表存成 `nn.Parameter` | 正弦表被训练改掉；优化器里多了 `max_len × d` 个参数 |
# | 表存成普通属性 | 不在 `state_dict` 里，`.to(device)` 不跟着走 |
# | 表建成整数类型（`dtype=torch.long`，或跟着整数的 `position`） | sin/cos 被静默截断成整数：第 0 行仍是 `[0, 1, 0, 1, …]`，其余几乎全是 0 |
# | 指数里用整除：`2 * i // d_model` | 对所有 $2i < d_{\text{model}}$ 都得 0，所有频率都变成 1 |
# | 位置编码加到 Q、K、V 之后，或拼接（concat）而不是相加 | 与原论文不符；原论文在嵌入层**相加**一次 |
#
# （常见的误解：`arange` 默认是 int64，“必须先转成浮点才能乘频率”——其实 int64 张量乘 float32 张量会自动提升为 float32，
# `torch.sin` 也接受整数张量。真正的坑是上表那两行：结果**存进**整数张量，或在指数里做整数除法。）下面的小实验把这两个坑演示出来：

# %%
angles_demo = torch.arange(4)[:, None] * torch.tensor([1.0, 0.01])    # (4, 1) * (2,) -> (4, 2), int64 * float32 -> float32
table_long = torch.zeros(4, 4, dtype=torch.long)                      # wrong: an integer table
table_long[:, 0::2], table_long[:, 1::2] = torch.sin(angles_demo), torch.cos(angles_demo)  # truncated toward 0, no error
print("angles dtype:", angles_demo.dtype, "| integer table (positions 0-3, d_model = 4):")
print(table_long)
pair_cols = torch.arange(0, 8, 2)                                     # 2i for d_model = 8
print("exponent 2i/d_model with / :", (pair_cols / 8).tolist(), "| with // :", (pair_cols // 8).tolist())

# %% [markdown]
# ## 9. 选做一：可学习位置编码（Learned Positional Embedding）
#
# BERT、GPT-2 不用公式，而是训练一张 `nn.Embedding(max_len, d_model)` 表：第 $t$ 行就是位置 $t$ 的向量，和词向量一样随梯度更新。
#
# - 优点：简单、灵活，由数据决定位置表示；
# - 代价：多了 `max_len × d_model` 个参数（BERT：$512 \times 768 \approx 39$ 万）；**不能超过 `max_len`**——
#   没有第 513 行可查，训练时没见过的长位置也学不好（这就是 BERT 限长 512 的原因之一）。
#
# 实现 `LearnedPositionalEmbedding(d_model, max_len=512, dropout=0.0)`：属性 `embed`（`nn.Embedding(max_len, d_model)`）和 `dropout`；
# `forward(x)` 返回 `dropout(x + embed(arange(T)))`。下面的检查不计分。

# %% exercise="LearnedPositionalEmbedding"

# %% check="LearnedPositionalEmbedding:LearnedPositionalEmbedding"

# %% [markdown]
# ## 10. 选做二：旋转位置编码 RoPE（Rotary Position Embedding）
#
# RoPE（Su et al., RoFormer, 2021；Llama、Qwen 等采用）不把位置向量**加**到嵌入上，而是在每一层注意力里把
# 查询和键按各自的位置**旋转**。把 $d$ 维向量看成 $d/2$ 对相邻特征 $(x_{2i}, x_{2i+1})$，
# 位置为 $m$ 的向量的第 $i$ 对旋转角度 $m\,\theta_i$，$\theta_i = 10000^{-2i/d}$（与正弦编码同一组频率）：
#
# $$
# \begin{pmatrix} x'_{2i} \\ x'_{2i+1} \end{pmatrix} =
# \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\ \sin m\theta_i & \cos m\theta_i \end{pmatrix}
# \begin{pmatrix} x_{2i} \\ x_{2i+1} \end{pmatrix} ,
# \qquad\text{记作 } x' = R_m x .
# $$
#
# 关键性质：旋转矩阵满足 $R_m^\top R_n = R_{n-m}$，所以
#
# $$
# (R_m q)^\top (R_n k) = q^\top R_m^\top R_n\, k = q^\top R_{n-m}\, k ,
# $$
#
# **注意力分数只依赖相对位置 $n - m$**，而且旋转不改变向量长度。实现要点：
#
# - 只旋转 Q 和 K（分头之后，形状 `(B, H, T, d_k)`），**不旋转 V**；每一层都做，而不是只在输入层加一次；
# - 用逐元素乘法实现，不要真的构造 $d \times d$ 的旋转矩阵；
# - 配对方式有两种：本课和 RoFormer 论文、Meta 原版 LLaMA 代码一样用“相邻配对” $(2i, 2i+1)$（LLaMA 把相邻两维看成一个复数，
#   乘以一个模为 1 的复数来旋转）；GPT-NeoX 和 Hugging Face transformers 里的 Llama 实现用“前后半配对” $(i, i + d/2)$（`rotate_half`）。
#   两者只差每个头内特征的一个排列，同样正确：Hugging Face 转换 Meta 的 LLaMA 权重时，正是把 $W_Q$、$W_K$ 的行按这个排列重排，
#   才让 `rotate_half` 算出同样的分数。所以**加载别人的权重时，RoPE 的配对方式必须与权重的来源一致**（或者自己重排 $W_Q$、$W_K$），
#   否则程序照常运行，注意力分数却全错。
#
# 实现 `rope_frequencies(d, base=10000.0)`（返回 $\theta_i$，形状 `(d/2,)`）和 `apply_rope(x, positions=None, base=10000.0)`
# （`x (..., T, d)`，默认位置 `arange(T)`，返回同形状）。下面的检查不计分。

# %% exercise="rope_frequencies,apply_rope"

# %% check="apply_rope:apply_rope"

# %% [markdown]
# 用你的 `apply_rope` 验证相对位置性质：取一个固定的 $q$ 和 $k$，把 $q$ 放在位置 $m$、$k$ 放在位置 $n$，
# 算出所有 $(m, n)$ 的分数。RoPE 的分数矩阵每条对角线（同一个偏移 $m - n$）上是常数；
# 作为对比，右图把正弦位置编码**加**到 $q$、$k$ 上再做点积，分数同时依赖 $m$ 和 $n$。

# %%
try:
    gen = torch.Generator().manual_seed(7)
    T_demo, d_demo = 24, 16
    q_vec = torch.randn(d_demo, generator=gen, dtype=torch.float64)
    k_vec = torch.randn(d_demo, generator=gen, dtype=torch.float64)
    q_rot = apply_rope(q_vec.expand(T_demo, d_demo))            # (T, d): row m = q rotated to position m
    k_rot = apply_rope(k_vec.expand(T_demo, d_demo))            # (T, d): row n = k rotated to position n
    scores_rope = q_rot @ k_rot.T                               # (T, T): [m, n] = q_m . k_n
    diag_spread = max((torch.diagonal(scores_rope, off).max() - torch.diagonal(scores_rope, off).min()).item()
                      for off in range(-T_demo + 1, T_demo))
    print("RoPE: largest spread of q_m.k_n along one diagonal (same offset):", f"{diag_spread:.1e}")
    shifted = apply_rope(q_vec[None], torch.tensor([105])) @ apply_rope(k_vec[None], torch.tensor([100])).T
    print("q at 5, k at 0:", f"{scores_rope[5, 0].item():.6f}", "| q at 105, k at 100:", f"{shifted.item():.6f}")
    print("rotation keeps the norm:", torch.allclose(q_rot.norm(dim=-1), q_vec.norm().expand(T_demo)))
    pe_demo = sinusoidal_positional_encoding(T_demo, d_demo).double()          # (T, d)
    scores_abs = (q_vec + pe_demo) @ (k_vec + pe_demo).T                       # (T, T)
    plot_rope_scores(scores_rope, scores_abs)
    plt.show()
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# ## 11. ALiBi、T5 相对位置偏置与各方案对比
#
# **ALiBi**（Attention with Linear Biases，Press et al., 2022；BLOOM 采用）完全不碰嵌入和 Q、K，
# 直接在注意力分数上加一个随距离线性增长的惩罚：
#
# $$
# \mathrm{softmax}\!\left(\frac{q_i \cdot k_j}{\sqrt{d_k}} - m_h\, |i - j|\right),
# $$
#
# 每个头一个固定斜率 $m_h$（$H = 8$ 时为 $2^{-1}, 2^{-2}, \dots, 2^{-8}$ 的几何序列），没有可训练参数。
# 它相当于“软的局部注意力”：越远的 token 权重越小，斜率大的头看得近、斜率小的头看得远。在比训练更长的序列上测试时表现稳定。
#
# **T5 的相对位置偏置**（relative position bias，Raffel et al., 2020）同样不给输入加任何位置向量，而是在每个头的注意力分数上
# 加一个**可学习的标量** $b_h\big(\mathrm{bucket}(j - i)\big)$：相对距离先分桶（bucket），近处每个距离一个桶，远处按对数合并成越来越宽的桶
# （T5 默认 32 个桶，最远 128；双向注意力时前后方向各占一半），同一个桶共用一个偏置。它可以看成“可学习版的 ALiBi”：
# 每个头每个桶一个参数（T5 里各层共用这张小表），超过最远距离的 token 都落进最后一个桶。
# 常和它并列提到的 XLNet 沿用 Transformer-XL 的相对位置编码：把分数拆成“内容–内容”“内容–位置”等几项，
# 位置项用相对距离的正弦向量，同样不加到输入上。
#
# | 方案 | 绝对 / 相对 | 额外参数 | 注入位置 | 超出训练长度 | 代表模型 |
# | --- | --- | --- | --- | --- | --- |
# | 正弦 | 绝对（隐含相对：偏移 = 旋转） | 0 | 输入嵌入，相加一次 | 能算，但效果明显下降 | 原始 Transformer |
# | 可学习 | 绝对 | `max_len × d` | 输入嵌入，相加一次 | 不能超过 `max_len` | BERT、GPT-2 |
# | RoPE | 相对（分数只依赖 $n - m$） | 0 | 每层的 Q、K，旋转 | 比绝对编码好，但远超训练长度仍会退化，常配合位置插值、NTK/YaRN 等缩放 | Llama、Qwen |
# | T5 相对偏置 | 相对（分桶的距离） | 每头每桶一个标量（如 $32 \times H$） | 注意力分数，可学习偏置 | 能运行：远处都落进最后一个桶 | T5 |
# | ALiBi | 相对（距离惩罚） | 0 | 每层的注意力分数，偏置 | 外推表现最稳 | BLOOM |
#
# （别以为用了 RoPE 就能直接处理比训练时更长的序列：不加缩放技巧时并不成立，这也是长上下文模型要做 RoPE 缩放的原因。）

# %% [markdown]
# ## 12. 面试要点（Q&A）
#
# **Q1：Transformer 为什么需要位置编码？**
# 自注意力对输入顺序是置换等变的：打乱输入，输出只是同样打乱，权重矩阵变成 $PAP^\top$。没有位置信息，“猫吃鱼”和“鱼吃猫”中每个词的表示相同。
#
# **Q2：写出正弦位置编码的公式。** $\mathrm{PE}[pos, 2i] = \sin(pos / 10000^{2i/d})$，$\mathrm{PE}[pos, 2i+1] = \cos(pos / 10000^{2i/d})$；
# 偶数列 sin、奇数列 cos，同一对共用频率。低维高频、高维低频，波长从 $2\pi$ 到 $10000 \cdot 2\pi$。
#
# **Q3：为什么用 sin 和 cos 成对？** $\mathrm{PE}[pos + k] = M_k\, \mathrm{PE}[pos]$，$M_k$ 是只依赖 $k$ 的旋转矩阵，相对位置是线性变换；
# 点积 $\mathrm{PE}[p] \cdot \mathrm{PE}[p+k] = \sum_i \cos(\omega_i k)$ 只依赖偏移。另外值有界、无参数、任意位置可算。
#
# **Q4：位置编码是加还是拼接？为什么加不会“破坏”词义？** 原论文相加。高维空间里两类信号可以占据近似正交的子空间，后面的线性层能把它们分开；
# 拼接也可以，但增加维度和计算量。
#
# **Q5：可学习位置编码和正弦编码的区别？** 前者是 `nn.Embedding(max_len, d)` 参数，灵活但多参数、不能超过 `max_len`（BERT 的 512）；
# 后者固定、无参数、可算到任意长度，但超过训练长度效果也会变差。论文里两者效果相近。
#
# **Q6：RoPE 的原理？为什么是相对位置编码？** 把 Q、K 的每对特征按位置旋转角度 $m\theta_i$；$(R_m q)^\top (R_n k) = q^\top R_{n-m} k$，
# 分数只依赖相对位置；旋转保持范数；只作用于 Q、K，不作用于 V，每层都做。
#
# **Q7：RoPE 比正弦编码好在哪？** 相对位置直接体现在注意力分数里，而不是混在相加后的表示中；无参数；
# 长度外推比绝对编码好，但仍需位置插值 / NTK / YaRN 等缩放才能可靠地远超训练长度。
#
# **Q8：ALiBi 是什么？T5 的相对位置偏置呢？** ALiBi 在注意力分数上加 $-m_h |i - j|$ 的线性距离惩罚，每头斜率固定，无参数，外推表现好；
# T5 在分数上加的是按相对距离分桶、每头每桶一个的**可学习**标量。两者都不改输入嵌入，也不改 Q、K。
#
# **Q9：`PositionalEncoding` 里的表为什么用 `register_buffer`？** 不参与训练，但要随 `state_dict` 保存、随 `.to(device)` 移动。
#
# **Q10：输入比 `max_len` 长怎么办？** 切片 `[:, :T]` 只处理 `T ≤ max_len`；更长时要么构造时加大 `max_len`（正弦表可以直接重算），
# 要么报错；可学习表则只能截断输入或换成相对位置方案。
#
# **Q11：Decoder-only 模型不加位置编码能工作吗？** 因果掩码让第 $t$ 个位置只看到前 $t$ 个 token，本身带有顺序信息，
# 所以 NoPE 在一定程度上可行；双向的编码器则必须有位置编码。
#
# 下一章：位置编码解决了“顺序”，接下来是每一层里注意力之外的部分——前馈网络、残差连接和层归一化。
