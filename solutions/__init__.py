"""Reference implementation of the course's public contract (COURSE_DESIGN §4), one module per chapter.

Each contract object marks the part a learner writes with ``### BEGIN SOLUTION`` /
``### END SOLUTION``; the build copies its source into the lesson notebooks.
"""
from .attention import ScaledDotProductAttention, attention_numpy, scaled_dot_product_attention, softmax
from .copy_task import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    copy_loss,
    exact_match,
    make_copy_batch,
    noam_lr,
    train_copy_model,
    train_step,
)
from .ffn_norm import FeedForward, LayerNorm, PreLNResidual, ResidualLayerNorm, RMSNorm
from .layers import DecoderLayer, EncoderLayer
from .masks import make_pad_mask, make_subsequent_mask
from .mha import MultiHeadAttention
from .positional import (
    LearnedPositionalEmbedding,
    PositionalEncoding,
    apply_rope,
    rope_frequencies,
    sinusoidal_positional_encoding,
)
from .transformer import Transformer, greedy_decode_cached

__all__ = [
    # 01 attention
    "softmax", "attention_numpy", "scaled_dot_product_attention", "ScaledDotProductAttention",
    # 02 multi-head attention
    "MultiHeadAttention",
    # 03 positional encoding (+ bonus)
    "sinusoidal_positional_encoding", "PositionalEncoding",
    "LearnedPositionalEmbedding", "rope_frequencies", "apply_rope",
    # 04 FFN, LayerNorm, residual (+ bonus)
    "FeedForward", "LayerNorm", "ResidualLayerNorm", "RMSNorm", "PreLNResidual",
    # 05 masks and layers
    "make_pad_mask", "make_subsequent_mask", "EncoderLayer", "DecoderLayer",
    # 06 Transformer (+ bonus)
    "Transformer", "greedy_decode_cached",
    # 07 copy task
    "PAD_ID", "BOS_ID", "EOS_ID", "make_copy_batch", "copy_loss", "exact_match", "noam_lr", "train_step",
    "train_copy_model",
]
