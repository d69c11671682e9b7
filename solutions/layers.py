"""Chapter 05 (part 2): Post-LN encoder and decoder layers."""
import torch.nn as nn

from .ffn_norm import FeedForward, ResidualLayerNorm
from .mha import MultiHeadAttention


class EncoderLayer(nn.Module):
    """One Post-LN encoder layer. / 一个 Post-LN 编码器层。

    ``EncoderLayer(d_model, num_heads, d_ff, dropout=0.1)``. Attributes / 属性: ``self_attn``
    (``MultiHeadAttention``), ``ffn`` (``FeedForward``, ReLU), ``norm1``, ``norm2`` (two separate
    ``ResidualLayerNorm``) and ``dropout`` (``nn.Dropout``); the attention and the FFN get the same
    dropout probability. / 注意力和 FFN 也用同一个 dropout 概率。

    ``forward(x (B, T, d_model), src_mask=None) -> (x (B, T, d_model), attn (B, H, T, T))``.
    Two sublayers in this order; each output goes through dropout, is added to that sublayer's
    input and normalised (Post-LN: ``LN(input + dropout(sublayer(input)))``).
    / 两个子层，按这个顺序；每个子层的输出先 dropout，再与这个子层的输入相加，然后归一化（Post-LN）。

    1. self-attention: queries, keys and values all come from ``x``; mask ``src_mask`` (bool,
       True = may attend, usually ``make_pad_mask(src)`` ``(B, 1, 1, T)``);
       / 自注意力：Q、K、V 都来自 ``x``，掩码 ``src_mask``（布尔，True = 可以看，通常是源序列的填充掩码）；
    2. the feed-forward network, applied to the result of 1. / 对第 1 步的结果做前馈网络。

    ``attn`` are the self-attention weights of every head. The result equals
    ``nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout, batch_first=True)`` (Post-LN, ReLU).
    / ``attn`` 是自注意力每个头的权重；结果与 PyTorch 的 ``nn.TransformerEncoderLayer`` 相等。
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        ### BEGIN SOLUTION
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = ResidualLayerNorm(d_model)
        self.norm2 = ResidualLayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, x, src_mask=None):
        ### BEGIN SOLUTION
        attn_out, attn = self.self_attn(x, x, src_mask)  # (B, T, d_model), (B, H, T, T)
        x = self.norm1(x, self.dropout(attn_out))
        x = self.norm2(x, self.dropout(self.ffn(x)))
        return x, attn
        ### END SOLUTION


class DecoderLayer(nn.Module):
    """One Post-LN decoder layer. / 一个 Post-LN 解码器层。

    ``DecoderLayer(d_model, num_heads, d_ff, dropout=0.1)``. Attributes / 属性: ``self_attn`` and
    ``cross_attn`` (two separate ``MultiHeadAttention``), ``ffn`` (``FeedForward``, ReLU),
    ``norm1``, ``norm2``, ``norm3`` (``ResidualLayerNorm``) and ``dropout``.

    ``forward(y (B, T_t, d_model), memory (B, T_s, d_model), tgt_mask=None, memory_mask=None)
    -> (y (B, T_t, d_model), (self_attn_w (B, H, T_t, T_t), cross_attn_w (B, H, T_t, T_s)))``.
    Three Post-LN sublayers in this order, each as in ``EncoderLayer``:
    / 三个 Post-LN 子层，按这个顺序，每个都与 ``EncoderLayer`` 的子层同样处理：

    1. masked self-attention over ``y``; ``tgt_mask`` is target padding & causal ``(B, 1, T_t, T_t)``;
       / 掩码自注意力，Q、K、V 都来自 ``y``，``tgt_mask`` 是目标填充 & 因果掩码；
    2. cross-attention: queries from the result of 1, keys and values from ``memory``;
       ``memory_mask`` is the *source* padding mask ``(B, 1, 1, T_s)``, never the target mask;
       / 交叉注意力：Q 来自第 1 步的结果，K、V 来自 ``memory``；``memory_mask`` 是**源**序列的填充掩码；
    3. the feed-forward network. / 前馈网络。

    Masks are bool, True = may attend. The result equals ``nn.TransformerDecoderLayer(...,
    batch_first=True)`` (Post-LN, ReLU). / 掩码为布尔，True = 可以看；结果与 ``nn.TransformerDecoderLayer`` 相等。
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        ### BEGIN SOLUTION
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = ResidualLayerNorm(d_model)
        self.norm2 = ResidualLayerNorm(d_model)
        self.norm3 = ResidualLayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        ### BEGIN SOLUTION
        self_out, self_attn_w = self.self_attn(y, y, tgt_mask)  # (B, T_t, d_model), (B, H, T_t, T_t)
        y = self.norm1(y, self.dropout(self_out))
        cross_out, cross_attn_w = self.cross_attn(y, memory, memory_mask)  # (B, T_t, d_model), (B, H, T_t, T_s)
        y = self.norm2(y, self.dropout(cross_out))
        y = self.norm3(y, self.dropout(self.ffn(y)))
        return y, (self_attn_w, cross_attn_w)
        ### END SOLUTION
