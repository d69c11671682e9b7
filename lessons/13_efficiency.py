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
# # 13 · 手写效率：在线 softmax、分块注意力、MoE、INT8 量化
#
# 大模型岗位的面试在“手写多头注意力”之后，最常让人当场写的是几件**省内存、省算力**的东西：
# FlashAttention 背后的**在线 softmax**和**分块注意力**，混合专家（MoE）的**路由与负载均衡损失**，
# 以及 **INT8 量化**。本章把它们各写一遍，每个都与朴素版本逐元素对照，并实测分块注意力省下的内存。
# 最后是选做的 DeepSeek **MLA**（多头潜在注意力）：写出它压缩 KV 缓存的做法，用第 09 章的 `kv_cache_bytes` 算它省下的字节。
#
# **本章共 19 分**，6 个评分单元格：
#
# | 练习 | 评分单元格（grade_id） | 检查什么 | 分值 |
# | --- | --- | --- | --- |
# | `online_softmax` | `online_softmax_matches_softmax` | 一遍扫描、运行最大值与运行和、最大值变大时重新缩放 | 3 |
# | `tiled_attention` | `tiled_attention_matches_attention` | 分块的查询与键、运行最大值/和/累加器；与第 01 章的注意力相等；因果时跳过对角线以上的块 | 4 |
# | `TopKRouter` | `router_softmax_then_top_k` | 先在全部专家上 softmax 再取 top-k；`normalize` 时重新归一化 | 3 |
# | `MoELayer` | `moe_layer_matches_dense` | 每个 token 只送到它的 k 个专家，输出按路由权重加权求和 | 3 |
# | `load_balancing_loss` | `load_balancing_loss_values` | Switch/Mixtral 的 $N \sum_i f_i P_i$：f 来自计数，P 来自概率 | 3 |
# | `quantize_int8`、`dequantize_int8` | `int8_round_trip` | 对称、逐输出通道的 scale = absmax / 127，四舍五入并截断 | 3 |
#
# 1. 为什么要“手写效率”；
# 2. 在线 softmax（练习 1）；
# 3. 分块注意力：FlashAttention 的前向（练习 2），实测内存；
# 4. 混合专家：路由器（练习 3）、MoE 层（练习 4）、负载均衡损失（练习 5）；
# 5. 对称 INT8 逐通道量化（练习 6）；
# 6. 选做：MLA 压缩 KV 缓存（练习 7，不计分）；
# 7. 面试要点。
#
# 全章在 CPU 上一两分钟就能跑完。

# %%
# Setup: imports, seeds, one thread, and warning filters (so that a library warning does not clutter a check's report).
import math
import os
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")
np.random.seed(0)
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
torch.set_num_threads(1)  # one thread: the same numbers on every run
FINISH_FIRST = "完成上面的练习后再运行 / finish the exercise above first"
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # nbgrader validate/autograde: small sizes only

# %% [markdown]
# 下面是前几章的参考实现（折叠着的只读单元格，提供给你使用，不计分）：第 01 章的注意力（用来对照）、第 08 章的 `SwiGLU`（MoE 的专家）、
# 第 09 章的 `kv_cache_bytes` 与测内存峰值的 `peak_memory_increase`。

# %% provided="earlier"

# %% provided="peak_memory_increase"

# %% [markdown]
# ## 1. 为什么要手写效率
#
# 第 09 章实测过：朴素注意力把 $T \times T$ 的分数矩阵整张存下来，内存随 $T^2$ 增长；融合内核（FlashAttention 的思路）几乎不要额外内存。
# 这一章亲手写出那个思路。它的核心只有一个小技巧——**在线 softmax**：softmax 需要整行的最大值和整行的和，
# 但可以**边读边算**，读到更大的数时把已经累加的部分“换算”到新的最大值下。
#
# 同样的“少存、少算”还有两件面试常考的事：**混合专家**（MoE，每个 token 只经过少数几个前馈网络）和**量化**（权重用 8 位整数存）。

# %% [markdown]
# ## 2. 在线 softmax
#
# 稳定的 softmax（第 01 章）要读三遍输入：一遍求最大值 $m$，一遍求 $s = \sum_j e^{x_j - m}$，一遍写出 $e^{x_i - m} / s$。
# **在线 softmax**（Milakov & Gimelshein, 2018）把前两遍合成一遍：对每个新元素 $x_j$，
#
# $$
# m_{\text{new}} = \max(m, x_j), \qquad s \leftarrow s \cdot e^{m - m_{\text{new}}} + e^{x_j - m_{\text{new}}}, \qquad m \leftarrow m_{\text{new}}.
# $$
#
# 乘上的 $e^{m - m_{\text{new}}}$ 就是**重新缩放**（rescaling）：$s$ 里的旧项是相对旧最大值算的，换成新最大值要整体乘这个因子。
# 开始时 $m = -\infty$、$s = 0$（$e^{-\infty} = 0$，第一步自然成立）。最后 $y_i = e^{x_i - m} / s$。
#
# 手算 $x = (1, 3, 2)$：读 1：$m = 1$，$s = 1$；读 3：$m = 3$，$s = 1 \cdot e^{-2} + 1 \approx 1.1353$；读 2：$m$ 不变，$s = 1.1353 + e^{-1} \approx 1.5032$。
# 下面的单元格逐步打印同样的数（用的是 Python 的浮点数，不是练习的答案）：

# %%
running = {"m": -math.inf, "s": 0.0}
for value in (1.0, 3.0, 2.0):
    bigger = max(running["m"], value)
    running["s"] = running["s"] * math.exp(running["m"] - bigger) + math.exp(value - bigger)
    running["m"] = bigger
    print(f"read {value:.0f}: m = {running['m']:.0f}, s = {running['s']:.4f}")
print("softmax:", [round(math.exp(v - running["m"]) / running["s"], 4) for v in (1.0, 3.0, 2.0)])
print("torch  :", [round(p, 4) for p in torch.softmax(torch.tensor([1.0, 3.0, 2.0]), -1).tolist()])

# %% [markdown]
# 两个常见错误：**忘了重新缩放**（直接 $s \mathrel{+}= e^{x_j - m_{\text{new}}}$，最大值一变，旧项就错了）；
# **先加后更新最大值**（新项写成 $e^{x_j - m}$，用的是旧的 $m$；从 $m = -\infty$ 开始时第一项就是无穷大）。
#
# 练习 1：写 `online_softmax(x)`：沿最后一维、对任意形状 `(..., n)`，用一个 Python 循环按列走一遍（每一步对所有行同时做），
# 维护每行的运行最大值和运行和；不许调用 `torch.softmax`、`F.softmax` 或 `torch.logsumexp`。

# %% exercise="online_softmax"

# %% grade_id="online_softmax_matches_softmax" points=3 check="online_softmax:online_softmax"
# Visible tests: the worked example, a rising row (the max changes at every step), large values, any leading shape.
_y = online_softmax(torch.tensor([1.0, 3.0, 2.0], dtype=torch.float64))
assert torch.allclose(_y, torch.tensor([0.0900, 0.6652, 0.2447], dtype=torch.float64), atol=1e-4), f"手算的例子 / the worked example: {_y}"
_rising = torch.arange(6, dtype=torch.float64)
assert torch.allclose(online_softmax(_rising), torch.softmax(_rising, -1), atol=1e-10), "最大值每步都变时要重新缩放 / rescale when the max changes"
_big = torch.tensor([[1000.0, 1001.0, 999.0]], dtype=torch.float64)
assert torch.isfinite(online_softmax(_big)).all(), "大数值不能溢出 / large values must not overflow"
_x = torch.randn(2, 3, 7, dtype=torch.float64)
assert online_softmax(_x).shape == (2, 3, 7) and torch.allclose(online_softmax(_x), torch.softmax(_x, -1), atol=1e-10), \
    "任意前置维度 / any leading dimensions"

# %% [markdown]
# ## 3. 分块注意力：FlashAttention 的前向
#
# 注意力的一行是“对 key 做 softmax，再对 value 加权求和”：$o_i = \sum_j \frac{e^{s_{ij} - m_i}}{\ell_i} v_j$，$s_{ij} = q_i \cdot k_j / \sqrt{d}$。
# 在线 softmax 的技巧对**加权和**同样成立：分母 $\ell$ 可以边读边换算，分子 $\text{acc} = \sum_j e^{s_{ij} - m} v_j$ 也可以，
# 而且用**同一个**因子 $e^{m_{\text{old}} - m_{\text{new}}}$。于是 key 和 value 可以一块一块地读：
#
# 对每一块查询 $Q_b$（至多 `block_size` 行），置 $m = -\infty$、$\ell = 0$、$\text{acc} = 0$，对每一块键值 $K_c, V_c$：
#
# 1. $S = Q_b K_c^\top / \sqrt{d}$，形状 $(b_q, b_k)$——这是整个算法里最大的临时矩阵；
# 2. $m_{\text{new}} = \max(m, \operatorname{rowmax} S)$，$P = e^{S - m_{\text{new}}}$；
# 3. $\ell \leftarrow \ell \cdot e^{m - m_{\text{new}}} + \operatorname{rowsum} P$，
#    $\text{acc} \leftarrow \text{acc} \cdot e^{m - m_{\text{new}}} + P V_c$，$m \leftarrow m_{\text{new}}$。
#
# 全部块读完后，这一块查询的输出是 $\text{acc} / \ell$：**只在最后除一次**。这正是 FlashAttention（Dao 等，2022；第 2 版把查询块放在外层循环）的前向；
# 真正的 FlashAttention 还把这些块放进 GPU 的片上内存（SRAM），并在反向时重算而不存 $P$。这里用 PyTorch 写出同样的数学，不求快，求**不存 $T \times T$**。
#
# **因果**（`causal=True`）在本章的范围内，而且几乎不花代价：查询 $i$ 只能看 $j \le i$，所以**完全在对角线以上的键块直接跳过**（不用算），
# 只有跨过对角线的那一块要在块内遮挡（按全局位置比较：key 位置 > query 位置的填 $-\infty$）。本章的因果只支持 $T_q = T_k$（自注意力）。
# 常见错误：跳过了上方的块却忘了遮挡对角线块；只缩放了 $\ell$ 没缩放 $\text{acc}$；忘了 $1/\sqrt{d}$。
#
# 练习 2：写 `tiled_attention(q, k, v, block_size=64, causal=False)`：`q (..., T_q, d)`、`k (..., T_k, d)`、`v (..., T_k, d_v)`，
# 返回 `(..., T_q, d_v)`；`T` 不必是 `block_size` 的倍数（最后一块可以短一些）。函数开头的参数检查已经写好。

# %% exercise="tiled_attention"

# %% grade_id="tiled_attention_matches_attention" points=4 check="tiled_attention:tiled_attention"
# Visible tests: equal to chapter 01's attention (float64, 1e-6), blocks that do not divide T, causal, T_q != T_k.
_g = torch.Generator().manual_seed(13)
_q, _k, _v = (torch.randn(2, 3, 10, 8, generator=_g, dtype=torch.float64) for _ in range(3))
_expected, _ = scaled_dot_product_attention(_q, _k, _v)
assert torch.allclose(tiled_attention(_q, _k, _v, block_size=4), _expected, atol=1e-6), "应等于第 01 章的注意力 / must equal chapter 01's attention"
_causal = torch.tril(torch.ones(10, 10, dtype=torch.bool))
_expected_causal, _ = scaled_dot_product_attention(_q, _k, _v, _causal)
assert torch.allclose(tiled_attention(_q, _k, _v, block_size=3, causal=True), _expected_causal, atol=1e-6), \
    "causal=True：对角线以上的块跳过、对角线块在块内遮挡 / skip the blocks above the diagonal, mask inside the diagonal block"
_k2, _v2 = torch.randn(2, 3, 13, 8, dtype=torch.float64), torch.randn(2, 3, 13, 5, dtype=torch.float64)
assert tiled_attention(_q, _k2, _v2, block_size=4).shape == (2, 3, 10, 5), "输出形状 (..., T_q, d_v) / output shape (..., T_q, d_v)"

# %% [markdown]
# **实测内存**：与第 09 章同样的量法（`peak_memory_increase`：一次调用让进程驻留内存的峰值多出多少），
# 一个头数 4、$d = 64$ 的因果注意力，T 从 512 翻倍到 4096；朴素的是第 01 章的 `scaled_dot_product_attention`，
# 分块的是你的 `tiled_attention`（`block_size=256`）。

# %%
mem_T = [128, 256] if GRADING else [512, 1024, 2048, 4096]  # grading: only that it runs
try:
    mem = {"naive": [], "tiled": []}
    for _T in mem_T:
        _q, _k, _v = (torch.randn(1, 4, _T, 64, generator=torch.Generator().manual_seed(i)) for i in range(3))  # (B, H, T, d)
        _mask = torch.tril(torch.ones(_T, _T, dtype=torch.bool))                                              # (T, T)
        _naive = lambda q=_q, k=_k, v=_v, mask=_mask: scaled_dot_product_attention(q, k, v, mask)
        _tiled = lambda q=_q, k=_k, v=_v: tiled_attention(q, k, v, block_size=256, causal=True)
        assert torch.allclose(_naive()[0], _tiled(), atol=1e-5)  # the same attention
        for _name, _fn in (("tiled", _tiled), ("naive", _naive)):  # tiled first: no pages the naive one freed
            mem[_name].append(peak_memory_increase(_fn))
    for _i, _T in enumerate(mem_T):
        print(f"T={_T:>5}: naive ~{mem['naive'][_i] / 2**20:.0f} MiB, tiled ~{mem['tiled'][_i] / 2**20:.1f} MiB")
    print(f"one T x T float32 matrix for 4 heads at T={mem_T[-1]}: {4 * mem_T[-1] ** 2 * 4 / 2**20:.0f} MiB; "
          f"the output itself: {4 * mem_T[-1] * 64 * 4 / 2**20:.0f} MiB")
    print(f"tiled / naive peak at T={mem_T[-1]}: ~{mem['tiled'][-1] / max(mem['naive'][-1], 1):.3f}")
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# 读数：朴素注意力的峰值是几张 $4 \times T \times T$ 的矩阵（T = 4096 时每张 256 MiB），随 $T^2$ 增长；
# 分块版本只多出输出本身（T = 4096 时 4 MiB）和几块 $256 \times 256$ 的临时矩阵，随 $T$ 线性增长——最后一行的比值远小于十分之一
# （内存分配器会复用已经释放的页，所以小的数量出来偏小，甚至为 0）。
# 计算量两者相同（都是 $O(T^2 d)$）；在 CPU 上用 Python 循环写的分块版本并不更快，FlashAttention 在 GPU 上快，是因为少读写显存。

# %% [markdown]
# ## 4. 混合专家（MoE）
#
# **混合专家层**（mixture of experts）把一个前馈层换成 $N$ 个“专家”（这里每个专家是第 08 章的 `SwiGLU`），再加一个**路由器**：
# 每个 token 只送到得分最高的 $k$ 个专家，输出是它们的加权和 $y_t = \sum_{e \in \text{top-}k(t)} w_{t,e}\, E_e(x_t)$。
# 参数量是 $N$ 个前馈层，每个 token 的计算量却只有 $k$ 个（Mixtral 8x7B：8 个专家、$k = 2$）。
#
# **路由器**：一个无偏置的线性层给出 logits $(N_{\text{tok}}, E)$。权重怎么来，有两种公开的约定：
#
# - **先 softmax 再取 top-k**：在**全部**专家上做 softmax，取最大的 k 个概率作为权重（Switch Transformer，k = 1；DeepSeek-V2）；
#   可以再把这 k 个权重除以它们的和，使之加起来为 1（DeepSeek-V3、Qwen-MoE，Hugging Face 里叫 `norm_topk_prob`）。
# - **先取 top-k 再 softmax**：只在选中的 k 个 logits 上做 softmax（Mixtral）。
#
# 第二种与“先 softmax、取 top-k、再归一化”**完全相等**（同一组 $e^{z}$ 除以同一个和），所以本章的契约是：
# **先在全部专家上 softmax，再取 top-k**；`normalize=True`（默认）时再归一化——这时 Mixtral 的写法同样正确；
# `normalize=False` 时权重就是那 k 个原始概率，这时先 top-k 再 softmax 就**错了**（权重被放大，加起来成了 1）。
#
# 练习 3：写 `TopKRouter(d_model, num_experts, top_k=2, normalize=True)`：属性 `gate`（`nn.Linear(d_model, num_experts, bias=False)`）；
# `forward(x (N, d_model))` 返回 `(weights (N, k), indices (N, k), logits (N, E))`，按权重从大到小（`topk` 的顺序）。

# %% exercise="TopKRouter"

# %% grade_id="router_softmax_then_top_k" points=3 check="TopKRouter:TopKRouter"
# Visible tests: the shapes, the largest probabilities chosen, both normalize settings.
torch.manual_seed(3)
_router = TopKRouter(6, 4, top_k=2, normalize=False)
_x = torch.randn(5, 6)
_w, _i, _logits = _router(_x)
assert _w.shape == (5, 2) and _i.shape == (5, 2) and _logits.shape == (5, 4), "形状 (N, k)、(N, k)、(N, E) / shapes (N, k), (N, k), (N, E)"
_probs = torch.softmax(_logits, -1)
assert torch.equal(_i, _probs.topk(2, -1).indices), "选概率最大的 k 个专家 / choose the k most probable experts"
assert torch.allclose(_w, _probs.gather(-1, _i), atol=1e-6), "normalize=False：权重是全体 softmax 的概率 / the weights are the full softmax's probabilities"
_normalized = TopKRouter(6, 4, top_k=2, normalize=True)
assert torch.allclose(_normalized(_x)[0].sum(-1), torch.ones(5), atol=1e-6), "normalize=True：k 个权重加起来为 1 / the k weights add up to 1"

# %% [markdown]
# **分派**（dispatch）：把 token 摊平成 $(N_{\text{tok}}, d)$，对每个专家 $e$ 找出路由到它的 token（`torch.where(indices == e)` 同时给出
# token 的行号和它在 k 个位置中的哪一个），只在这些行上运行专家，乘上对应的权重，再用 `index_add` 加回原来的行。
# 这是最直白的写法：每个专家运行一次；真正的实现会把 token 按专家排序后成批地算，道理相同。
#
# 练习 4：写 `MoELayer(d_model, d_ff, num_experts, top_k=2, normalize=True)`：属性 `router`（你的 `TopKRouter`）和 `experts`
# （`nn.ModuleList`，`num_experts` 个 `SwiGLU(d_model, d_ff)`）；`forward(x (B, T, d_model))` 返回
# `(out (B, T, d_model), logits (B*T, E), indices (B*T, k))`（后两个给负载均衡损失用）。

# %% exercise="MoELayer"

# %% grade_id="moe_layer_matches_dense" points=3 check="MoELayer:MoELayer"
# Visible tests: equal to running every expert on every token and keeping only the routed ones, both normalize settings.
for _normalize in (True, False):
    torch.manual_seed(4)
    _moe = MoELayer(8, 12, 4, top_k=2, normalize=_normalize)
    _x = torch.randn(2, 3, 8)
    _out, _logits, _idx = _moe(_x)
    assert _out.shape == (2, 3, 8) and _logits.shape == (6, 4) and _idx.shape == (6, 2), "形状 / shapes"
    _tokens = _x.reshape(6, 8)
    _w = torch.softmax(_logits, -1).gather(-1, _idx)
    _w = _w / _w.sum(-1, keepdim=True) if _normalize else _w
    _dense = torch.stack([_moe.experts[e](_tokens) for e in range(4)], 1)  # (6, 4, 8): every expert on every token
    _expected = (torch.zeros(6, 4).scatter(1, _idx, _w)[..., None] * _dense).sum(1)
    assert torch.allclose(_out.reshape(6, 8), _expected, atol=1e-5), \
        f"normalize={_normalize}：应等于只保留被选中专家的稠密计算 / must equal the dense computation keeping the routed experts"

# %% [markdown]
# **负载均衡损失**。只靠语言模型的损失训练时，路由器很容易“塌缩”：几个专家拿走几乎所有 token，其余的闲着（也学不到东西）。
# Switch Transformer（Fedus 等，2021）加了一个辅助损失，Mixtral 沿用：
#
# $$
# \mathcal{L}_{\text{aux}} = N \sum_{i=1}^{N} f_i \, P_i ,
# $$
#
# 其中 $f_i$ 是**实际被分给**专家 $i$ 的 token 比例（从 `expert_index` **计数**得来，不可导），
# $P_i$ 是路由器 softmax（沿专家维）给专家 $i$ 的概率对全部 token 的平均（可导，梯度从这里回到路由器）。
# 两者都均匀时损失最小。$f$ 的归一化有两种写法：本章按 Hugging Face 的 `load_balancing_loss_func`，一个 token 对它的 k 个专家各计一次、
# 除以 token 数 $T$，所以 $\sum_i f_i = k$，完全均衡时损失为 $k$；Megatron-LM 再除以 $k$（$\sum_i f_i = 1$，均衡时为 1）。两种都算对。
# 常见错误：softmax 沿了 token 维；$f$ 也用概率（损失成了 $N \sum P_i^2$，“计数”的那一半信号没了）；忘了乘 $N$。
#
# 练习 5：写 `load_balancing_loss(router_logits, expert_index, num_experts)`：`router_logits (T, N)`、`expert_index (T, k)`，返回一个标量张量。

# %% exercise="load_balancing_loss"

# %% grade_id="load_balancing_loss_values" points=3 check="load_balancing_loss:load_balancing_loss"
# Visible tests: the balanced value, a collapsed router, and a gradient that reaches the logits.
_balanced = load_balancing_loss(torch.zeros(8, 4), (torch.arange(8) % 4)[:, None], 4)
assert abs(_balanced.item() - 1.0) < 1e-6, f"均匀的路由、均衡的计数（k=1）：损失为 1 / uniform router, balanced counts (k=1): 1, got {_balanced.item()}"
_collapsed = torch.tensor([[6.0, 0.0, 0.0, 0.0]]).repeat(8, 1)
_loss = load_balancing_loss(_collapsed, torch.zeros(8, 1, dtype=torch.long), 4)
assert abs(_loss.item() - 4 * torch.softmax(_collapsed[0], -1)[0].item()) < 1e-5, f"全部分给专家 0：N * P_0 / all to expert 0: N * P_0, got {_loss.item()}"
_logits = torch.randn(10, 4, requires_grad=True)
load_balancing_loss(_logits, torch.softmax(_logits, -1).topk(2, -1).indices, 4).backward()
assert _logits.grad is not None and _logits.grad.abs().sum() > 0, "梯度要经过 P 回到 logits / the gradient must reach the logits through P"

# %% [markdown]
# 看它在做什么：同一批 64 个 token、8 个专家、k = 2，一个随机初始化的路由器，和一个把所有 token 都推向专家 0、1 的路由器：

# %%
try:
    _g = torch.Generator().manual_seed(7)
    _fair = torch.randn(64, 8, generator=_g) * 0.1                         # (T, E): almost uniform
    _unfair = _fair + torch.tensor([4.0, 4.0, 0, 0, 0, 0, 0, 0])            # experts 0 and 1 win every token
    for _name, _logits in (("near-uniform router", _fair), ("collapsed router", _unfair)):
        _index = torch.softmax(_logits, -1).topk(2, -1).indices              # (T, 2)
        _counts = torch.bincount(_index.flatten(), minlength=8).tolist()
        print(f"{_name:19s}: tokens per expert {_counts}, aux loss {load_balancing_loss(_logits, _index, 8).item():.3f}")
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# 近乎均匀的路由器，损失约为 $k = 2$；
# 塌缩的路由器（专家 0、1 拿走全部 token：$f_0 = f_1 = 1$，平均概率 $P_0 \approx P_1 \approx 0.47$）约为 $8 \times (0.47 + 0.47) \approx 7.6$，大了近 4 倍。
# （DeepSeek-V3 改用不加损失的做法：给每个专家的得分加一个只用于选专家的偏置，按负载调整它。）

# %% [markdown]
# ## 5. 对称 INT8 逐通道量化
#
# 一个 float32 权重占 4 字节，int8 只占 1 字节。**对称量化**（absmax）把一组数按 $\text{scale} = \max |w| / 127$ 映射到整数
# $q = \operatorname{round}(w / \text{scale}) \in [-127, 127]$，
# 反量化 $\hat w = q \cdot \text{scale}$，误差至多半个 scale。用 127 而不是 128：对称的 $[-127, 127]$ 让 0 正好是 0、正负对称；
# 除以 128 会让最大的数变成 128，超出 int8 的正半边。
#
# **逐通道**（per-channel）：`nn.Linear` 的权重是 `(out, in)`，每个**输出通道**（一行）一个 scale，形状 `(out, 1)`。
# 为什么不整个张量一个 scale？各行的量级可能差很多，一个全局的 scale 由最大的那行决定，数值小的行就只剩几个量化等级。下面的单元格算给你看：

# %%
_w = torch.tensor([[0.02, -0.01, 0.015, 0.005], [2.0, -1.5, 0.5, 1.0]])   # two rows of very different size
_global = _w.abs().max() / 127
print("one scale for the tensor  :", torch.round(_w / _global).int().tolist())
print("one scale per output row  :", torch.round(_w / (_w.abs().amax(1, keepdim=True) / 127)).int().tolist())

# %% [markdown]
# 第一行在全局 scale 下只剩 $-1$ 到 $1$ 三个等级，逐行的 scale 则让每行都用满 $[-127, 127]$。
# 常见错误：整个张量一个 scale；scale 沿错了维度（每列一个）；除以 128；不四舍五入（`.to(torch.int8)` 向零截断）。
#
# 练习 6：写 `quantize_int8(w)`（`w (out, in)` → `(q, scale)`：`q` 为 `torch.int8`，`scale (out, 1)` 与 `w` 同类型；全零的行 scale 取 1）
# 和 `dequantize_int8(q, scale)`（回到 scale 的浮点类型）。

# %% exercise="quantize_int8,dequantize_int8"

# %% grade_id="int8_round_trip" points=3 check="quantize_int8:quantize_int8"
# Visible tests: the dtype and shapes, each row reaching 127, and the round-trip error within half a scale.
_w = torch.randn(6, 10, dtype=torch.float64) * torch.tensor([[0.01], [0.1], [1.0], [10.0], [3.0], [0.5]], dtype=torch.float64)
_q, _scale = quantize_int8(_w)
assert _q.dtype == torch.int8 and _q.shape == (6, 10), f"q 应为 int8 (out, in) / q must be int8 (out, in), got {_q.dtype} {tuple(_q.shape)}"
assert _scale.shape == (6, 1), f"每个输出通道一个 scale / one scale per output channel: (6, 1), got {tuple(_scale.shape)}"
assert _q.abs().amax(1).tolist() == [127] * 6, "每行的最大绝对值应映射到 127 / each row's absmax must map to 127"
_err = (dequantize_int8(_q, _scale) - _w).abs()
assert bool((_err <= _scale / 2 + 1e-12).all()), "反量化误差应不超过半个 scale / the round-trip error must stay within half a scale"

# %% [markdown]
# 量化一个 $512 \times 512$ 的随机层，看存储和输出误差：

# %%
try:
    _layer = nn.Linear(512, 512, bias=False)
    _q, _scale = quantize_int8(_layer.weight.data)
    _x = torch.randn(64, 512)
    _exact = _layer(_x)
    _approx = _x @ dequantize_int8(_q, _scale).T                           # (64, 512) @ (512, 512)
    _bytes_fp32 = _layer.weight.numel() * 4
    _bytes_int8 = _q.numel() + _scale.numel() * 4
    print(f"float32 {_bytes_fp32 / 2**10:.0f} KiB -> int8 + scales {_bytes_int8 / 2**10:.1f} KiB "
          f"({_bytes_fp32 / _bytes_int8:.2f} times smaller)")
    print(f"relative output error: {((_approx - _exact).norm() / _exact.norm()).item():.4f}")
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# 存储约小 4 倍，输出的相对误差在千分之几。真实的 INT8 推理（LLM.int8()、bitsandbytes）还要处理**离群值**：
# 少数激活特别大的维度单独用 fp16 计算，否则一个离群值就把整行的 scale 撑大。

# %% [markdown]
# ## 6. 选做：MLA 压缩 KV 缓存
#
# 第 09 章算过：长上下文推理时，内存的大头是 KV 缓存，$2 \times N_{\text{layers}} \times G \times d_k$ 个数每 token。
# GQA 减少 K/V 头数 $G$；DeepSeek-V2 的**多头潜在注意力**（multi-head latent attention, MLA）换一条路：
# 把每个 token 的 K 和 V 一起**压缩**成一个低维的潜向量 $c^{KV} = W^{DKV} h$（维度 $d_c$，远小于 $H \cdot d_k$），缓存只存它；
# 用时再由 $W^{UK}, W^{UV}$ 升回每个头的 K 和 V（推理时 $W^{UK}$ 可以并进查询投影，不必真的升维）。
# RoPE 与这种压缩不兼容，所以另外缓存一个所有头共用的、带 RoPE 的小 key（维度 $d_h^R$）。每 token 每层缓存 $d_c + d_h^R$ 个数。
#
# 选做练习 7（不计分，检查单元格只报告结果）：写 `MultiHeadLatentAttention(d_model, num_heads, d_latent)`，不含解耦的 RoPE key。
# 属性 `W_q`（`d_model → d_model`）、`W_dkv`（`d_model → d_latent`）、`W_uk`、`W_uv`（`d_latent → d_model`）、`W_o`，都没有偏置；
# `forward(x, mask=None, cache=None)` 返回 `(out, cache)`：`cache` 是到目前为止全部 token 的潜向量 `(B, T_past + T, d_latent)`，
# K、V 每次由它升维得到，再像第 02 章那样分头、做第 01 章的注意力、合并、过 `W_o`。

# %% exercise="MultiHeadLatentAttention"

# %% check="MultiHeadLatentAttention:MultiHeadLatentAttention"

# %% [markdown]
# 用第 09 章的 `kv_cache_bytes` 对照 DeepSeek-V2 公开的配置（60 层、128 个头、每头 128 维、$d_c = 512$、$d_h^R = 64$；bf16，每值 2 字节）：

# %%
_layers, _heads, _head_dim, _d_c, _d_rope = 60, 128, 128, 512, 64
_mha = kv_cache_bytes(_layers, _heads, _head_dim)                          # K and V of every head
_gqa8 = kv_cache_bytes(_layers, 8, _head_dim)                              # the same model with 8 KV heads
_mla = _layers * (_d_c + _d_rope) * 2                                      # one latent + one shared RoPE key, no factor 2 for K/V
for _name, _b in (("MHA, 128 KV heads", _mha), ("GQA, 8 KV heads", _gqa8), ("MLA, d_c=512 + 64", _mla)):
    print(f"{_name:18s}: {_b / 2**10:7.1f} KiB per token, {_b * 32768 / 2**30:6.2f} GiB for 32k tokens, MHA / this = {_mha / _b:5.1f}")
try:
    _, _latents = MultiHeadLatentAttention(64, 4, 8)(torch.randn(1, 10, 64))      # your MLA on 10 tokens
    print(f"your MLA's cache for 10 tokens: {tuple(_latents.shape)}, {_latents.numel()} numbers; "
          f"K and V of 4 heads would be {2 * 10 * 64}")
except NotImplementedError:
    print("（选做练习 7 未完成 / bonus exercise 7 not done）")

# %% [markdown]
# MLA 的缓存比 MHA 小约 57 倍，比 8 组的 GQA 还小约 3.6 倍；DeepSeek-V2 的论文报告它的效果不差于 MHA。代价是多了两次低秩投影。

# %% [markdown]
# ## 7. 面试要点（Q&A）
#
# **Q1：在线 softmax 怎么做到一遍？** 维护运行最大值 $m$ 和运行和 $s$；新元素让最大值变成 $m'$ 时，$s \leftarrow s\,e^{m - m'} + e^{x - m'}$。
# 任何一个参考点都能让 softmax 精确，只要分子分母用的是同一个；重新缩放就是在换参考点。
#
# **Q2：FlashAttention 为什么省内存、为什么快？** 把 Q、K、V 分块，用在线 softmax 的运行最大值、运行和与输出累加器逐块合并，
# 从不存 $T \times T$ 的分数矩阵（内存从 $O(T^2)$ 降到 $O(T)$）；计算量不变，快在少读写显存（块放在 SRAM 里），反向时重算注意力而不存它。
# 因果时对角线以上的块整块跳过，计算量约减半。
#
# **Q3：MoE 路由先 softmax 还是先 top-k？** 看约定：Switch/DeepSeek-V2 先在全部专家上 softmax 再取 top-k（权重不归一化）；
# Mixtral 先 top-k 再 softmax，等于“先 softmax、取 top-k、再归一化”。负载均衡损失 $N \sum_i f_i P_i$，$f$ 用计数、$P$ 用概率。
#
# **Q4：INT8 对称量化怎么写？为什么逐通道？** $\text{scale} = \max|w| / 127$，$q = \operatorname{clamp}(\operatorname{round}(w/\text{scale}), -127, 127)$；
# 逐输出通道一个 scale，因为各行量级不同，全局 scale 会让小的行只剩几个等级。
#
# **Q5：MLA 省了什么？** KV 缓存：每 token 每层只存一个 $d_c$ 维的潜向量和一个共享的 RoPE key，而不是每个头的 K 和 V。
