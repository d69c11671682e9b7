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
# # 06 完整的 Transformer（Encoder-Decoder）
#
# 这一章把前五章的零件装成原论文的编码器-解码器（encoder-decoder）模型：词嵌入（embedding）乘 $\sqrt{d_{\text{model}}}$、
# 加位置编码、$N$ 层编码器、$N$ 层解码器、输出投影到词表；再让它用贪心解码（greedy decoding）逐个 token 生成，
# （选做）用 KV 缓存（KV cache）给解码提速并实测加速比。之后数一数原论文 base 模型的参数，比较训练和推理的开销。
#
# **本章共 11 分**，两个练习、4 个评分单元格：
#
# | 练习 | 评分单元格（grade_id） | 检查什么 | 分值 |
# | --- | --- | --- | --- |
# | `Transformer`（第 4 节，8 分） | `transformer_structure` | 属性名与类型、参数量、`encode`/`decode`/`forward` 的输出形状 | 2 |
# | | `transformer_masks_from_pad_id` | 掩码在模型内部由 `pad_id` 构造：源/目标的 `<pad>` 不改变结果，解码器看不到未来 | 2 |
# | | `transformer_forward_matches_reference` | $\sqrt{d_{\text{model}}}$ 缩放、各层的掩码、logits 与参考实现数值一致 | 4 |
# | `greedy_decode`（第 6 节，3 分） | `greedy_decode_stops_at_eos` | 从 `<bos>` 开始，结束的行补 `<pad>`，所有行都输出 `<eos>` 后立刻停止 | 3 |
#
# 选做（第 7 节，不计分）：`greedy_decode_cached`，带 KV 缓存的贪心解码，与 `greedy_decode` 输出的 token 逐个相同，并测出加速比。
#
# 第 01–05 章的全部组件以参考实现的形式在下面提供（折叠的只读单元格）。掩码约定不变：布尔张量，**True = 可以看**。
# 词表约定与第 07 章一致：`<pad> = 0`、`<bos> = 1`、`<eos> = 2`，其余是内容 token。

# %%
# Setup: imports, seeds, and warning filters (so that a library warning does not clutter a check's report).
import math
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tutor.plots import plot_decode_timing, plot_mask_row, plot_param_breakdown

warnings.filterwarnings("ignore")
np.random.seed(0)
torch.manual_seed(0)
torch.set_printoptions(precision=3, sci_mode=False)
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
FINISH_FIRST = "完成上面的练习后再运行 / finish the exercise above first"

# %% [markdown]
# 第 01–05 章组件的参考实现（提供给你使用，不计分；展开可阅读）：

# %% provided="earlier"

# %% [markdown]
# ## 1. 整体结构
#
# ```
#  src (B, T_s) ─ src_embed × √d ─ + PE ─ EncoderLayer × N ─ memory (B, T_s, d)
#                                         (mask: pad(src))      │ K, V
#                                                               ▼
#  tgt_in (B, T_t) ─ tgt_embed × √d ─ + PE ────────────── DecoderLayer × N ─ out_proj ─ logits (B, T_t, V_tgt)
#                                             (self: pad(tgt_in) & causal; cross: pad(src))
# ```
#
# - **编码器**把源序列整句编码成 memory，只算一次；
# - **解码器**每一层都用同一份 memory 做交叉注意力；
# - **输出投影** `out_proj = nn.Linear(d_model, tgt_vocab)` 给出每个位置下一个 token 的 **logits**。softmax 不放在模型里：
#   训练用的 `F.cross_entropy` 自己会做 log-softmax（再做一次就是“双重 softmax”，梯度变小、训练变慢），
#   贪心解码取 argmax 也不需要 softmax。
#
# 模型接口（课程契约，评分和第 07 章都依赖它）：
#
# | 方法 | 输入 → 输出 | 掩码 |
# | --- | --- | --- |
# | `encode(src)` | `(B, T_s)` → memory `(B, T_s, d_model)` | `make_pad_mask(src, pad_id)` |
# | `decode(tgt_in, memory, src_mask=None)` | `(B, T_t)` → `(B, T_t, d_model)` | `make_pad_mask(tgt_in, pad_id) & make_subsequent_mask(T_t)`；交叉：`src_mask` |
# | `forward(src, tgt_in)` | → logits `(B, T_t, tgt_vocab)` | 都在内部构造 |
# | `greedy_decode(src, bos_id, eos_id, max_new_tokens)` | → `(B, ≤ 1 + max_new_tokens)`：调用第 6 节的函数 `greedy_decode(model, ...)` | 同上 |
#
# 掩码**在模型内部**从 `pad_id` 构造，调用者只需给 token id。这样用的人就不可能传错约定、传错形状
# （若让调用者自己传填充掩码、默认 `None`，忘了传，`<pad>` 就参与注意力，不报错）。

# %% [markdown]
# ## 2. 嵌入为什么要乘 $\sqrt{d_{\text{model}}}$
#
# 原论文 3.4 节：嵌入层的权重乘以 $\sqrt{d_{\text{model}}}$，然后加正弦位置编码。位置编码每个元素在 $[-1, 1]$ 之间，
# 每一对 $(\sin, \cos)$ 的平方和是 1，所以均方根（RMS）恰好是 $\sqrt{1/2} \approx 0.71$，与 $d_{\text{model}}$ 无关；
# 嵌入向量有多大，则完全取决于**初始化**。这个缩放因子是和一种特定的初始化配套的：
#
# - 原论文的参考代码（tensor2tensor）把嵌入矩阵按均值 0、标准差 $d_{\text{model}}^{-1/2}$ 的正态分布初始化，
#   即 $\mathcal{N}(0,\ 1/d_{\text{model}})$（第二个参数是方差），并让嵌入与输出投影**共享同一个矩阵**（weight tying）。
#   乘 $\sqrt{d_{\text{model}}}$ 后元素 RMS 约为 1，与位置编码同一量级，不论 $d_{\text{model}}$ 和词表多大。
# - PyTorch 的 `nn.Embedding` 默认按 $\mathcal{N}(0, 1)$ 初始化，元素 RMS 约 1；再乘 $\sqrt{512} \approx 22.6$，
#   位置编码只剩约 3% 的分量，位置信息被淹没。
# - Xavier 均匀初始化（`nn.init.xavier_uniform_`）作用在 $(V, d)$ 的嵌入矩阵上，标准差是 $\sqrt{2/(V + d)}$——**依赖词表大小** $V$。
#   $V = 1000,\ d = 512$ 时乘 $\sqrt{d}$ 后 RMS 约 0.82，碰巧与位置编码相当；换成原论文的 $V = 37000$，只有约 0.17，
#   位置编码反过来占了主导。
#
# 所以“乘 $\sqrt{d_{\text{model}}}$”和“嵌入按 $\mathcal{N}(0, 1/d_{\text{model}})$ 初始化”是一套组合。本课程的参考实现与
# Annotated Transformer 一样，对所有矩阵用 Xavier 均匀初始化再乘 $\sqrt{d_{\text{model}}}$：第 07 章的词表只有 $V = 13$
# （$d_{\text{model}} = 64$，乘 $\sqrt{d}$ 后 RMS 约 1.3），同一量级，够用；词表大时就该换成上面那种初始化。下面量一量（$d = 512$）：

# %% demo=true
d_demo = 512
pe_rms = sinusoidal_positional_encoding(64, d_demo).pow(2).mean().sqrt().item()
print(f"positional encoding RMS: {pe_rms:.3f}")
print(f"{'embedding init':30s} | {'unscaled':>8s} | {'x sqrt(d)':>9s} | PE share of the sum's variance (x sqrt(d))")
for V_demo in (1000, 37000):
    emb = torch.empty(V_demo, d_demo)                                        # (V, d), like nn.Embedding.weight
    inits = ((f"default N(0, 1), V = {V_demo}", lambda w: nn.init.normal_(w, 0.0, 1.0)),
             (f"Xavier uniform, V = {V_demo}", nn.init.xavier_uniform_),  # U(-a, a), a = sqrt(6 / (V + d))
             (f"N(0, 1/d) (paper), V = {V_demo}", lambda w: nn.init.normal_(w, 0.0, d_demo ** -0.5)))
    for name, init in inits:
        rms = init(emb).pow(2).mean().sqrt().item()
        scaled = rms * math.sqrt(d_demo)
        print(f"{name:30s} | {rms:8.3f} | {scaled:9.3f} | {pe_rms ** 2 / (scaled ** 2 + pe_rms ** 2):6.1%}")  # independent: variances add

# %% [markdown]
# 最后一列是位置编码在“嵌入 × $\sqrt{d}$ + 位置编码”这个和的**方差**里占的比例
# （两者独立，方差相加：$\mathrm{RMS}_{PE}^2 / (\mathrm{RMS}_{emb}^2 + \mathrm{RMS}_{PE}^2)$）。
# 对照这张表：$\mathcal{N}(0, 1)$ 乘 $\sqrt{d}$ 后 RMS 约 22.6，位置信号只占方差的 0.1%（按幅度之比 $0.71 / 22.6$ 也只有约 3%）；
# $\mathcal{N}(0, 1/d)$ 乘 $\sqrt{d}$ 后 RMS 约 1，位置编码占三分之一，两种信号同一量级，且与 $V$ 无关；Xavier 则随 $V$ 变：
# $V = 1000$ 时 RMS 0.82，位置编码占四成多，还算平衡；$V = 37000$ 时 RMS 0.17，位置编码占了约 95%，反过来盖过了词义。
# 两个常见错误正好对应两端：忘了乘 $\sqrt{d_{\text{model}}}$（小初始化时位置信号占绝对主导）；乘了，却用默认的 $\mathcal{N}(0, 1)$ 嵌入（位置信号被淹没）。
#
# 顺带一提 `nn.Embedding(..., padding_idx=pad_id)`：它把 `<pad>` 那一行初始化为 0，并且永远不给它梯度。
# 有了掩码，`<pad>` 的嵌入是什么都不影响真实位置，所以它不是必需的；而且如果之后对所有矩阵做 Xavier 初始化，
# 那一行会被重新随机化（只是仍然得不到梯度）。本课程不使用它。

# %% [markdown]
# ## 3. 形状追踪：一次前向传播
#
# 以原论文 base 配置（$d_{\text{model}} = 512,\ H = 8,\ d_{\text{ff}} = 2048,\ N = 6$）、共享词表 $V = 37000$、
# $B = 2$、源长 $T_s = 10$、目标长 $T_t = 9$ 为例：
#
# | 步骤 | 形状 |
# | --- | --- |
# | `src` / `tgt_in` | `(2, 10)` / `(2, 9)`，LongTensor |
# | `src_mask = make_pad_mask(src)` | `(2, 1, 1, 10)` |
# | `src_embed(src) * sqrt(512)`，`+ pe[:, :10]` | `(2, 10, 512)` |
# | 每个编码器层：自注意力权重 / FFN 中间层 / 输出 | `(2, 8, 10, 10)` / `(2, 10, 2048)` / `(2, 10, 512)` |
# | memory | `(2, 10, 512)` |
# | `tgt_mask = make_pad_mask(tgt_in) & make_subsequent_mask(9)` | `(2, 1, 1, 9) & (1, 1, 9, 9)` → `(2, 1, 9, 9)` |
# | `tgt_embed(tgt_in) * sqrt(512)`，`+ pe[:, :9]` | `(2, 9, 512)` |
# | 每个解码器层：自注意力 / 交叉注意力权重 / 输出 | `(2, 8, 9, 9)` / `(2, 8, 9, 10)` / `(2, 9, 512)` |
# | `out_proj` → logits | `(2, 9, 37000)` |
#
# 两点值得注意：编码器、解码器的每一层都不改变形状；只有嵌入（`(B, T)` → `(B, T, d)`）和输出投影（`d` → `V`）改变最后一维。
# 完成下面的练习后，这个单元格会用一个小模型（$d_{\text{model}} = 32$）逐步走一遍，并确认与 `encode` / `forward` 的结果相同。

# %% [markdown]
# ## 4. 练习：`Transformer`（8 分）
#
# 要求（属性名是契约，评分时按这些名字拷贝参考权重）：
#
# - `Transformer(src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4, dropout=0.1, max_len=512, pad_id=0)`；
# - 属性 `src_embed`、`tgt_embed`（`nn.Embedding`）、`pos_enc`（一个 `PositionalEncoding`，源和目标共用）、
#   `encoder_layers`、`decoder_layers`（`nn.ModuleList`，各 `num_layers` 层）、`out_proj`（`nn.Linear(d_model, tgt_vocab)`），
#   以及 `d_model`、`pad_id`；
# - 建议：对所有维数大于 1 的参数做 `nn.init.xavier_uniform_`（第 2 节；第 07 章的训练需要它）；
# - `encode`、`decode`、`forward` 如上表；嵌入乘 `math.sqrt(self.d_model)` 后再交给 `pos_enc`（它负责加位置编码和 dropout）；
# - 方法 `greedy_decode` 已经写好：它只调用第 6 节的练习——函数 `greedy_decode(model, ...)`。这个练习的评分不看它。

# %% exercise="Transformer"

# %% grade_id="transformer_structure" points=2
# Visible tests: attribute names and types, the parameter count, and the shapes of encode/decode/forward.
torch.manual_seed(11)
_m = Transformer(11, 13, d_model=16, num_heads=4, d_ff=32, num_layers=2, dropout=0.0, max_len=50, pad_id=0).eval()
for _name, _cls in (("src_embed", nn.Embedding), ("tgt_embed", nn.Embedding), ("pos_enc", PositionalEncoding),
                    ("encoder_layers", nn.ModuleList), ("decoder_layers", nn.ModuleList), ("out_proj", nn.Linear)):
    assert isinstance(getattr(_m, _name, None), _cls), f"属性 {_name} 应为 {_cls.__name__} / attribute {_name} must be a {_cls.__name__}"
assert _m.src_embed.weight.shape == (11, 16) and _m.tgt_embed.weight.shape == (13, 16), \
    "src_embed 用 src_vocab、tgt_embed 用 tgt_vocab / src_embed uses src_vocab, tgt_embed uses tgt_vocab"
assert len(_m.encoder_layers) == 2 and all(isinstance(_l, EncoderLayer) for _l in _m.encoder_layers), \
    "encoder_layers 应有 num_layers 个 EncoderLayer / encoder_layers must hold num_layers EncoderLayers"
assert len(_m.decoder_layers) == 2 and all(isinstance(_l, DecoderLayer) for _l in _m.decoder_layers), \
    "decoder_layers 应有 num_layers 个 DecoderLayer / decoder_layers must hold num_layers DecoderLayers"
assert (_m.out_proj.in_features, _m.out_proj.out_features) == (16, 13), \
    "out_proj 应为 nn.Linear(d_model, tgt_vocab) / out_proj must be nn.Linear(d_model, tgt_vocab)"
_enc_p = (4 * 16 * 16 + 4 * 16) + (2 * 16 * 32 + 32 + 16) + 2 * (2 * 16)         # one encoder layer
_dec_p = 2 * (4 * 16 * 16 + 4 * 16) + (2 * 16 * 32 + 32 + 16) + 3 * (2 * 16)     # one decoder layer
_expected = 11 * 16 + 13 * 16 + 2 * _enc_p + 2 * _dec_p + (16 * 13 + 13)
_n = sum(_p.numel() for _p in _m.parameters())
assert _n == _expected, f"参数量应为 {_expected}，得到 {_n}（多了或少了模块？）/ expected {_expected} parameters, got {_n}"
_src = torch.tensor([[3, 4, 5, 6, 7, 0, 0], [3, 4, 5, 6, 7, 8, 9]])              # (B, T_s)
_tgt = torch.tensor([[1, 3, 4, 0, 0], [1, 3, 4, 5, 6]])                          # (B, T_t)
with torch.no_grad():
    _mem = _m.encode(_src)
    assert _mem.shape == (2, 7, 16), f"encode 应返回 (B, T_s, d_model) = (2, 7, 16) / encode must return (2, 7, 16), got {tuple(_mem.shape)}"
    _hid = _m.decode(_tgt, _mem, make_pad_mask(_src))
    assert _hid.shape == (2, 5, 16), f"decode 应返回 (B, T_t, d_model) = (2, 5, 16) / decode must return (2, 5, 16), got {tuple(_hid.shape)}"
    _logits = _m(_src, _tgt)
    assert _logits.shape == (2, 5, 13), f"forward 应返回 (B, T_t, tgt_vocab) = (2, 5, 13) / forward must return (2, 5, 13), got {tuple(_logits.shape)}"
    assert not torch.allclose(_logits.softmax(-1).sum(-1), _logits.sum(-1)), "forward 应返回 logits，不做 softmax / forward must return logits, no softmax"

# %% grade_id="transformer_masks_from_pad_id" points=2
# Visible tests: masks are built inside from pad_id -- padding changes nothing, the decoder never sees the future.
torch.manual_seed(12)
_m = Transformer(12, 12, d_model=16, num_heads=4, d_ff=32, num_layers=2, dropout=0.0).eval()
_src, _src_padded = torch.tensor([[5, 6, 7]]), torch.tensor([[5, 6, 7, 0, 0]])
_tgt, _tgt_padded = torch.tensor([[1, 8, 9]]), torch.tensor([[1, 8, 9, 0]])
with torch.no_grad():
    _ref = _m(_src, _tgt)                                                           # (1, 3, 12)
    assert torch.allclose(_m(_src_padded, _tgt), _ref, atol=1e-5), \
        "源序列末尾补 <pad> 不应改变 logits（编码器与交叉注意力的掩码）/ source <pad> must not change the logits"
    assert torch.allclose(_m(_src, _tgt_padded)[:, :3], _ref, atol=1e-5), \
        "目标序列末尾补 <pad> 不应改变前面的 logits / target <pad> must not change earlier logits"
    _tgt_changed = torch.tensor([[1, 8, 4]])
    assert torch.allclose(_m(_src, _tgt_changed)[:, :2], _ref[:, :2], atol=1e-5), \
        "改变最后一个目标 token 不应影响前面位置（因果掩码）/ the last target token must not affect earlier positions (causal mask)"
    torch.manual_seed(13)
    _m5 = Transformer(12, 12, d_model=16, num_heads=4, d_ff=32, num_layers=1, dropout=0.0, pad_id=5).eval()
    assert torch.allclose(_m5(torch.tensor([[6, 7, 5, 5]]), _tgt), _m5(torch.tensor([[6, 7]]), _tgt), atol=1e-5), \
        "源序列的掩码应使用 self.pad_id，而不是写死 0 / the source mask must use self.pad_id, not a hard-coded 0"
    # Target side: with trailing padding the causal mask alone already hides <pad>, so use a LEFT-padded
    # target. Its real positions 2..4 must not depend on the <pad> (id 5) embedding at all.
    _tgt_left = torch.tensor([[5, 5, 1, 8, 9]])                                     # (1, T_t), pad_id = 5
    _before = _m5(torch.tensor([[6, 7]]), _tgt_left)[:, 2:]                         # (1, 3, 12)
    _m5.tgt_embed.weight[5] += 3.0                                                  # change only the <pad> row
    assert torch.allclose(_m5(torch.tensor([[6, 7]]), _tgt_left)[:, 2:], _before, atol=1e-5), \
        "目标序列的掩码也应使用 self.pad_id：make_pad_mask(tgt_in, self.pad_id) & 因果掩码 / " \
        "the target mask must use self.pad_id too: make_pad_mask(tgt_in, self.pad_id) & causal"

# %% grade_id="transformer_forward_matches_reference" points=4 check="Transformer:Transformer"
# Visible tests: encode/decode/forward recomputed step by step from your model's own parts.
def _hidden(out):  # layers return (x, weights) in chapter 05's contract; a layer of your own may return x alone
    return out[0] if isinstance(out, (tuple, list)) else out


torch.manual_seed(14)
_m = Transformer(10, 10, d_model=16, num_heads=4, d_ff=32, num_layers=2, dropout=0.0).eval()
_src = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 9]])                                # (B, T_s)
_tgt = torch.tensor([[1, 3, 4, 5, 0], [1, 6, 7, 8, 9]])                          # (B, T_t)
with torch.no_grad():
    _src_mask = make_pad_mask(_src)                                                 # (B, 1, 1, T_s)
    _x = _m.pos_enc(_m.src_embed(_src) * math.sqrt(16))                            # (B, T_s, d_model)
    for _layer in _m.encoder_layers:
        _x = _hidden(_layer(_x, _src_mask))
    assert torch.allclose(_m.encode(_src), _x, atol=1e-5), \
        "encode：嵌入 × √d_model，加位置编码，再过各编码器层（源填充掩码）/ encode: embed * sqrt(d_model), + PE, encoder layers with the source pad mask"
    _tgt_mask = make_pad_mask(_tgt) & make_subsequent_mask(5)                       # (B, 1, T_t, T_t)
    _y = _m.pos_enc(_m.tgt_embed(_tgt) * math.sqrt(16))                            # (B, T_t, d_model)
    for _layer in _m.decoder_layers:
        _y = _hidden(_layer(_y, _x, _tgt_mask, _src_mask))
    assert torch.allclose(_m.decode(_tgt, _x, _src_mask), _y, atol=1e-5), \
        "decode：嵌入 × √d_model，加位置编码，各解码器层（填充 & 因果，交叉注意力用 src_mask）/ decode: pad & causal self-mask, src_mask for cross-attention"
    assert torch.allclose(_m(_src, _tgt), _m.out_proj(_y), atol=1e-5), "forward 应返回 out_proj(decode(...)) / forward must return out_proj(decode(...))"

# %% [markdown]
# 下面用一个小模型（$d_{\text{model}} = 32,\ H = 4,\ N = 2$）把第 3 节的形状追踪实际走一遍：

# %%
src_demo = torch.tensor([[5, 6, 7, 8, 0, 0, 0], [3, 4, 5, 6, 7, 8, 9]])           # (B=2, T_s=7)
tgt_demo = torch.tensor([[1, 5, 6, 7, 0], [1, 3, 4, 5, 6]])                        # (B=2, T_t=5)


def show(step, t):
    print(f"{step:52s} {tuple(t.shape)}")


try:
    torch.manual_seed(15)
    model = Transformer(12, 12, d_model=32, num_heads=4, d_ff=64, num_layers=2, dropout=0.0).eval()
    with torch.no_grad():
        src_mask = make_pad_mask(src_demo, model.pad_id)
        show("src_mask = make_pad_mask(src)", src_mask)
        x = model.pos_enc(model.src_embed(src_demo) * math.sqrt(model.d_model))
        show("pos_enc(src_embed(src) * sqrt(d_model))", x)
        for i, layer in enumerate(model.encoder_layers):
            x, attn = layer(x, src_mask)
            show(f"encoder layer {i}: self-attention weights", attn)
            show(f"encoder layer {i}: output", x)
        print("memory equals model.encode(src):", torch.allclose(x, model.encode(src_demo), atol=1e-6))
        tgt_mask = make_pad_mask(tgt_demo, model.pad_id) & make_subsequent_mask(tgt_demo.size(1))
        show("tgt_mask = pad(tgt_in) & causal", tgt_mask)
        y = model.pos_enc(model.tgt_embed(tgt_demo) * math.sqrt(model.d_model))
        show("pos_enc(tgt_embed(tgt_in) * sqrt(d_model))", y)
        for i, layer in enumerate(model.decoder_layers):
            y, (self_w, cross_w) = layer(y, x, tgt_mask, src_mask)
            show(f"decoder layer {i}: self-attention weights", self_w)
            show(f"decoder layer {i}: cross-attention weights", cross_w)
            show(f"decoder layer {i}: output", y)
        logits = model.out_proj(y)
        show("logits = out_proj(hidden)", logits)
        print("logits equal model(src, tgt_in):", torch.allclose(logits, model(src_demo, tgt_demo), atol=1e-6))
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# ## 5. 训练与推理：为什么一个并行、一个串行
#
# **训练（teacher forcing）**：目标序列 $y_1 \dots y_n$ 右移一位作为解码器输入，原序列加 `<eos>` 作为标签：
#
# ```
# tgt_in  = <bos> y1  y2  ...  yn
# tgt_out =  y1   y2  y3  ... <eos>
# ```
#
# 一次前向就得到全部 $n + 1$ 个位置的预测，因果掩码保证预测 $y_i$ 的位置只看到 `<bos>`, $y_{<i}$，损失对所有位置一起算。
# 整个目标序列并行，这是 Transformer 训练比 RNN 快的主要原因。
#
# **推理（自回归，autoregressive）**：下一个 token 要等上一个 token 生成出来才知道，只能一步一步来：
# 编码器只跑一次，解码器每步跑一次。模型在训练时看到的前缀都是**正确答案**，推理时看到的是**自己生成的**，
# 前面错一步后面可能一路错下去——这叫暴露偏差（exposure bias）。

# %% [markdown]
# ## 6. 练习：`greedy_decode`（3 分）
#
# **贪心解码**每步取概率最大的 token。它的批量版本要处理一个细节：各行在不同的步输出 `<eos>`。正确做法是记录每行是否已结束，
# 已结束的行之后一律补 `<pad>`，**所有行**都结束时立即停止。常见的错误写法是 `if (next_token == eos_id).all(): break`——
# 只有所有行**在同一步**恰好输出 `<eos>` 才会提前停，否则（几乎总是）跑满 `max_new_tokens` 步，而且结束的行还在继续写 token。
#
# 要求（一个函数，模型作为第一个参数；`Transformer.greedy_decode` 方法调用的就是它）：
#
# - `greedy_decode(model, src, bos_id, eos_id, max_new_tokens)`：先 `model.encode(src)` 一次，源填充掩码用 `model.pad_id`；
# - 序列从 `<bos>` 开始，每步用 `model.decode` 和 `model.out_proj` 算出**最后一个位置**的 logits，取 argmax 接到末尾；
# - 一行输出过 `<eos>` 之后，这一行再接的都是 `model.pad_id`；**所有行**都输出过 `<eos>` 就立即停止，最多生成 `max_new_tokens` 个 token；
# - 返回 LongTensor，形状 `(B, ≤ 1 + max_new_tokens)`。函数已经带了 `@torch.no_grad()`；它不改模型的模式，调用前先 `model.eval()`（关掉 dropout）。

# %% exercise="greedy_decode"

# %% [markdown]
# 下面用一个“剧本”代替整个模型来看看批量的细节：`ScriptedModel` 有契约里的 `encode`、`decode`、`forward`、`out_proj` 和 `pad_id`，
# 第 $b$ 行在位置 $t$ 上预测的下一个 token 就是 `script[b][t]`——不用训练就能决定每行在哪一步输出 `<eos>`。
# 它不用你的 `Transformer`，所以这个练习可以单独完成、单独评分。

# %%
class ScriptedModel(nn.Module):
    """Stands in for a trained Transformer: at position t of row b the largest logit is on ``script[b][t]``.

    ``decode`` hands each position its (row, position) as a (B, T, 2) "hidden state"; ``out_proj`` looks
    the token up and returns one-hot logits, on the last position ``(B, 2)`` or on every one ``(B, T, 2)``.
    """

    def __init__(self, script, vocab, pad_id=PAD_ID):
        super().__init__()
        self.script = torch.tensor(script)                                         # (B, steps)
        self.vocab, self.pad_id = vocab, pad_id

    def encode(self, src):
        return torch.zeros(*src.shape, 2)                                          # (B, T_s, 2): memory is not used

    def decode(self, tgt_in, memory, src_mask=None):
        B, T = tgt_in.shape
        rows, positions = torch.meshgrid(torch.arange(B), torch.arange(T), indexing="ij")  # (B, T) each
        return torch.stack([rows, positions], dim=-1).float()                     # (B, T, 2)

    def out_proj(self, hidden):
        rows, positions = hidden[..., 0].long(), hidden[..., 1].long().clamp(max=self.script.size(1) - 1)
        return F.one_hot(self.script[rows, positions], self.vocab).float()        # (..., vocab)

    def forward(self, src, tgt_in):
        return self.out_proj(self.decode(tgt_in, self.encode(src)))               # (B, T_t, vocab)


SCRIPT = [[5, EOS_ID, 7, 7, 7, 7],      # row 0 ends at step 1
          [6, 7, EOS_ID, 7, 7, 7],      # row 1 ends at step 2
          [EOS_ID, 8, 8, 8, 8, 8]]      # row 2 ends at step 0


@torch.no_grad()
def naive_batched_greedy(model, src, bos_id, eos_id, max_new_tokens):
    """The common wrong loop: no per-row bookkeeping, stops only if all rows hit EOS in the same step."""
    memory = model.encode(src)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)                    # (B, 1)
    for _ in range(max_new_tokens):
        next_token = model.out_proj(model.decode(ys, memory, make_pad_mask(src))[:, -1]).argmax(-1, keepdim=True)  # (B, 1)
        ys = torch.cat([ys, next_token], dim=1)
        if (next_token == eos_id).all():
            break
    return ys


src_script = torch.tensor([[5, 6, 7, 0], [5, 6, 7, 8], [9, 9, 0, 0]])             # (B=3, T_s)
model_s = ScriptedModel(SCRIPT, vocab=12)
print("naive loop:\n", naive_batched_greedy(model_s, src_script, BOS_ID, EOS_ID, max_new_tokens=6))
try:
    print("your greedy_decode:\n", greedy_decode(model_s, src_script, BOS_ID, EOS_ID, max_new_tokens=6))
except NotImplementedError:
    print(FINISH_FIRST)

# %% [markdown]
# 朴素的循环跑满了 6 步，结束的行后面还接着 `7`、`8`；正确的版本在第 3 步后停止（3 行都已输出 `<eos>`），
# 结束的行补 `<pad> = 0`：`[[1, 5, 2, 0], [1, 6, 7, 2], [1, 2, 0, 0]]`。下面的评分单元格检查的正是这个行为。

# %% grade_id="greedy_decode_stops_at_eos" points=3 check="greedy_decode:greedy_decode"
# Visible tests with the scripted model: start with BOS, pad finished rows, stop once every row has emitted EOS.
_src = torch.tensor([[5, 6, 7, 0], [5, 6, 7, 8], [9, 9, 0, 0]])
_out = greedy_decode(ScriptedModel(SCRIPT, vocab=12), _src, BOS_ID, EOS_ID, max_new_tokens=6)
assert isinstance(_out, torch.Tensor) and _out.dtype == torch.long, "应返回 LongTensor / must return a LongTensor"
assert torch.all(_out[:, 0] == BOS_ID), "每行应以 <bos> 开头 / every row must start with <bos>"
assert _out.shape == (3, 4), \
    f"3 行都输出 <eos> 后应立即停止：形状 (3, 4)，得到 {tuple(_out.shape)} / must stop once every row has emitted <eos>: shape (3, 4)"
assert torch.equal(_out, torch.tensor([[1, 5, 2, 0], [1, 6, 7, 2], [1, 2, 0, 0]])), \
    f"输出 <eos> 之后的位置应为 pad_id / positions after <eos> must be pad_id; got {_out.tolist()}"
_never = ScriptedModel([[5, 6, 7, 8, 9], [6, 7, 8, 9, 5], [7, 8, 9, 5, 6]], vocab=12)  # never emits <eos>
_out = greedy_decode(_never, _src, BOS_ID, EOS_ID, max_new_tokens=4)
assert _out.shape == (3, 5), f"没有 <eos> 时应生成 max_new_tokens 个 token：形状 (3, 5) / without <eos>: shape (3, 1 + max_new_tokens), got {tuple(_out.shape)}"
assert torch.equal(_out[:, 1:], _never.script[:, :4]), \
    f"每步应取最后一个位置 logits 的 argmax / take the arg-max of the last position's logits; got {_out.tolist()}"

# %% [markdown]
# ## 7. 选做：KV 缓存（不计分）
#
# **推理**时每一步只新增 1 个查询。如果每步都把整个前缀重新过一遍解码器（第 6 节的 `greedy_decode` 就是这样），
# 第 $t$ 步要重算 $t$ 个位置（一层的乘加公式见第 9 节）：投影和 FFN $O(t\,d^2)$，注意力 $O(t^2 d)$；生成 $T$ 个 token 合计 $O(T^2 d^2)$ 的投影和 FFN、
# $O(T^3 d)$ 的注意力乘加。
# 对比训练：$n = 2048$ 时训练每个头要算一个 4.2M 元素的注意力矩阵，而推理时新的一步本质上只需要新查询与 2048 个键的点积。
# 前缀里每个位置的 K、V 在之后的步骤里**不会变**（因果掩码保证了前面的位置看不到后面的 token），重算纯属浪费——这就是 KV 缓存的出发点。
#
# **思路**：每个解码器层为自注意力维护一份缓存 `(K, V)`，形状 `(B, H, t, d_k)`。第 $t$ 步只把**最新的一个 token** 送进解码器：
#
# 1. 嵌入最新的 token，加上**第 $t$ 个位置**的位置编码（不是第 0 个！），得到 `(B, 1, d_model)`；
# 2. 每层自注意力：只算这个 token 的 q、k、v，把 k、v 拼到缓存末尾，q 与缓存里全部 $t + 1$ 个键做注意力。
#    新 token 本来就只看过去和自己，所以**不需要因果掩码**；但缓存里可能有已结束行补的 `<pad>`，键的填充掩码仍要；
# 3. 交叉注意力的 K、V 来自 memory，整个解码过程不变：在开始时每层算一次，之后反复使用；
# 4. 残差、LayerNorm、FFN 都是逐位置的，只算这一个位置即可。
#
# 代价是显存：每层每个 token 缓存 K、V 各 $d_{\text{model}}$ 个数。base 模型（6 层解码器、$d = 512$、FP16）每个 token
# $6 \times 2 \times 512 \times 2$ 字节 = 12 KiB，生成 2048 个 token 时每个样本 24 MiB；交叉注意力的缓存另算，大小与源序列长度成正比。
# 大模型推理时 KV 缓存常常比模型权重还占显存，这催生了多查询注意力（MQA）、分组查询注意力（GQA）、分页缓存（PagedAttention）等技术。
#
# 写一个与 `greedy_decode` **输出的 token 逐个相同**的 `greedy_decode_cached(model, src, bos_id, eos_id, max_new_tokens)`。
# 它直接使用模型的子模块（`layer.self_attn.W_q` 等），所以要自己分头、合头。

# %% exercise="greedy_decode_cached"

# %% [markdown]
# 自查（不计分）：在几个随机初始化的模型上，与参考的贪心解码逐个 token 比较，其中有各行在不同步结束的例子。
# 出错时会指出常见的错误，例如新 token 加了第 0 个位置的位置编码、结束的行没有补 `<pad>`、交叉注意力忘了源填充掩码。

# %% check="greedy_decode_cached:greedy_decode_cached"

# %% [markdown]
# 在同一个**未训练**的模型上比较两种解码（输出的 token 逐个相同，才谈得上比速度）。为了让每次调用都生成同样多的 token，
# 这里把 `eos_id` 设成一个模型不可能输出的 id（`-1`），两种解码都会跑满 `max_new_tokens` 步。计时的数字每台机器都不同。

# %% demo=true
try:
    torch.manual_seed(18)
    model_t = Transformer(16, 16, d_model=128, num_heads=4, d_ff=256, num_layers=2, dropout=0.0).eval()
    src_t = torch.randint(3, 16, (4, 12), generator=torch.Generator().manual_seed(18))   # (B, T_s)
    NO_EOS = -1                                                                          # never emitted
    greedy_decode(model_t, src_t, BOS_ID, NO_EOS, 4)                                     # warmup
    greedy_decode_cached(model_t, src_t, BOS_ID, NO_EOS, 4)
    lengths, plain_s, cached_s = [8, 16, 32, 64], [], []
    for n in lengths:
        best_plain = best_cached = float("inf")
        for _ in range(2):                                                               # best of 2 runs
            start = time.perf_counter()
            plain = greedy_decode(model_t, src_t, BOS_ID, NO_EOS, n)
            middle = time.perf_counter()
            cached = greedy_decode_cached(model_t, src_t, BOS_ID, NO_EOS, n)
            best_plain = min(best_plain, middle - start)
            best_cached = min(best_cached, time.perf_counter() - middle)
        assert torch.equal(plain, cached), f"{n} 个新 token 时两种解码的输出不同 / outputs differ at {n} new tokens"
        plain_s.append(best_plain)
        cached_s.append(best_cached)
        print(f"{n} new tokens: plain {1e3 * plain_s[-1]:.1f} ms, cached {1e3 * cached_s[-1]:.1f} ms")
    print("identical tokens at every length: True")
    print(f"speed-up at {lengths[-1]} new tokens: {plain_s[-1] / cached_s[-1]:.1f}x")
    plot_decode_timing(lengths, plain_s, cached_s,
                       title="Greedy decoding on one untrained model (d_model=128, N=2, B=4): plain vs KV cache")
    plt.show()
except NotImplementedError:
    print("计时需要第 6 节的 greedy_decode 和本节选做的 greedy_decode_cached / "
          "the timing needs greedy_decode (section 6) and this section's optional greedy_decode_cached")

# %% [markdown]
# 生成的 token 越多，缓存省下的计算越多：不带缓存时第 $t$ 步要算 $O(t\,d^2 + t^2 d)$（重算整个前缀的投影、FFN 和注意力），
# 带缓存时只算 $O(d^2 + t\,d)$（一个位置的投影、FFN，加上与 $t$ 个缓存键的点积）——每步从随 $t$ 增长变成基本是常数。
# 短序列时加速有限，因为每步固定的开销（Python 循环、小矩阵乘）占了大头；在这样的小模型上，测出的倍数还随机器负载起伏。
# 在 GPU 上、大模型里，KV 缓存是所有生成式推理的标配。
#
# 另一个常见的选做是**束搜索（beam search）**：每步保留得分最高的 $k$ 个前缀而不是 1 个，按对数概率之和（常配长度惩罚）排序。
# 翻译任务里它比贪心解码好一些（原论文用 beam size 4、长度惩罚 $\alpha = 0.6$）；开放式生成里更常用采样（temperature、top-k、top-p）。

# %% [markdown]
# ## 8. 参数量：公式、实例与原论文 base 模型
#
# 记 $d = d_{\text{model}}$，沿用第 05 章的单层公式：
#
# $$
# \begin{aligned}
# P_{\text{enc}} &= (4d^2 + 4d) + (2d\,d_{\text{ff}} + d_{\text{ff}} + d) + 4d, \qquad
# P_{\text{dec}} = 2(4d^2 + 4d) + (2d\,d_{\text{ff}} + d_{\text{ff}} + d) + 6d\\
# P &= \underbrace{V_s d + V_t d}_{\text{两个嵌入}} + N (P_{\text{enc}} + P_{\text{dec}}) + \underbrace{d\,V_t + V_t}_{\text{out\_proj}}
# \end{aligned}
# $$
#
# 位置编码是 buffer（不训练），不计入参数。原论文（WMT 英德）用一个**共享**的 BPE 词表，约 37000 个 token，并让源嵌入、
# 目标嵌入、输出投影三者共用一个矩阵（three-way weight tying）；这时嵌入部分只算一次 $V d$，`out_proj` 只剩偏置 $V$
# （论文没有说输出层有没有偏置，我们的 `nn.Linear` 有）。我们的 `Transformer` 默认**不共享**：三个矩阵各算各的。
#
# 下表的假设：base 配置 $d = 512,\ H = 8,\ d_{\text{ff}} = 2048,\ N = 6$；“分开”表示源、目标词表各 37000 且不共享权重；
# “共享”表示一个 37000 的词表、三者共享。“实例”一列在 `meta` 设备上真正构造你的 `Transformer` 来数参数——
# `meta` 张量只有形状、不分配内存，1 亿参数的模型也是瞬间建好。

# %% demo=true
def encoder_layer_params(d, d_ff):
    return (4 * d * d + 4 * d) + (2 * d * d_ff + d_ff + d) + 4 * d


def decoder_layer_params(d, d_ff):
    return 2 * (4 * d * d + 4 * d) + (2 * d * d_ff + d_ff + d) + 6 * d


def transformer_params(src_vocab, tgt_vocab, d, d_ff, n_layers, tied=False):
    """Exact parameter count from the formula; ``tied``: one shared matrix for both embeddings and out_proj."""
    layers = n_layers * (encoder_layer_params(d, d_ff) + decoder_layer_params(d, d_ff))
    if tied:
        if src_vocab != tgt_vocab:
            raise ValueError("共享权重需要同一个词表 / tying needs one shared vocabulary")
        return tgt_vocab * d + layers + tgt_vocab                          # shared matrix + out_proj bias
    return (src_vocab + tgt_vocab) * d + layers + (d * tgt_vocab + tgt_vocab)


def instantiated_params(src_vocab, tgt_vocab, tied=False):
    """Build the base model on the meta device (shapes only) and count its distinct parameters."""
    with torch.device("meta"):
        m = Transformer(src_vocab, tgt_vocab, d_model=512, num_heads=8, d_ff=2048, num_layers=6, max_len=5000)
    if tied:
        m.tgt_embed.weight = m.src_embed.weight                            # one matrix, three uses
        m.out_proj.weight = m.src_embed.weight                             # (V, d) is nn.Linear(d, V)'s weight shape
    return sum(p.numel() for p in m.parameters())                          # a shared tensor is counted once


configs = [("separate, 37000 + 37000 (ours by default)", 37000, 37000, False),
           ("shared 37000, tied (paper, EN-DE)", 37000, 37000, True),
           ("shared 32000, tied (paper, EN-FR)", 32000, 32000, True)]
print(f"{'base model (d=512, h=8, d_ff=2048, N=6)':44s} | {'formula':>12s} | {'instantiated':>12s}")
for name, vs, vt, tied in configs:
    try:
        built = f"{instantiated_params(vs, vt, tied):12,d}"
    except NotImplementedError:
        built = f"{'(todo)':>12s}"
    print(f"{name:44s} | {transformer_params(vs, vt, 512, 2048, 6, tied):12,d} | {built}")
layers_only = 6 * (encoder_layer_params(512, 2048) + decoder_layer_params(512, 2048))
print(f"{'encoder + decoder layers only':44s} | {layers_only:12,d} |")

# %% [markdown]
# 原论文表 3 报告 base 模型约 65M 参数；按共享词表的公式是 63.1M，差额来自论文没有给出的细节（词表的确切大小等）。
# 不共享时要 101M：三个 $37000 \times 512$ 的矩阵就占了 56.8M。只拿编码器层算（“单层约 3.15M，6 层约 18.9M”）会漏掉一半；
# 解码器层因为多一个交叉注意力更大，6 层编码器加 6 层解码器是 44.1M。各部分的占比：

# %% demo=true
d, d_ff, N, V = 512, 2048, 6, 37000
attn = 4 * d * d + 4 * d
ffn = 2 * d * d_ff + d_ff + d
breakdown = {
    "shared embedding / output matrix (V x d)": V * d,
    "encoder self-attention (6 layers)": N * attn,
    "encoder FFN (6 layers)": N * ffn,
    "decoder self-attention (6 layers)": N * attn,
    "decoder cross-attention (6 layers)": N * attn,
    "decoder FFN (6 layers)": N * ffn,
    "LayerNorms (30 of them)": N * (4 * d + 6 * d),
    "output bias": V,
}
assert sum(breakdown.values()) == transformer_params(V, V, d, d_ff, N, tied=True)
plot_param_breakdown(breakdown, title="Base Transformer, shared 37k vocabulary, tied weights")
plt.show()

# %% [markdown]
# FFN 是参数大户（两组合计 25.2M，占 40%），其次是词嵌入（30%）。词表越大，嵌入占比越高——这也是大词表模型普遍做权重共享的原因之一。

# %% [markdown]
# ## 9. 复杂度与显存
#
# 一层的乘加次数（multiply-add，1 次乘加 = 2 FLOPs）——Q、K、V、O 投影 $4nd^2$，$QK^{\top}$ 与 $AV$ 合计 $2n^2 d$，
# FFN $2nd\,d_{\text{ff}} = 8nd^2$，一层约 $12nd^2 + 2n^2 d$——以及 $n^2$ 项什么时候占主导（注意力子层内 $n > 2d$，
# 整个层 $n > 6d$）、注意力矩阵占多少显存，都在第 01 章第 10 节算过。$d = 512$ 时两个分界点是 $n = 1024$ 和 $n = 3072$。
# 这里把同一套公式用到原论文的 base 模型上：

# %%
def encoder_layer_macs(n, d, d_ff):
    """Multiply-adds of one encoder layer on n tokens: (Q/K/V/O projections, FFN, QK^T + AV)."""
    return 4 * n * d * d, 2 * n * d * d_ff, 2 * n * n * d


d, d_ff, n = 512, 2048, 1024
proj, ffn, attn = encoder_layer_macs(n, d, d_ff)
print(f"one head, n = 1024: QK^T = 1024^2 x 64 = {1024 ** 2 * 64 / 1e6:.0f} M multiply-adds")
print(f"one encoder layer, n = 1024: projections {proj / 1e9:.2f} G + FFN {ffn / 1e9:.2f} G + QK^T and AV {attn / 1e9:.2f} G "
      f"= {(proj + ffn + attn) / 1e9:.2f} G multiply-adds = {2 * (proj + ffn + attn) / 1e9:.1f} GFLOPs")
enc = 6 * sum(encoder_layer_macs(n, d, d_ff))
dec = 6 * (sum(encoder_layer_macs(n, d, d_ff)) + 4 * n * d * d + 2 * n * n * d)   # + cross-attention
head = n * d * 37000                                                                 # out_proj onto V = 37000
print(f"base model forward, n_src = n_tgt = 1024: {(enc + dec + head) / 1e9:.1f} G multiply-adds "
      f"= {2 * (enc + dec + head) / 1e9:.0f} GFLOPs (out_proj alone {head / 1e9:.1f} G)")

# %% [markdown]
# $n = 1024$（$= 2d$）时注意力分数与投影都是 1.07G，正是注意力子层内的分界点。
# 自己估算时容易只数一个头：$QK^{\top}$ 约 $1024^2 \times 64 \approx 67$M 乘加，于是以为一次前向只有几百 MFLOPs。67M 只是**一个头**；
# 8 个头、再加 $AV$，注意力分数部分是 1.07G 乘加，加上投影和 FFN，$n = 1024$ 时**一个编码器层**就约 4.3G 乘加（≈ 8.6 GFLOPs），
# 整个 base 模型一次前向（源、目标各 1024 个 token）约 84G 乘加、170 GFLOPs——差了两个多数量级。训练一步（前向 + 反向）约是前向的 3 倍。
#
# 显存方面（第 01 章第 10 节的表）：$n = 16384$ 时单个头、单个样本的注意力矩阵在 FP16 下就要 512 MiB，8 个头 4 GiB，
# 还没算梯度和其他激活；批大小 $B$ 再乘上去。长序列的常见对策：
#
# | 方法 | 做法 | 计算量 | 注意力部分的显存 | 精确？ |
# | --- | --- | --- | --- | --- |
# | FlashAttention | 分块（tiling）在片上 SRAM 里算 online softmax，不把 $n \times n$ 矩阵写回显存；IO-aware | $O(n^2 d)$（反向重算略增） | $O(n)$ | 精确 |
# | 局部 / 滑动窗口注意力（windowed） | 每个查询只看附近 $w$ 个键；远处的信息靠多层逐层传递 | $O(n w d)$ | $O(n w)$ | 近似 |
# | 稀疏注意力（Longformer、BigBird） | 窗口之外再留少数全局 token（如 `[CLS]`），它们看全部、也被全部看 | $O(n (w + g) d)$ | $O(n (w + g))$ | 近似 |
# | 检索（retrieval） | 先为每个查询检索 $k$ 个相关片段 / 键，只对它们做注意力 | $O(n k d)$ | $O(n k)$ | 近似 |
# | 线性注意力（Linformer、Performer） | K、V 沿序列投影到 $k$ 维（Linformer）；随机特征近似 softmax 核，先算 $K^{\top} V$ | $O(n)$ | $O(n)$ | 近似 |
# | Reformer | 局部敏感哈希（LSH）把相近的 q、k 分到同一个桶，只在桶内做注意力 | $O(n \log n)$ | $O(n \log n)$ | 近似 |
# | 梯度检查点（gradient checkpointing） | 前向不存中间激活，反向时重算 | 约多一次前向 | 激活显存大降 | 精确 |
#
# 例如 $n = 16384,\ w = 512$：窗口注意力的矩阵有 $n w \approx 8.4$M 个元素，全量是 $n^2 \approx 268$M，小 $n / w = 32$ 倍
# （约一个半数量级，不到两个数量级）。
# 注意 Reformer 是 $O(n \log n)$ 而不是 $O(n)$：别把 Linformer、Performer、Reformer 一起记成“线性注意力”。
# FlashAttention 是今天训练和推理的默认做法：结果与全量注意力一致，只是不再物化 $n \times n$ 矩阵，论文报告提速约 2–4 倍。
# 一个不花钱的优化：每个批次只补齐到**批内最长**的序列，而不是一律补到 2048——有效内容只有几百个 token 时，$n^2$ 的浪费是几十倍。
#
# 推理时每一步只新增 1 个查询，这一步的代价和 KV 缓存怎么省掉重算，见第 7 节。

# %% [markdown]
# ## 10. 三种架构：编码器-解码器、仅编码器、仅解码器
#
# | 架构 | 注意力 | 代表模型 | 典型任务 |
# | --- | --- | --- | --- |
# | 仅编码器（encoder-only） | 双向自注意力 | BERT、RoBERTa；视觉：ViT | 分类、序列标注、抽取式问答；图像分类 |
# | 仅解码器（decoder-only） | 因果自注意力 | GPT 系列、LLaMA、Qwen | 生成、对话，现代大模型 |
# | 编码器-解码器 | 编码器双向 + 解码器因果 + 交叉注意力 | 原始 Transformer、T5、BART | 翻译、摘要等条件生成 |
#
# 仅解码器模型就是本章的解码器去掉交叉注意力（每层两个子层），输入是“提示 + 已生成部分”拼成的一条序列。
#
# **仅编码器怎么做分类？** 把整句编码成 `(B, T, d)` 之后，需要一个句向量 `(B, d)` 再接线性分类头：要么在句首放一个特殊的
# `[CLS]` token，取它的输出（BERT）；要么对真实 token 做平均池化（mean pooling）——求平均时要用填充掩码排除 `<pad>`。
# **ViT**（Vision Transformer）把图像当成 token 序列：$224 \times 224$ 的图像切成 $16 \times 16$ 的小块（patch），
# 得到 $14 \times 14 = 196$ 个 token（每块 $16 \times 16 \times 3 = 768$ 个像素值，经线性层映射到 $d$ 维），再加一个 `[CLS]` 共 197 个，
# 之后就是标准的编码器。块越小，token 越多，注意力的 $n^2$ 代价越高。
#
# **怎么评价？** 翻译用 BLEU（与参考译文的 $n$-gram 重合度，带长度惩罚；原论文 base 模型在 WMT 英德上是 27.3）；
# 语言模型用困惑度（perplexity）$= \exp(\text{平均交叉熵})$，可以理解为“平均在多少个 token 之间犹豫”，均匀猜 $V$ 个 token 时恰好是 $V$；
# 工程上还要量吞吐（tokens/sec）和显存峰值（如 `torch.cuda.max_memory_allocated()`），比较 $n = 512$ 与 $n = 1024$ 的吞吐就能直接看到 $n^2$ 的代价。
# **前缀语言模型**（prefix LM）介于两者之间：前缀部分内部双向可见，生成部分因果（UniLM、GLM 属于这类；
# T5 本身是编码器-解码器，它的论文把 prefix LM 作为对照实验比较过）。
#
# 三种架构的区别全在自注意力的掩码上。下面把它们画在一起（6 个位置，前缀 3 个；True = 可以看）：

# %%
T_arch, prefix_len = 6, 3
arch_tokens = ["p1", "p2", "p3", "g1", "g2", "g3"]                                  # prefix p*, generated part g*
bidirectional = torch.ones(T_arch, T_arch, dtype=torch.bool)                       # (T, T): everyone sees everyone
causal_arch = torch.tril(torch.ones(T_arch, T_arch, dtype=torch.bool))             # (T, T): keys j <= query i
prefix_lm = causal_arch | (torch.arange(T_arch) < prefix_len)[None, :]             # (T, T): + every prefix key
plot_mask_row([bidirectional, causal_arch, prefix_lm],
              ["encoder-only: bidirectional", "decoder-only: causal", f"prefix LM: first {prefix_len} bidirectional"],
              x_labels=arch_tokens, y_labels=arch_tokens, title="Self-attention masks of the three architectures")
plt.show()

# %% [markdown]
# 前缀 LM 的掩码 = 因果掩码 **或** “键在前缀里”：前缀内部每个位置互相看得见（左上 3×3 全可见），生成部分每个位置看得到整个前缀和
# 自己之前的生成部分；前缀看不到生成部分（右上仍是遮挡）。所以前缀部分可以像编码器一样双向理解输入，生成部分仍能逐个 token 自回归生成。
#
# **为什么现在的大模型多是仅解码器？** 常见的理由：
#
# 1. **目标简单、数据无限**：下一个 token 预测（next-token prediction）可以直接用任何文本训练，不需要设计 MLM 那样的任务；
# 2. **工程简单**：一个模块，训练和推理是同一个计算图；KV 缓存可以跨多轮对话复用；
# 3. **规模化表现**：在相同算力下，仅解码器模型的零样本、少样本（in-context learning）能力在实践中表现突出；
# 4. **一种理论解释（有争议）**：因果注意力矩阵是下三角且对角线为正，必定满秩；双向注意力矩阵可能低秩，表达能力受限。
#    这是一种直觉性的论证，不是定论。（常被引用的 Dong et al. 2021 讨论的是“不带残差和 FFN 的纯注意力随深度以双指数速度退化为秩 1”，
#    它对两种注意力都成立，不能直接拿来证明“双向不如单向”。）

# %% [markdown]
# **子词分词（附录，有计分练习）。** 第 8 节的“共享 BPE 词表，约 37000 个 token”是怎么来的？BPE、WordPiece、SentencePiece（Unigram）
# 和字节级 BPE，连同亲手写 BPE 的练习和相关面试题，都在附录 11_tokenizers（`11_tokenizers.ipynb`）里。

# %% [markdown]
# ## 11. 易错点清单
#
# | 错误 | 现象 |
# | --- | --- |
# | 忘了乘 $\sqrt{d_{\text{model}}}$；$\mathcal{N}(0, 1)$ 嵌入又乘了它；大词表（$V = 37000$）Xavier 初始化再乘它 | 位置或词的信号被淹没，训练慢、学不会顺序 |
# | 掩码交给调用者传、默认 `None` | 忘传时 `<pad>` 参与注意力，不报错 |
# | `pad_id` 写死为 0 | 换词表后掩码全错 |
# | 交叉注意力用了目标的掩码，或每层解码器配对应层编码器的输出 | 形状错或语义错：交叉注意力用源填充掩码和**最后一层**编码器输出 |
# | `forward` 里做了 softmax，训练又用 `cross_entropy` | 双重 softmax，梯度被压小，学得极慢 |
# | 贪心解码取 `logits[:, 0]` 而不是 `logits[:, -1]` | 每步都重复预测第一个 token |
# | `if (next == eos).all(): break` | 只有所有行恰好在同一步输出 `<eos>` 才提前停，（几乎）总是跑满 `max_new_tokens`；结束的行继续写 token |
# | 推理前没有 `model.eval()` | dropout 仍然生效，同一输入每次结果不同 |
# | 在 `greedy_decode` 里偷偷调 `model.eval()` | 训练中途评估一次后，模型一直停在 eval 模式，dropout 悄悄关掉了 |
# | `max_len` 小于 `1 + max_new_tokens` 或源序列长度 | 位置编码越界（`PositionalEncoding` 报错） |
# | KV 缓存时新 token 用了第 0 个位置的位置编码 | 结果与不带缓存的解码不同 |
# | KV 缓存时对单个新 token 还加因果掩码 `(t, t)` | 形状对不上 `(1, t)`：新 token 本来就只看过去 |

# %% [markdown]
# ## 12. 面试要点（Q&A）
#
# **Q1：用 30 秒讲一下 Transformer 的结构。**
# 编码器-解码器。编码器 $N$ 层，每层多头自注意力 + FFN；解码器 $N$ 层，每层带因果掩码的自注意力、对编码器输出的交叉注意力、FFN；
# 每个子层都有残差连接和 LayerNorm（原论文 Post-LN）。输入是词嵌入 × $\sqrt{d_{\text{model}}}$ 加正弦位置编码，输出经线性层得到词表上的 logits。
#
# **Q2：为什么嵌入要乘 $\sqrt{d_{\text{model}}}$？** 它和嵌入的初始化配套：原论文的代码按标准差 $d^{-1/2}$ 初始化嵌入（并与输出投影共享），
# 乘 $\sqrt{d}$ 后元素 RMS 约 1，与位置编码（RMS 约 0.71）同一量级，两种信号都不被淹没。换了初始化，这个因子就不一定合适：
# 默认 $\mathcal{N}(0, 1)$ 嵌入乘 $\sqrt{512}$ 后 RMS 约 22.6，位置信号被淹没；Xavier 初始化的标准差 $\sqrt{2/(V + d)}$ 随词表变化，
# $V = 1000$ 时碰巧合适，$V = 37000$ 时乘完只有约 0.17，位置信号反而占主导。
#
# **Q3：base 模型有多少参数？** 约 65M（论文）。按公式：12 个层共 44.1M（编码器层 3.15M × 6，解码器层 4.20M × 6），
# 共享的 37000 × 512 嵌入矩阵 18.9M，合计约 63.1M；不共享则约 101M。
#
# **Q4：什么是权重共享（weight tying）？有什么好处？** 源嵌入、目标嵌入和输出投影用同一个矩阵（需要共享词表）：
# 参数少了两个 $V \times d$ 矩阵，输入和输出的词向量空间一致，小数据上通常还能提升效果。
# （另一种共享是 ALBERT 的**跨层**参数共享：所有层用同一组权重，参数量大降，但计算量不变。）
#
# **Q5：训练和推理的区别？** 训练用 teacher forcing，整个目标序列一次前向、并行计算，靠因果掩码防止偷看；
# 推理自回归，逐个 token 串行。训练见到的是正确前缀，推理见到的是自己的输出（exposure bias）。
#
# **Q6：贪心解码什么时候停？批量时要注意什么？** 输出 `<eos>` 或达到最大长度。批量时每行结束的时间不同：
# 记录每行是否结束，结束的行补 `<pad>`，所有行都结束才停。
#
# **Q7：KV 缓存的原理？为什么能缓存？代价是什么？**
# 因果掩码下，前面位置的 K、V 不依赖后面的 token，生成新 token 时不会变，所以缓存起来，每步只算新 token 的 q、k、v；
# 不带缓存时第 $t$ 步重算整个前缀，要 $O(t\,d^2 + t^2 d)$，生成 $T$ 个 token 共 $O(T^2 d^2 + T^3 d)$；带缓存时每步 $O(d^2 + t\,d)$，
# 共 $O(T d^2 + T^2 d)$。代价是显存：每层每个 token $2d$ 个数，随序列长度线性增长。
# 交叉注意力的 K、V 来自编码器输出，整个解码只算一次。
#
# **Q8：注意力的复杂度？瓶颈在哪？** 一层约 $12 n d^2 + 2 n^2 d$ 次乘加（$d_{\text{ff}} = 4d$），注意力权重显存 $O(B H n^2)$。
# 注意力子层内 $n > 2d$、整个层 $n > 6d$ 时 $n^2$ 项才占主导；$n = 1024,\ d = 512$ 时一层约 4.3G 乘加（8.6 GFLOPs）。
# 长序列的对策：FlashAttention（精确，分块、不物化 $n \times n$ 矩阵，显存 $O(n)$，计算量不变）、窗口/稀疏注意力 $O(nw)$、
# 检索 $O(nk)$、Linformer/Performer $O(n)$、Reformer $O(n \log n)$（后几种都是近似）、梯度检查点（重算换显存）。
#
# **Q9：为什么大模型多用仅解码器架构？** 目标简单、任意文本可训练；工程简单、KV 缓存好用；规模化后的少样本能力强；
# 还有“因果注意力矩阵满秩”之类的理论解释，但那只是一种说法。
#
# **Q10：Transformer 为什么能取代 RNN？** 训练时整句并行（RNN 必须按时间步串行）；任意两个位置之间的路径长度是 $O(1)$
# （RNN 是 $O(n)$），长距离依赖更容易学；代价是 $O(n^2)$ 的注意力和需要显式的位置编码。
#
# **Q11：困惑度是什么？** $\exp(\text{平均交叉熵})$，相当于模型平均在多少个 token 之间犹豫；均匀乱猜时等于词表大小 $V$，完美预测时是 1。
#
# ### 怎么讲：30 秒 / 1 分钟版本
#
# 手写完一个 Transformer，面试官常说“讲讲你的实现”。顺序比细节重要：**先结构，再形状，再掩码，最后易错点**。
#
# - **30 秒**：只讲结构，也就是 Q1 的回答——编码器、解码器各有哪几个子层，残差 + LayerNorm，嵌入 × $\sqrt{d_{\text{model}}}$ 加位置编码，输出 logits。
# - **1 分钟**：在 30 秒版本之后再补三句。
#   1. *形状*：`(B, T)` → 嵌入 `(B, T, d)` → 分头 `(B, H, T, d_k)` → 权重 `(B, H, T_q, T_k)` → 合头 `(B, T, d)` → logits `(B, T, V)`；
#      编码器层、解码器层都不改变形状。
#   2. *掩码*：约定 True = 可以看；编码器自注意力和交叉注意力用源的填充掩码 `(B, 1, 1, T_s)`，只遮挡键；
#      解码器自注意力用目标填充掩码 & 因果掩码，得到 `(B, 1, T_t, T_t)`；掩码在模型内部由 `pad_id` 构造。
#   3. *易错点*（挑两三个）：softmax 做在键的维度上、除以 $\sqrt{d_k}$；合头先 `transpose` 再 `contiguous().view`；
#      整行被遮挡时输出 0 而不是 NaN；训练时解码器输入右移一位，推理时取 `logits[:, -1]`。
#
# KV 缓存、复杂度、Pre-LN 这些留给面试官追问时再展开（Q7、Q8 和第 04 章）。
#
# ### 完整版（约 3 分钟）：公式、形状、掩码、复杂度、变体
#
# 面试官说“详细讲讲”时，按下面五段讲，每段一两句话，每句都能落到你写过的代码上：
#
# 1. **公式。** “注意力是按相似度加权平均：$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}(QK^\top/\sqrt{d_k} + M)\,V$。
#    除以 $\sqrt{d_k}$ 是因为 $q\cdot k$ 的方差随 $d_k$ 线性增长，不缩放 softmax 会饱和、梯度消失（第 01 章第 5 节）。
#    多头把 $d_{\text{model}}$ 拆成 $H$ 份各算一次注意力，拼起来再过 $W_O$；总计算量和单头一样（第 02 章）。
#    一层 = 注意力子层 + 逐位置 FFN，各带残差和 LayerNorm；原论文是 Post-LN，$\mathrm{LN}(x + F(x))$（第 04 章）。”
# 2. **形状。** “输入 `(B, T)` 的 token id，嵌入乘 $\sqrt{d_{\text{model}}}$ 加位置编码得 `(B, T, d)`；Q/K/V 投影后
#    `view(B, T, H, d_k)` 再 `transpose(1, 2)` 得 `(B, H, T, d_k)`；分数和权重 `(B, H, T_q, T_k)`；加权和 `(B, H, T_q, d_k)`；
#    合头先 `transpose` 回来再 `contiguous().view(B, T, d)`；每层进出都是 `(B, T, d)`；最后线性层得 logits `(B, T, V)`。
#    交叉注意力里 $T_q$ 是目标长度、$T_k$ 是源长度，两者不等。”
# 3. **掩码。** “约定 True = 可以看，在 softmax 之前把不可以看的分数填成很大的负数。三处：编码器自注意力和交叉注意力用源的
#    填充掩码 `(B, 1, 1, T_s)`，只遮挡键；解码器自注意力用目标填充掩码 & 因果掩码 `(B, 1, T_t, T_t)`。整行被遮挡时输出 0 而不是 NaN。
#    训练用教师强制：解码器输入右移一位、一次前向算出所有位置；损失用 `ignore_index` 排除 PAD（第 05、07 章）。”
# 4. **复杂度。** “一层约 $12 n d^2 + 2 n^2 d$ 次乘加：投影和 FFN 是 $n d^2$ 项，$QK^\top$ 和加权和是 $n^2 d$ 项；注意力子层里
#    $n > 2d$ 时 $n^2$ 项才占主导（第 01 章第 10 节）。权重矩阵的显存 $O(B H n^2)$，FlashAttention 分块计算不存它（第 09 章第 5 节）。
#    推理自回归，KV 缓存把每步的计算从重算整个前缀降到只算新 token，代价是随长度线性增长的缓存（Q7、第 09 章第 6 节）。”
# 5. **变体。** “今天的大模型多是仅解码器（GPT、Llama）：只有带因果掩码的自注意力；Pre-LN 或 RMSNorm 让深层好训；
#    RoPE 代替绝对位置编码（第 03 章）；SwiGLU 代替 ReLU FFN；GQA/MQA 让多个查询头共用 K/V，缩小 KV 缓存（第 08 章）。
#    仅编码器（BERT）用于理解任务，编码器-解码器（T5、原论文）用于翻译这类序列到序列任务（第 10 节）。”
#
# 讲完之后，最常见的追问是“你怎么确认实现是对的”：与参考实现和 PyTorch 内置模块逐数值比较（第 02、05 章），
# 而不是“训练能收敛”——第 07 章第 14 节演示了一个分头 bug，教师强制下几乎满分，贪心解码全错。
#
# ### 消融实验与注意力可视化
#
# 消融实验（ablation）一次只改一个设计、其余不变，看指标怎么变，用来说明这个设计确实有用。原论文表 3 就是一组消融：
# 单头注意力比最好的设置低 0.9 BLEU，头太多也会变差；把正弦位置编码换成学习的位置嵌入，结果几乎相同；
# 更大的模型（$d_{\text{model}}$、$d_{\text{ff}}$ 更大）更好，也更贵。本课程里有几个能在 CPU 上跑的相关小实验：
# 第 01 章的 $\sqrt{d_k}$ 实验（不缩放时 softmax 饱和、梯度变小），第 03 章去掉位置编码后自注意力对 token 顺序置换等变，
# 第 04 章 Post-LN 与 Pre-LN 的激活和梯度尺度对比；第 07 章第 14 节在复制任务上默认训练去掉缩放、分头写错这两种改动，
# 把开关 `MORE_ABLATIONS` 改成 `True` 还会训练去掉位置编码、单头、更窄的 FFN 这三种，表格由单元格打印。
# 看注意力权重（例如每个查询权重最大的 top-k 个键，`torch.topk(attn, k, dim=-1)`）可以检查模型有没有学到预期的对齐
# （第 07 章的交叉注意力就是一条对角线），但权重不等于解释：Jain & Wallace（2019，*Attention is not Explanation*）发现，
# 注意力权重常与基于梯度的特征重要性不一致，换一组差别很大的权重，预测也可能几乎不变。
#
# 下一章：用这个 `Transformer` 训练一个真正能学会的复制任务（copy task），并看训练好的交叉注意力如何沿对角线对齐。
