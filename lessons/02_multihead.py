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
# # 02 多头注意力（Multi-Head Attention, MHA）
#
# 上一章的注意力只有“一个视角”：每个查询得到**一个**概率分布。这一章把 $d_{\text{model}}$ 维拆成 $H$ 个头（head），
# 每个头在自己的 $d_k = d_{\text{model}} / H$ 维子空间里独立做注意力，最后拼接再投影回来。
#
# **本章共 8 分**，只有一个练习 `MultiHeadAttention`，分 3 个评分单元格：
#
# | 评分单元格（grade_id） | 检查什么 | 分值 |
# | --- | --- | --- |
# | `mha_rejects_bad_heads` | `d_model` 不能被 `num_heads` 整除时报清楚的错 | 1 |
# | `mha_output_shapes` | 自注意力与交叉注意力的输出形状、参数量 $4d^2 + 4d$ | 2 |
# | `mha_matches_reference` | 每个头的权重、掩码、与参考实现数值一致 | 5 |
#
# 本章用到第 01 章的 `scaled_dot_product_attention`。为了让你即使还没做完第 01 章也能做这一章，
# 下面提供了一份参考实现（折叠着的只读单元格）；你的 `MultiHeadAttention` 直接调用它即可。
# 掩码约定与第 01 章相同：布尔张量，**True = 可以看**，可广播到 `(B, H, T_q, T_k)`。

# %%
# Setup: imports, seeds, and warning filters (so that a library warning does not clutter a check's report).
import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tutor.plots import plot_head_split, plot_heads

warnings.filterwarnings("ignore")
np.random.seed(0)
torch.manual_seed(0)
torch.set_printoptions(precision=3, sci_mode=False)
FINISH_FIRST = "完成上面的练习后再运行 / finish the exercise above first"

# %% [markdown]
# 下面是第 01 章 `scaled_dot_product_attention` 的参考实现（提供给你使用，不计分）：

# %% provided="earlier"

# %% [markdown]
# ## 1. 为什么要多个头
#
# 单头注意力里，一个查询只能给出**一个**权重分布，它必须在“该看主语”“该看相邻词”“该看指代对象”之间折中。
# 多头让同一个位置**同时**用几组不同的投影去提问：一个头可能学到语法关系（主谓宾），一个头学到语义相近的词，
# 一个头学到相对位置（左边一个词），一个头学到指代（代词指向谁）。
#
# $$
# \mathrm{MultiHead}(X_q, X_{kv}) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_H)\, W^O,\qquad
# \mathrm{head}_h = \mathrm{Attention}\!\left(X_q W^Q_h,\ X_{kv} W^K_h,\ X_{kv} W^V_h\right)
# $$
#
# 其中 $W^Q_h, W^K_h, W^V_h \in \mathbb{R}^{d_{\text{model}} \times d_k}$，$W^O \in \mathbb{R}^{H d_k \times d_{\text{model}}}$，
# 且 $H \cdot d_k = d_{\text{model}}$。
#
# - **自注意力（self-attention）**：$X_q = X_{kv}$，Q、K、V 来自同一序列（编码器、解码器的第一个注意力子层）。
# - **交叉注意力（cross-attention）**：$X_q$ 来自解码器，$X_{kv}$ 来自编码器的输出（memory），
#   即“解码器拿自己的状态去源序列里查信息”。$T_q$ 是目标长度，$T_k$ 是源长度，两者一般不相等。
#
# **头数不改变计算量和参数量。** $d_{\text{model}}$ 固定时，$H$ 个头各做 $n^2 d_k$ 次乘加，合计 $n^2 H d_k = n^2 d_{\text{model}}$，
# 与一个 $d_{\text{model}}$ 维的单头一样；四个投影矩阵的大小也与 $H$ 无关。另外 $d_{\text{model}}$ 必须能被 $H$ 整除，
# 例如 $d_{\text{model}} = 512,\ H = 6$ 就无法平均分头。
#
# ### 每个头多宽：$d_k$ 取 32–128 的经验从哪来
#
# $d_{\text{model}}$ 固定时，头越多，每个头越窄（$d_k = d_{\text{model}} / H$）。两头都有代价：
#
# - **$d_k$ 太小，一个头“看不清”。** 一个头靠 $q \cdot k$ 按内容挑键。$d_k$ 维里随机的键彼此并不正交：两个随机方向夹角的余弦
#   平均为 0，但标准差约为 $1/\sqrt{d_k}$（下面的输出先量这个），$d_k$ 越小，偶然“撞方向”的键越多。
#   分数 $q\cdot k/\sqrt{d_k}$ 的方差是 1，而与查询完全匹配的那个键的分数约为 $\sqrt{d_k}$——它要比其余 $T_k - 1$ 个键的分数
#   高出大约 $\ln T_k$ 以上，softmax 才能把权重集中到它身上。下面直接量：$T_k$ 个随机键（各分量方差 1，大致是 LayerNorm 之后、
#   初始化时的尺度），查询就等于其中一个键，它能分到多少权重？
# - **$d_k$ 太大，头太少。** 每个头已经看得很清楚之后，再加宽只是减少头数，能同时关注的关系变少。

# %% demo=true
gen_cos = torch.Generator().manual_seed(1)
for d_k_try in (4, 16, 64, 256):
    a, b = torch.randn(2, 10_000, d_k_try, generator=gen_cos)                                 # 10,000 random pairs, each (d_k,)
    cos = F.cosine_similarity(a, b, dim=-1)                                                  # (10000,)
    print(f"d_k = {d_k_try:3d}: cosine of two random directions: mean {cos.mean().item():+.3f}, "
          f"std {cos.std().item():.3f} (1/sqrt(d_k) = {1 / math.sqrt(d_k_try):.3f})")
gen_dk = torch.Generator().manual_seed(0)
d_k_values, key_counts, n_trials = [4, 8, 16, 32, 64, 128, 256], [64, 512, 4096], 50
print(" d_k | heads at d_model = 512 | weight on the matching key for T_k = " + " / ".join(map(str, key_counts)))
for d_k_try in d_k_values:
    shares = []
    for n_keys in key_counts:
        keys = torch.randn(n_trials, n_keys, d_k_try, generator=gen_dk)                     # (N, T_k, d_k)
        query = keys[:, :1]                                                                  # (N, 1, d_k): equal to key 0
        w = torch.softmax(query @ keys.transpose(-2, -1) / math.sqrt(d_k_try), dim=-1)       # (N, 1, d_k) @ (N, d_k, T_k) -> (N, 1, T_k)
        shares.append(w[:, 0, 0].mean().item())
    print(f"{d_k_try:4d} | {512 // d_k_try:22d} | " + "   ".join(f"{v:.2f}" for v in shares))

# %% [markdown]
# $d_k \le 16$ 时，即使查询与某个键一模一样，在 512 个键里它分到的权重也不到一成；$d_k = 64$ 时约七成，
# $d_k = 128$ 时在 4096 个键里仍有近九成；$d_k = 256$ 已经是 one-hot，再宽也没有可提升的了，而 $d_{\text{model}} = 512$ 时只剩 2 个头。
# 这是单位方差尺度下的快照：训练可以把 $W_Q$、$W_K$ 放大一些来弥补，所以它说明的是趋势，不是硬界限。
#
# 另一头的证据来自原论文表 3 的 (A) 组：$d_{\text{model}} = 512$、总计算量不变，只改头数（英德翻译开发集）：
#
# | $H$ | 1 | 4 | 8 | 16 | 32 |
# | --- | --- | --- | --- | --- | --- |
# | $d_k$ | 512 | 128 | 64 | 32 | 16 |
# | BLEU | 24.9 | 25.5 | 25.8 | 25.8 | 25.4 |
#
# 单头最差，头太多（$d_k = 16$）也变差，最好的在 $d_k = 32$–$64$。今天的大模型多取 $d_k = 64$ 或 $128$：
# BERT-base、GPT-2 是 64（第 00 章的表），Llama 2/3 的主力型号（7B、8B、13B、70B）是 128（Llama 3.2 1B 是 64）。

# %% [markdown]
# ## 2. 一个大投影 = $H$ 个小投影
#
# 实现时不需要 $3H$ 个小矩阵：用一个 `nn.Linear(d_model, d_model)` 一次算出所有头的查询，
# 输出的第 $h$ 段 $[h\,d_k,\ (h+1)\,d_k)$ 就是第 $h$ 个头的 $X W^Q_h$。
# （注意 `nn.Linear` 算的是 $x W^{\top} + b$，`weight` 的形状是 `(out_features, in_features)`，
# 所以数学里的 $W^Q$ 对应 `W_q.weight.T`。）下面验证这一点：

# %%
d_model_demo, H_demo = 8, 2
d_k_demo = d_model_demo // H_demo
proj = nn.Linear(d_model_demo, d_model_demo)
x_demo = torch.randn(1, 3, d_model_demo)                          # (B, T, d_model)
all_heads = proj(x_demo)                                          # (B, T, d_model)
per_head = [x_demo @ proj.weight[h * d_k_demo:(h + 1) * d_k_demo].T + proj.bias[h * d_k_demo:(h + 1) * d_k_demo]
            for h in range(H_demo)]                               # H tensors of (B, T, d_k)
print("one big projection == H small ones, concatenated:", torch.allclose(all_heads, torch.cat(per_head, dim=-1)))

# %% [markdown]
# 所以分头就是把最后一维 `d_model` 看成 `(H, d_k)`——**H 在外，d_k 在内**——再把头的维度挪到序列维前面，
# 得到 `(B, H, T, d_k)`，让第 01 章的注意力把 `(B, H)` 当作批次维并行计算所有头。

# %% [markdown]
# ## 3. 分头与合头：`view`、`transpose`、`contiguous`
#
# 这是手写 MHA 最容易出错的地方。用一个小张量看清楚：3 个 token，每个 4 维，分成 2 个头。
# 第 $t$ 个 token 的特征是 `4t, 4t+1, 4t+2, 4t+3`，头 0 应该拿到每个 token 的前两维。

# %%
B, T, H, d_k = 1, 3, 2, 2
d_model = H * d_k
x = torch.arange(B * T * d_model).view(B, T, d_model)            # (B, T, d_model)
print("x[0] =\n", x[0])
right = x.view(B, T, H, d_k).transpose(1, 2)                       # (B, T, H, d_k) -> (B, H, T, d_k)
wrong = x.view(B, H, T, d_k)                                       # same shape, scrambled content
print("right: head 0 =\n", right[0, 0])
print("wrong: head 0 =\n", wrong[0, 0])
plot_head_split(x[0], right[0], wrong[0])
plt.show()

# %% [markdown]
# 两种写法形状都是 `(B, H, T, d_k)`，程序不会报错，但直接 `view(B, H, T, d_k)` 的头 0 里，
# “第 1 个 token”其实是 token 0 的后半段——token 被拆散重组了（图中颜色表示每个数来自哪个 token：
# 正确的分法每一行只有一种颜色）。**形状对不代表内容对。**
#
# 合头时反过来：注意力的输出是一个新张量，内存按 `(B, H, T, d_k)` 排列。`transpose(1, 2)` 只改步长（stride），
# 不搬数据，得到的 `(B, T, H, d_k)` 在内存里不连续（not contiguous），`view` 无法把 `H, d_k` 两维合并：

# %%
heads_out = right.contiguous()                                     # like attention's output: laid out as (B, H, T, d_k)
swapped = heads_out.transpose(1, 2)                                # (B, T, H, d_k), strides changed, no copy
print("strides:", heads_out.stride(), "->", swapped.stride(), "| contiguous:", swapped.is_contiguous())
try:
    swapped.view(B, T, d_model)
except RuntimeError as err:
    print("view after transpose -> RuntimeError:", str(err).split(".")[0])
merged = swapped.contiguous().view(B, T, d_model)                  # (B, T, H, d_k) -> (B, T, d_model)
print("transpose + contiguous + view gives x back:", torch.equal(merged, x))
print("transpose + reshape gives x back:          ", torch.equal(swapped.reshape(B, T, d_model), x))
print("forgot the transpose (view straight from (B, H, T, d_k)) gives x back:",
      torch.equal(heads_out.view(B, T, d_model), x))

# %% [markdown]
# 小结：
#
# - **分头**：`view(B, T, H, d_k)` 再 `transpose(1, 2)`。这里先 `view` 的是投影的输出，它本身是连续的，所以不需要 `contiguous()`。
#   （你可能会担心分头这一步也得先 `contiguous()`：不需要，这样写是对的；会报错的是合头那一步。）
# - **合头**：`transpose(1, 2)` 后必须 `.contiguous().view(...)`，或者直接 `.reshape(...)`（必要时自动复制）。
# - **忘了转置回来**就直接 `view(B, T, d_model)` 不会报错，但把不同 token 的头拼到了一起——又一个“形状对、内容错”的 bug。

# %% [markdown]
# ### 选读：NumPy 版多头注意力（不计分）
#
# 面试里也常被要求用 NumPy 写 MHA。分头、合头的思路完全相同，只是 API 不同：
#
# - NumPy 没有 `view`，用 `reshape`；数组不连续时它**默默复制**，不会像 `view` 那样报错；
# - `np.transpose` / `arr.transpose(0, 2, 1, 3)` 要给出**所有轴**的新顺序（相当于 PyTorch 的 `permute`），
#   而 PyTorch 的 `transpose(1, 2)` 只交换两个轴；NumPy 里与它对应的是 `np.swapaxes(arr, 1, 2)`。
#
# 下面的函数从每个数组**自己的**形状读出长度（查询是 `T_q`，键和值是 `T_k`），
# 所以交叉注意力里也不会犯“K、V 用查询长度来分头”的错（第 4 节的形状追踪里还会看到这个坑）。

# %%
def split_heads_np(x, num_heads):
    """(B, T, d_model) -> (B, H, T, d_k); T is read from x itself (T_q for queries, T_k for keys/values)."""
    b, t, d = x.shape
    return x.reshape(b, t, num_heads, d // num_heads).transpose(0, 2, 1, 3)  # (B, T, H, d_k) -> (B, H, T, d_k)


def merge_heads_np(heads):
    """(B, H, T, d_k) -> (B, T, d_model): the exact inverse of split_heads_np."""
    b, h, t, d_k_ = heads.shape
    return heads.transpose(0, 2, 1, 3).reshape(b, t, h * d_k_)  # (B, T, H, d_k) -> (B, T, d_model)


rng = np.random.default_rng(0)
xq_np = rng.normal(size=(2, 5, 8))                         # (B, T_q, d_model)
xkv_np = rng.normal(size=(2, 7, 8))                        # (B, T_k, d_model): a different length
q_np, k_np = split_heads_np(xq_np, 2), split_heads_np(xkv_np, 2)
print("q:", q_np.shape, "| k:", k_np.shape)                # (2, 2, 5, 4) | (2, 2, 7, 4)
assert np.array_equal(merge_heads_np(q_np), xq_np), "合头应还原输入 / merging must give the input back"
assert np.array_equal(q_np[:, 0], xq_np[..., :4]), "头 0 是前 d_k 维 / head 0 is the first d_k features"
via_swapaxes = np.swapaxes(xq_np.reshape(2, 5, 2, 4), 1, 2)  # (B, T_q, H, d_k) -> (B, H, T_q, d_k)
assert np.array_equal(q_np, via_swapaxes), "swapaxes(1, 2) 应得到同样的结果 / swapaxes(1, 2) must agree"
out_np = np.ascontiguousarray(q_np)                         # like attention's output: laid out as (B, H, T_q, d_k)
swapped_np = out_np.transpose(0, 2, 1, 3)                   # (B, T_q, H, d_k), strides changed, no copy
print("round trip OK | transposed C-contiguous:", swapped_np.flags["C_CONTIGUOUS"],
      "| reshape still works (it copies):", swapped_np.reshape(2, 5, 8).shape)  # (B, T_q, d_model)

# %% [markdown]
# ## 4. 形状追踪
#
# 以原论文 base 配置 $d_{\text{model}} = 512,\ H = 8$（$d_k = 64$）、$B = 2$ 为例；交叉注意力里目标长度 64、源长度 128：
#
# | 步骤 | 自注意力（$T_q = T_k = 128$） | 交叉注意力（$T_q = 64,\ T_k = 128$） |
# | --- | --- | --- |
# | 输入 `x_q` / `x_kv` | `(2, 128, 512)` / `(2, 128, 512)` | `(2, 64, 512)` / `(2, 128, 512)` |
# | `W_q(x_q)` → 分头 `q` | `(2, 128, 512)` → `(2, 8, 128, 64)` | `(2, 64, 512)` → `(2, 8, 64, 64)` |
# | `W_k(x_kv)`、`W_v(x_kv)` → 分头 `k`、`v` | `(2, 8, 128, 64)` | `(2, 8, 128, 64)` |
# | 注意力权重 `attn` | `(2, 8, 128, 128)` | `(2, 8, 64, 128)` |
# | 每头输出 `attn @ v` | `(2, 8, 128, 64)` | `(2, 8, 64, 64)` |
# | 合头 | `(2, 128, 512)` | `(2, 64, 512)` |
# | `W_o` | `(2, 128, 512)` | `(2, 64, 512)` |
#
# 交叉注意力的输出长度跟着**查询**走（$T_q$），权重矩阵 `(T_q, T_k)` 表示每个目标位置对源序列的“对齐”。
# 注意 `k`、`v` 要用 `x_kv` 的长度 $T_k$ 来 `view`：若对 K、V 也用查询的长度，自注意力时碰巧能跑，交叉注意力一用就错。
#
# 掩码原样传给注意力函数：`(B, 1, 1, T_k)` 的填充掩码或 `(1, 1, T_q, T_k)` 的因果掩码在“头”这一维上广播，所有头共用同一个掩码。

# %% [markdown]
# ## 5. 练习：`MultiHeadAttention`（8 分）
#
# 要求（第 05–07 章和评分都依赖这些名字）：
#
# - `MultiHeadAttention(d_model, num_heads, dropout=0.0)`；`d_model % num_heads != 0` 时抛出 `ValueError`，信息里写清两个数；
# - 属性 `W_q, W_k, W_v, W_o`，各是 `nn.Linear(d_model, d_model)`（带偏置）；属性 `num_heads`、`d_k`；
# - `forward(x_q, x_kv, mask=None) -> (out, attn)`：`out (B, T_q, d_model)`，`attn (B, H, T_q, T_k)` 为每个头的权重；
# - 调用上面提供的 `scaled_dot_product_attention`，dropout 只作用在注意力权重上（把 `self.training` 传进去）；
#   `W_o` 之后**不要**再加 dropout——残差前的 dropout 属于第 05 章的层，`nn.MultiheadAttention` 也没有它。
#
# 不要调用 `nn.MultiheadAttention` 或 `F.scaled_dot_product_attention`（评分时会检测）。

# %% exercise="MultiHeadAttention"

# %% grade_id="mha_rejects_bad_heads" points=1
# Visible tests: a clear error when d_model is not divisible by num_heads; the per-head size.
try:
    MultiHeadAttention(512, 6)
except ValueError as err:
    print("ValueError:", err)
else:
    raise AssertionError("MultiHeadAttention(512, 6) 应抛出 ValueError / must raise ValueError")
_mha = MultiHeadAttention(512, 8)
assert _mha.num_heads == 8 and _mha.d_k == 64, "num_heads=8 时 d_k 应为 64 / with num_heads=8, d_k must be 64"

# %% grade_id="mha_output_shapes" points=2
# Visible tests: output shapes for self- and cross-attention, and the parameter count 4*d^2 + 4*d.
_g = torch.Generator().manual_seed(1)
_mha = MultiHeadAttention(16, 4)
for _name in ("W_q", "W_k", "W_v", "W_o"):
    _lin = getattr(_mha, _name, None)
    assert isinstance(_lin, nn.Linear) and _lin.in_features == _lin.out_features == 16 and _lin.bias is not None, \
        f"{_name} 应为 nn.Linear(d_model, d_model) / {_name} must be nn.Linear(d_model, d_model)"
_n_params = sum(p.numel() for p in _mha.parameters())
assert _n_params == 4 * 16 * 16 + 4 * 16, f"参数量应为 4d²+4d = 1088 / expected 1088 parameters, got {_n_params}"
_x = torch.randn(2, 5, 16, generator=_g)                  # (B, T, d_model)
_out, _attn = _mha(_x, _x)
assert _out.shape == (2, 5, 16), f"自注意力 out 形状应为 (2, 5, 16) / self-attention out must be (2, 5, 16), got {tuple(_out.shape)}"
assert _attn.shape == (2, 4, 5, 5), f"attn 形状应为 (B, H, T, T) = (2, 4, 5, 5) / attn must be (2, 4, 5, 5), got {tuple(_attn.shape)}"
_y = torch.randn(2, 3, 16, generator=_g)                  # (B, T_q, d_model): queries from another sequence
_out, _attn = _mha(_y, _x)
assert _out.shape == (2, 3, 16), f"交叉注意力 out 形状应为 (B, T_q, d_model) = (2, 3, 16) / got {tuple(_out.shape)}"
assert _attn.shape == (2, 4, 3, 5), f"交叉注意力 attn 形状应为 (B, H, T_q, T_k) = (2, 4, 3, 5) / got {tuple(_attn.shape)}"
assert torch.allclose(_attn.sum(-1), torch.ones(2, 4, 3)), "每个头每个查询的权重之和应为 1 / weights must sum to 1 per head and query"

# %% grade_id="mha_matches_reference" points=5 check="MultiHeadAttention:MultiHeadAttention"
# Visible tests: head h must be the attention of the h-th slice of the projections; masks are shared by all heads.
_g = torch.Generator().manual_seed(2)
_mha = MultiHeadAttention(12, 3).eval()
_y = torch.randn(2, 4, 12, generator=_g)                  # (B, T_q, d_model)
_x = torch.randn(2, 6, 12, generator=_g)                  # (B, T_k, d_model)
_pad = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, None, :]  # (B, 1, 1, T_k)
with torch.no_grad():
    _out, _attn = _mha(_y, _x, _pad)
    for _h in range(3):
        _rows = slice(4 * _h, 4 * (_h + 1))               # output features of head h (d_k = 4)
        _q_h = _y @ _mha.W_q.weight[_rows].T + _mha.W_q.bias[_rows]  # (B, T_q, d_k)
        _k_h = _x @ _mha.W_k.weight[_rows].T + _mha.W_k.bias[_rows]  # (B, T_k, d_k)
        _scores = _q_h @ _k_h.transpose(-2, -1) / math.sqrt(4)       # (B, T_q, T_k)
        _w_h = torch.softmax(_scores.masked_fill(~_pad[:, 0], float("-inf")), dim=-1)
        assert torch.allclose(_attn[:, _h], _w_h, atol=1e-5), \
            f"第 {_h} 个头的权重不对（分头方式？缩放？）/ head {_h} weights are wrong (head split? scaling?)"
assert torch.all(_attn[1, :, :, 4:] == 0), "被遮挡的键在每个头里权重都应为 0 / blocked keys must get weight 0 in every head"
# Self-attention without a mask treats the input as a set: permuting the tokens permutes the outputs.
_perm = torch.tensor([3, 0, 5, 1, 4, 2])
with torch.no_grad():
    _out_x, _ = _mha(_x, _x)
    _out_p, _ = _mha(_x[:, _perm], _x[:, _perm])
assert torch.allclose(_out_p, _out_x[:, _perm], atol=1e-5), \
    "打乱 token 顺序后输出应同样打乱（分头/合头把不同 token 混在一起了？）/ permuting tokens must permute outputs (does the head split/merge mix tokens?)"
# With W_v = W_o = identity (no biases), head h's slice of the output is attn_h @ (slice h of x_kv).
with torch.no_grad():
    for _lin in (_mha.W_v, _mha.W_o):
        _lin.weight.copy_(torch.eye(12))
        _lin.bias.zero_()
    _out, _attn = _mha(_y, _x, _pad)
    for _h in range(3):
        _rows = slice(4 * _h, 4 * (_h + 1))
        _expected = _attn[:, _h] @ _x[..., _rows]         # (B, T_q, T_k) @ (B, T_k, d_k) -> (B, T_q, d_k)
        assert torch.allclose(_out[..., _rows], _expected, atol=1e-5), \
            f"W_v = W_o = I 时输出第 {_h} 段应为 attn_{_h} @ x_kv 的第 {_h} 段（V 是否来自 x_kv？合头顺序？）/ " \
            f"with W_v = W_o = I, output slice {_h} must be attn_{_h} @ slice {_h} of x_kv (values from x_kv? head merge order?)"
# If every value vector is the same, any weighted average of them is that vector: all output rows are equal.
with torch.no_grad():
    _mha.W_v.weight.zero_()
    _mha.W_v.bias.fill_(0.3)
    _out, _ = _mha(_y, _x, _pad)
assert torch.allclose(_out, _out[:, :1].expand_as(_out), atol=1e-6), \
    "W_v 为 0 时所有输出行应相同（V 是否经过 W_v？）/ with W_v = 0 all output rows must be equal (do values go through W_v?)"
# The last step is the output projection W_o.
with torch.no_grad():
    _mha.W_o.weight.zero_()
    _mha.W_o.bias.fill_(0.5)
    _out, _ = _mha(_y, _x, _pad)
assert torch.allclose(_out, torch.full_like(_out, 0.5)), "输出应经过 W_o / the output must go through W_o"

# %% [markdown]
# ## 6. 参数量：$4d^2 + 4d$
#
# 四个 `nn.Linear(d, d)`，每个 $d^2$ 个权重加 $d$ 个偏置：
#
# $$
# \underbrace{3(d^2 + d)}_{W_Q,\ W_K,\ W_V} + \underbrace{d^2 + d}_{W_O} = 4d^2 + 4d .
# $$
#
# 与头数 $H$ 无关。$d = 512$ 时是 $1{,}050{,}624$；常说的“约 $4d^2 = 1{,}048{,}576$”是不计偏置的近似。
# `nn.MultiheadAttention` 把三个输入投影合成一个 `in_proj_weight (3d, d)`，参数总数相同。

# %%
try:
    rows = []
    for d, h in ((16, 4), (512, 8), (1024, 16)):
        ours = sum(p.numel() for p in MultiHeadAttention(d, h).parameters())
        torch_count = sum(p.numel() for p in nn.MultiheadAttention(d, h, batch_first=True).parameters())
        rows.append(f"{d:9d} {h:2d} | {4 * d * d + 4 * d:9,d} | {ours:9,d} | {torch_count:9,d}")
    print("  d_model  H |  4d^2+4d  | ours      | nn.MultiheadAttention")
    print("\n".join(rows))
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# ## 7. 每个头的注意力
#
# 下面用随机初始化（未训练）的 MHA 画出每个头的权重。为了让未训练的头之间差别看得清，输入放大了 4 倍；
# 训练后的头会形成各自稳定的模式（第 07 章会看到训练好的交叉注意力沿对角线对齐）。
# 左边是带因果掩码的自注意力（每个头的右上三角都是 0），右边是交叉注意力：6 个源位置中最后 2 个是 `<pad>`，所有头都不看它们。

# %%
src_tokens = ["s0", "s1", "s2", "s3", "<pad>", "<pad>"]
tgt_tokens = ["t0", "t1", "t2", "t3", "t4"]
gen = torch.Generator().manual_seed(3)
src = 4 * torch.randn(1, len(src_tokens), 32, generator=gen)                         # (B, T_k, d_model)
tgt = 4 * torch.randn(1, len(tgt_tokens), 32, generator=gen)                         # (B, T_q, d_model)
causal = torch.tril(torch.ones(len(tgt_tokens), len(tgt_tokens), dtype=torch.bool))  # (T_q, T_q)
src_pad = torch.tensor([[True, True, True, True, False, False]])[:, None, None, :]    # (B, 1, 1, T_k)
try:
    torch.manual_seed(3)
    mha_demo = MultiHeadAttention(32, 4).eval()
    with torch.no_grad():
        _, attn_self = mha_demo(tgt, tgt, causal)                              # (B, H, T_q, T_q)
        _, attn_cross = mha_demo(tgt, src, src_pad)                            # (B, H, T_q, T_k)
    plot_heads(attn_self[0], x_labels=tgt_tokens, y_labels=tgt_tokens, title="Self-attention per head (causal mask)")
    plot_heads(attn_cross[0], x_labels=src_tokens, y_labels=tgt_tokens,
               title="Cross-attention per head (queries: target, keys: source with padding)")
    plt.show()
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# ## 8. 与 `nn.MultiheadAttention` 逐位相等
#
# 把你的四个投影的权重拷进 PyTorch 的 `nn.MultiheadAttention(batch_first=True)`：它的 `in_proj_weight` 是
# `W_q, W_k, W_v` 的权重按行拼接 `(3d, d)`，`out_proj` 对应 `W_o`。然后在 float64 下比较输出和每个头的权重。
#
# 几个接口差异要特别当心：
#
# - `nn.MultiheadAttention` 的布尔掩码 **True = 遮挡**，与我们的约定相反（第 00 章第 2 节），所以传 `attn_mask=~causal`；
#   填充用单独的参数 `key_padding_mask (B, T_k)`，同样 True = 遮挡；
# - 它的 `attn_mask` 若是 3 维，形状必须是 `(B·num_heads, T_q, T_k)`，第 0 维按 `b·num_heads + h` 排列
#   （用 `repeat_interleave(num_heads, dim=0)` 构造）；常见错误是直接传 `(B, T, T)`，`num_heads > 1` 时会报错。
#   只按样本区分的填充，交给 `key_padding_mask (B, T_k)` 更简单（本节最后一个单元格验证这两点）；
# - 它默认返回**所有头的平均**权重，要每个头的权重需传 `average_attn_weights=False`；
#   它的 `forward(query, key, value)` 分开接收 K、V 的输入，我们的 `x_kv` 同时充当两者；
# - `need_weights` 默认是 `True`：为了把权重矩阵交给你，它必须把 $(B, H, T_q, T_k)$ 的权重实实在在算出来存下。
#   不需要权重时（训练、推理通常都不需要）传 `need_weights=False`：第二个返回值是 `None`，输出不变，
#   PyTorch 就可以走不存权重矩阵的融合内核（第 09 章实测它省下的时间和内存）。本节最后一个单元格也验证这一点。

# %%
def copy_into_torch_mha(mha, d_model, num_heads):
    """An nn.MultiheadAttention (float64, batch_first) carrying the weights of our MultiHeadAttention."""
    ref = nn.MultiheadAttention(d_model, num_heads, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]))  # (3d, d)
        ref.in_proj_bias.copy_(torch.cat([mha.W_q.bias, mha.W_k.bias, mha.W_v.bias]))          # (3d,)
        ref.out_proj.weight.copy_(mha.W_o.weight)                                              # (d, d)
        ref.out_proj.bias.copy_(mha.W_o.bias)                                                  # (d,)
    return ref.eval()


try:
    torch.manual_seed(4)
    ours = MultiHeadAttention(32, 4).double().eval()
    theirs = copy_into_torch_mha(ours, 32, 4)
    tgt64, src64 = tgt.double(), src.double()
    with torch.no_grad():
        out_a, w_a = ours(tgt64, tgt64, causal)
        out_b, w_b = theirs(tgt64, tgt64, tgt64, attn_mask=~causal, average_attn_weights=False)
        print("self-attention + causal mask:  outputs equal:", torch.allclose(out_a, out_b, atol=1e-12, rtol=0),
              "| per-head weights equal:", torch.allclose(w_a, w_b, atol=1e-12, rtol=0))
        out_a, w_a = ours(tgt64, src64, src_pad)
        out_b, w_b = theirs(tgt64, src64, src64, key_padding_mask=~src_pad[:, 0, 0], average_attn_weights=False)
        print("cross-attention + padding mask: outputs equal:", torch.allclose(out_a, out_b, atol=1e-12, rtol=0),
              "| per-head weights equal:", torch.allclose(w_a, w_b, atol=1e-12, rtol=0))
        nothing = torch.zeros(len(tgt_tokens), len(src_tokens), dtype=torch.bool)
        nothing[0] = True                                  # only query 0 may attend; queries 1.. see nothing
        out_a, _ = ours(tgt64, src64, nothing)
        out_b, _ = theirs(tgt64, src64, src64, attn_mask=~nothing)
        print("rows that see nothing -> ours has NaN:", bool(out_a.isnan().any()),
              "| nn.MultiheadAttention has NaN:", bool(out_b.isnan().any()))
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# 最后一行说明了第 01 章的约定为什么重要：一行什么都看不到时，`nn.MultiheadAttention`（默认 `need_weights=True`）输出 NaN，
# 而我们的注意力给出 0 权重，MHA 的输出就是 `W_o` 的偏置——有限、可训练，不会把 NaN 传进梯度。
#
# 再验证上面关于 3 维 `attn_mask` 的说法：`(B, T_q, T_k)` 的掩码被拒绝；按头复制成 `(B·num_heads, T_q, T_k)` 后，
# 结果与用 `key_padding_mask` 表达同一个填充完全相同；`need_weights=False` 不返回权重，输出相同。
# （这里用一个独立的 `nn.MultiheadAttention`，不依赖你的练习。）

# %% demo=true
# nn.MultiheadAttention's 3-D attn_mask: one (T_q, T_k) mask per (sample, head), and True = blocked.
torch.manual_seed(5)
torch_mha = nn.MultiheadAttention(32, 4, batch_first=True).eval()
blocked = (~src_pad[:, 0]).expand(-1, len(tgt_tokens), -1)     # (B, T_q, T_k), True = blocked
with torch.no_grad():
    try:
        torch_mha(tgt, src, src, attn_mask=blocked)
    except RuntimeError as err:
        print("attn_mask (B, T_q, T_k)     -> RuntimeError:", str(err))
    per_head = blocked.repeat_interleave(4, dim=0)             # (B * num_heads, T_q, T_k)
    out_3d, _ = torch_mha(tgt, src, src, attn_mask=per_head)
    out_kpm, _ = torch_mha(tgt, src, src, key_padding_mask=~src_pad[:, 0, 0])
    out_nw, w_nw = torch_mha(tgt, src, src, key_padding_mask=~src_pad[:, 0, 0], need_weights=False)
print("attn_mask (B*H, T_q, T_k)   -> same output as key_padding_mask:", torch.allclose(out_3d, out_kpm, atol=1e-6))
print("need_weights=False          -> weights:", w_nw, "| same output:", torch.allclose(out_nw, out_kpm, atol=1e-6))

# %% [markdown]
# ## 9. 易错点清单
#
# | 错误 | 现象 |
# | --- | --- |
# | 分头直接 `view(B, H, T, d_k)`，没有先 `view(B, T, H, d_k)` 再转置 | 不报错，token 被打散，结果错 |
# | 合头忘了 `transpose(1, 2)` | 不报错，不同 token 的头被拼在一起 |
# | 转置后直接 `view` | `RuntimeError`：用 `.contiguous().view` 或 `.reshape` |
# | K、V 用查询长度 `T_q` 来 `view` | 自注意力正常，交叉注意力报错或错位 |
# | 交叉注意力里 Q 用了编码器输出、或 K/V 互换 | 形状可能都对，语义全错：Q 来自解码器，K 和 V 都来自编码器 |
# | 忘了输出投影 `W_o` | 各头之间没有交互，参数量少了 $d^2 + d$ |
# | 混用掩码约定（`nn.MultiheadAttention` 是 True = 遮挡） | 模型只看 padding、不看真实 token |
# | 给 `nn.MultiheadAttention` 传 `(B, T_q, T_k)` 的 3 维 `attn_mask` | `num_heads > 1` 时报形状错误：应为 `(B·num_heads, T_q, T_k)` |
# | 每个头用 $\sqrt{d_{\text{model}}}$ 而不是 $\sqrt{d_k}$ 缩放 | 分数被多缩小了 $\sqrt{H}$ 倍，注意力过于平均 |
# | `d_model % num_heads != 0` 仍然硬分 | 用 `assert` 或干脆不检查，得到难懂的 `view` 报错；应抛出写清原因的 `ValueError` |

# %% [markdown]
# ## 10. 面试要点（Q&A）
#
# **Q1：为什么用多头，而不是一个大头？**
# 一个头的 softmax 只能给出一个分布，只能在多种关系之间折中；多个头在不同子空间里各自注意，同一位置能同时关注语法、语义、位置、指代等不同关系，
# 再由 $W^O$ 融合。计算量和参数量与单个 $d_{\text{model}}$ 维的头相同。
#
# **Q2：头数越多越好吗？**
# 不是。$d_{\text{model}}$ 固定时，头数翻倍不增加总算力，只让 $d_k$ 减半；$d_k$ 太小（如 16）一个头在很多键里“看不清”
# （第 1 节的测量），原论文表 3 里 $d_k = 16$ 也比 64 差。经验范围 $d_k = 32$–$128$，常见 64 或 128。
#
# **Q3：MHA 的参数量？** $4d^2 + 4d$（含偏置）；$d = 512$ 时 1,050,624，不含偏置约 $4d^2 \approx 1.05\text{M}$，与头数无关。
#
# **Q4：说出 MHA 的形状变化。**
# `(B, T, d) -> W_q -> (B, T, d) -> view (B, T, H, d_k) -> transpose (B, H, T, d_k)`；
# 注意力 `(B, H, T_q, T_k)`；输出 `(B, H, T_q, d_k) -> transpose (B, T_q, H, d_k) -> contiguous().view (B, T_q, d) -> W_o`。
#
# **Q5：为什么要 `contiguous()`？** `transpose` 只改步长不搬数据，`view` 要求内存布局能直接解释成新形状；
# 合头时转置后的张量不连续，需要先 `contiguous()`（或用 `reshape`）。
#
# **Q6：自注意力和交叉注意力的区别？** Q、K、V 是否来自同一序列。交叉注意力里 Q 来自解码器、K/V 来自编码器输出，
# 权重形状 `(B, H, T_tgt, T_src)`，可以看作软对齐（soft alignment）。
#
# **Q7：掩码在多头里怎么用？** 在头这一维上广播（形状 `(B, 1, 1, T_k)` 或 `(1, 1, T, T)`），所有头共用；
# 注意 `nn.MultiheadAttention` 的布尔掩码是 True = 遮挡。
#
# **Q8：$W^O$ 有什么用？** 拼接只是把各头结果并排放着；$W^O$ 把它们线性混合回 $d_{\text{model}}$ 维，让头之间的信息交互。
#
# **Q9：MHA 的复杂度？** 与单头相同：注意力 $O(n^2 d)$，投影 $O(n d^2)$；权重矩阵显存 $O(B H n^2)$。
#
# 下一章：注意力对输入顺序一无所知——把 token 打乱，输出也只是跟着打乱。位置编码（positional encoding）来补上顺序信息。
