"""Reference implementation of the course's public contract, one module per chapter.

The names, their chapters and modules are listed once, in the registry ``contract.COMPONENTS``;
this package imports each from its module by name (grep and editors follow them) and exports
exactly the registered ones (``__all__``; tests/test_registry.py keeps the two equal and says
where a new name is missing). Each contract object marks the part a learner writes with
``### BEGIN SOLUTION`` / ``### END SOLUTION``; the build copies its source into the lesson notebooks.
"""
from contract import COMPONENTS

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
from .ffn_norm import FeedForward, LayerNorm, PreLNResidual, ResidualLayerNorm, RMSNorm
from .gpt_data import (
    CharTokenizer,
    estimate_loss,
    is_regular_poem,
    load_poems,
    next_token_batch,
    peak_memory_increase,
    train_gpt,
)
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
from .tokenizers import END_OF_WORD, bpe_decode, bpe_encode, learn_bpe, merge_pair
from .training import AdamW, clip_grad_norm, warmup_cosine_lr
from .transformer import Transformer, greedy_decode, greedy_decode_cached

__all__ = [c.name for c in COMPONENTS if c.name in globals()]
