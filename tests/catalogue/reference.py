"""The reference implementation's own source, re-defined outside the ``solutions`` package.

A check refuses the ``solutions`` objects themselves (that is the point of the guard), so tests
that need a known-correct learner answer execute the reference source here, as a notebook's cell
would: same code, defined in a namespace whose code does not live in ``solutions/``.
"""
import inspect
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import solutions
import solutions.copy_task

NAMES = [
    "softmax", "attention_numpy", "scaled_dot_product_attention", "ScaledDotProductAttention",
    "MultiHeadAttention", "sinusoidal_positional_encoding", "PositionalEncoding",
    "LearnedPositionalEmbedding", "rope_frequencies", "apply_rope", "FeedForward", "LayerNorm",
    "ResidualLayerNorm", "RMSNorm", "PreLNResidual", "make_pad_mask", "make_subsequent_mask",
    "EncoderLayer", "DecoderLayer", "Transformer",
    # docs/CONTRACT_LLM.md
    "repeat_kv", "GroupedQueryAttention", "SwiGLU", "GPTBlock", "GPT", "make_sliding_window_mask",
    "attention_flops_and_memory", "kv_cache_bytes", "top_k_filter", "top_p_filter", "sampling_probs",
    "sample_next_token", "generate", "beam_search", "softmax_backward", "layer_norm_backward", "cross_entropy",
]
COPY_NAMES = ["PAD_ID", "BOS_ID", "EOS_ID", "make_copy_batch", "copy_loss", "exact_match"]


def load():
    """A dict name -> object: the reference's source executed as learner code."""
    namespace = {"math": math, "np": np, "torch": torch, "nn": nn, "F": F}
    for name in NAMES + COPY_NAMES:
        obj = getattr(solutions, name, None)
        if obj is None:
            obj = getattr(solutions.copy_task, name)
        if isinstance(obj, int):
            namespace[name] = obj
            continue
        code = compile(inspect.getsource(obj), f"<reference copy of {name}>", "exec")
        exec(code, namespace)  # noqa: S102 - trusted repository code, run as a notebook cell would
    return namespace
