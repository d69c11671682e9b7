"""The course's public contract: one entry per component the reference package exports.

This is the only place that lists the contract's names. Everything else derives from it:

    solutions/__init__.py   imports each component from its module; ``__all__``
    tutor/checks/<module>   ``FunctionCheck("Name", ...)`` declares a check; a name not declared here is refused
    tools/build.py          a lesson's ``provided="earlier"`` cell (the earlier chapters' components it
                            uses) and docs/CONTRACT.md (generated; a test compares)
    tests/                  the signature table, the catalogue's names, the add-a-chapter checklist
                            (tests/test_registry.py says what a new name still lacks)

Importing this module is cheap (no torch, no ``solutions``): learner kernels import it through
``tutor.engine`` while the reference package must stay unloaded.
"""
import ast
from dataclasses import dataclass, field

KINDS = {
    "graded": "the learner writes it; nbgrader grades it",
    "bonus": "the learner writes it (选做); checked, never graded",
    "provided": "reference code shown read-only in the lessons",
    "constant": "a fixed value of the contract",
}
EXERCISE_KINDS = ("graded", "bonus")  # the kinds a learner writes


@dataclass(frozen=True)
class Component:
    """One name of the public contract.

    ``signature``/``methods``: parameters as ``inspect`` prints them without ``self`` (tested
    against the reference). ``checks``: the ``tutor.checks`` checks that prove it (a method can have
    its own, e.g. ``greedy_decode``); ``tested_by``: for an exercise without a check, the grade_id
    of the graded cell whose visible tests judge it. The classic mistakes a check names are declared
    with the check (``mistakes=`` in ``tutor/checks/<module>.py``)."""
    name: str
    chapter: str
    module: str
    kind: str
    summary: str
    signature: str = None
    methods: dict = field(default_factory=dict)
    checks: tuple = ()
    tested_by: str = None

    @property
    def exercise(self):
        return self.kind in EXERCISE_KINDS


def _c(name, chapter, module, kind, summary, signature=None, *, methods=None, checks=None, tested_by=None):
    if checks is None:  # an exercise is proven by the check of its own name unless it says otherwise
        checks = (name,) if kind in EXERCISE_KINDS and tested_by is None else ()
    return Component(name, chapter, module, kind, summary, signature, methods or {}, tuple(checks), tested_by)


COMPONENTS = (
    # 01 attention
    _c("softmax", "01", "attention", "graded", "numerically stable softmax along `axis` (NumPy)", "x, axis=-1"),
    _c("attention_numpy", "01", "attention", "graded", "scaled dot-product attention in NumPy -> (output, weights)",
       "Q, K, V, mask=None"),
    _c("scaled_dot_product_attention", "01", "attention", "graded",
       "attention with a boolean mask (True = may attend), zero rows for fully masked queries, dropout on the "
       "weights -> (output, weights)", "Q, K, V, mask=None, dropout_p=0.0, training=False"),
    _c("ScaledDotProductAttention", "01", "attention", "graded", "the same as an `nn.Module` (dropout as a module)",
       "dropout=0.0", methods={"forward": "Q, K, V, mask=None"}),
    # 02 multi-head attention
    _c("MultiHeadAttention", "02", "mha", "graded",
       "projections `W_q, W_k, W_v, W_o`, heads split and merged "
       "-> (output (B, T_q, d_model), weights (B, H, T_q, T_k))",
       "d_model, num_heads, dropout=0.0", methods={"forward": "x_q, x_kv, mask=None"}),
    # 03 positional encoding
    _c("sinusoidal_positional_encoding", "03", "positional", "graded",
       "the (max_len, d_model) table: sin in even columns, cos in odd ones", "max_len, d_model"),
    _c("PositionalEncoding", "03", "positional", "graded",
       "adds `pe[:, :T]` (a buffer) to (B, T, d_model), then dropout", "d_model, max_len=5000, dropout=0.0",
       methods={"forward": "x"}),
    _c("LearnedPositionalEmbedding", "03", "positional", "bonus", "learned positions (`embed`, an `nn.Embedding`)",
       "d_model, max_len=512, dropout=0.0", methods={"forward": "x"}),
    _c("rope_frequencies", "03", "positional", "bonus", "RoPE's rotation frequencies theta_i = base^(-2i/d)",
       "d, base=10000.0", checks=("apply_rope",)),
    _c("apply_rope", "03", "positional", "bonus",
       "rotates adjacent feature pairs (2i, 2i+1) of (..., T, d) by position",
       "x, positions=None, base=10000.0"),
    # 04 FFN, LayerNorm, residual
    _c("FeedForward", "04", "ffn_norm", "graded", "`fc2(dropout(activation(fc1(x))))`",
       "d_model, d_ff, dropout=0.0, activation='relu'", methods={"forward": "x"}),
    _c("LayerNorm", "04", "ffn_norm", "graded", "biased variance, eps inside the square root, `weight` and `bias`",
       "d_model, eps=1e-05", methods={"forward": "x"}),
    _c("ResidualLayerNorm", "04", "ffn_norm", "graded", "Post-LN: `ln(x + sublayer_out)`", "d_model, eps=1e-05",
       methods={"forward": "x, sublayer_out"}),
    _c("RMSNorm", "04", "ffn_norm", "bonus", "root-mean-square norm, no mean subtracted, `weight` only",
       "d_model, eps=1e-06", methods={"forward": "x"}),
    _c("PreLNResidual", "04", "ffn_norm", "bonus", "Pre-LN: `x + sublayer(ln(x))`", "d_model, eps=1e-05",
       methods={"forward": "x, sublayer"}),
    # 05 masks and layers
    _c("make_pad_mask", "05", "masks", "graded", "(B, T) tokens -> (B, 1, 1, T) bool, True = a real key",
       "tokens, pad_id=0"),
    _c("make_subsequent_mask", "05", "masks", "graded", "(1, 1, T, T) bool lower triangle, diagonal included",
       "T, device=None"),
    _c("EncoderLayer", "05", "layers", "graded", "Post-LN self-attention and FFN sublayers -> (output, weights)",
       "d_model, num_heads, d_ff, dropout=0.1", methods={"forward": "x, src_mask=None"}),
    _c("DecoderLayer", "05", "layers", "graded",
       "masked self-attention, cross-attention on `memory`, FFN -> (output, self weights, cross weights)",
       "d_model, num_heads, d_ff, dropout=0.1", methods={"forward": "y, memory, tgt_mask=None, memory_mask=None"}),
    # 06 the Transformer
    _c("Transformer", "06", "transformer", "graded",
       "embeddings scaled by sqrt(d_model), positions, N encoder and decoder layers, `out_proj`; masks built from "
       "`pad_id`; the method `greedy_decode` calls the function `greedy_decode(self, ...)`",
       "src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4, dropout=0.1, max_len=512, pad_id=0",
       methods={"encode": "src", "decode": "tgt_in, memory, src_mask=None", "forward": "src, tgt_in",
                "greedy_decode": "src, bos_id, eos_id, max_new_tokens"}),
    _c("greedy_decode", "06", "transformer", "graded",
       "greedy decoding from BOS: arg-max at the last position, `pad_id` after a row's EOS, stops once every row "
       "has emitted EOS -> LongTensor (B, <= 1 + max_new_tokens)", "model, src, bos_id, eos_id, max_new_tokens"),
    _c("greedy_decode_cached", "06", "transformer", "bonus",
       "greedy decoding with a KV cache, token for token what `greedy_decode` gives",
       "model, src, bos_id, eos_id, max_new_tokens"),
    # 07 copy task
    _c("PAD_ID", "07", "copy_task", "constant", "0, the padding token"),
    _c("BOS_ID", "07", "copy_task", "constant", "1, the begin-of-sequence token"),
    _c("EOS_ID", "07", "copy_task", "constant", "2, the end-of-sequence token"),
    _c("make_copy_batch", "07", "copy_task", "graded", "random copy-task batch -> (src, tgt_in, tgt_out)",
       "batch_size, vocab_size, min_len, max_len, generator=None"),
    _c("copy_loss", "07", "copy_task", "graded", "cross-entropy averaged over the non-PAD targets",
       "logits, tgt_out, pad_id=0"),
    _c("exact_match", "07", "copy_task", "graded", "share of rows decoded exactly up to and including EOS",
       "pred, tgt_out, eos_id=2, pad_id=0"),
    _c("noam_lr", "07", "copy_task", "provided", "the original paper's warmup then 1/sqrt(step) learning-rate factor",
       "step, d_model, warmup"),
    _c("train_step", "07", "copy_task", "graded", "one optimiser step (zero_grad, loss, backward, step, scheduler) "
       "-> the loss as a float", "model, optimizer, scheduler, src, tgt_in, tgt_out",
       tested_by="train_step_updates_model"),
    _c("pick_device", "07", "copy_task", "provided",
       "where to train and generate: CUDA, else Apple's MPS, else the CPU (`COURSE_DEVICE` overrides)", ""),
    _c("train_copy_model", "07", "copy_task", "provided",
       "trains until the held-out exact match reaches `target`, on the model's device",
       "model, *, vocab_size, min_len, max_len, eval_src, eval_tgt, batch_size=64, max_steps=2000, lr_factor=1.0, "
       "warmup=100, eval_every=25, target=0.999, seed=0, progress=True"),
    # 08 from the Transformer to a GPT (docs/CONTRACT_LLM.md)
    _c("CharTokenizer", "08", "gpt_data", "graded", "character vocabulary: `chars`, `vocab_size`, `encode`, `decode`",
       "text", methods={"encode": "s", "decode": "ids"}, tested_by="tokenizer_round_trip"),
    _c("load_poems", "08", "gpt_data", "provided",
       "the corpus's poems; one bilingual line when the file is missing or damaged",
       "path, sha256='665f376d719cf248303b843d5daedac0b75554455dea27cbcefb93a53d6b93df'"),
    _c("is_regular_poem", "08", "gpt_data", "provided",
       "lines of the same length (5 or 7), alternately ending in ，and 。", "poem"),
    _c("next_token_batch", "08", "gpt_data", "provided", "random windows x and their next tokens y",
       "data, block_size, batch_size, generator=None"),
    _c("estimate_loss", "08", "gpt_data", "provided", "mean loss over fixed, seeded batches",
       "model, data, block_size, batch_size=32, num_batches=8, seed=1234"),
    _c("warmup_cosine_lr", "08", "training", "graded",
       "learning rate of 0-based `step`: linear warmup `max_lr * (step + 1) / warmup_steps` "
       "(`max_lr * step / warmup_steps` is accepted too), then cosine decay to `min_lr`",
       "step, max_lr, warmup_steps, max_steps, min_lr=0.0"),
    _c("clip_grad_norm", "08", "training", "graded",
       "gradients scaled in place by `max_norm / (total + 1e-6)` when their global L2 norm exceeds `max_norm` "
       "-> the norm before clipping", "parameters, max_norm"),
    _c("AdamW", "08", "training", "graded",
       "a `torch.optim.Optimizer` subclass: decoupled weight decay, bias-corrected moments; settings read from "
       "each param group at every step (schedulers work), a parameter without `.grad` skipped",
       "params, lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.01", methods={"step": ""}),
    _c("train_gpt", "08", "gpt_data", "provided",
       "the chapter's AdamW with two param groups (decay on matrices only), warmup then cosine decay, clipping, "
       "on the model's device",
       "model, train_data, val_data, *, block_size, batch_size=32, max_steps=600, lr=0.003, warmup=50, "
       "eval_every=50, seed=0, progress=True"),
    _c("repeat_kv", "08", "llm", "graded", "(B, H_kv, T, d) -> (B, H_kv * n_rep, T, d), each KV head repeated in place",
       "x, n_rep"),
    _c("GroupedQueryAttention", "08", "llm", "graded", "GQA with RoPE, a causal mask and an optional KV cache",
       "d_model, num_heads, num_kv_heads, rope=True, rope_base=10000.0, dropout=0.0",
       methods={"forward": "x, mask=None, cache=None"}),
    _c("SwiGLU", "08", "llm", "graded", "`down_proj(silu(gate_proj(x)) * up_proj(x))`", "d_model, d_ff",
       methods={"forward": "x"}),
    _c("GPTBlock", "08", "llm", "graded", "Pre-RMSNorm block: GQA then SwiGLU, each with a residual",
       "d_model, num_heads, num_kv_heads, d_ff, dropout=0.0, rope_base=10000.0, eps=1e-06",
       methods={"forward": "x, mask=None, cache=None"}),
    _c("GPT", "08", "llm", "graded", "decoder-only language model -> logits (B, T, vocab_size)",
       "vocab_size, d_model=64, num_heads=4, num_kv_heads=2, d_ff=172, num_layers=2, max_len=256, dropout=0.0, "
       "tie_weights=False, rope_base=10000.0", methods={"forward": "idx", "forward_cached": "idx, caches=None"}),
    # 09 decoding and costs (docs/CONTRACT_LLM.md)
    _c("top_k_filter", "09", "decoding", "graded", "logits outside the k largest set to -inf", "logits, k"),
    _c("top_p_filter", "09", "decoding", "graded", "logits outside the smallest nucleus of mass p set to -inf",
       "logits, p"),
    _c("sampling_probs", "09", "decoding", "graded", "temperature, then top-k, then top-p, then softmax",
       "logits, temperature=1.0, top_k=None, top_p=None"),
    _c("sample_next_token", "09", "decoding", "graded",
       "arg-max at temperature 0, else one draw from `sampling_probs` with the given generator, which lives on the "
       "logits' device (the tokens too)",
       "logits, temperature=1.0, top_k=None, top_p=None, generator=None"),
    _c("generate", "09", "decoding", "graded", "autoregressive generation, with or without the KV cache (same tokens)",
       "model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None, use_cache=True"),
    _c("gpt_step_fn", "09", "decoding", "provided", "a GPT as beam search's step function", "model"),
    _c("transformer_step_fn", "09", "decoding", "provided", "a Transformer (with its source) as a step function",
       "model, src"),
    _c("beam_search", "09", "decoding", "graded", "beam search with finished beams kept and a length penalty",
       "step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha=0.0"),
    _c("kv_cache_bytes", "09", "llm", "graded", "bytes of a KV cache: 2 (K and V) x layers x KV heads x ...",
       "num_layers, num_kv_heads, head_dim, seq_len=1, batch=1, bytes_per_element=2"),
    _c("peak_memory_increase", "09", "gpt_data", "provided", "peak memory a call adds (CUDA or tracemalloc)", "fn"),
    # 10 the drill bank: components drilled there only
    _c("make_sliding_window_mask", "10", "llm", "graded", "(1, 1, T, T) causal mask that sees the last `window` keys",
       "T, window, device=None"),
    _c("attention_flops_and_memory", "10", "llm", "graded", "FLOPs and bytes of naive attention",
       "n, d, H, num_kv_heads=None, batch=1, bytes_per_element=4"),
    _c("softmax_backward", "10", "backward", "graded", "dL/dx of a softmax from its output and dL/dy",
       "y, grad_y, dim=-1"),
    _c("layer_norm_backward", "10", "backward", "graded", "dL/dx, dL/dweight, dL/dbias of LayerNorm",
       "x, weight, grad_out, eps=1e-05"),
    _c("batch_norm_forward", "10", "backward", "graded", "training-mode BatchNorm over the batch axis of (N, D)",
       "x, weight, bias, eps=1e-05"),
    _c("batch_norm_backward", "10", "backward", "graded", "dL/dx, dL/dweight, dL/dbias of training-mode BatchNorm",
       "x, weight, grad_out, eps=1e-05"),
    _c("mlp_backward", "10", "backward", "graded", "the five gradients of a two-layer ReLU MLP",
       "x, w1, b1, w2, b2, grad_out"),
    _c("cross_entropy", "10", "backward", "graded", "cross-entropy with `ignore_index` and label smoothing",
       "logits, target, ignore_index=-100, label_smoothing=0.0"),
    # 11 subword tokenization: BPE
    _c("END_OF_WORD", "11", "tokenizers", "constant", '"</w>", the end-of-word marker of BPE'),
    _c("merge_pair", "11", "tokenizers", "provided",
       "every occurrence of a pair of adjacent symbols joined, left to right", "symbols, pair"),
    _c("learn_bpe", "11", "tokenizers", "graded",
       "BPE merges, most frequent pair first, counted inside words and weighted by word frequency",
       "word_freqs, num_merges"),
    _c("bpe_encode", "11", "tokenizers", "graded", "a word's characters and `</w>`, then the merges in rank order",
       "word, merges"),
    _c("bpe_decode", "11", "tokenizers", "graded", "tokens joined, `</w>` as the space between words",
       "tokens", tested_by="bpe_round_trip"),
    # 12 post-training by hand: GRPO, DPO, LoRA
    _c("completion_mask", "12", "posttrain", "graded",
       "True on a row's continuation up to and including its first `end_id`; False on the prompt and the padding",
       "ids, prompt_len, end_id"),
    _c("completion_logprobs", "12", "posttrain", "graded",
       "log p(ids[:, t+1] | ids[:, :t+1]) under `model(ids)` -> (B, T-1), 0 where `mask[:, 1:]` is False",
       "model, ids, mask"),
    _c("ppo_clip_loss", "12", "posttrain", "graded",
       "the PPO clipped objective negated, per-sequence masked mean then batch mean",
       "logprobs, old_logprobs, advantages, mask, clip_eps=0.2"),
    _c("grpo_loss", "12", "posttrain", "graded",
       "group-normalised advantages, the clipped ratio and beta times the k3 KL to the frozen reference",
       "logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1"),
    _c("dpo_loss", "12", "posttrain", "graded",
       "mean of -logsigmoid(beta * ((pc - rc) - (pr - rr))) over summed sequence log-probs",
       "policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1"),
    _c("LoRALinear", "12", "posttrain", "graded",
       "frozen `base` plus `scaling * (x @ A.T) @ B.T`, `B` zero at init, `scaling = alpha / r`; merge/unmerge",
       "base, r=4, alpha=8", methods={"forward": "x", "merge": "", "unmerge": ""}),
    _c("SHAPES", "12", "posttrain_run", "constant",
       "(characters per line, lines) of the four regular shapes: five or seven characters, four or eight lines"),
    _c("poem_shape", "12", "posttrain_run", "provided", "a regular poem's (characters per line, lines), else None",
       "poem"),
    _c("poem_reward", "12", "posttrain_run", "provided", "1.0 for a poem in regular form, else 0.0", "poem"),
    _c("sample_stats", "12", "posttrain_run", "provided", "% regular, % duplicates, % in the most common shape",
       "poems"),
    _c("decode_poems", "12", "posttrain_run", "provided", "each row's text after the prompt, up to its first newline",
       "tokenizer, ids, prompt_len"),
    _c("sample_group", "12", "posttrain_run", "provided", "n continuations of a prompt in one batch -> (ids, poems)",
       "model, tokenizer, prompt, n, max_new_tokens, generator, temperature=1.0, top_p=None"),
    _c("frozen_copy", "12", "posttrain_run", "provided", "a copy of a model that never trains (the reference)",
       "model"),
    _c("grpo_train", "12", "posttrain_run", "provided",
       "GRPO steps against a frozen copy: sample groups, reward, grpo_loss, AdamW -> per-step history",
       "model, tokenizer, prompt, *, steps, max_new_tokens, n_groups=8, group_size=8, lr=0.0002, beta=0.1, "
       "clip_eps=0.2, temperature=1.0, seed=0, reward=None, progress=False"),
    _c("preference_pairs", "12", "posttrain_run", "provided",
       "the model's own samples as (chosen, rejected): a regular poem over an irregular one",
       "model, tokenizer, prompt, n_pairs, max_new_tokens, generator, temperature=1.0, batch=64, max_batches=50"),
    _c("sequence_logprobs", "12", "posttrain_run", "provided", "summed log-probability of each row's continuation",
       "model, ids, prompt_len, end_id"),
    _c("dpo_train", "12", "posttrain_run", "provided", "DPO steps on preference pairs -> per-step loss and accuracy",
       "model, chosen, rejected, prompt_len, end_id, *, steps, lr=0.0002, beta=0.1, batch_size=16, seed=0"),
    _c("add_lora", "12", "posttrain_run", "provided",
       "every linear layer of the blocks wrapped in a LoRALinear, in place -> parameters left to train",
       "model, r=4, alpha=8"),
    # 13 efficiency by hand
    _c("online_softmax", "13", "efficiency", "graded",
       "softmax over the last axis in one pass: a running max and a running sum, rescaled when the max grows", "x"),
    _c("tiled_attention", "13", "efficiency", "graded",
       "attention's forward in blocks of queries and keys with a running max, sum and accumulator (FlashAttention), "
       "never a T_q x T_k matrix; `causal` skips the blocks above the diagonal",
       "q, k, v, block_size=64, causal=False"),
    _c("TopKRouter", "13", "efficiency", "graded",
       "linear gate, softmax over all experts, then the top k (renormalised when `normalize`) "
       "-> (weights (N, k), indices (N, k), logits (N, E))",
       "d_model, num_experts, top_k=2, normalize=True", methods={"forward": "x"}),
    _c("MoELayer", "13", "efficiency", "graded",
       "a router and `num_experts` SwiGLU experts; each token to its top k, outputs weighted and summed "
       "-> (out (B, T, d_model), logits (B*T, E), indices (B*T, k))",
       "d_model, d_ff, num_experts, top_k=2, normalize=True", methods={"forward": "x"}),
    _c("load_balancing_loss", "13", "efficiency", "graded",
       "Switch/Mixtral auxiliary loss N * sum_i f_i * P_i: f from the routing counts, P the mean router probability",
       "router_logits, expert_index, num_experts"),
    _c("quantize_int8", "13", "efficiency", "graded",
       "symmetric INT8, one scale per output channel (row): scale = absmax / 127, q = round(w / scale) clamped",
       "w"),
    _c("dequantize_int8", "13", "efficiency", "graded", "q * scale, in the scale's dtype", "q, scale",
       tested_by="int8_round_trip"),
    _c("MultiHeadLatentAttention", "13", "efficiency", "bonus",
       "DeepSeek-V2's KV compression: the cache holds one latent `W_dkv(x)` a token, keys and values are "
       "`W_uk`/`W_uv` of it -> (out (B, T, d_model), cache (B, T_past + T, d_latent))",
       "d_model, num_heads, d_latent", methods={"forward": "x, mask=None, cache=None"}),
)

BY_NAME = {c.name: c for c in COMPONENTS}
CHECK_NAMES = tuple(dict.fromkeys(check for c in COMPONENTS for check in c.checks))


def get(name):
    """The component called ``name``; a clear error for a name the contract does not have."""
    if name not in BY_NAME:
        raise KeyError(f"{name!r} is not in the contract registry (contract/__init__.py: COMPONENTS)")
    return BY_NAME[name]


def defaults(name):
    """[(parameter, default)] of a component's signature, in order: a parameter without a default has
    ``NO_DEFAULT``; a keyword-only parameter is not listed (no caller passes it by position)."""
    sig = get(name).signature
    if not sig:
        return []
    args = ast.parse(f"def f({sig}): pass").body[0].args
    first_default = len(args.args) - len(args.defaults)
    return [(a.arg, ast.literal_eval(args.defaults[i - first_default]) if i >= first_default else NO_DEFAULT)
            for i, a in enumerate(args.args)]


NO_DEFAULT = object()


def chapter(number):
    """The components of one chapter (``"05"``), in teaching order."""
    return [c for c in COMPONENTS if c.chapter == number]


def with_dependencies(names, source_of, among=None):
    """``names`` and every component their code uses, directly or through another one, in teaching
    order: what a notebook cell must define before them. ``source_of(name)`` gives a component's
    source; ``among`` (default: every component but the constants) limits what counts as a use."""
    pool = [c.name for c in COMPONENTS if c.kind != "constant"] if among is None else list(among)
    found, todo = set(), [n for n in names if n in pool]
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            used = {n.id for n in ast.walk(ast.parse(source_of(name))) if isinstance(n, ast.Name)}
            todo += [n for n in pool if n in used]
    return [n for n in pool if n in found]
