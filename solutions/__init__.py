"""Reference implementation of the course's public contract (COURSE_DESIGN §4), one module per chapter.

Each contract object marks the part a learner writes with ``### BEGIN SOLUTION`` /
``### END SOLUTION``; the build copies its source into the lesson notebooks.
"""
from .attention import ScaledDotProductAttention, attention_numpy, scaled_dot_product_attention, softmax
from .backward import cross_entropy, layer_norm_backward, softmax_backward
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
from .decoding import (
    beam_search,
    generate,
    gpt_step_fn,
    sample_next_token,
    sampling_probs,
    top_k_filter,
    top_p_filter,
    transformer_step_fn,
)
from .gpt_data import CharTokenizer, estimate_loss, next_token_batch, peak_memory_increase, train_gpt
from .ffn_norm import FeedForward, LayerNorm, PreLNResidual, ResidualLayerNorm, RMSNorm
from .layers import DecoderLayer, EncoderLayer
from .llm import (
    GPT,
    GPTBlock,
    GroupedQueryAttention,
    SwiGLU,
    attention_flops_and_memory,
    kv_cache_bytes,
    make_sliding_window_mask,
    repeat_kv,
)
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
    # 08 decoder-only LLM and the drill bank (docs/CONTRACT_LLM.md)
    "repeat_kv", "GroupedQueryAttention", "SwiGLU", "GPTBlock", "GPT", "make_sliding_window_mask",
    "attention_flops_and_memory", "kv_cache_bytes",
    "top_k_filter", "top_p_filter", "sampling_probs", "sample_next_token", "generate", "gpt_step_fn",
    "transformer_step_fn", "beam_search",
    "softmax_backward", "layer_norm_backward", "cross_entropy",
    # 08 text and training around the GPT (solutions/gpt_data.py)
    "CharTokenizer", "next_token_batch", "estimate_loss", "train_gpt", "peak_memory_increase",
]
