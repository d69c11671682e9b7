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
# # 05 掩码、编码器层与解码器层（Masks, Encoder Layer, Decoder Layer）
#
# 前四章造好了零件：注意力、多头注意力、位置编码、FFN 和 LayerNorm。这一章把它们装成 Transformer 的两种“层”：
#
# - **编码器层（encoder layer）**：自注意力 + FFN，每个子层后接残差和 LayerNorm（Post-LN）；
# - **解码器层（decoder layer）**：带因果掩码的自注意力 + 交叉注意力（cross-attention）+ FFN，三个子层。
#
# 在此之前先写两个掩码函数：**填充掩码**（padding mask）和**因果掩码（causal mask）**。它们只有一两行，
# 却是整个模型里最容易“不报错、结果错”的地方。
#
# **本章共 14 分**，6 个评分单元格：
#
# | 练习 | 评分单元格（grade_id） | 检查什么 | 分值 |
# | --- | --- | --- | --- |
# | `make_pad_mask` | `pad_mask_hides_keys_only` | 形状 `(B, 1, 1, T)`，只遮挡 `<pad>` 键，不遮挡查询行 | 2 |
# | `make_subsequent_mask` | `causal_mask_blocks_future` | 下三角（含对角线），形状 `(1, 1, T, T)` | 2 |
# | `EncoderLayer` | `encoder_layer_ignores_padding` | 形状、属性名，`<pad>` 位置的内容不影响真实位置 | 1 |
# | `EncoderLayer` | `encoder_layer_matches_reference` | Post-LN 的顺序，与参考实现数值一致 | 3 |
# | `DecoderLayer` | `decoder_layer_is_causal` | 形状，看不到未来、看不到源序列的 `<pad>` | 2 |
# | `DecoderLayer` | `decoder_layer_matches_reference` | 三个子层的顺序与输入，与参考实现数值一致 | 4 |
#
# 第 01–04 章的组件（`scaled_dot_product_attention`、`MultiHeadAttention`、`FeedForward`、`LayerNorm`、
# `ResidualLayerNorm`）以参考实现的形式在下面提供（折叠的只读单元格），所以前面几章没做完也能做这一章，
# 前面的错误也不会连带扣分。掩码约定全课程统一：**布尔张量，True = 可以看（may attend）**，可广播到 `(B, H, T_q, T_k)`。

# %%
# Setup: imports, seeds, and warning filters (so that a library warning does not clutter a check's report).
import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tutor.plots import plot_heads, plot_mask_row

warnings.filterwarnings("ignore")
np.random.seed(0)
torch.manual_seed(0)
torch.set_printoptions(precision=3, sci_mode=False)
FINISH_FIRST = "完成上面的练习后再运行 / finish the exercise above first"

# %% [markdown]
# 第 01–04 章组件的参考实现（提供给你使用，不计分；展开可阅读）：

# %% provided="earlier"

# %% [markdown]
# ## 1. 填充掩码：只遮挡键（key），不遮挡查询（query）
#
# 一个批次里的句子长短不一，短句在末尾补 `<pad>`（本课程 `pad_id = 0`）。注意力里 `<pad>` 只有一个要求：
# **任何查询都不能从 `<pad>` 键取信息**。所以填充掩码只依赖键的位置：
#
# $$
# M_{\text{pad}}[b, 0, 0, j] = \big(\text{tokens}[b, j] \ne \text{pad\_id}\big), \qquad \text{形状 } (B, 1, 1, T)
# $$
#
# 两个长度为 1 的轴分别留给头 $H$ 和查询位置 $T_q$：广播到分数 `(B, H, T_q, T_k)` 时，每个头、每个查询都共用同一行“哪些键可见”。
# 画成图，遮挡的是**整列**。`<pad>` 位置作为**查询**照样计算，它的输出没人用（后面的层不会从 `<pad>` 键读它，
# 损失函数也忽略它），所以没有必要遮挡。
#
# ### 把查询行也遮挡会怎样
#
# 常见错误：把查询行也一起遮挡，`mask = q_visible & k_visible`，形状 `(B, 1, T_q, T_k)`。
# 这样 `<pad>` 查询所在的行**一个键都看不见**。再配上最常见的写法 `masked_fill(~mask, -inf)` + softmax，
# 这一行的 softmax 是 $e^{-\infty} / \sum e^{-\infty} = 0/0$，得到 NaN。更糟的是，下一层里这些 NaN 位置作为**键和值**出现：
# 即使它们的权重是 0，`0 × NaN` 仍是 NaN，于是**所有**位置都变成 NaN。下面用两层最朴素的注意力演示：

# %%
def naive_attention(x, mask):
    """Single-head self-attention the common way: masked_fill(-inf), then softmax (no projections)."""
    scores = x @ x.transpose(-2, -1) / math.sqrt(x.size(-1))     # (B, T, d) @ (B, d, T) -> (B, T, T)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights @ x                                            # (B, T, T) @ (B, T, d) -> (B, T, d)


tokens_demo = torch.tensor([[5, 8, 3, 0, 0]])                     # (B=1, T=5): two <pad> at the end
is_real = tokens_demo != 0                                        # (B, T)
rows_and_cols = is_real[:, :, None] & is_real[:, None, :]         # (B, T_q, T_k): query rows masked too (wrong)
keys_only = is_real[:, None, :].expand(-1, 5, -1)                 # (B, T_q, T_k): padding hides keys only
x_demo = torch.randn(1, 5, 4, generator=torch.Generator().manual_seed(0))  # (B, T, d)
for name, mask in (("rows and columns masked", rows_and_cols), ("keys only", keys_only)):
    h1 = naive_attention(x_demo, mask)
    h2 = naive_attention(h1, mask)
    print(f"{name:24s} | NaN rows after layer 1: {h1.isnan().any(-1)[0].tolist()}")
    print(f"{'':24s} | NaN rows after layer 2: {h2.isnan().any(-1)[0].tolist()}")
names_demo = ["5", "8", "3", "<pad>", "<pad>"]
plot_mask_row([rows_and_cols[0], keys_only[0]], ["rows and columns masked (wrong)", "keys only (right)"],
              x_labels=names_demo, y_labels=names_demo, title="Two padding masks for the tokens [5, 8, 3, <pad>, <pad>]")
plt.show()

# %% [markdown]
# 左图最后两行一个可见的键都没有。第一种写法在第 1 层只有这两个 `<pad>` 行是 NaN，到第 2 层就“传染”给了全部 5 个位置，损失和梯度随之全是 NaN。
# 只遮挡键的写法，每一行至少有一个真实的键可看，不会出现全被遮挡的行（单用填充掩码时如此。唯一的例外出现在与因果掩码组合、序列左侧补齐时，第 3 节末尾会讲到）。
#
# （第 01 章的 `scaled_dot_product_attention` 对全被遮挡的行返回 0 而不是 NaN，所以即使遮了查询行，在本课程里也不会爆；
# 但那只是兜底。约定仍是：填充掩码只管键。`nn.MultiheadAttention` 的 `key_padding_mask` 也是同一个思路——名字里就写着 key。）
#
# ### 练习 1：`make_pad_mask(tokens, pad_id=0)`（2 分）
#
# 输入 `(B, T)` 的 LongTensor，返回 `(B, 1, 1, T)` 的布尔张量，`True` 表示这个键是真实 token。一行就够。

# %% exercise="make_pad_mask"

# %% grade_id="pad_mask_hides_keys_only" points=2 check="make_pad_mask:make_pad_mask"
# Visible tests: bool (B, 1, 1, T), True = real token, honours pad_id, and no query row is ever fully hidden.
_tokens = torch.tensor([[5, 6, 7, 0, 0],
                        [3, 4, 5, 6, 7]])
_m = make_pad_mask(_tokens)
assert isinstance(_m, torch.Tensor) and _m.dtype == torch.bool, "应返回布尔张量 / must return a bool tensor"
assert _m.shape == (2, 1, 1, 5), f"形状应为 (B, 1, 1, T) = (2, 1, 1, 5) / shape must be (2, 1, 1, 5), got {tuple(_m.shape)}"
assert torch.equal(_m[:, 0, 0], torch.tensor([[True, True, True, False, False], [True] * 5])), \
    "True 应表示真实 token、False 表示 <pad>（约定：True = 可以看）/ True must mark real tokens, False <pad>"
assert torch.equal(make_pad_mask(torch.tensor([[9, 1, 9]]), pad_id=9)[0, 0, 0], torch.tensor([False, True, False])), \
    "应使用参数 pad_id / must use the pad_id argument"
_rows = _m.expand(2, 4, 5, 5)                                   # broadcast to scores (B, H, T_q, T_k)
assert torch.all(_rows[0].sum(-1) == 3), \
    "每个查询行（包括 <pad> 的行）都应看到 3 个真实键：只遮挡键，不遮挡查询 / every query row must see the 3 real keys"

# %% [markdown]
# ## 2. 因果掩码：只能看自己和过去
#
# 解码器训练时一次输入整句目标序列，但位置 $i$ 预测第 $i+1$ 个 token 时，不能看到位置 $i+1, i+2, \dots$ 的 token，否则就是抄答案。
# 因果掩码（causal mask，也叫 look-ahead / subsequent mask）让查询 $i$ 只看键 $j \le i$：
#
# $$
# M_{\text{causal}}[i, j] = (j \le i), \qquad \text{形状 } (1, 1, T, T)
# $$
#
# 也就是**包括对角线**的下三角。两个常见的误解：
#
# - “位置 $i$ 只能看 $0$ 到 $i-1$”——错。那样位置 0 一个键都看不到（又是全被遮挡的行），而且每个位置都看不到自己刚输入的那个 token。
#   位置 $i$ 的输入本身就是已知的（训练时它是右移一位后的目标 `tgt_in`，推理时是上一步生成的 token），看自己不算作弊。
# - “因果掩码是上三角”——看你用哪种约定。不少代码用 `torch.triu(ones, diagonal=1)` 且 **1 = 遮挡**（第 00 章第 2 节）：
#   那是**被遮挡**的严格上三角，正好是我们这个掩码的补集：`~triu(ones, 1) == tril(ones)`。两种写法等价，混用就全反了。

# %%
T_demo = 5
tril = torch.tril(torch.ones(T_demo, T_demo, dtype=torch.bool))          # ours: True = may attend
triu_blocked = torch.triu(torch.ones(T_demo, T_demo), diagonal=1).bool()  # the other convention: True = blocked
print("tril (True = may attend):\n", tril.int())
print("~triu(ones, diagonal=1) equals tril:", torch.equal(~triu_blocked, tril))

# %% [markdown]
# ### 练习 2：`make_subsequent_mask(T, device=None)`（2 分）
#
# 返回 `(1, 1, T, T)` 的布尔下三角（含对角线），建在 `device` 上（推理时序列在 GPU 上，掩码也要在）。

# %% [markdown]
# <details><summary>提示 / hint（卡住了再展开 / open when stuck）</summary>
#
# - `torch.tril` 保留一个矩阵的下三角（含对角线），其余位置置 0（布尔矩阵则置 `False`）。
#   / `torch.tril` keeps the lower triangle, diagonal included, and zeroes the rest.
# - 让它作用在一个 `T × T`、全为 `True` 的布尔矩阵上；建这个矩阵时就传入 `dtype` 和 `device`，之后不用再转换。
#   / Apply it to a `T × T` all-True bool matrix created with the right `dtype` and `device`.
# - 最后在前面补出两个长度为 1 的轴（`x[None, None]` 或两次 `unsqueeze(0)`），得到 `(1, 1, T, T)`。
#   / Add two leading singleton axes to get `(1, 1, T, T)`.
#
# </details>

# %% exercise="make_subsequent_mask"

# %% grade_id="causal_mask_blocks_future" points=2 check="make_subsequent_mask:make_subsequent_mask"
# Visible tests: bool (1, 1, T, T), lower triangle including the diagonal, on the requested device.
_c = make_subsequent_mask(4)
assert isinstance(_c, torch.Tensor) and _c.dtype == torch.bool, "应返回布尔张量 / must return a bool tensor"
assert _c.shape == (1, 1, 4, 4), f"形状应为 (1, 1, T, T) / shape must be (1, 1, 4, 4), got {tuple(_c.shape)}"
assert torch.all(_c[0, 0].diagonal()), "对角线应为 True：位置 i 可以看自己 / the diagonal must be True (position i sees itself)"
assert not torch.any(torch.triu(_c[0, 0].int(), diagonal=1)), "对角线以上应为 False：不能看未来 / above the diagonal must be False (no future)"
assert torch.equal(_c[0, 0].sum(-1), torch.tensor([1, 2, 3, 4])), "查询 i 应看到 i + 1 个键 / query i must see i + 1 keys"
assert torch.equal(make_subsequent_mask(1), torch.ones(1, 1, 1, 1, dtype=torch.bool)), "T = 1 时是 [[True]] / T = 1 gives [[True]]"
assert make_subsequent_mask(3, device=torch.device("cpu")).device.type == "cpu", "应建在给定 device 上 / must live on the given device"

# %% [markdown]
# ### 滑动窗口掩码（sliding-window mask）
#
# 因果掩码让查询 $i$ 看 $0..i$ 的所有键，代价随长度平方增长。Mistral 等用因果的**滑动窗口**：查询 $i$ 只看最近的 $w$ 个键，
# 即 $i - w < j \le i$（连自己恰好 $w$ 个；开头不足 $w$ 个时看全部）。它是因果掩码再 `&` 一条“离得不远”的带：
# $j > i - w$。每个查询最多看 $w$ 个键，计算量从 $O(n^2)$ 降到 $O(nw)$；层数一多，信息仍能一层层传得比 $w$ 远。
# （Longformer 的窗口是双向的：编码器里查询两侧各看 $w/2$ 个键，不是因果的。）
# 常见错误：写成 $i - w \le j$（多看一个，$w + 1$ 个键），或者忘了因果那一半（变成左右对称的带，偷看未来）。
# 下面由行号、列号直接构造一个 $T = 6$、$w = 3$ 的窗口，并与因果掩码比较：

# %%
# A sliding window of w = 3 keys, from row and column indices (True = may attend).
_T, _w = 6, 3
_i = torch.arange(_T)[:, None]                                             # (T, 1) query positions
_j = torch.arange(_T)[None, :]                                             # (1, T) key positions
_window = (_j <= _i) & (_j > _i - _w)                                      # (T, T): the last w keys, itself included
print(_window.int())
print("keys seen by each query:", _window.sum(-1).tolist())
try:
    print("inside the causal mask:", bool((_window <= make_subsequent_mask(_T)[0, 0]).all()))
    plot_mask_row([make_subsequent_mask(_T)[0, 0], _window], ["causal", f"sliding window w={_w}"],
                  title="Causal mask vs sliding-window mask (True = may attend)")
    plt.show()
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# 每个查询最多看 3 个键（开头的两个少一些），窗口完全落在因果掩码之内。第 10 章的手撕练习库里有这道题（`make_sliding_window_mask`）。

# %% [markdown]
# ## 3. 三种掩码，各用在哪里
#
# 一个编码器-解码器模型里，注意力出现在三个地方，每处的掩码不同：
#
# | 注意力 | 查询 / 键 | 掩码 | 形状（广播前） |
# | --- | --- | --- | --- |
# | 编码器自注意力 | 源 / 源 | 源序列的填充掩码 `make_pad_mask(src)` | `(B, 1, 1, T_s)` |
# | 解码器自注意力 | 目标 / 目标 | 目标填充掩码 **&** 因果掩码 | `(B, 1, 1, T_t) & (1, 1, T_t, T_t) -> (B, 1, T_t, T_t)` |
# | 交叉注意力 | 目标 / 源 | **源**序列的填充掩码（与编码器那份相同） | `(B, 1, 1, T_s)`，广播到 `(B, H, T_t, T_s)` |
#
# 交叉注意力的掩码只看**键**，而键来自源序列，所以它就是源序列的填充掩码；它与目标序列的长度无关，不需要构造 `(B, 1, T_t, T_s)`。
# 两个形状不同的布尔掩码用 `&` 组合，PyTorch 会自动广播。下面是目标序列 `<bos> I love you <pad>` 的三幅图：

# %%
tgt_tokens = ["<bos>", "I", "love", "you", "<pad>"]
tgt_ids = torch.tensor([[1, 7, 8, 9, 0]])                                     # (B=1, T_t=5)
try:
    tgt_pad = make_pad_mask(tgt_ids)                                          # (B, 1, 1, T_t)
    causal = make_subsequent_mask(tgt_ids.size(1))                            # (1, 1, T_t, T_t)
    combined = tgt_pad & causal                                               # (B, 1, T_t, T_t)
    print("pad", tuple(tgt_pad.shape), "& causal", tuple(causal.shape), "->", tuple(combined.shape))
    plot_mask_row([tgt_pad[0, 0].expand(5, 5), causal[0, 0], combined[0, 0]],
                  ["padding mask (keys only)", "causal mask", "decoder self-attention: pad & causal"],
                  x_labels=tgt_tokens, y_labels=tgt_tokens,
                  title="Decoder self-attention mask = padding mask & causal mask")
    plt.show()
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# 右图最后一行：`<pad>` 作为查询仍能看到前面的真实 token（它的输出会被损失函数忽略），而任何查询都看不到 `<pad>` 这一列。
#
# 一个细节：目标序列**右侧**补齐时，`<pad>` 总在真实 token 之后，因果掩码本来就遮挡了真实查询看 `<pad>` 键——
# 所以一个常见的疏漏——构造了目标填充掩码，却忘了把它 `&` 进去——在右侧补齐时碰巧没错。但左侧补齐（有些生成式模型这样做）时它就必不可少：
# `<pad> <pad> <bos> I love` 里，`<bos>` 按因果掩码能看到前面两个 `<pad>` 键，只有填充掩码能把它们遮挡。
# 这时 `pad & causal` 还会让开头的 `<pad>` 查询行**全被遮挡**（它们按因果只能看前面的 `<pad>`）——这是“只遮挡键”的约定下
# 唯一会出现全被遮挡行的情形；第 01 章的 `scaled_dot_product_attention` 对这种行输出 0，而这些行的输出本来也没人用。
# 写上目标填充掩码，不要依赖巧合。

# %% [markdown]
# ## 4. 编码器层（Encoder Layer）
#
# 编码器层有两个子层（sublayer），每个子层后面都是“dropout → 残差相加 → LayerNorm”，也就是原论文的 **Post-LN**：
#
# $$
# \begin{aligned}
# X' &= \mathrm{LN}_1\big(X + \mathrm{Dropout}(\mathrm{MHA}(X, X, M_{\text{src}}))\big) &&\text{自注意力：Q、K、V 都来自 } X\\
# Y &= \mathrm{LN}_2\big(X' + \mathrm{Dropout}(\mathrm{FFN}(X'))\big) &&\text{逐位置前馈}
# \end{aligned}
# $$
#
# 形状从头到尾不变，这正是层能堆叠 $N$ 次的原因（$B = 2,\ T_s = 128,\ d_{\text{model}} = 512,\ H = 8,\ d_{\text{ff}} = 2048$）：
#
# | 步骤 | 形状 |
# | --- | --- |
# | 输入 `x` | `(2, 128, 512)` |
# | 自注意力输出、注意力权重 | `(2, 128, 512)`、`(2, 8, 128, 128)` |
# | `norm1(x, dropout(attn_out))` | `(2, 128, 512)` |
# | FFN 中间层 | `(2, 128, 2048)` |
# | `norm2(x, dropout(ffn(x)))` | `(2, 128, 512)` |
#
# 编码器的自注意力是**双向**的：每个位置都能看整句（除了 `<pad>`），所以编码器没有因果掩码。
#
# ### 练习 3：`EncoderLayer`（1 + 3 分）
#
# 用上面提供的组件，属性名必须是 `self_attn`（`MultiHeadAttention`）、`ffn`（`FeedForward`，ReLU）、
# `norm1`、`norm2`（`ResidualLayerNorm`，它的 `forward(x, sublayer_out)` 计算 `ln(x + sublayer_out)`）和 `dropout`——
# 评分时会按这些名字把参考权重拷进你的层。把 `dropout` 概率也传给 `MultiHeadAttention` 和 `FeedForward`（与 PyTorch 一致）。
# `forward(x, src_mask=None)` 返回 `(x, attn)`，`attn` 是自注意力每个头的权重。

# %% [markdown]
# <details><summary>提示 / hint（卡住了再展开 / open when stuck）</summary>
#
# **`__init__`**：按上面的属性名建好五个子模块。两个 `ResidualLayerNorm` 是两个独立的对象（各有自己的参数），不能共用一个。
# / Build the five sub-modules under the names above; the two `ResidualLayerNorm` are separate objects.
#
# **`forward`**，伪代码 / pseudo-code：
#
# 1. 自注意力：查询、键、值都是 `x`，掩码是 `src_mask`。`MultiHeadAttention` 返回 `(输出, 权重)`，权重留到最后返回。
#    / Self-attention with `x` as queries, keys and values and `src_mask`; keep the weights for the return value.
# 2. 第一次 Add & Norm：对注意力输出做 dropout，再交给 `norm1`；`norm1` 的第一个参数是这个子层的**输入**。
#    / Dropout on the attention output, then `norm1(sublayer input, that)`.
# 3. FFN 子层照做一遍：第 2 步的结果 → `ffn` → dropout → `norm2`（第一个参数仍是这个子层的输入）。
#    / The same for the FFN sublayer, starting from the result of step 2.
# 4. 返回 `(第 3 步的结果, 第 1 步的权重)`。/ Return the result of step 3 and the weights of step 1.
#
# </details>

# %% exercise="EncoderLayer"

# %% grade_id="encoder_layer_ignores_padding" points=1
# Visible tests: attribute names, shapes, and the content of <pad> positions never reaches a real position.
_g = torch.Generator().manual_seed(1)
torch.manual_seed(1)
_enc = EncoderLayer(16, 4, 32, dropout=0.0).eval()
for _name, _cls in (("self_attn", MultiHeadAttention), ("ffn", FeedForward),
                    ("norm1", ResidualLayerNorm), ("norm2", ResidualLayerNorm)):
    assert isinstance(getattr(_enc, _name, None), _cls), f"属性 {_name} 应为 {_cls.__name__} / attribute {_name} must be a {_cls.__name__}"
_x = torch.randn(2, 5, 16, generator=_g)                              # (B, T_s, d_model)
_src_mask = torch.tensor([[True, True, True, False, False], [True] * 5])[:, None, None, :]  # (B, 1, 1, T_s)
with torch.no_grad():
    _y, _attn = _enc(_x, _src_mask)
    assert _y.shape == (2, 5, 16), f"输出形状应为 (B, T, d_model) = (2, 5, 16) / output must be (2, 5, 16), got {tuple(_y.shape)}"
    assert _attn.shape == (2, 4, 5, 5), f"attn 形状应为 (B, H, T, T) = (2, 4, 5, 5) / attn must be (2, 4, 5, 5), got {tuple(_attn.shape)}"
    assert torch.all(_attn[0, :, :, 3:] == 0), "<pad> 键的权重应为 0（src_mask 传给自注意力了吗？）/ <pad> keys must get weight 0 (src_mask passed on?)"
    _x2 = _x.clone()
    _x2[0, 3:] = torch.randn(2, 16, generator=_g)                      # change only the <pad> positions
    _y2, _ = _enc(_x2, _src_mask)
    assert torch.allclose(_y2[0, :3], _y[0, :3], atol=1e-6), \
        "改变 <pad> 位置的内容不应影响真实位置的输出 / changing <pad> positions must not change real positions"

# %% grade_id="encoder_layer_matches_reference" points=3 check="EncoderLayer:EncoderLayer"
# Visible tests: the Post-LN order, recomputed from your layer's own sublayers.
_g = torch.Generator().manual_seed(2)
torch.manual_seed(2)
_enc = EncoderLayer(16, 4, 32, dropout=0.0).eval()
_x = torch.randn(2, 6, 16, generator=_g)                              # (B, T_s, d_model)
_src_mask = torch.tensor([[True] * 4 + [False] * 2, [True] * 6])[:, None, None, :]
with torch.no_grad():
    _y, _ = _enc(_x, _src_mask)
    _h = _enc.norm1(_x, _enc.self_attn(_x, _x, _src_mask)[0])         # sublayer 1: self-attention, add, norm
    _expected = _enc.norm2(_h, _enc.ffn(_h))                           # sublayer 2: FFN, add, norm
assert torch.allclose(_y, _expected, atol=1e-5), \
    "应为 x = norm1(x, attn(x)); x = norm2(x, ffn(x))（Post-LN）/ expected Post-LN: norm1(x, attn(x)) then norm2(x, ffn(x))"
assert torch.allclose(_y.mean(-1), torch.zeros(2, 6), atol=1e-5), \
    "Post-LN 的输出在每个位置上均值为 0（最后一步是 LayerNorm）/ Post-LN output has zero mean per position"

# %% [markdown]
# ## 5. 解码器层（Decoder Layer）
#
# 解码器层比编码器层多一个子层，共三个，仍然是 Post-LN：
#
# $$
# \begin{aligned}
# Y' &= \mathrm{LN}_1\big(Y + \mathrm{Dropout}(\mathrm{MHA}(Y, Y, M_{\text{tgt}}))\big) &&\text{带掩码的自注意力：只看已生成的部分}\\
# Y'' &= \mathrm{LN}_2\big(Y' + \mathrm{Dropout}(\mathrm{MHA}(Y', \mathrm{Mem}, M_{\text{src}}))\big) &&\text{交叉注意力：Q 来自 } Y'\text{，K、V 来自 Mem}\\
# Z &= \mathrm{LN}_3\big(Y'' + \mathrm{Dropout}(\mathrm{FFN}(Y''))\big)
# \end{aligned}
# $$
#
# $\mathrm{Mem}$（memory）是编码器最后一层的输出 `(B, T_s, d_model)`。每一层解码器都用**同一份** memory（最后一层编码器的输出），
# 而不是“第 $i$ 层解码器配第 $i$ 层编码器”。
#
# 三个容易写错的地方：
#
# 1. 交叉注意力的**查询**是第一个子层的输出 $Y'$，不是原始输入 $Y$，也不是 memory；K 和 V **都**来自 memory。
# 2. 交叉注意力的掩码是**源**序列的填充掩码 `memory_mask`，不是 `tgt_mask`（形状都对不上：`tgt_mask` 的最后一维是 $T_t$，而键有 $T_s$ 个）。
# 3. 自注意力和交叉注意力是**两个**独立的 `MultiHeadAttention`，各有参数，不能共用一个。
#
# ### 练习 4：`DecoderLayer`（2 + 4 分）
#
# 属性名：`self_attn`、`cross_attn`（`MultiHeadAttention`）、`ffn`、`norm1`、`norm2`、`norm3`、`dropout`。
# `forward(y, memory, tgt_mask=None, memory_mask=None)` 返回 `(y, (self_attn_w, cross_attn_w))`。

# %% [markdown]
# <details><summary>提示 / hint（卡住了再展开 / open when stuck）</summary>
#
# 与 `EncoderLayer` 同一个模式，只是三个子层，每个都是“子层 → dropout → `normK`(子层的输入, ·)”：
# / The encoder's pattern with three sublayers, each "sublayer -> dropout -> normK(sublayer input, ...)":
#
# 1. 掩码自注意力：查询、键、值都是 `y`，掩码 `tgt_mask` → `norm1`；
#    / masked self-attention over `y` with `tgt_mask`, then `norm1`;
# 2. 交叉注意力：查询是**第 1 步的结果**，键和值都是 `memory`，掩码 `memory_mask` → `norm2`；
#    / cross-attention: queries = the result of step 1, keys = values = `memory`, mask `memory_mask`, then `norm2`;
# 3. FFN → `norm3`。/ the FFN, then `norm3`.
#
# 两个注意力模块是不同的对象；两份权重都留下，按 `(y, (自注意力权重, 交叉注意力权重))` 返回。
# / Two distinct attention modules; return `(y, (self-attention weights, cross-attention weights))`.
#
# </details>

# %% exercise="DecoderLayer"

# %% grade_id="decoder_layer_is_causal" points=2
# Visible tests: shapes, no peeking at future target positions, no reading of <pad> source positions.
_g = torch.Generator().manual_seed(3)
torch.manual_seed(3)
_dec = DecoderLayer(16, 4, 32, dropout=0.0).eval()
for _name, _cls in (("self_attn", MultiHeadAttention), ("cross_attn", MultiHeadAttention), ("ffn", FeedForward),
                    ("norm1", ResidualLayerNorm), ("norm2", ResidualLayerNorm), ("norm3", ResidualLayerNorm)):
    assert isinstance(getattr(_dec, _name, None), _cls), f"属性 {_name} 应为 {_cls.__name__} / attribute {_name} must be a {_cls.__name__}"
assert _dec.self_attn is not _dec.cross_attn, "自注意力与交叉注意力应是两个模块 / self- and cross-attention must be separate modules"
_y = torch.randn(2, 4, 16, generator=_g)                              # (B, T_t, d_model)
_mem = torch.randn(2, 6, 16, generator=_g)                            # (B, T_s, d_model), T_s != T_t
_tgt_mask = torch.tril(torch.ones(4, 4, dtype=torch.bool))[None, None]  # (1, 1, T_t, T_t)
_mem_mask = torch.tensor([[True] * 4 + [False] * 2, [True] * 6])[:, None, None, :]  # (B, 1, 1, T_s)
with torch.no_grad():
    _out, (_sw, _cw) = _dec(_y, _mem, _tgt_mask, _mem_mask)
    assert _out.shape == (2, 4, 16), f"输出形状应为 (B, T_t, d_model) = (2, 4, 16) / output must be (2, 4, 16), got {tuple(_out.shape)}"
    assert _sw.shape == (2, 4, 4, 4), f"自注意力权重应为 (B, H, T_t, T_t) / self-attention weights must be (2, 4, 4, 4), got {tuple(_sw.shape)}"
    assert _cw.shape == (2, 4, 4, 6), f"交叉注意力权重应为 (B, H, T_t, T_s) / cross-attention weights must be (2, 4, 4, 6), got {tuple(_cw.shape)}"
    assert torch.all(_cw[0, :, :, 4:] == 0), "源序列 <pad> 的交叉注意力权重应为 0（用 memory_mask）/ <pad> source keys must get weight 0 (memory_mask)"
    _y2 = _y.clone()
    _y2[:, 3] = torch.randn(2, 16, generator=_g)                       # change the last target position only
    _out2, _ = _dec(_y2, _mem, _tgt_mask, _mem_mask)
    assert torch.allclose(_out2[:, :3], _out[:, :3], atol=1e-6), \
        "改变位置 3 不应影响位置 0..2 的输出（tgt_mask 传给自注意力了吗？）/ position 3 must not affect positions 0..2"
    _mem2 = _mem.clone()
    _mem2[0, 4:] = torch.randn(2, 16, generator=_g)                    # change only the <pad> source positions
    _out3, _ = _dec(_y, _mem2, _tgt_mask, _mem_mask)
    assert torch.allclose(_out3, _out, atol=1e-6), "源序列 <pad> 位置的内容不应影响输出 / <pad> source positions must not matter"

# %% grade_id="decoder_layer_matches_reference" points=4 check="DecoderLayer:DecoderLayer"
# Visible tests: the three Post-LN sublayers in order, recomputed from your layer's own sublayers.
_g = torch.Generator().manual_seed(4)
torch.manual_seed(4)
_dec = DecoderLayer(16, 4, 32, dropout=0.0).eval()
_y = torch.randn(2, 5, 16, generator=_g)                              # (B, T_t, d_model)
_mem = torch.randn(2, 3, 16, generator=_g)                            # (B, T_s, d_model)
_tgt_mask = torch.tril(torch.ones(5, 5, dtype=torch.bool))[None, None]
_mem_mask = torch.tensor([[True, True, False], [True] * 3])[:, None, None, :]
with torch.no_grad():
    _out, _ = _dec(_y, _mem, _tgt_mask, _mem_mask)
    _h1 = _dec.norm1(_y, _dec.self_attn(_y, _y, _tgt_mask)[0])                 # masked self-attention
    _h2 = _dec.norm2(_h1, _dec.cross_attn(_h1, _mem, _mem_mask)[0])           # cross-attention: Q from h1
    _expected = _dec.norm3(_h2, _dec.ffn(_h2))                                 # feed-forward
assert torch.allclose(_out, _expected, atol=1e-5), \
    "应为 norm1(自注意力) -> norm2(交叉注意力，Q 来自上一步) -> norm3(FFN) / expected self-attn, cross-attn (Q from the previous sublayer), FFN, each Post-LN"

# %% [markdown]
# ## 6. 交叉注意力的形状追踪
#
# 交叉注意力是编码器和解码器唯一的连接点，也是形状最容易搞混的地方：查询和键来自**长度不同**的两个序列。
# 以 $B = 2,\ T_t = 4$（目标）、$T_s = 6$（源）、$d_{\text{model}} = 16,\ H = 4$（$d_k = 4$）为例：
#
# | 步骤 | 形状 | 说明 |
# | --- | --- | --- |
# | 解码器状态 $Y'$ / memory | `(2, 4, 16)` / `(2, 6, 16)` | 长度不同，$d_{\text{model}}$ 相同 |
# | `W_q(Y')` 分头 | `(2, 4, 4, 4)` = `(B, H, T_t, d_k)` | 查询跟着目标序列 |
# | `W_k(memory)`、`W_v(memory)` 分头 | `(2, 4, 6, 4)` = `(B, H, T_s, d_k)` | 键、值跟着源序列 |
# | 分数 / 权重 | `(2, 4, 4, 6)` = `(B, H, T_t, T_s)` | 每个目标位置在源序列上的分布 |
# | 源填充掩码 | `(2, 1, 1, 6)` → 广播到 `(2, 4, 4, 6)` | 只遮挡源 `<pad>` 列 |
# | 每头输出 → 合头 → `W_o` | `(2, 4, 4, 4)` → `(2, 4, 16)` | 输出长度跟着**查询**：$T_t$ |
#
# 下面用你的 `DecoderLayer` 实际走一遍（未训练，权重随机），并把样本 0 的交叉注意力按头画出来：最后两个源位置是 `<pad>`，每个头的这两列都是 0。

# %%
src_names = ["s0", "s1", "s2", "s3", "<pad>", "<pad>"]
tgt_names = ["<bos>", "t1", "t2", "t3"]
gen = torch.Generator().manual_seed(5)
y_trace = 3 * torch.randn(2, 4, 16, generator=gen)                          # (B, T_t, d_model)
memory_trace = 3 * torch.randn(2, 6, 16, generator=gen)                     # (B, T_s, d_model)
src_mask_trace = torch.tensor([[True] * 4 + [False] * 2, [True] * 6])[:, None, None, :]  # (B, 1, 1, T_s)
tgt_mask_trace = torch.tril(torch.ones(4, 4, dtype=torch.bool))[None, None]  # (1, 1, T_t, T_t)
try:
    torch.manual_seed(5)
    dec_trace = DecoderLayer(16, 4, 32, dropout=0.0).eval()
    with torch.no_grad():
        out_trace, (self_w, cross_w) = dec_trace(y_trace, memory_trace, tgt_mask_trace, src_mask_trace)
    print("y", tuple(y_trace.shape), "| memory", tuple(memory_trace.shape), "| memory_mask", tuple(src_mask_trace.shape))
    print("self-attention weights ", tuple(self_w.shape), " (B, H, T_t, T_t)")
    print("cross-attention weights", tuple(cross_w.shape), " (B, H, T_t, T_s)")
    print("output                 ", tuple(out_trace.shape), "    (B, T_t, d_model)")
    plot_heads(cross_w[0], x_labels=src_names, y_labels=tgt_names,
               title="Cross-attention per head (queries: target, keys: source with 2 <pad>)")
    plt.show()
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# 训练好的翻译或复制模型里，这张图会出现清晰的“对齐”（alignment）：目标第 $i$ 个 token 主要看源序列里与它对应的 token。第 07 章的复制任务会画出一条对角线。

# %% [markdown]
# ## 7. 与 PyTorch 的 `nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer` 逐位相等
#
# PyTorch 内置的层在 `norm_first=False`（Post-LN，默认）、`activation="relu"`（默认）、`dropout=0`、`batch_first=True` 时，
# 计算的正是上面的公式。把你的层的权重拷过去，float64 下两者应相等到舍入误差。参数名的对应关系：
#
# | 我们的层 | `nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer` |
# | --- | --- |
# | `self_attn.W_q, W_k, W_v` 的 `weight`、`bias` | `self_attn.in_proj_weight (3d, d)`、`in_proj_bias (3d,)`：三者按行拼接 |
# | `self_attn.W_o` | `self_attn.out_proj` |
# | `cross_attn.*` | `multihead_attn.*`（同上） |
# | `ffn.fc1`、`ffn.fc2` | `linear1`、`linear2` |
# | `norm1.ln`、`norm2.ln`、`norm3.ln` | `norm1`、`norm2`、`norm3` |
#
# 掩码要**取反**：PyTorch 的布尔掩码是 True = 遮挡。填充掩码用 `src_key_padding_mask` / `tgt_key_padding_mask` /
# `memory_key_padding_mask`（形状 `(B, T)`），因果掩码用 `tgt_mask`（形状 `(T, T)`）。

# %%
def copy_attention(ours, theirs):
    """Copy our MultiHeadAttention's four projections into an nn.MultiheadAttention (packed q/k/v)."""
    theirs.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))  # (3d, d)
    theirs.in_proj_bias.copy_(torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]))          # (3d,)
    theirs.out_proj.weight.copy_(ours.W_o.weight)
    theirs.out_proj.bias.copy_(ours.W_o.bias)


def copy_ffn_and_norms(ours, theirs, n_norms):
    """Copy fc1/fc2 and norm1..norm{n_norms} of our layer into the matching nn.Transformer*Layer fields."""
    theirs.linear1.load_state_dict(ours.ffn.fc1.state_dict())
    theirs.linear2.load_state_dict(ours.ffn.fc2.state_dict())
    for k in range(1, n_norms + 1):
        getattr(theirs, f"norm{k}").load_state_dict(getattr(ours, f"norm{k}").ln.state_dict())


d_model, num_heads, d_ff = 16, 4, 32
src_ids = torch.tensor([[5, 6, 7, 0, 0, 0], [3, 4, 5, 6, 7, 8]])          # (B, T_s)
tgt_ids = torch.tensor([[1, 9, 9, 0], [1, 4, 5, 6]])                      # (B, T_t)
gen = torch.Generator().manual_seed(6)
x64 = torch.randn(2, 6, d_model, generator=gen, dtype=torch.float64)      # (B, T_s, d_model)
y64 = torch.randn(2, 4, d_model, generator=gen, dtype=torch.float64)      # (B, T_t, d_model)
try:
    torch.manual_seed(6)
    enc = EncoderLayer(d_model, num_heads, d_ff, dropout=0.0).double().eval()
    dec = DecoderLayer(d_model, num_heads, d_ff, dropout=0.0).double().eval()
    src_mask = make_pad_mask(src_ids)                                      # (B, 1, 1, T_s)
    tgt_mask = make_pad_mask(tgt_ids) & make_subsequent_mask(4)            # (B, 1, T_t, T_t)
    torch_enc = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="relu",
                                           batch_first=True, norm_first=False, dtype=torch.float64).eval()
    torch_dec = nn.TransformerDecoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="relu",
                                           batch_first=True, norm_first=False, dtype=torch.float64).eval()
    with torch.no_grad():
        copy_attention(enc.self_attn, torch_enc.self_attn)
        copy_ffn_and_norms(enc, torch_enc, 2)
        copy_attention(dec.self_attn, torch_dec.self_attn)
        copy_attention(dec.cross_attn, torch_dec.multihead_attn)
        copy_ffn_and_norms(dec, torch_dec, 3)

        memory, _ = enc(x64, src_mask)
        memory_torch = torch_enc(x64, src_key_padding_mask=~src_mask[:, 0, 0])                # True = blocked
        out, _ = dec(y64, memory, tgt_mask, src_mask)
        out_torch = torch_dec(y64, memory, tgt_mask=~make_subsequent_mask(4)[0, 0],          # (T_t, T_t)
                              tgt_key_padding_mask=tgt_ids == 0, memory_key_padding_mask=src_ids == 0)
    print("encoder layer equals nn.TransformerEncoderLayer (float64, atol 1e-12):",
          torch.allclose(memory, memory_torch, atol=1e-12, rtol=0))
    print("decoder layer equals nn.TransformerDecoderLayer (float64, atol 1e-12):",
          torch.allclose(out, out_torch, atol=1e-12, rtol=0))
    n_ours = sum(p.numel() for p in enc.parameters()), sum(p.numel() for p in dec.parameters())
    n_torch = sum(p.numel() for p in torch_enc.parameters()), sum(p.numel() for p in torch_dec.parameters())
    print("parameters (encoder, decoder): ours", n_ours, "| PyTorch", n_torch)
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# 注意拷权重时 `in_proj_weight` 的行顺序是 **q、k、v**：拼错顺序不会报错，只会得到不相等的结果。
# 另外，多层容器 `nn.TransformerEncoder` 在推理时（`enable_nested_tensor=True`，默认）可能把带填充的批次转成嵌套张量（nested tensor）
# 走快速路径，`<pad>` 位置的输出直接是 0；和它比较时只比真实位置。这里比较的是单层，全部位置都相等。

# %% [markdown]
# ## 8. 每层有多少参数
#
# 记 $d = d_{\text{model}}$，一个 `MultiHeadAttention` 有 $4d^2 + 4d$ 个参数（第 02 章），一个 FFN 有 $2 d\, d_{\text{ff}} + d_{\text{ff}} + d$，
# 一个 LayerNorm 有 $2d$：
#
# $$
# \begin{aligned}
# P_{\text{enc}} &= (4d^2 + 4d) + (2 d\, d_{\text{ff}} + d_{\text{ff}} + d) + 2 \cdot 2d\\
# P_{\text{dec}} &= 2(4d^2 + 4d) + (2 d\, d_{\text{ff}} + d_{\text{ff}} + d) + 3 \cdot 2d
# \end{aligned}
# $$
#
# 取 $d_{\text{ff}} = 4d$ 并忽略一次项，就是常说的“编码器层约 $12d^2$、解码器层约 $16d^2$”：FFN 占了编码器层的 2/3。
# 原论文 base 配置（$d = 512,\ d_{\text{ff}} = 2048$）：

# %%
def encoder_layer_params(d, d_ff):
    """Exact parameter count of one Post-LN encoder layer (with biases)."""
    return (4 * d * d + 4 * d) + (2 * d * d_ff + d_ff + d) + 2 * (2 * d)


def decoder_layer_params(d, d_ff):
    """Exact parameter count of one Post-LN decoder layer (with biases)."""
    return 2 * (4 * d * d + 4 * d) + (2 * d * d_ff + d_ff + d) + 3 * (2 * d)


d, d_ff_base = 512, 2048
print(f"encoder layer: formula {encoder_layer_params(d, d_ff_base):,} | 12 d^2 = {12 * d * d:,}")
print(f"decoder layer: formula {decoder_layer_params(d, d_ff_base):,} | 16 d^2 = {16 * d * d:,}")
try:
    torch.manual_seed(7)
    print(f"your EncoderLayer(512, 8, 2048): {sum(p.numel() for p in EncoderLayer(d, 8, d_ff_base).parameters()):,}")
    print(f"your DecoderLayer(512, 8, 2048): {sum(p.numel() for p in DecoderLayer(d, 8, d_ff_base).parameters()):,}")
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# 编码器层 3,152,384 个参数，其中 FFN 2,099,712（约 2/3），注意力 1,050,624（约 1/3），LayerNorm 只有 2,048。
# 容易算错的地方：拿“单层约 3.15M，6 层约 18.9M”当 6 层 Transformer 的层参数——那只是 6 个**编码器**层；解码器层每层多一个交叉注意力，是 4,204,032，
# 6 层共 25.2M。整个模型（加上词嵌入和输出层）的参数表在第 06 章。

# %% [markdown]
# ## 9. 编码器层 vs 解码器层
#
# | | 编码器层 | 解码器层 |
# | --- | --- | --- |
# | 子层 | 自注意力、FFN（2 个） | 掩码自注意力、交叉注意力、FFN（3 个） |
# | Add & Norm | 2 个 | 3 个 |
# | 自注意力方向 | 双向：看整句 | 单向：只看自己和过去 |
# | 掩码 | 源填充掩码 | 自注意力：目标填充 & 因果；交叉注意力：源填充 |
# | 输入 | 只有源序列 | 目标序列 + 编码器输出 memory |
# | 并行性 | 训练、推理都一次算完整句 | 训练时整句并行（teacher forcing + 因果掩码），推理时逐个 token 串行 |
# | 参数（$d_{\text{ff}} = 4d$） | 约 $12d^2$ | 约 $16d^2$ |

# %% [markdown]
# ### 推理时去掉因果掩码会怎样
#
# 常见误区：“因果掩码只在训练时需要，推理时未来的 token 还没生成，反正看不到。”如果推理时每一步都把**整个前缀**重新送进解码器
# （第 06 章的 `greedy_decode` 就是这样做的），前缀里靠前的位置在这一步看得到它后面已经生成的 token：不加因果掩码，
# 它们的表示就和训练时不同，再经过下一层传给最后一个位置，预测的下一个 token 也就变了。
#
# 下面用未训练的 `DecoderLayer` 模拟逐步生成：第 $t$ 步送入前 $t$ 个位置，取**最后一个位置**的输出（它决定下一个 token），
# 与训练时“整句 + 因果掩码”一次算出的第 $t$ 个位置比较，分别用 1 层和 2 层解码器。

# %%
gen = torch.Generator().manual_seed(8)
y_steps = torch.randn(1, 5, 16, generator=gen)             # (B, T_t, d_model): the prefix, fed one more position per step
memory_steps = torch.randn(1, 6, 16, generator=gen)        # (B, T_s, d_model)


def run_decoder(layers, y, tgt_mask):
    """Stacked decoder layers over y (B, t, d_model) -> (B, t, d_model); no source padding here."""
    for layer in layers:
        y, _ = layer(y, memory_steps, tgt_mask)
    return y


try:
    torch.manual_seed(8)
    stack = [DecoderLayer(16, 4, 32, dropout=0.0).eval() for _ in range(2)]
    with torch.no_grad():
        for n_layers in (1, 2):
            layers = stack[:n_layers]
            training_pass = run_decoder(layers, y_steps, make_subsequent_mask(5))     # (B, T_t, d_model) in one go
            gaps = {}
            for name, use_mask in (("with the causal mask", True), ("without it", False)):
                last = [run_decoder(layers, y_steps[:, :t], make_subsequent_mask(t) if use_mask else None)[:, -1]
                        for t in range(1, 6)]                                      # 5 x (B, d_model): step t's last position
                gaps[name] = (torch.stack(last, dim=1) - training_pass).abs().max().item()
            print(f"{n_layers} decoder layer(s): step-by-step last position vs the training pass, largest difference: "
                  + " | ".join(f"{k} {'0 (equal)' if v < 1e-5 else f'{v:.2f}'}" for k, v in gaps.items()))
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# 有因果掩码时，逐步生成与训练时的一次前向完全一致。去掉它，1 层时最后一个位置碰巧不受影响（它本来就能看所有键）；
# 从 2 层起就不同了（输出经过 LayerNorm，每个分量的量级约为 1，差 0.1 并不小）：第 1 层里靠前的位置偷看了后面的 token，
# 第 2 层的最后一个位置读到的是这些“变了味”的表示。
# 所以只要每步重算整个前缀，推理时就必须带着因果掩码；第 06 章的 KV 缓存只算最新一个位置，才不再需要它。

# %% [markdown]
# ## 10. 易错点清单
#
# | 错误 | 现象 |
# | --- | --- |
# | 填充掩码把查询行也遮挡（`q_visible & k_visible`） | `<pad>` 行全被遮挡；配 `-inf` 时出现 NaN，下一层扩散到所有位置 |
# | 填充掩码形状写成 `(B, T)` 或 `(B, 1, T)` | 广播到 `(B, H, T_q, T_k)` 时错位或报错：要 `(B, 1, 1, T)` |
# | 混用掩码约定（`triu(…, 1)` 且 1 = 遮挡 vs `tril` 且 True = 可以看） | 模型只看未来、不看过去，不报错 |
# | 因果掩码不含对角线 | 位置 0 什么都看不到，每个位置都看不到自己 |
# | 只用因果掩码、忘了目标填充掩码 | 右侧补齐时碰巧没错，左侧补齐就错 |
# | 交叉注意力用了 `tgt_mask` | 形状 `(…, T_t, T_t)` 与分数 `(…, T_t, T_s)` 对不上；$T_s = T_t$ 时不报错但语义全错 |
# | 交叉注意力的 Q 来自 memory、或 Q 用了原始 $Y$ 而不是 $Y'$ | 输出长度变成 $T_s$，或第一个子层白算了 |
# | 自注意力与交叉注意力共用一个 MHA | 参数少了 $4d^2 + 4d$，表达能力下降 |
# | 残差加在 LayerNorm 之后（Pre-LN）却说是原论文结构 | 数值不等于 `norm_first=False` 的 PyTorch 层 |
# | 忘了残差前的 dropout，或推理时没有 `model.eval()` | 训练正则化不足；推理结果每次不同 |
# | 拷权重进 `in_proj_weight` 时顺序不是 q、k、v | 与 PyTorch 对不上 |

# %% [markdown]
# ## 11. 面试要点（Q&A）
#
# **Q1：Transformer 里有几种掩码？各用在哪里？**
# 两种基本掩码、三个使用位置：编码器自注意力用源填充掩码；解码器自注意力用目标填充掩码与因果掩码的“与”；
# 交叉注意力用源填充掩码（键来自源序列）。
#
# **Q2：填充掩码为什么只遮挡键，不遮挡查询？**
# 掩码的作用是不让任何位置从 `<pad>` **取信息**，这只和键有关。`<pad>` 查询的输出没人使用（损失忽略它，后续层不从它读），
# 遮挡它反而制造“全被遮挡的行”：用 `-inf` 填充时 softmax 得 NaN，下一层 `0 × NaN` 把 NaN 扩散到全部位置。
#
# **Q3：因果掩码的形状和内容？** `(1, 1, T, T)` 的下三角（含对角线），位置 $i$ 看 $0..i$；批次里所有样本共用。
# 和填充掩码 `(B, 1, 1, T)` 做 `&` 得到 `(B, 1, T, T)`。
#
# **Q4：训练时解码器一次输入整句目标，怎么保证不“偷看”？推理时还需要因果掩码吗？**
# 靠因果掩码：整句并行计算，但位置 $i$ 的分数里 $j > i$ 的都被遮挡，等价于逐个 token 生成。
# 推理时每一步都重新算整个前缀的话，仍然需要因果掩码，否则前面位置的表示会和训练时不同，从第 2 层起连最后一个位置也跟着变（第 9 节实测）；
# 用 KV 缓存每次只算最新一个 token 时，它本来就只能看已有的键，掩码自然满足（第 06 章）。
#
# **Q5：交叉注意力的 Q、K、V 分别来自哪里？输出形状？**
# Q 来自解码器（上一子层的输出），K、V 都来自编码器最后一层的输出 memory；权重 `(B, H, T_t, T_s)`，输出 `(B, T_t, d_model)`。
#
# **Q6：编码器层和解码器层的结构区别？** 解码器层多一个交叉注意力子层（3 个子层、3 个 Add & Norm），自注意力带因果掩码；
# 编码器是双向的。参数约 $12d^2$ vs $16d^2$。
#
# **Q7：写出 Post-LN 编码器层的公式。** $X' = \mathrm{LN}(X + \mathrm{MHA}(X))$，$Y = \mathrm{LN}(X' + \mathrm{FFN}(X'))$，
# 每个子层输出在残差相加前做 dropout。Pre-LN 则是 $X + \mathrm{MHA}(\mathrm{LN}(X))$（第 04 章）。
#
# **Q8：一层编码器有多少参数？** 注意力 $4d^2 + 4d$，FFN $2 d\, d_{\text{ff}} + d_{\text{ff}} + d$，两个 LN $4d$；
# $d = 512,\ d_{\text{ff}} = 2048$ 时 3,152,384（约 3.15M）；解码器层 4,204,032。
#
# **Q9：PyTorch 的 `nn.TransformerEncoderLayer` 与手写的有什么接口差异？**
# 布尔掩码 True = 遮挡；填充用 `*_key_padding_mask (B, T)`；`in_proj_weight` 把 q/k/v 打包；默认 Post-LN（`norm_first=False`）、
# ReLU、dropout 0.1；默认 `batch_first=False`（形状 `(T, B, d)`）。
#
# 下一章：把嵌入、位置编码、$N$ 层编码器和解码器、输出层装成完整的 `Transformer`，并让它逐个 token 生成。
