"""Known wrong variants of the contract components, for diagnosis.

When a learner's output differs from the reference, ``tutor.checks`` computes each known wrong
variant on the *same* case with the *same* weights and names the one the learner's output
matches. ``MISTAKES`` maps a diagnosis id to its bilingual explanation; ``VARIANTS`` maps a check
name to a function ``(reference, case) -> [(diagnosis_id, thunk)]`` whose thunks return the wrong
output in the check's output format (a dict of named tensors/arrays, a subset of the check's keys).
Entries are ``(ids, thunk)`` or ``(ids, thunk, note, singles)``: ``ids`` one id or a tuple of ids
(several bugs at once, from ``combine``), ``note`` a bilingual detail (e.g. the eps found) and
``singles`` the thunks of each bug alone (to say on which cases each one shows).
``WIRING`` maps a composite's check name to its contract forward written from its parts, so that
``tutor.checks`` can run it (and the wiring variants) with the *learner's* parts.
``EXCEPTIONS`` maps error-message fragments to a diagnosis for learners whose code raises.
``RULES`` names what a failing case shows when no variant reproduces it (an allowed token drawn
another way, right tokens with another score, gradients missing because the output has no graph).

Every variant is written from the reference's building blocks (its weights and sub-modules), so
a diagnosis means "your output equals what this exact bug produces", not a guess.
"""
import math
from itertools import combinations

import numpy as np
import torch
import torch.nn.functional as F

MISTAKES = {
    # attention
    "no_scale": ("注意力分数没有除以 √d_k：d_k 大时 softmax 饱和、梯度消失",
                 "scores are not divided by √d_k: for large d_k the softmax saturates and gradients vanish"),
    "scale_by_dk": ("除以了 d_k 而不是 √d_k：Q·K 的方差是 d_k，要除以标准差 √d_k",
                    "divided by d_k instead of √d_k: Q·K has variance d_k, divide by its std √d_k"),
    "scale_by_d_model": ("多头里按 √d_model 缩放了：每个头的点积只有 d_k = d_model / H 维，应除以 √d_k",
                         "scaled by √d_model in multi-head attention: each head's dot product has d_k = d_model / H "
                         "terms, divide by √d_k"),
    "softmax_wrong_axis": ("softmax 的轴错了：应在最后一维（对每个查询的所有键）归一化",
                           "softmax over the wrong axis: normalise over the last axis (all keys of one query)"),
    "softmax_ignores_axis": ("softmax 忽略了 axis 参数，总在最后一维归一化：max 和 sum 都要沿 axis 取（keepdims=True）",
                             "softmax ignores its axis argument and always normalises the last axis: take max and sum "
                             "along axis (keepdims=True)"),
    "softmax_all_elements": ("softmax 对整个数组归一化（max/sum 没有指定轴）：应沿 axis 归一化，每个切片之和为 1",
                             "softmax normalises the whole array (max/sum without an axis): normalise along axis, each "
                             "slice sums to 1"),
    "mask_inverted": ("掩码约定反了：本课程 True = 可以看，True 的位置要保留，False 的位置才遮挡",
                      "mask convention inverted: in this course True = may attend; block the False positions, keep the "
                      "True ones"),
    "mask_after_softmax": ("在 softmax 之后才遮挡：被遮挡位置置 0 后每行之和不再是 1；应在 softmax "
                           "之前把分数设为很大的负数",
                           "mask applied after the softmax: zeroing weights afterwards leaves rows that do not sum to "
                           "1; fill the scores before the softmax"),
    "mask_multiplies_scores": ("用掩码乘分数：被遮挡的分数变成 0 而不是很大的负数，仍然分到权重",
                               "the mask multiplies the scores: blocked scores become 0, not a large negative number, "
                               "and still get weight"),
    "nan_fully_masked": ("用 -inf 填充后，整行都被遮挡的查询得到 NaN；契约要求这样的行输出全 0",
                         "filling with -inf gives NaN on a query row whose keys are all blocked; the contract asks for "
                         "zeros there"),
    "fully_masked_uniform": ("整行都被遮挡时得到均匀权重（用了有限的大负数却没把被遮挡的权重清零）；契约要求全 0",
                             "a fully blocked row gets uniform weights (a finite large negative fill without zeroing "
                             "the blocked weights); the contract asks for zeros"),
    "mask_shape": ("掩码不能广播到注意力分数 (B, H, T_q, T_k)：make_pad_mask 已是 (B, 1, 1, T)，make_subsequent_mask "
                   "已是 (1, 1, T, T)，直接传入，不要再 unsqueeze",
                   "the mask does not broadcast to the scores (B, H, T_q, T_k): make_pad_mask already gives (B, 1, 1, "
                   "T) and make_subsequent_mask (1, 1, T, T); pass them as they are, without another unsqueeze"),
    "mask_not_bool": ("掩码可能是 0/1 整数：先 mask.to(torch.bool) 再用 ~mask 或 masked_fill",
                      "the mask may be 0/1 integers: convert with mask.to(torch.bool) before ~mask or masked_fill"),
    # multi-head attention
    "split_heads_no_transpose": ("拆头时直接 view 成 (B, H, T, d_k)：这会把不同 token 的数字混进一个头；"
                                 "应先 view(B, T, H, d_k) 再 transpose(1, 2)",
                                 "heads split by a straight view to (B, H, T, d_k): that mixes numbers of different "
                                 "tokens into one head; view(B, T, H, d_k) then transpose(1, 2)"),
    "merge_heads_no_transpose": ("合并头时没有先 transpose(1, 2) 回 (B, T, H, d_k)：直接 view 成 (B, T, d_model) "
                                 "会打乱 token",
                                 "heads merged without transpose(1, 2) back to (B, T, H, d_k): a straight view to (B, "
                                 "T, d_model) scrambles the tokens"),
    "view_without_contiguous": ("transpose 之后的张量不连续，不能直接 view：先 .contiguous() 或改用 reshape",
                                "a transposed tensor is not contiguous and cannot be viewed: call .contiguous() first "
                                "or use reshape"),
    "missing_w_o": ("缺少输出投影 W_o：合并各头之后还要再乘 W_o",
                    "the output projection W_o is missing: apply W_o after merging the heads"),
    "attn_averaged_over_heads": ("返回的注意力权重在头上取了平均（nn.MultiheadAttention 的默认做法）："
                                 "契约要每个头各自的权重 (B, H, T_q, T_k)",
                                 "the attention weights are averaged over the heads (nn.MultiheadAttention's default): "
                                 "the contract returns each head's weights, (B, H, T_q, T_k)"),
    "kv_swapped": ("K 和 V 用反了：键（用来打分）来自 W_k，值（被加权求和）来自 W_v",
                   "K and V are swapped: keys (scored against queries) come from W_k, values (averaged) from W_v"),
    # positional encoding
    "pe_sin_cos_swapped": ("sin 和 cos 放反了：偶数列是 sin，奇数列是 cos",
                           "sin and cos are swapped: even columns are sin, odd columns cos"),
    "pe_freq_factor_2": ("频率差了 2 倍：指数应是 2i/d_model，其中 i 是第几对（列号 2i 和 2i+1 共用一个频率）",
                         "frequencies off by a factor 2 in the exponent: it is 2i/d_model with i the pair index "
                         "(columns 2i and 2i+1 share one frequency)"),
    "pe_sin_cos_halves": ("把 sin 放在前一半列、cos 放在后一半列：契约要求交错排列（偶数列 sin，奇数列 cos）",
                          "sin in the first half of the columns and cos in the second: the contract interleaves them "
                          "(even columns sin, odd cos)"),
    "pe_not_sliced": ("位置编码没有按序列长度切片：应加 pe[:, :T]，而不是整个 max_len 长的表",
                      "the positional table is not sliced to the sequence length: add pe[:, :T], not the whole max_len "
                      "table"),
    "pe_sliced_by_batch": ("位置编码按 x.size(0)（batch 大小）切片了：输入是 batch-first 的 (B, T, d_model)，应取 "
                           "pe[:, :x.size(1)]（PyTorch 教程的写法是 sequence-first）",
                           "the positional table is sliced by x.size(0), the batch size: inputs are batch-first (B, T, "
                           "d_model), take pe[:, :x.size(1)] (PyTorch's tutorial is sequence-first)"),
    "rope_half_split": ("RoPE 配对方式不对：本课程把相邻的 (2i, 2i+1) 配成一对，而不是 (i, i + d/2)",
                        "RoPE pairs the wrong features: this course rotates adjacent pairs (2i, 2i+1), not (i, i + d/"
                        "2)"),
    "rope_rotation_inverted": ("RoPE 旋转方向反了：out[2i] = x[2i]·cos − x[2i+1]·sin",
                               "RoPE rotates the wrong way: out[2i] = x[2i]·cos − x[2i+1]·sin"),
    # FFN, normalisation, residual
    "ffn_no_activation": ("FFN 两层之间缺少激活函数：没有非线性，两层等于一层",
                          "the FFN has no activation between its layers: without a non-linearity two layers collapse "
                          "into one"),
    "ffn_wrong_activation": ("激活函数与 activation 参数不一致（relu / gelu）",
                             "the activation does not follow the activation argument (relu / gelu)"),
    "ffn_gelu_tanh": ("用了 tanh 近似的 GELU（GPT-2 的 gelu_new）：契约是精确的 erf 版本，即 F.gelu 的默认值",
                      "the tanh approximation of GELU (GPT-2's gelu_new): the contract is the exact, erf-based GELU, "
                      "F.gelu's default"),
    "ffn_activation_after_fc2": ("在 fc2 之后又加了一次激活：FFN 的输出不能被截断为非负",
                                 "an activation after fc2: the FFN output must not be clipped"),
    "ln_wrong_axis": ("LayerNorm 归一化的轴错了：只在最后一维（每个位置的特征）上求均值和方差，不是在 batch 或时间轴上",
                      "LayerNorm normalises over the wrong axis: take mean and variance over the last (feature) axis "
                      "of each position, not over batch or time"),
    "ln_unbiased_var": ("用了无偏方差（除以 n−1）：LayerNorm 用有偏方差，unbiased=False",
                        "unbiased variance (divides by n−1): LayerNorm uses the biased variance, unbiased=False"),
    "ln_eps_outside_sqrt": ("eps 放在根号外面：应是 sqrt(var + eps)，方差很小时两者差别很大",
                            "eps outside the square root: it is sqrt(var + eps); for small variances the two differ a "
                            "lot"),
    "ln_eps_value": ("eps 的数值与契约不同（例如 BERT 的 1e-12、Annotated Transformer 的 1e-6）：用构造参数 eps，默认 "
                     "1e-5",
                     "eps differs from the contract (e.g. BERT's 1e-12, the Annotated Transformer's 1e-6): use the eps "
                     "argument, default 1e-5"),
    "ln_no_affine": ("没有乘 weight、加 bias：归一化之后还要做可学习的缩放和平移",
                     "weight and bias are not applied: scale and shift after normalising"),
    "rms_subtracts_mean": ("RMSNorm 不减均值：只除以均方根 sqrt(mean(x²) + eps)",
                           "RMSNorm does not subtract the mean: divide by the root mean square sqrt(mean(x²) + eps) "
                           "only"),
    "missing_residual": ("缺少残差连接：子层输出要与它的输入相加（x + sublayer(x)）再归一化",
                         "a residual connection is missing: add the sublayer's input to its output (x + sublayer(x)) "
                         "before normalising"),
    "shared_norm": ("一个 LayerNorm 被两个子层共用：每个子层要有自己的 norm1、norm2……，各自学习自己的参数",
                    "one LayerNorm shared by two sublayers: each sublayer has its own norm1, norm2, ... with its own "
                    "parameters"),
    "weights_tied": ("两个契约参数是同一个张量（权重共享，例如嵌入层和输出层共用一个矩阵）：契约里它们各自独立，去掉 "
                     "a.weight = b.weight",
                     "two contract parameters are one tensor (weight tying, e.g. the embedding and the output "
                     "projection): the contract keeps them separate, remove a.weight = b.weight"),
    "layers_shared": ("所有层是同一个对象（例如 [layer] * N）：它们共用一组参数；每层都要新建一次，如 [Layer(...) for "
                      "_ in range(N)]",
                      "every layer is the same object (e.g. [layer] * N), so they share one set of weights: build each "
                      "layer anew, [Layer(...) for _ in range(N)]"),
    "norms_swapped": ("LayerNorm 用错了位置：第 k 个子层之后用 norm{k}（norm1 在自注意力之后……）",
                      "the LayerNorms are used in the wrong places: sublayer k is followed by norm{k} (norm1 after "
                      "self-attention, ...)"),
    "residual_wrong_source": ("残差加错了对象：每个子层加的是它自己的输入（上一个子层的输出），不是整层的输入",
                              "the residual adds the wrong tensor: each sublayer adds its own input (the previous "
                              "sublayer's output), not the layer's input"),
    "pre_ln_instead_of_post": ("写成了 Pre-LN：这里要求 Post-LN，即 LayerNorm(x + sublayer(x))",
                               "Pre-LN where Post-LN was asked: this contract is LayerNorm(x + sublayer(x))"),
    "post_ln_instead_of_pre": ("写成了 Post-LN：Pre-LN 是 x + sublayer(LayerNorm(x))，残差路径不经过归一化",
                               "Post-LN where Pre-LN was asked: Pre-LN is x + sublayer(LayerNorm(x)), the residual "
                               "path is not normalised"),
    # masks and layers
    "pad_mask_queries": ("填充掩码把查询行也遮挡了：它只遮挡键，形状 (B, 1, 1, T)；遮挡查询行会产生没有可见键的行",
                         "the padding mask also hides query rows: it hides keys only, shape (B, 1, 1, T); hiding query "
                         "rows leaves rows with no visible key"),
    "pad_mask_inverted": ("填充掩码反了：True 表示真实 token（可以看），PAD 位置为 False",
                          "the padding mask is inverted: True marks real tokens (may attend), PAD positions are False"),
    "causal_diagonal_hidden": ("因果掩码差一：对角线被遮挡了，每个位置应能看到自己（tril 含对角线）",
                               "causal mask off by one: the diagonal is hidden; each position must see itself (tril "
                               "with the diagonal)"),
    "causal_next_visible": ("因果掩码差一：下一个 token 可见，模型能偷看答案（应是 tril，diagonal=0）",
                            "causal mask off by one: the next token is visible, the model can peek at the answer (tril "
                            "with diagonal=0)"),
    "causal_inverted": ("因果掩码反了：True = 可以看，应是下三角（含对角线）为 True",
                        "causal mask inverted: True = may attend, the lower triangle (with the diagonal) is True"),
    "tgt_pad_missing": ("解码器自注意力的掩码只有因果部分，没有目标序列的填充掩码：应是 make_pad_mask(tgt_in) & "
                        "make_subsequent_mask(T_t)",
                        "the decoder self-attention mask is causal only, without the target padding mask: use "
                        "make_pad_mask(tgt_in) & make_subsequent_mask(T_t)"),
    "causal_missing": ("解码器自注意力没有因果掩码：训练时每个位置都能看到后面的答案",
                       "the decoder self-attention has no causal mask: during training each position sees the answers "
                       "after it"),
    "src_mask_missing": ("编码器没有用源序列的填充掩码：PAD token 被当作真实内容关注",
                         "the encoder ignores the source padding mask: PAD tokens are attended to as if they were "
                         "content"),
    "memory_mask_missing": ("交叉注意力没有用源序列的填充掩码：解码器会关注源序列的 PAD",
                            "cross-attention ignores the source padding mask: the decoder attends to source PAD "
                            "tokens"),
    "cross_attn_target_mask": ("交叉注意力用了目标序列的掩码：它的键来自 memory（源序列），应使用源序列的填充掩码 "
                               "memory_mask",
                               "cross-attention uses the target mask: its keys come from memory (the source), use the "
                               "source padding mask memory_mask"),
    "cross_attn_wrong_source": ("交叉注意力的键和值应来自 memory（编码器输出），查询来自解码器",
                                "cross-attention takes keys and values from memory (the encoder output) and queries "
                                "from the decoder"),
    "embed_not_scaled": ("词嵌入没有乘 √d_model：位置编码会淹没词的信息",
                         "embeddings are not multiplied by √d_model: the positional encoding drowns the token "
                         "information"),
    "embed_scaled_by_d_model": ("词嵌入乘了 d_model：应乘 √d_model",
                                "embeddings are multiplied by d_model: multiply by √d_model"),
    "positions_missing": ("有一侧没有加位置编码：源序列和目标序列的嵌入都要经过 pos_enc",
                          "one side gets no positional encoding: both the source and the target embeddings go through "
                          "pos_enc"),
    # decoding and the copy task
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
    "loss_includes_pad": ("损失把 PAD 位置也算进去了：用 ignore_index=pad_id，只在真实目标 token 上求平均",
                          "the loss counts PAD positions: use ignore_index=pad_id and average over real target tokens "
                          "only"),
    "loss_sum_not_mean": ("损失求和而不是求平均：应对非 PAD 位置取平均",
                          "the loss is summed instead of averaged over the non-PAD positions"),
    "em_whole_row": ("比较了整行（包括 EOS 之后的内容）：只比较到第一个 EOS（含）为止",
                     "the whole row was compared (including what follows EOS): compare up to and including the first "
                     "EOS only"),
    "em_token_accuracy": ("算成了逐 token 准确率：exact match 按行计分，一行中到 EOS 为止全部正确才算对",
                          "a per-token accuracy: exact match scores whole rows, a row counts only when every token up "
                          "to EOS is right"),
    "softmax_unstable": ("没有先减去最大值：大输入时 exp 溢出得到 inf/NaN",
                         "the maximum is not subtracted first: exp overflows to inf/NaN for large inputs"),
}


def explain(mistake_id):
    """One line: ``诊断 / diagnosis [id]: 中文 / English``."""
    zh, en = MISTAKES[mistake_id]
    return f"诊断 / diagnosis [{mistake_id}]: {zh} / {en}"


def combine(bugs, run, most=2, note=None):
    """Variant entries for each bug of ``bugs`` (``[(id, switches)]``) alone, then for each
    combination of up to ``most`` bugs that set different switches (two mistakes at once).
    ``run(**switches)`` -> output dict; ``note(switches)`` -> a detail line or ""."""
    entries = []
    for size in range(1, most + 1):
        for combo in combinations(bugs, size):
            keys = [set(kw) for _, kw in combo]
            if len(set().union(*keys)) < sum(map(len, keys)) or len({mid for mid, _ in combo}) < size:
                continue  # two bugs on one switch, or the same bug twice
            switches = {k: v for _, kw in combo for k, v in kw.items()}
            singles = tuple((lambda kw=kw: run(**kw)) for _, kw in combo) if size > 1 else ()
            entries.append((tuple(mid for mid, _ in combo), lambda sw=switches: run(**sw),
                            note(switches) if note else "", singles))
    return entries


# ---------------------------------------------------------------- attention

def attention(Q, K, V, mask=None, scale="sqrt_dk", softmax_dim=-1, invert=False, mode="fill",
              fill="min", zero_blocked=True):
    """Scaled dot-product attention with switches for each known bug; defaults = the contract."""
    d_k = Q.size(-1)
    scores = Q @ K.transpose(-2, -1)  # (..., T_q, T_k)
    if scale == "sqrt_dk":
        scores = scores / math.sqrt(d_k)
    elif scale == "dk":
        scores = scores / d_k
    elif scale is not None:
        scores = scores / scale
    if mask is not None:
        mask = mask.to(torch.bool)
        if invert:
            mask = ~mask
        if mode == "fill":
            value = {"min": torch.finfo(scores.dtype).min, "-inf": float("-inf"), "-1e9": -1e9}[fill]
            scores = scores.masked_fill(~mask, value)
        elif mode == "multiply":
            scores = scores * mask
    attn = torch.softmax(scores, dim=softmax_dim)
    if mask is not None and (zero_blocked or mode == "after_softmax"):
        attn = attn.masked_fill(~mask, 0.0)
    return attn @ V, attn  # (..., T_q, d_v), (..., T_q, T_k)


ATTENTION_BUGS = [
    ("no_scale", dict(scale=None)),
    ("scale_by_dk", dict(scale="dk")),
    ("softmax_wrong_axis", dict(softmax_dim=-2)),
    ("mask_inverted", dict(invert=True)),
    ("mask_after_softmax", dict(mode="after_softmax")),
    ("mask_multiplies_scores", dict(mode="multiply", zero_blocked=False)),
    ("nan_fully_masked", dict(fill="-inf", zero_blocked=False)),
    ("fully_masked_uniform", dict(fill="-1e9", zero_blocked=False)),
]


def _attention_variants(Q, K, V, mask, to_output):
    return combine(ATTENTION_BUGS, lambda **kw: to_output(*attention(Q, K, V, mask, **kw)))


def sdpa_variants(ref, case):
    to_output = lambda out, attn: {"out": out, "attn": attn}  # noqa: E731
    return _attention_variants(case["Q"], case["K"], case["V"], case.get("mask"), to_output)


def numpy_attention_variants(ref, case):
    t = lambda a: None if a is None else torch.from_numpy(np.asarray(a))  # noqa: E731
    to_output = lambda out, attn: {"out": out.numpy(), "weights": attn.numpy()}  # noqa: E731
    return _attention_variants(t(case["Q"]), t(case["K"]), t(case["V"]), t(case.get("mask")), to_output)


def softmax_variants(ref, case):
    x = case["x"]

    def run(axis=case["axis"], stable=True):
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(x - np.max(x, axis=axis, keepdims=True)) if stable else np.exp(x)
            return {"y": e / np.sum(e, axis=axis, keepdims=True)}

    def fixed_axis(axis):  # the whole array's max (stable enough), the sum over one fixed axis
        e = np.exp(x - np.max(x))
        return {"y": e / e.sum(axis=axis, keepdims=True)}

    return combine([("softmax_unstable", dict(stable=False)), ("softmax_ignores_axis", dict(axis=-1)),
                    ("softmax_all_elements", dict(axis=None))], run) + [
        ("softmax_fixed_axis", lambda axis=axis: fixed_axis(axis)) for axis in (0, 1) if axis < x.ndim]


# ---------------------------------------------------------------- multi-head attention

def mha(ref, x_q, x_kv, mask=None, split_transpose=True, merge_transpose=True, use_w_o=True,
        swap_kv=False, average_attn=False, **attn_kwargs):
    """Multi-head attention with the reference's weights and switches for each known bug."""
    B, T_q, d_model = x_q.shape
    T_k = x_kv.size(1)
    H, d_k = ref.num_heads, d_model // ref.num_heads

    def split(x, T):
        if split_transpose:
            return x.view(B, T, H, d_k).transpose(1, 2)  # (B, T, d_model) -> (B, H, T, d_k)
        return x.view(B, H, T, d_k)  # the bug: no transpose

    q, k, v = split(ref.W_q(x_q), T_q), split(ref.W_k(x_kv), T_k), split(ref.W_v(x_kv), T_k)
    if swap_kv:
        k, v = v, k
    out, attn = attention(q, k, v, mask, **attn_kwargs)  # (B, H, T_q, d_k), (B, H, T_q, T_k)
    if merge_transpose:
        out = out.transpose(1, 2).reshape(B, T_q, d_model)  # (B, T_q, H, d_k) -> (B, T_q, d_model)
    else:
        out = out.reshape(B, T_q, d_model)  # the bug: (B, H, T_q, d_k) read as (B, T_q, d_model)
    return (ref.W_o(out) if use_w_o else out), (attn.mean(dim=1) if average_attn else attn)


MHA_BUGS = [
    ("attn_averaged_over_heads", dict(average_attn=True)),
    ("split_heads_no_transpose", dict(split_transpose=False)),
    ("merge_heads_no_transpose", dict(merge_transpose=False)),
    ("missing_w_o", dict(use_w_o=False)),
    ("kv_swapped", dict(swap_kv=True)),
] + ATTENTION_BUGS


def mha_variants(ref, case):
    def run(kw):
        out, attn = mha(ref, case["x_q"], case.get("x_kv", case["x_q"]), case.get("mask"), **kw)
        return {"out": out, "attn": attn}

    bugs = MHA_BUGS + [("scale_by_d_model", dict(scale=math.sqrt(case["x_q"].size(-1))))]
    return combine(bugs, lambda **kw: run(kw))


# ---------------------------------------------------------------- positional encoding

def pe_table(max_len, d_model, swap=False, exponent_factor=1.0, halves=False, dtype=torch.float64):
    """Sinusoidal table with switches for the known bugs; defaults = the contract."""
    position = torch.arange(max_len, dtype=dtype).unsqueeze(1)  # (max_len, 1)
    n_sin, n_cos = (d_model + 1) // 2, d_model // 2
    pair = torch.arange(n_sin, dtype=dtype)  # pair index i
    angles = position * torch.pow(10000.0, -2.0 * pair * exponent_factor / d_model)  # (max_len, n_sin)
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    pe = torch.zeros(max_len, d_model, dtype=dtype)
    if halves:
        pe[:, :n_sin] = first(angles)
        pe[:, n_sin:] = second(angles[:, :n_cos])
    else:
        pe[:, 0::2] = first(angles)
        pe[:, 1::2] = second(angles[:, :n_cos])
    return pe


PE_BUGS = [
    ("pe_sin_cos_swapped", dict(swap=True)),
    ("pe_freq_factor_2", dict(exponent_factor=2.0)),
    ("pe_freq_factor_2", dict(exponent_factor=0.5)),
    ("pe_sin_cos_halves", dict(halves=True)),
]


def pe_table_variants(ref, case):
    return [(mid, lambda kw=kw: {"pe": pe_table(case["max_len"], case["d_model"], **kw)}) for mid, kw in PE_BUGS]


def pe_module_variants(ref, case):
    x, max_len = case["x"], case["max_len"]

    def run(kw):
        pe = pe_table(max_len, x.size(-1), **kw).unsqueeze(0)  # (1, max_len, d_model)
        return {"pe": pe, "out": x + pe[:, : x.size(1)]}

    def sliced(length):
        pe = pe_table(max_len, x.size(-1)).unsqueeze(0)  # (1, max_len, d_model)
        return {"pe": pe, "out": x + pe[:, :length]}  # raises unless the length broadcasts

    return [(mid, lambda kw=kw: run(kw)) for mid, kw in PE_BUGS] + [("pe_not_sliced", lambda: sliced(max_len)),
                                                                    ("pe_sliced_by_batch", lambda: sliced(x.size(0)))]


def rope(x, half_split=False, inverted=False, base=10000.0):
    T, d = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)  # (d/2,)
    angles = torch.arange(T, dtype=x.dtype).unsqueeze(-1) * theta  # (T, d/2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    if inverted:
        sin = -sin
    if half_split:
        a, b = x[..., : d // 2], x[..., d // 2:]
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)  # (..., T, d)


def rope_variants(ref, case):
    return [("rope_half_split", lambda: {"out": rope(case["x"], half_split=True)}),
            ("rope_rotation_inverted", lambda: {"out": rope(case["x"], inverted=True)})]


# ---------------------------------------------------------------- FFN and normalisation

FFN_BUGS = [
    ("ffn_no_activation", dict(act=None)),
    ("ffn_wrong_activation", dict(act="relu")),  # whatever the activation argument says
    ("ffn_wrong_activation", dict(act="gelu")),
    ("ffn_gelu_tanh", dict(tanh=True)),
    ("ffn_activation_after_fc2", dict(after_fc2=True)),
]


def ffn_variants(ref, case):
    x = case["x"]

    def run(act=case["activation"], tanh=False, after_fc2=False):
        fn = {"relu": F.relu, "gelu": lambda h: F.gelu(h, approximate="tanh" if tanh else "none"),
              None: lambda h: h}[act]
        out = ref.fc2(fn(ref.fc1(x)))
        return {"out": fn(out) if after_fc2 else out}

    return combine(FFN_BUGS, run)


def layer_norm(x, weight, bias, eps, dims=(-1,), unbiased=False, eps_outside=False, affine=True, eps_value=None):
    eps = eps if eps_value is None else eps_value
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, unbiased=unbiased)
    std = torch.sqrt(var) + eps if eps_outside else torch.sqrt(var + eps)
    y = (x - mean) / std
    return y * weight + bias if affine else y


LN_BUGS = [
    ("ln_wrong_axis", dict(dims=(0,))),
    ("ln_wrong_axis", dict(dims=(-2,))),
    ("ln_wrong_axis", dict(dims=(-2, -1))),
    ("ln_unbiased_var", dict(unbiased=True)),
    ("ln_eps_outside_sqrt", dict(eps_outside=True)),
    ("ln_no_affine", dict(affine=False)),
] + [("ln_eps_value", dict(eps_value=eps)) for eps in (1e-12, 1e-6, 1e-8, 1e-5)]  # BERT, Annotated, ...


def _layer_norm_combinations(x, ln):
    """LayerNorm bugs alone and up to three at once (the Annotated Transformer's has three)."""
    note = lambda kw: ("" if "eps_value" not in kw else  # noqa: E731
                       f"eps = {kw['eps_value']:g}，契约是 {ln.eps:g} / eps = {kw['eps_value']:g}, the contract says "
                       f"{ln.eps:g}")
    return combine(LN_BUGS, lambda **kw: {"out": layer_norm(x, ln.weight, ln.bias, ln.eps, **kw)}, most=3, note=note)


def layer_norm_variants(ref, case):
    return _layer_norm_combinations(case["x"], ref)


def residual_variants(ref, case):
    x, s, ln = case["x"], case["sublayer_out"], ref.ln
    return [("missing_residual", lambda: {"out": ln(s)}),
            ("pre_ln_instead_of_post", lambda: {"out": x + ln(s)}),
            ("pre_ln_instead_of_post", lambda: {"out": ln(x) + s})] + _layer_norm_combinations(x + s, ln)


def rms_variants(ref, case):
    x = case["x"]
    zero = torch.zeros_like(ref.weight)
    rms_out = lambda: {"out": x / (torch.sqrt(x.pow(2).mean(-1, keepdim=True)) + ref.eps) * ref.weight}  # noqa: E731
    plus_one = lambda: {"out": x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + ref.eps) * (1 + ref.weight)}  # noqa: E731
    return [("rms_subtracts_mean", lambda: {"out": layer_norm(x, ref.weight, zero, ref.eps)}),
            ("ln_eps_outside_sqrt", rms_out), ("rms_weight_plus_one", plus_one)]


def pre_ln_variants(ref, case):
    x, sub, ln = case["x"], case["sublayer"], ref.ln
    return [("post_ln_instead_of_pre", lambda: {"out": ln(x + sub(x))}),
            ("missing_residual", lambda: {"out": sub(ln(x))})]


# ---------------------------------------------------------------- masks

def pad_mask_variants(ref, case):
    keep = case["tokens"] != case["pad_id"]  # (B, T)
    return [("pad_mask_queries", lambda: {"mask": keep[:, None, :, None]}),
            ("pad_mask_queries", lambda: {"mask": keep[:, None, :, None] & keep[:, None, None, :]}),
            ("pad_mask_inverted", lambda: {"mask": ~keep[:, None, None, :]})]


def subsequent_mask_variants(ref, case):
    ones = torch.ones(case["T"], case["T"], dtype=torch.bool)
    return [("causal_diagonal_hidden", lambda: {"mask": torch.tril(ones, -1)[None, None]}),
            ("causal_next_visible", lambda: {"mask": torch.tril(ones, 1)[None, None]}),
            ("causal_inverted", lambda: {"mask": torch.triu(ones, 1)[None, None]}),
            ("causal_inverted", lambda: {"mask": torch.triu(ones)[None, None]})]


# ---------------------------------------------------------------- layers

def encoder_layer(ref, x, mask, residual=(True, True), pre_ln=False, use_mask=True, norms=(1, 2),
                  skip_from_input=False):
    """The Post-LN encoder layer from ``ref``'s parts, with switches for the known wiring bugs."""
    x0, mask = x, (mask if use_mask else None)
    n1, n2 = (getattr(ref, f"norm{k}").ln for k in norms)
    attn_sub = lambda h: ref.self_attn(h, h, mask)[0]  # noqa: E731
    if pre_ln:
        x = x + attn_sub(n1(x))
        return x + ref.ffn(n2(x))
    a = attn_sub(x)
    x = n1(x + a if residual[0] else a)
    f = ref.ffn(x)
    return n2((x0 if skip_from_input else x) + f if residual[1] else f)


ENCODER_BUGS = [
    ("missing_residual", dict(residual=(False, True))),
    ("missing_residual", dict(residual=(True, False))),
    ("missing_residual", dict(residual=(False, False))),
    ("pre_ln_instead_of_post", dict(pre_ln=True)),
    ("src_mask_missing", dict(use_mask=False)),
    ("shared_norm", dict(norms=(1, 1))),
    ("shared_norm", dict(norms=(2, 2))),
    ("norms_swapped", dict(norms=(2, 1))),
    ("residual_wrong_source", dict(skip_from_input=True)),
]


def encoder_variants(ref, case):
    x, mask = case["x"], case.get("src_mask")
    return combine(ENCODER_BUGS, lambda **kw: {"out": encoder_layer(ref, x, mask, **kw)})


def decoder_layer(ref, y, memory, tgt_mask, memory_mask, residual=(True, True, True), pre_ln=False,
                  cross_mask="memory", cross_source="memory", norms=(1, 2, 3), skip_from_input=False):
    """The Post-LN decoder layer from ``ref``'s parts, with switches for the known wiring bugs."""
    cmask = {"memory": memory_mask, "target": tgt_mask, None: None}[cross_mask]
    n1, n2, n3 = (getattr(ref, f"norm{k}").ln for k in norms)
    self_sub = lambda h: ref.self_attn(h, h, tgt_mask)[0]  # noqa: E731
    cross_sub = {"memory": lambda h: ref.cross_attn(h, memory, cmask)[0],
                 "target": lambda h: ref.cross_attn(h, h, cmask)[0],
                 "swapped": lambda h: ref.cross_attn(memory, h, cmask)[0]}[cross_source]  # swapped: queries from memory
    if pre_ln:
        y = y + self_sub(n1(y))
        y = y + cross_sub(n2(y))
        return y + ref.ffn(n3(y))
    y0 = y
    for sub, norm, keep in ((self_sub, n1, residual[0]), (cross_sub, n2, residual[1]), (ref.ffn, n3, residual[2])):
        s = sub(y)
        y = norm((y0 if skip_from_input else y) + s if keep else s)
    return y


# one norm reused by another sublayer (norm k in place of norm j), or one norm for all three; norms permuted
_SHARED = [tuple(k if i == j else i for i in (1, 2, 3)) for j in (1, 2, 3) for k in (1, 2, 3) if k != j] + [(1, 1, 1)]
_SWAPPED = [(2, 1, 3), (1, 3, 2), (3, 2, 1), (2, 3, 1), (3, 1, 2)]
DECODER_BUGS = [("missing_residual", dict(residual=tuple(i != k for i in range(3)))) for k in range(3)] + [
    ("pre_ln_instead_of_post", dict(pre_ln=True)),
    ("cross_attn_target_mask", dict(cross_mask="target")),
    ("memory_mask_missing", dict(cross_mask=None)),
    ("cross_attn_wrong_source", dict(cross_source="target")),
    ("cross_attn_wrong_source", dict(cross_source="target", cross_mask="target")),
    ("cross_attn_wrong_source", dict(cross_source="swapped")),
    ("residual_wrong_source", dict(skip_from_input=True)),
]
DECODER_BUGS += [("shared_norm", dict(norms=norms)) for norms in _SHARED]
DECODER_BUGS += [("norms_swapped", dict(norms=norms)) for norms in _SWAPPED]


def decoder_variants(ref, case):
    args = (case["y"], case["memory"], case.get("tgt_mask"), case.get("memory_mask"))
    return combine(DECODER_BUGS, lambda **kw: {"out": decoder_layer(ref, *args, **kw)})


# ---------------------------------------------------------------- Transformer

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
    ("embed_not_scaled", dict(scale_embed=False)),
    ("embed_scaled_by_d_model", dict(scale_embed="d_model")),
    ("positions_missing", dict(positions=(True, False))),
    ("positions_missing", dict(positions=(False, True))),
    ("positions_missing", dict(positions=(False, False))),
    ("causal_missing", dict(causal="none")),
    ("causal_diagonal_hidden", dict(causal="diag_hidden")),
    ("causal_next_visible", dict(causal="next_visible")),
    ("causal_inverted", dict(causal="inverted")),
    ("tgt_pad_missing", dict(tgt_pad=False)),
    ("src_mask_missing", dict(src_pad=False)),
    ("memory_mask_missing", dict(memory_mask=False)),
    ("cross_attn_target_mask", dict(cross_target_mask=True)),
    ("pad_mask_queries", dict(pad_queries=True)),
]


def transformer_variants(ref, case):
    forward = lambda **kw: {"logits": transformer_forward(ref, case["src"], case["tgt_in"], **kw)}  # noqa: E731
    return combine(TRANSFORMER_BUGS, forward)


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
    run = lambda **kw: {"tokens": greedy(ref, *args, **kw)}  # noqa: E731
    return [("greedy_no_eos_stop", lambda: run(stop=False)),
            (("greedy_no_eos_stop", "greedy_no_pad_after_eos"), lambda: run(stop=False, pad_finished=False)),
            ("greedy_no_pad_after_eos", lambda: run(pad_finished=False)),
            ("greedy_no_bos", lambda: run(keep_bos=False)),
            ("greedy_first_position", lambda: run(position=0))]


def greedy_cached_variants(ref, case):
    args = (case["src"], case["bos_id"], case["eos_id"], case["max_new_tokens"])
    run = lambda **kw: {"tokens": greedy(ref, *args, **kw)}  # noqa: E731
    return [("kv_cache_pe_position_zero", lambda: run(positions_from_zero=True)),
            ("greedy_no_pad_after_eos", lambda: run(pad_finished=False)),
            ("greedy_no_eos_stop", lambda: run(stop=False)),
            (("greedy_no_eos_stop", "greedy_no_pad_after_eos"), lambda: run(stop=False, pad_finished=False)),
            ("memory_mask_missing", lambda: run(memory_mask=False))]


# ---------------------------------------------------------------- copy task

def copy_loss_variants(ref, case):
    logits, target = case["logits"], case["tgt_out"]
    flat = (logits.reshape(-1, logits.size(-1)), target.reshape(-1))
    return [("loss_includes_pad", lambda: {"loss": F.cross_entropy(*flat)}),
            ("loss_sum_not_mean",
             lambda: {"loss": F.cross_entropy(*flat, ignore_index=case["pad_id"], reduction="sum")})]


def exact_match_variants(ref, case):
    pred, target = case["pred"], case["tgt_out"]

    def whole_row():
        p, t = pred, target
        width = max(p.size(1), t.size(1))
        p = F.pad(p, (0, width - p.size(1)), value=case["pad_id"])
        t = F.pad(t, (0, width - t.size(1)), value=case["pad_id"])
        return {"score": float((p == t).all(dim=1).double().mean())}

    def token_accuracy():
        T = min(pred.size(1), target.size(1))
        real = target[:, :T] != case["pad_id"]
        return {"score": float(((pred[:, :T] == target[:, :T]) & real).sum() / real.sum())}

    return [("em_whole_row", whole_row), ("em_token_accuracy", token_accuracy)]


VARIANTS = {
    "softmax": softmax_variants,
    "attention_numpy": numpy_attention_variants,
    "scaled_dot_product_attention": sdpa_variants,
    "ScaledDotProductAttention": sdpa_variants,
    "MultiHeadAttention": mha_variants,
    "sinusoidal_positional_encoding": pe_table_variants,
    "PositionalEncoding": pe_module_variants,
    "FeedForward": ffn_variants,
    "LayerNorm": layer_norm_variants,
    "ResidualLayerNorm": residual_variants,
    "make_pad_mask": pad_mask_variants,
    "make_subsequent_mask": subsequent_mask_variants,
    "EncoderLayer": encoder_variants,
    "DecoderLayer": decoder_variants,
    "Transformer": transformer_variants,
    "greedy_decode": greedy_variants,
    "greedy_decode_cached": greedy_cached_variants,
    "copy_loss": copy_loss_variants,
    "exact_match": exact_match_variants,
    "RMSNorm": rms_variants,
    "apply_rope": rope_variants,
    "PreLNResidual": pre_ln_variants,
}

# The contract forward of each composite, written from the parts of the module it is given: run
# with the learner's parts, it tells whether a composite's wiring is right when its parts are not.
WIRING = {
    "ResidualLayerNorm": lambda m, case: {"out": m.ln(case["x"] + case["sublayer_out"])},
    "EncoderLayer": lambda m, case: {"out": encoder_layer(m, case["x"], case.get("src_mask"))},
    "DecoderLayer": lambda m, case: {"out": decoder_layer(m, case["y"], case["memory"], case.get("tgt_mask"),
                                                          case.get("memory_mask"))},
    "Transformer": lambda m, case: {"logits": transformer_forward(m, case["src"], case["tgt_in"])},
}

# Error-message fragments -> diagnosis, for learners whose code raises.
EXCEPTIONS = [
    ("view size is not compatible with input tensor's size and stride", "view_without_contiguous"),
    ("only supports boolean masks", "mask_not_bool"),
    ("bitwise_not", "mask_not_bool"),
    ("is not broadcastable to the scores", "mask_shape"),  # the course's scaled_dot_product_attention
]


# ---------------------------------------------------------------- LLM components (docs/CONTRACT_LLM.md)

MISTAKES.update({
    "gqa_repeat_not_interleave": ("KV 头的复制顺序错了：用了 repeat（第 h 个查询头拿到 KV 头 h % G），应是 "
                                  "repeat_interleave（相邻的 H/G 个查询头共用 KV 头 h // (H/G)）",
                                  "KV heads repeated in the wrong order: repeat gives query head h the KV head h % G; "
                                  "use repeat_interleave (adjacent H/G query heads share KV head h // (H/G))"),
    "kv_cache_positions_reset": ("用 KV 缓存时新 token 的 RoPE 位置从 0 重新算了："
                                 "新 token 的位置是 T_past, T_past + 1, ……",
                                 "with a KV cache the new tokens are rotated as if they were at position 0: their "
                                 "positions are T_past, T_past + 1, ..."),
    "kv_cache_before_rope": ("缓存里存的是旋转之前的键：契约要求缓存存 RoPE 之后的键（之后每步不必再旋转旧键）",
                             "the cache holds keys before RoPE: the contract caches the rotated keys (old keys are "
                             "never rotated again)"),
    "rope_on_values": ("RoPE 也作用到了 V 上：只旋转 Q 和 K（位置信息只进入打分），V 不旋转",
                       "RoPE is applied to V too: rotate only Q and K (positions enter the scores), never V"),
    "swiglu_gate_wrong_branch": ("SiLU 放错了分支：应是 down(silu(gate(x)) * up(x))，SiLU 作用在 gate_proj 上，up_proj "
                                 "保持线性",
                                 "SiLU on the wrong branch: it is down(silu(gate(x)) * up(x)), SiLU on gate_proj, "
                                 "up_proj stays linear"),
    "swiglu_sigmoid_gate": ("门用了 sigmoid（原始 GLU）：SwiGLU 的门是 SiLU(x) = x·sigmoid(x)",
                            "the gate uses sigmoid (the original GLU): SwiGLU's gate is SiLU(x) = x·sigmoid(x)"),
    "swiglu_silu_after_product": ("SiLU 作用在乘积上：应先 silu(gate(x))，再乘 up(x)",
                                  "SiLU applied to the product: take silu(gate(x)) first, then multiply by up(x)"),
    "gpt_no_final_norm": ("最后一个块之后缺少最终的 RMSNorm：Pre-LN 的残差路径从不归一化，lm_head 之前要有 norm",
                          "the final RMSNorm after the last block is missing: a Pre-LN residual stream is never "
                          "normalised, so apply norm before lm_head"),
    "generate_cache_refeeds_prefix": ("用缓存时每一步又把整个序列喂了进去：缓存里已有前缀的键值，"
                                      "之后每步只喂新生成的那个 token",
                                      "with a cache the whole sequence is fed again at every step: the cache already "
                                      "holds the prefix, feed only the newest token"),
    "top_k_ties_dropped": ("top-k 只按下标保留了恰好 k 个：与第 k 大并列的 token 也要保留（logits >= 第 k 大的值）",
                           "top-k kept exactly k by index: tokens tied with the k-th largest are kept too (logits >= "
                           "the k-th value)"),
    "top_k_off_by_one": ("top-k 差一：保留了 k+1 或 k−1 个（第 k 大是排序后下标 k−1 的那个）",
                         "top-k off by one: k+1 or k−1 tokens kept (the k-th largest sits at sorted index k−1)"),
    "top_k_fill_zero": ("被过滤的 logit 设成了 0 而不是 -inf：softmax 后它们仍有概率",
                        "filtered logits set to 0 instead of -inf: they keep probability after the softmax"),
    "top_p_drops_crossing_token": ("top-p 丢掉了越过 p 的那个 token：应保留累计概率首次 >= p "
                                   "的最小集合（它之前的累计概率 < p 就保留）",
                                   "top-p drops the token that crosses p: keep the smallest set whose mass is >= p (a "
                                   "token stays while the mass before it is < p)"),
    "top_p_not_sorted": ("top-p 的累计概率没有先按概率从大到小排序：按词表顺序累加得到的不是“最可能的 token”集合",
                         "top-p accumulates the mass in vocabulary order: sort the probabilities in descending order "
                         "first"),
    "temperature_after_softmax": ("温度用在了 softmax 之后：应先用温度除 logits，再做 softmax",
                                  "temperature applied after the softmax: divide the logits by the temperature, then "
                                  "take the softmax"),
    "filters_order_swapped": ("top-k 和 top-p 的顺序反了：先 top-k，再在剩下的 token 上做 top-p",
                              "top-k and top-p in the wrong order: top-k first, then top-p on what is left"),
    "sample_argmax": ("采样时取了 argmax：temperature > 0 时要用 torch.multinomial 从分布中抽样",
                      "argmax where sampling was asked: for temperature > 0 draw with torch.multinomial"),
    "beam_no_length_norm": ("束搜索没有做长度归一化：分数应是 logp_sum / n ** alpha，否则偏爱短输出",
                            "beam search without length normalisation: the score is logp_sum / n ** alpha, otherwise "
                            "short outputs win"),
    "beam_finished_extended": ("已经输出 EOS 的束还在继续扩展：结束的束应移出存活集合，不再扩展",
                               "beams that emitted EOS are still extended: finished beams leave the alive set and "
                               "stop"),
    "beam_norm_counts_prefix": ("长度归一化把前缀也算进了长度：n 只数生成的 token（含 EOS，不含前缀）",
                                "the length normalisation counts the prefix: n is the number of generated tokens (EOS "
                                "included, prefix excluded)"),
    "softmax_backward_missing_sum": ("softmax 反向漏了求和项：grad_x = y * (grad_y - sum(grad_y * y))，"
                                     "雅可比矩阵不只是对角线",
                                     "softmax backward misses the sum term: grad_x = y * (grad_y - sum(grad_y * y)); "
                                     "the Jacobian is not diagonal"),
    "backward_sum_wrong_axis": ("反向里的求和沿错了轴：沿 softmax 的 dim 求和（keepdim=True）",
                                "the backward sums over the wrong axis: sum along the softmax's dim (keepdim=True)"),
    "ln_backward_missing_mean_terms": ("LayerNorm 反向漏了均值项：grad_x = (g - mean(g) - x̂·mean(g·x̂)) / σ，"
                                       "两个均值项来自均值和方差对每个 x 的依赖",
                                       "LayerNorm backward misses the mean terms: grad_x = (g - mean(g) - "
                                       "x̂·mean(g·x̂)) / σ, from the mean and the variance depending on every x"),
    "ln_backward_missing_variance_term": ("LayerNorm 反向漏了方差项 x̂·mean(g·x̂)",
                                          "LayerNorm backward misses the variance term x̂·mean(g·x̂)"),
    "ln_backward_no_weight": ("LayerNorm 反向里 grad_x 没有乘 weight：g = grad_out * weight",
                              "LayerNorm backward: grad_x ignores the weight: g = grad_out * weight"),
    "ls_over_v_minus_1": ("标签平滑把 ε 只分给了其余 V−1 个类：PyTorch 的约定是 ε / C 分给全部 C 个类（包括正确类）",
                          "label smoothing spreads ε over the other V−1 classes: PyTorch spreads ε / C over all C "
                          "classes, the true one included"),
    "ce_ignored_in_mean": ("被忽略的位置也算进了平均的分母：只对 target != ignore_index 的位置求平均",
                           "ignored positions count in the mean's denominator: average over the positions with target "
                           "!= ignore_index only"),
    "window_off_by_one": ("滑动窗口差一：查询 i 应看 i - window < j <= i，恰好 window 个键（含自己）",
                          "sliding window off by one: query i sees i - window < j <= i, exactly window keys including "
                          "itself"),
    "window_not_causal": ("滑动窗口没有因果：未来的键也能看到；应同时满足 j <= i",
                          "the sliding window is not causal: future keys are visible; j <= i must hold too"),
    "flops_macs_not_doubled": ("把乘加当成 1 次 FLOP：一次乘加是 2 FLOPs（一次乘法、一次加法）",
                               "a multiply-add counted as 1 FLOP: it is 2 FLOPs (a multiply and an add)"),
    "flops_missing_projections": ("漏了 W_q、W_k、W_v、W_o 四个投影的 FLOPs：只算了 n² 的两项",
                                  "the FLOPs of the projections W_q, W_k, W_v, W_o are missing: only the two n² terms "
                                  "are counted"),
    "flops_kv_heads_ignored": ("K、V 投影按 H 个头算了：GQA 的 W_k、W_v 只有 num_kv_heads · d_k 列",
                               "the K and V projections counted with H heads: in GQA W_k and W_v have num_kv_heads · "
                               "d_k columns"),
    "attn_memory_one_head": ("注意力矩阵的内存漏乘了头数 H：每个头都有一个 n × n 矩阵",
                             "the attention-matrix memory misses the factor H: every head has its own n × n matrix"),
    "kv_cache_only_k": ("KV 缓存漏了因子 2：K 和 V 各存一份",
                        "the KV cache misses the factor 2: both K and V are stored"),
    "kv_cache_one_layer": ("KV 缓存只算了一层：每一层都有自己的 K、V",
                           "the KV cache counts one layer only: every layer keeps its own K and V"),
})


def repeat_kv_variants(ref, case):
    x, n = case["x"], case["n_rep"]
    return [("gqa_repeat_not_interleave", lambda: {"out": x.repeat(1, n, 1, 1)})]


def gqa(ref, x, mask=None, cache=None, interleave=True, half_split=False, reset_positions=False, rope_v=False,
        cache_raw=False, scale="sqrt_dk", cache_repeated=False, **attn_kwargs):
    """Grouped-query attention with the reference's weights and switches for the known bugs."""
    B, T, d = x.shape
    H, G, d_k = ref.num_heads, ref.num_kv_heads, ref.d_k
    q = ref.W_q(x).view(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k)
    k = ref.W_k(x).view(B, T, G, d_k).transpose(1, 2)  # (B, G, T, d_k)
    v = ref.W_v(x).view(B, T, G, d_k).transpose(1, 2)
    T_past = 0 if cache is None else cache[0].size(2)
    start = 0 if reset_positions else T_past

    def rot(t, first, length):
        pos = torch.arange(first, first + length, dtype=t.dtype)
        theta = ref.rope_base ** (-torch.arange(0, d_k, 2, dtype=t.dtype) / d_k)
        ang = pos[:, None] * theta  # (T, d_k/2)
        cos, sin = torch.cos(ang), torch.sin(ang)
        if half_split:
            a, b = t[..., : d_k // 2], t[..., d_k // 2:]
            return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
        a, b = t[..., 0::2], t[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)

    if ref.rope and not cache_raw:
        q, k = rot(q, start, T), rot(k, start, T)
        if rope_v:
            v = rot(v, start, T)
    if cache is not None:
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
    kq = k
    if ref.rope and cache_raw:  # raw keys cached, all rotated by their absolute positions
        q, kq = rot(q, T_past, T), rot(k, 0, k.size(2))
    rep = (lambda t: t.repeat_interleave(H // G, dim=1)) if interleave else (lambda t: t.repeat(1, H // G, 1, 1))
    out, _ = attention(q, rep(kq), rep(v), mask, scale=scale, **attn_kwargs)
    if cache_repeated:  # the H repeated heads cached instead of the G KV heads
        k, v = rep(k), rep(v)  # (B, H, T_past + T, d_k)
    return {"out": ref.W_o(out.transpose(1, 2).reshape(B, T, d)), "k_cache": k, "v_cache": v}


GQA_BUGS = [
    ("gqa_repeat_not_interleave", dict(interleave=False)),
    ("rope_half_split", dict(half_split=True)),
    ("kv_cache_positions_reset", dict(reset_positions=True)),
    ("kv_cache_before_rope", dict(cache_raw=True)),
    ("rope_on_values", dict(rope_v=True)),
    ("no_scale", dict(scale=None)),
    ("nan_fully_masked", dict(fill="-inf", zero_blocked=False)),
    ("fully_masked_uniform", dict(fill="-1e9", zero_blocked=False)),
    ("kv_cache_repeated_heads", dict(cache_repeated=True)),
]


def gqa_variants(ref, case):
    return combine(GQA_BUGS, lambda **kw: gqa(ref, case["x"], case.get("mask"), case.get("cache"), **kw))


def swiglu(ref, x, act="silu", branch="gate", after=False):
    fn = {"silu": F.silu, "sigmoid": torch.sigmoid}[act]
    gate, up = ref.gate_proj(x), ref.up_proj(x)
    if after:
        return ref.down_proj(fn(gate * up))
    return ref.down_proj(fn(gate) * up if branch == "gate" else gate * fn(up))


SWIGLU_BUGS = [("swiglu_gate_wrong_branch", dict(branch="up")), ("swiglu_sigmoid_gate", dict(act="sigmoid")),
               ("swiglu_silu_after_product", dict(after=True))]


def swiglu_variants(ref, case):
    return combine(SWIGLU_BUGS, lambda **kw: {"out": swiglu(ref, case["x"], **kw)})


def gpt_block(ref, x, mask, pre_ln=True, residual_from_input=False, gqa_kw=None, swiglu_kw=None):
    attn = gqa(ref.attn, ref.norm1(x) if pre_ln else x, mask, **(gqa_kw or {}))["out"]
    if not pre_ln:
        h = ref.norm1(x + attn)
        return ref.norm2(h + swiglu(ref.ffn, h, **(swiglu_kw or {})))
    h = x + attn
    return (x if residual_from_input else h) + swiglu(ref.ffn, ref.norm2(h), **(swiglu_kw or {}))


def gpt_block_variants(ref, case):
    x, mask = case["x"], case.get("mask")
    return ([("post_ln_instead_of_pre", lambda: {"out": gpt_block(ref, x, mask, pre_ln=False)}),
             ("residual_wrong_source", lambda: {"out": gpt_block(ref, x, mask, residual_from_input=True)})]
            + [(mid, lambda kw=kw: {"out": gpt_block(ref, x, mask, gqa_kw=kw)}) for mid, kw in GQA_BUGS[:2]]
            + [(mid, lambda kw=kw: {"out": gpt_block(ref, x, mask, swiglu_kw=kw)}) for mid, kw in SWIGLU_BUGS])


def gpt_forward(ref, idx, causal=True, final_norm=True):
    T = idx.size(1)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))[None, None] if causal else None
    x = ref.tok_embed(idx)
    for block in ref.blocks:
        x = gpt_block(block, x, mask)
    return ref.lm_head(ref.norm(x) if final_norm else x)


def gpt_variants(ref, case):
    idx = case["idx"]
    return [("causal_missing", lambda: {"logits": gpt_forward(ref, idx, causal=False)}),
            ("gpt_no_final_norm", lambda: {"logits": gpt_forward(ref, idx, final_norm=False)})]


def _sample(logits, temperature, top_k, top_p, generator, after_softmax=False, argmax=False):
    import solutions.decoding as dec

    if temperature == 0 or argmax:
        return logits.argmax(-1)
    if after_softmax:
        probs = torch.softmax(dec.top_p_filter(dec.top_k_filter(logits, top_k), top_p), -1) / temperature
    else:
        probs = dec.sampling_probs(logits, temperature, top_k, top_p)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def generate_variants(ref, case):
    model, idx, n = case["model"], case["idx"], case["max_new_tokens"]
    kw = case["kwargs"]

    def refeed():
        caches, ys = None, idx
        gen = torch.Generator().manual_seed(case["seed"])
        for _ in range(n):
            logits, caches = model.forward_cached(ys, caches)
            nxt = _sample(logits[:, -1], kw.get("temperature", 0.0), kw.get("top_k"), kw.get("top_p"), gen)  # (B,)
            ys = torch.cat([ys, nxt[:, None]], 1)
        return {"tokens": ys}

    def new_only():  # the contract's tokens without the prompt
        import solutions.decoding as dec

        gen = torch.Generator().manual_seed(case["seed"])
        return {"tokens": dec.generate(model, idx, n, generator=gen, **kw)[:, idx.size(1):]}

    return ([("generate_cache_refeeds_prefix", refeed)] if kw.get("use_cache", True) else []) + [
        ("generate_new_tokens_only", new_only)]


def top_k_variants(ref, case):
    logits, k = case["logits"], case["k"]
    ninf = float("-inf")

    def exactly_k():
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, torch.topk(logits, k, -1).indices, True)
        return {"out": logits.masked_fill(~keep, ninf)}

    def kth(j, fill=ninf):
        j = min(max(j, 1), logits.size(-1))
        return {"out": logits.masked_fill(logits < torch.topk(logits, j, -1).values[..., -1:], fill)}

    finite = lambda out: {"out": out["out"].masked_fill(out["out"] == ninf, torch.finfo(logits.dtype).min)}  # noqa: E731
    return [("top_k_ties_dropped", lambda: finite(exactly_k())), ("top_k_off_by_one", lambda: finite(kth(k + 1))),
            ("top_k_off_by_one", lambda: finite(kth(k - 1))), ("top_k_fill_zero", lambda: kth(k, 0.0))]


def top_p_variants(ref, case):
    logits, p = case["logits"], case["p"]

    def run(drop_crossing=False, unsorted=False):
        probs = torch.softmax(logits, -1)
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
        if unsorted:
            sorted_probs, order = probs, torch.arange(probs.size(-1)).expand_as(probs)
        cum = torch.cumsum(sorted_probs, -1)
        drop = cum > p if drop_crossing else cum - sorted_probs >= p
        return {"out": logits.masked_fill(drop.scatter(-1, order, drop), torch.finfo(logits.dtype).min)}

    return [("top_p_drops_crossing_token", lambda: run(drop_crossing=True)),
            ("top_p_not_sorted", lambda: run(unsorted=True))]


def sampling_probs_variants(ref, case):
    import solutions.decoding as dec

    logits, T, k, p = case["logits"], case["temperature"], case["top_k"], case["top_p"]
    filtered = lambda z: dec.top_p_filter(dec.top_k_filter(z, k), p)  # noqa: E731

    def after_softmax(renormalise):
        probs = torch.softmax(filtered(logits), -1) / T
        return {"probs": probs / probs.sum(-1, keepdim=True) if renormalise else probs}

    return [("temperature_after_softmax", lambda: after_softmax(False)),
            ("temperature_after_softmax", lambda: after_softmax(True)),
            ("filters_order_swapped",
             lambda: {"probs": torch.softmax(dec.top_k_filter(dec.top_p_filter(logits / T, p), k), -1)}),
            ("top_p_missing", lambda: {"probs": torch.softmax(dec.top_k_filter(logits / T, k), -1)}),
            ("top_k_missing", lambda: {"probs": torch.softmax(dec.top_p_filter(logits / T, p), -1)})]


def sample_next_token_variants(ref, case):
    kw = {k: case[k] for k in ("temperature", "top_k", "top_p")}
    def run(**bug):
        return {"tokens": _sample(case["logits"], **kw, generator=torch.Generator().manual_seed(case["seed"]), **bug)}

    def without(name):  # one filter left out, the draw the contract's
        return {"tokens": _sample(case["logits"], **{**kw, name: None},
                                  generator=torch.Generator().manual_seed(case["seed"]))}

    return [("sample_argmax", lambda: run(argmax=True)), ("temperature_after_softmax", lambda: run(after_softmax=True)),
            ("top_p_missing", lambda: without("top_p")), ("top_k_missing", lambda: without("top_k"))]


def beam(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha=0.0, normalise=True, stop_finished=True,
         count_prefix=False):
    """Beam search with switches for the known bugs; defaults = the contract."""
    alive, alive_scores, finished = prefix[None], torch.zeros(1, dtype=torch.float64), []
    for _ in range(max_new_tokens):
        log_probs = step_fn(alive).to(torch.float64)
        V = log_probs.size(-1)
        top, flat = torch.topk((alive_scores[:, None] + log_probs).flatten(), min(beam_size, alive.size(0) * V))
        ys = torch.cat([alive[flat // V], (flat % V)[:, None]], dim=1)
        done = (flat % V == eos_id) & stop_finished
        finished += [(ys[i], float(top[i])) for i in done.nonzero().flatten().tolist()]
        alive, alive_scores = ys[~done], top[~done]
        if alive.size(0) == 0 or len(finished) >= beam_size:
            break
    offset = 0 if count_prefix else prefix.numel()
    norm = lambda c: c[1] / (c[0].numel() - offset) ** alpha if normalise else c[1]  # noqa: E731
    best = max(finished + list(zip(alive, alive_scores.tolist())), key=norm)
    return {"tokens": best[0], "score": float(norm(best))}


def beam_search_variants(ref, case):
    args = (case["step_fn"], case["prefix"], case["beam_size"], case["max_new_tokens"], case["eos_id"], case["alpha"])
    return [("beam_no_length_norm", lambda: beam(*args, normalise=False)),
            ("beam_finished_extended", lambda: beam(*args, stop_finished=False)),
            ("beam_norm_counts_prefix", lambda: beam(*args, count_prefix=True))]


def softmax_backward_variants(ref, case):
    y, g = case["y"], case["grad_y"]
    return [("softmax_backward_missing_sum", lambda: {"grad_x": y * g}),
            ("softmax_backward_missing_sum", lambda: {"grad_x": y * (1 - y) * g}),
            ("backward_sum_wrong_axis", lambda: {"grad_x": y * (g - (g * y).sum(-1, keepdim=True))}),
            ("softmax_backward_no_keepdim", lambda: {"grad_x": y * (g - (g * y).sum(case["dim"]))})]


def layer_norm_backward_variants(ref, case):
    x, w, go, eps = case["x"], case["weight"], case["grad_out"], case["eps"]
    d = x.size(-1)
    sigma = torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps)
    x_hat = (x - x.mean(-1, keepdim=True)) / sigma
    grads = {"grad_weight": (go * x_hat).reshape(-1, d).sum(0), "grad_bias": go.reshape(-1, d).sum(0)}

    def run(mean_term=True, var_term=True, weight=True):
        g = go * w if weight else go
        mean_part = g.mean(-1, keepdim=True) if mean_term else 0
        var_part = x_hat * (g * x_hat).mean(-1, keepdim=True) if var_term else 0
        gx = g - mean_part - var_part
        return {"grad_x": gx / sigma, **grads}

    def fixed_axes():  # dw and db summed over axes (0, 1), as for a (B, T, C) input only
        out = run()
        return {**out, "grad_weight": (go * x_hat).sum((0, 1)), "grad_bias": go.sum((0, 1))}

    return [("ln_backward_missing_mean_terms", lambda: run(mean_term=False, var_term=False)),
            ("ln_backward_missing_variance_term", lambda: run(var_term=False)),
            ("ln_backward_no_weight", lambda: run(weight=False)),
            ("ln_backward_grads_swapped",
             lambda: {**run(), "grad_weight": grads["grad_bias"], "grad_bias": grads["grad_weight"]}),
            ("ln_backward_sums_fixed_axes", fixed_axes)]


def cross_entropy_variants(ref, case):
    logits, target, ignore, eps = case["logits"], case["target"], case["ignore_index"], case["label_smoothing"]
    C = logits.size(-1)
    z, t = logits.reshape(-1, C), target.reshape(-1)

    def run(over_rest=False, mean_all=False, use_ignore=True):
        logp = torch.log_softmax(z, -1)
        keep = t != ignore if use_ignore else torch.ones_like(t, dtype=torch.bool)
        safe = t.masked_fill(t == ignore, 0)
        nll = -logp.gather(-1, safe[:, None]).squeeze(-1)
        if over_rest:
            rest = (-logp.sum(-1) - nll) / (C - 1)
            loss = (1 - eps) * nll + eps * rest
        else:
            loss = (1 - eps) * nll + eps * -logp.mean(-1)
        total = loss[keep].sum()
        return {"loss": total / (t.numel() if mean_all else keep.sum())}

    return [("ls_over_v_minus_1", lambda: run(over_rest=True)), ("ce_ignored_in_mean", lambda: run(mean_all=True)),
            ("loss_includes_pad", lambda: run(use_ignore=False))]


def sliding_window_variants(ref, case):
    T, w = case["T"], case["window"]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    run = lambda m: {"mask": m[None, None]}  # noqa: E731
    return [("window_off_by_one", lambda: run((j <= i) & (j >= i - w))),
            ("window_off_by_one", lambda: run((j <= i) & (j > i - w + 1))),
            ("window_not_causal", lambda: run((i - j).abs() < w))]


def attention_cost_variants(ref, case):
    n, d, H, G, B, b = (case[k] for k in ("n", "d", "H", "num_kv_heads", "batch", "bytes_per_element"))
    G = G or H
    d_k = d // H

    def run(mac=2, projections=True, kv_heads=G, heads=H):
        proj = mac * n * d * (2 * d + 2 * kv_heads * d_k) if projections else 0
        return {"flops": B * (proj + 2 * mac * n * n * H * d_k), "attn_bytes": B * heads * n * n * b}

    return [("flops_macs_not_doubled", lambda: run(mac=1)),
            ("flops_missing_projections", lambda: run(projections=False)),
            ("flops_kv_heads_ignored", lambda: run(kv_heads=H)), ("attn_memory_one_head", lambda: run(heads=1))]


def kv_cache_bytes_variants(ref, case):
    keys = ("num_layers", "num_kv_heads", "head_dim", "seq_len", "batch", "bytes_per_element")
    L, G, d, T, B, b = (case[k] for k in keys)
    return [("kv_cache_only_k", lambda: {"bytes": L * G * d * T * B * b}),
            ("kv_cache_one_layer", lambda: {"bytes": 2 * G * d * T * B * b})]


VARIANTS.update({
    "repeat_kv": repeat_kv_variants,
    "GroupedQueryAttention": gqa_variants,
    "SwiGLU": swiglu_variants,
    "GPTBlock": gpt_block_variants,
    "GPT": gpt_variants,
    "generate": generate_variants,
    "top_k_filter": top_k_variants,
    "top_p_filter": top_p_variants,
    "sampling_probs": sampling_probs_variants,
    "sample_next_token": sample_next_token_variants,
    "beam_search": beam_search_variants,
    "softmax_backward": softmax_backward_variants,
    "layer_norm_backward": layer_norm_backward_variants,
    "cross_entropy": cross_entropy_variants,
    "make_sliding_window_mask": sliding_window_variants,
    "attention_flops_and_memory": attention_cost_variants,
    "kv_cache_bytes": kv_cache_bytes_variants,
})


# ---------------------------------------------------------------- issue 25: what real public code does

MISTAKES.update({
    "generate_new_tokens_only": ("只返回了新生成的 token：契约返回提示词加新 token，(B, T0 + max_new_tokens)",
                                 "only the new tokens are returned: the contract returns the prompt and the new "
                                 "tokens, (B, T0 + max_new_tokens)"),
    "softmax_fixed_axis": ("softmax 总在一条固定的轴（例如 axis=0，常见的 e_x / e_x.sum(axis=0)）上求和，没有沿 axis："
                           "max 和 sum 都要沿 axis 取（keepdims=True）",
                           "softmax sums over a fixed axis (e.g. the common e_x / e_x.sum(axis=0)), not along axis: "
                           "take max and sum along axis (keepdims=True)"),
    "rms_weight_plus_one": ("RMSNorm 乘的是 (1 + weight)（Gemma 的约定，weight 初始化为 0）：本课程乘 weight，"
                            "weight 初始化为 1",
                            "RMSNorm scaled by (1 + weight) (Gemma's convention, weight initialised at 0): this course "
                            "multiplies by weight, initialised at 1"),
    "kv_cache_repeated_heads": ("缓存里存的是复制之后的 H 个头：GQA 的缓存只存 G = num_kv_heads 个键/值头 "
                                "(B, G, T, d_k)，复制只在算注意力时做，这正是 GQA 省内存的地方",
                                "the cache holds the H repeated heads: a GQA cache keeps the G = num_kv_heads "
                                "key/value heads, (B, G, T, d_k), and repeats them only to attend; that is the memory "
                                "GQA saves"),
    "top_p_missing": ("没有做 top-p 过滤（top_p 参数被忽略了）：先 top-k，再在剩下的 token 上做 top-p",
                      "no top-p filter (the top_p argument is ignored): top-k first, then top-p on what is left"),
    "top_k_missing": ("没有做 top-k 过滤（top_k 参数被忽略了）：先 top-k，再在剩下的 token 上做 top-p",
                      "no top-k filter (the top_k argument is ignored): top-k first, then top-p on what is left"),
    "sample_draw_not_contract": ("抽到的 token 都在允许的 token 里，但抽法与契约不同：契约是每步一次 "
                                 "torch.multinomial(probs, 1, generator=generator)，probs 是整个词表按词表顺序"
                                 "（不排序、不截取）的分布，并使用传入的 generator；多次抽样、指数分布技巧"
                                 "（gpt-fast 的 probs / Exp(1)）或不传 generator 都会抽出别的 token",
                                 "every drawn token is an allowed one, but the draw is not the contract's: one "
                                 "torch.multinomial(probs, 1, generator=generator) per step, probs over the whole "
                                 "vocabulary in vocabulary order (not sorted, not cut down), with the given generator; "
                                 "several draws, the exponential trick (gpt-fast's probs / Exp(1)) or no generator "
                                 "draw other tokens"),
    "no_autograd_graph": ("输出没有自动求导图（no_grad / inference_mode / detach）：梯度传不回输入和参数，"
                          "训练时模型学不到东西；forward 里不要关掉梯度",
                          "the output has no autograd graph (no_grad / inference_mode / detach): gradients cannot "
                          "reach the inputs and parameters, so training learns nothing; do not turn gradients off "
                          "inside forward"),
    "beam_score_differs": ("束搜索选出的 token 对了，分数不对：分数是所选束的对数概率之和（step_fn 给出的对数概率，"
                           "每步不要再归一化）除以 n ** alpha，n 只数生成的 token（含 EOS，不含前缀）",
                           "beam search picks the right tokens but reports another score: the score is the chosen "
                           "beam's sum of log-probabilities (as step_fn gives them, not renormalised at each step) "
                           "divided by n ** alpha, n the generated tokens (EOS included, prefix excluded)"),
    "softmax_backward_no_keepdim": ("softmax 反向里的求和丢了 keepdim：sum(grad_y * y, dim) 要 keepdim=True "
                                    "才能和 y 对齐广播（否则报错，或在别的轴上悄悄广播）",
                                    "softmax backward's sum loses keepdim: sum(grad_y * y, dim) needs keepdim=True to "
                                    "broadcast against y (otherwise it raises, or silently broadcasts along another "
                                    "axis)"),
    "ln_backward_grads_swapped": ("grad_weight 和 grad_bias 放反了：grad_weight = sum(grad_out · x̂)，"
                                  "grad_bias = sum(grad_out)",
                                  "grad_weight and grad_bias are swapped: grad_weight = sum(grad_out · x̂), grad_bias "
                                  "= sum(grad_out)"),
    "ln_backward_sums_fixed_axes": ("grad_weight、grad_bias 只在轴 (0, 1) 上求和（只对 (B, T, C) 输入成立）："
                                    "要对最后一维之外的所有轴求和，x 也可以是 2 维",
                                    "grad_weight and grad_bias are summed over axes (0, 1), right for a (B, T, C) "
                                    "input only: sum over every axis but the last, x may be 2-D too"),
    "kv_cache_recomputes": ("用了缓存却每步重算：KV 缓存的意义是提示词只喂一次、之后每步只喂一个新 token；"
                            "下面是实测的每次调用喂入的 token 数",
                            "a cache that recomputes: with a KV cache the prompt is fed once and then one new token "
                            "per step; the tokens fed per call, as measured, follow"),
    "cross_kv_recomputed": ("交叉注意力的键/值每步都重新投影了：memory 不变，W_k(memory)、W_v(memory) "
                            "每层只需算一次，放进缓存",
                            "cross-attention keys/values are projected again at every step: memory does not change, "
                            "project W_k(memory) and W_v(memory) once per layer and keep them"),
})


def _draw_allowed(logits, temperature, top_k, top_p, tokens):
    """Every token of ``tokens`` (B,) has a positive probability under the contract's distribution."""
    import solutions.decoding as dec

    probs = dec.sampling_probs(logits, temperature, top_k, top_p)  # (B, V)
    if type(tokens) is not torch.Tensor or tokens.shape != probs.shape[:-1] or tokens.dtype != torch.long:
        return False
    if tokens.min() < 0 or tokens.max() >= probs.size(-1):
        return False
    return bool((probs.gather(-1, tokens[..., None]) > 0).all())


def _sample_rule(case, expected, got):
    if case["temperature"] == 0 or not _draw_allowed(case["logits"], case["temperature"], case["top_k"],
                                                     case["top_p"], got.get("tokens")):
        return None
    return "sample_draw_not_contract"


def _generate_rule(case, expected, got):
    """Sampled tokens that differ where each row first differs by an allowed draw of the same model."""
    kw, want, ys = case["kwargs"], expected["tokens"], got.get("tokens")
    if kw.get("temperature", 0.0) == 0 or type(ys) is not torch.Tensor or ys.shape != want.shape:
        return None
    T0 = case["idx"].size(1)
    if not torch.equal(ys[:, :T0], want[:, :T0]):
        return None
    for b in range(ys.size(0)):
        differ = (ys[b] != want[b]).nonzero()
        if len(differ):
            t = int(differ[0])
            with torch.no_grad():
                logits = case["model"](ys[b:b + 1, :t])[:, -1]  # (1, V)
            if not _draw_allowed(logits, kw["temperature"], kw.get("top_k"), kw.get("top_p"), ys[b:b + 1, t]):
                return None
    return "sample_draw_not_contract"


def _beam_rule(case, expected, got):
    tokens = got.get("tokens")
    if type(tokens) is torch.Tensor and tokens.shape == expected["tokens"].shape \
            and torch.equal(tokens, expected["tokens"]):
        return "beam_score_differs"
    return None


def _no_graph_rule(case, expected, got):
    if any(k.startswith("grad ") and k not in got for k in expected):
        return "no_autograd_graph"
    return None


# Rules for a failing case that no wrong variant reproduces: check name (or "*", every check) ->
# ``(case, expected, got) -> id or None``, from what the learner's output shows (a draw of an allowed
# token, right tokens with another score, gradients missing).
RULES = {"*": _no_graph_rule, "sample_next_token": _sample_rule, "generate": _generate_rule,
         "beam_search": _beam_rule}


# Chapter 08's training pieces and chapter 11's BPE (issue 24) keep their explanations and variants next to
# their checks; importing them adds both to MISTAKES and VARIANTS above.
from . import tokenizer_checks, training_checks  # noqa: E402,F401
