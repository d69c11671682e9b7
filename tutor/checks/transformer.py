"""Checks of chapter 06 (``solutions/transformer.py``): the whole Transformer and greedy decoding,
with and without a KV cache (whose cost is measured: ``tutor.engine.cost``)."""
import math

import torch

from ..engine.cost import Cost, fed, per_row
from ..engine.diagnosis import combine
from ..engine.messages import define_mistakes
from ..engine.running import perturb, provided, solutions
from ..engine.specs import Bug, Case, FunctionCheck, ModuleCheck, wrong

MISTAKES = define_mistakes({
    "tgt_pad_missing": ("解码器自注意力的掩码只有因果部分，没有目标序列的填充掩码：应是 make_pad_mask(tgt_in) & "
                        "make_subsequent_mask(T_t)",
                        "the decoder self-attention mask is causal only, without the target padding mask: use "
                        "make_pad_mask(tgt_in) & make_subsequent_mask(T_t)"),
    "causal_missing": ("解码器自注意力没有因果掩码：训练时每个位置都能看到后面的答案",
                       "the decoder self-attention has no causal mask: during training each position sees the answers "
                       "after it"),
    "embed_not_scaled": ("词嵌入没有乘 √d_model：位置编码会淹没词的信息",
                         "embeddings are not multiplied by √d_model: the positional encoding drowns the token "
                         "information"),
    "embed_scaled_by_d_model": ("词嵌入乘了 d_model：应乘 √d_model",
                                "embeddings are multiplied by d_model: multiply by √d_model"),
    "positions_missing": ("有一侧没有加位置编码：源序列和目标序列的嵌入都要经过 pos_enc",
                          "one side gets no positional encoding: both the source and the target embeddings go through "
                          "pos_enc"),
    "greedy_no_eos_stop": ("贪心解码没有在所有行都输出 EOS 后停止：每步之后检查，全部结束就跳出循环",
                           "greedy decoding does not stop once every row has emitted EOS: check after each step and "
                           "leave the loop when all rows are done"),
    "greedy_no_pad_after_eos": ("已经输出 EOS 的行之后应该填 pad_id，而不是继续生成",
                                "rows that have emitted EOS must continue with pad_id, not with more generated tokens"),
    "greedy_no_bos": ("解码结果应以 bos_id 开头：形状 (B, ≤ 1 + max_new_tokens)",
                      "the decoded tokens must start with bos_id: shape (B, ≤ 1 + max_new_tokens)"),
    "greedy_first_position": ("每步取了第一个位置的 logits：下一个 token 由最后一个位置预测，取 logits[:, -1]",
                              "each step takes the logits of the first position: the next token is predicted at "
                              "the last position, take logits[:, -1]"),
    "kv_cache_pe_position_zero": ("用 KV 缓存时每个新 token 都加了第 0 个位置的位置编码："
                                  "第 t 步送进解码器的 token 在序列里的位置是 t，要加 pe[:, t]",
                                  "with a KV cache every new token gets the positional encoding of position 0: the "
                                  "token fed at step t sits at position t of the sequence and needs pe[:, t]"),
    "kv_cache_recomputes": ("用了缓存却每步重算：KV 缓存的意义是提示词只喂一次、之后每步只喂一个新 token；"
                            "下面是实测的每次调用喂入的 token 数",
                            "a cache that recomputes: with a KV cache the prompt is fed once and then one new token "
                            "per step; the tokens fed per call, as measured, follow"),
    "cross_kv_recomputed": ("交叉注意力的键/值每步都重新投影了：memory 不变，W_k(memory)、W_v(memory) "
                            "每层只需算一次，放进缓存",
                            "cross-attention keys/values are projected again at every step: memory does not change, "
                            "project W_k(memory) and W_v(memory) once per layer and keep them"),
})


def transformer_forward(ref, src, tgt_in, scale_embed=True, causal="right", src_pad=True, memory_mask=True,
                        cross_target_mask=False, pad_queries=False, tgt_pad=True, positions=(True, True)):
    """The reference Transformer's forward with switches for the known bugs."""
    pad = ref.pad_id
    keep_s, keep_t = src != pad, tgt_in != pad  # (B, T_s), (B, T_t)
    T_t = tgt_in.size(1)
    src_mask = keep_s[:, None, None, :]  # (B, 1, 1, T_s)
    enc_mask = (keep_s[:, None, :, None] & src_mask) if pad_queries else src_mask
    scale = {True: math.sqrt(ref.d_model), False: 1.0, "d_model": ref.d_model}[scale_embed]
    src_pos, tgt_pos = (ref.pos_enc if on else (lambda h: h) for on in positions)
    x = src_pos(ref.src_embed(src) * scale)
    for layer in ref.encoder_layers:
        x, _ = layer(x, enc_mask if src_pad else None)
    ones = torch.ones(T_t, T_t, dtype=torch.bool)
    causal_mask = {"right": torch.tril(ones), "none": ones, "diag_hidden": torch.tril(ones, -1),
                   "next_visible": torch.tril(ones, 1), "inverted": torch.triu(ones, 1)}[causal]
    tgt_mask = (keep_t[:, None, None, :] if tgt_pad else True) & causal_mask  # (B, 1, T_t, T_t)
    if pad_queries:
        tgt_mask = tgt_mask & keep_t[:, None, :, None]
    y = tgt_pos(ref.tgt_embed(tgt_in) * scale)
    cross = tgt_mask if cross_target_mask else (src_mask if memory_mask else None)
    for layer in ref.decoder_layers:
        y, _ = layer(y, x, tgt_mask, cross)
    return ref.out_proj(y)


TRANSFORMER_BUGS = [
    Bug("embed_not_scaled", dict(scale_embed=False)),
    Bug("embed_scaled_by_d_model", dict(scale_embed="d_model")),
    Bug("positions_missing", dict(positions=(True, False))),
    Bug("positions_missing", dict(positions=(False, True))),
    Bug("positions_missing", dict(positions=(False, False))),
    Bug("causal_missing", dict(causal="none")),
    Bug("causal_diagonal_hidden", dict(causal="diag_hidden")),
    Bug("causal_next_visible", dict(causal="next_visible")),
    Bug("causal_inverted", dict(causal="inverted")),
    Bug("tgt_pad_missing", dict(tgt_pad=False)),
    Bug("src_mask_missing", dict(src_pad=False)),
    Bug("memory_mask_missing", dict(memory_mask=False)),
    Bug("cross_attn_target_mask", dict(cross_target_mask=True)),
    Bug("pad_mask_queries", dict(pad_queries=True)),
]


def transformer_variants(ref, case):
    forward = lambda **kw: {"logits": transformer_forward(ref, case["src"], case["tgt_in"], **kw)}
    return combine(TRANSFORMER_BUGS, forward)


# ---------------------------------------------------------------- greedy decoding

def decoder_steps(ref, ys, memory, src_mask, positions_from_zero=False):
    """The reference decoder on the tokens so far, as cached decoding computes it, with a switch for the
    cache's known bug: every token gets position 0's encoding (a token's states depend only on the tokens
    before it, so decoding the whole prefix again gives what a cache gives step by step)."""
    T = ys.size(1)
    pe = ref.pos_enc.pe[:, :1] if positions_from_zero else ref.pos_enc.pe[:, :T]  # (1, 1 or T, d_model)
    y = ref.tgt_embed(ys) * math.sqrt(ref.d_model) + pe  # (B, T, d_model)
    mask = (ys != ref.pad_id)[:, None, None, :] & torch.tril(torch.ones(T, T, dtype=torch.bool))  # (B, 1, T, T)
    for layer in ref.decoder_layers:
        y, _ = layer(y, memory, mask, src_mask)
    return y


def greedy(ref, src, bos_id, eos_id, max_new_tokens, stop=True, pad_finished=True, keep_bos=True,
           memory_mask=True, positions_from_zero=False, position=-1):
    """Greedy decoding with the reference model and switches for the known bugs."""
    memory = ref.encode(src)
    src_mask = (src != ref.pad_id)[:, None, None, :] if memory_mask else None  # (B, 1, 1, T_s)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
    finished = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(max_new_tokens):
        hidden = (decoder_steps(ref, ys, memory, src_mask, True) if positions_from_zero
                  else ref.decode(ys, memory, src_mask))  # (B, T, d_model)
        nxt = ref.out_proj(hidden[:, position]).argmax(-1)  # (B,)
        if pad_finished:
            nxt = nxt.masked_fill(finished, ref.pad_id)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        finished |= nxt == eos_id
        if stop and finished.all():
            break
    return ys if keep_bos else ys[:, 1:]


def greedy_variants(ref, case):
    args = (case["src"], case["bos_id"], case["eos_id"], case["max_new_tokens"])
    run = lambda **kw: {"tokens": greedy(ref, *args, **kw)}
    return [wrong("greedy_no_eos_stop", lambda: run(stop=False)),
            wrong(("greedy_no_eos_stop", "greedy_no_pad_after_eos"), lambda: run(stop=False, pad_finished=False)),
            wrong("greedy_no_pad_after_eos", lambda: run(pad_finished=False)),
            wrong("greedy_no_bos", lambda: run(keep_bos=False)),
            wrong("greedy_first_position", lambda: run(position=0))]


def greedy_cached_variants(ref, case):
    args = (case["src"], case["bos_id"], case["eos_id"], case["max_new_tokens"])
    run = lambda **kw: {"tokens": greedy(ref, *args, **kw)}
    return [wrong("kv_cache_pe_position_zero", lambda: run(positions_from_zero=True)),
            wrong("greedy_no_pad_after_eos", lambda: run(pad_finished=False)),
            wrong("greedy_no_eos_stop", lambda: run(stop=False)),
            wrong(("greedy_no_eos_stop", "greedy_no_pad_after_eos"), lambda: run(stop=False, pad_finished=False)),
            wrong("memory_mask_missing", lambda: run(memory_mask=False))]


# ---------------------------------------------------------------- the cases

TRANSFORMER_CFG = dict(d_model=16, num_heads=2, d_ff=32, num_layers=2, dropout=0.1, max_len=32, pad_id=0)


def _no_method_answer(*args, **kwargs):
    raise RuntimeError("model.greedy_decode 调用的正是你要写的 greedy_decode：请用 model.encode、model.decode、"
                       "model.out_proj 逐步解码 / model.greedy_decode calls the very greedy_decode you are writing: "
                       "decode step by step with model.encode, model.decode and model.out_proj")


def _provided_transformer(src_vocab, tgt_vocab, seed=0, **cfg):
    """A reference Transformer, seeded and perturbed as the engine builds one, from the reference
    source run outside ``solutions``: the model a learner's decoding function may call while the guard
    watches. Its ``greedy_decode`` method cannot stand in for the answer: it says so."""
    namespace = provided("Transformer", leave_out=("greedy_decode",))
    namespace["greedy_decode"] = _no_method_answer
    cls = namespace["Transformer"]
    torch.manual_seed(seed)
    return perturb(cls(src_vocab, tgt_vocab, **cfg).double(), seed + 1).eval()


_EOS_SHIFT = {}  # the EOS bias shift found for the greedy case, computed once per process


def _greedy_case(model):
    """A case where the reference decodes rows that finish at different steps, before the limit.

    A random model rarely stops where a test needs it: the EOS logit bias of ``model`` is shifted
    step by step until the reference output shows early stopping and padding (computed, never
    hard-coded; remembered for the process)."""

    src = torch.tensor([[5, 3, 8, 4, 9, 2, 0], [7, 6, 2, 0, 0, 0, 0], [4, 4, 5, 6, 7, 8, 2]])
    case = Case("B=3, max_new_tokens=8, 各行在不同步结束 / rows finish at different steps",
                {"src": src}, {"model": model, "bos_id": 1, "eos_id": 2, "max_new_tokens": 8})
    base = model.out_proj.bias.detach().clone()
    shifts = [_EOS_SHIFT["shift"]] if "shift" in _EOS_SHIFT else sorted(torch.arange(-8.0, 8.0, 0.25).tolist(), key=abs)
    for shift in shifts:
        with torch.no_grad():
            model.out_proj.bias.copy_(base)
            model.out_proj.bias[2] += shift
        ys = solutions.greedy_decode(model, src, 1, 2, 8)
        first_eos = [(row == 2).nonzero()[:1] for row in ys]
        if ys.size(1) < 9 and all(len(f) for f in first_eos) and len({int(f) for f in first_eos}) > 1:
            _EOS_SHIFT["shift"] = shift
            return case
    raise RuntimeError("internal: no EOS bias gives early stopping")


def _greedy_cases(model):
    """The early-stopping case, and the same sources with the limit one step before the last row ends."""

    stops = _greedy_case(model)
    limit = solutions.greedy_decode(model, stops["src"], 1, 2, 8).size(1) - 2  # every row has ended after limit + 1
    limited = Case(f"同样的源序列，max_new_tokens={limit}：最后一行结束之前到达上限 / "
                   "the limit comes before the last row ends", {"src": stops["src"]},
                   {**stops.extra, "max_new_tokens": limit})
    return [stops, limited]


# untrained models whose greedy tokens change with position and with the source padding (seeds picked so;
# a model in the uniform-token regime would not tell a wrong position or mask from a right one):
# (seed, (d_model, num_heads, d_ff, num_layers), batch size, max_new_tokens)
_UNTRAINED = ((21, (8, 2, 16, 1), 2, 12), (24, (16, 4, 32, 2), 3, 10), (28, (12, 3, 24, 3), 2, 12))


def _untrained_case(seed, cfg, B, n, vocab=11):
    d_model, H, d_ff, N = cfg
    model = _provided_transformer(vocab, vocab, seed, d_model=d_model, num_heads=H, d_ff=d_ff, num_layers=N,
                                  dropout=0.1, max_len=32)
    src = torch.randint(3, vocab, (B, 6), generator=torch.Generator().manual_seed(seed))  # (B, T_s)
    src[-1, 3:] = model.pad_id
    return Case(f"未训练的模型 / an untrained model: d_model={d_model} H={H} N={N}, B={B}, max_new_tokens={n}",
                {"src": src}, {"model": model, "bos_id": 1, "eos_id": 2, "max_new_tokens": n})


# ---------------------------------------------------------------- what a KV cache must not recompute

def _decoder_projections(case):
    model = case["model"]
    watched = {"self": model.decoder_layers[0].self_attn.W_k}
    watched.update({f"cross{i}": layer.cross_attn.W_k for i, layer in enumerate(model.decoder_layers)})
    return watched


def _cache_problems(cases):
    """(id, note) for each cost mistake measured on the learner's calls: decoding starts from BOS alone,
    so every step feeds one token to the self-attention, and each layer projects memory once."""
    problems = {}
    for case in cases:
        seen = per_row(case, case["src"].size(0))
        if not seen:
            continue
        steps = seen["self"]
        if steps and sum(steps) > len(steps):
            problems.setdefault("kv_cache_recomputes", (
                f"实测 / measured: 每步送进解码器自注意力的 token 数 / tokens fed to the decoder's self-attention per "
                f"step {fed(steps)}，用缓存应是 / with the cache: {fed([1] * len(steps))}"
                f"（用例 / case 「{case.label}」）"))
        cross = max((len(v) for k, v in seen.items() if k.startswith("cross")), default=0)
        if cross > 1:
            problems.setdefault("cross_kv_recomputed", (
                f"实测 / measured: 每层的 cross_attn.W_k 调用了 {cross} 次 / each layer's cross_attn.W_k ran {cross} "
                f"times, 应为 1 次 / once（用例 / case 「{case.label}」）"))
    return sorted(problems.items(), key=lambda item: item[0] != "kv_cache_recomputes")


def _decode(f, case, _):
    return f(case["model"], case["src"].clone(), case["bos_id"], case["eos_id"], case["max_new_tokens"])


def _transformer_cases():
    return [Case("B=2, T_s=7 T_t=5, 源和目标都有填充 / padding in source and target",
                 {"src": torch.tensor([[5, 3, 8, 4, 9, 2, 0], [7, 6, 2, 0, 0, 0, 0]]),
                  "tgt_in": torch.tensor([[1, 5, 3, 8, 4], [1, 7, 6, 0, 0]])}),
            Case("B=1, T_s = T_t = 6", {"src": torch.tensor([[3, 4, 5, 6, 7, 2]]),
                                         "tgt_in": torch.tensor([[1, 3, 4, 5, 6, 7]])})]


def _greedy_check_cases(untrained):
    return _greedy_cases(_provided_transformer(11, 13, **TRANSFORMER_CFG)) + [_untrained_case(*u) for u in untrained]


ModuleCheck("Transformer", cases=_transformer_cases, outputs=("logits",), variants=transformer_variants,
            make_args=lambda case: ((11, 13), TRANSFORMER_CFG),
            forward=lambda m, case, x: m(case["src"], case["tgt_in"]),
            # gradients as training computes them: no loss at PAD targets, so a learner's
            # nn.Embedding(padding_idx=pad_id), which freezes the PAD rows, is right too
            loss_mask=lambda case: (case["tgt_in"] != TRANSFORMER_CFG["pad_id"])[..., None],
            parts=lambda ref: [("pos_enc", "PositionalEncoding")]
            + [(f"encoder_layers.{i}", "EncoderLayer") for i in range(len(ref.encoder_layers))]
            + [(f"decoder_layers.{i}", "DecoderLayer") for i in range(len(ref.decoder_layers))],
            wiring=lambda m, case: {"logits": transformer_forward(m, case["src"], case["tgt_in"])},
            mistakes=("embed_not_scaled", "src_mask_missing", "memory_mask_missing", "causal_missing",
                      "causal_next_visible"))

FunctionCheck("greedy_decode", cases=lambda: _greedy_check_cases(_UNTRAINED[:1]), outputs=("tokens",), call=_decode,
              ref_for=lambda case: case["model"], variants=greedy_variants,
              mistakes=("greedy_no_eos_stop", "greedy_no_pad_after_eos", "greedy_no_bos", "greedy_first_position"))

# token for token the reference's plain greedy decoding: the early-stopping cases (rows that end at
# different steps) and untrained models of three sizes that decode to the limit
FunctionCheck("greedy_decode_cached", cases=lambda: _greedy_check_cases(_UNTRAINED), outputs=("tokens",), call=_decode,
              reference="greedy_decode", ref_for=lambda case: case["model"], variants=greedy_cached_variants,
              cost=Cost(watched=_decoder_projections, problems=_cache_problems),
              mistakes=("kv_cache_pe_position_zero", "greedy_no_pad_after_eos", "memory_mask_missing",
                        "kv_cache_recomputes", "cross_kv_recomputed"))
