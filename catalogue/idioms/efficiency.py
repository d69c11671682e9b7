"""Idioms of the exercises checked in tutor/checks/efficiency.py (13 efficiency by hand)."""
from . import idiom

# ---------------------------------------------------------------- 13_efficiency

idiom("online_softmax_unbind_python_scalars_per_row", "13_efficiency", "online_softmax",
      "rows flattened with reshape(-1, n), each row walked with plain Python floats and math.exp, "
      "the result stacked back", r'''
def online_softmax(x):
    rows = x.reshape(-1, x.shape[-1])                                 # (R, n)
    out = []
    for row in rows.unbind(0):
        m, s = -math.inf, 0.0
        for value in row.tolist():
            m_new = max(m, value)
            s = s * math.exp(m - m_new) + math.exp(value - m_new)     # rescale the old sum, add the new term
            m = m_new
        out.append(torch.exp(row - m) / s)
    return torch.stack(out).reshape(x.shape)                          # (R, n) -> (..., n)
''')


idiom("tiled_attention_einsum_split_chunks", "13_efficiency", "tiled_attention",
      "torch.split into chunks, einsum for both products, torch.cat of the finished query blocks; causal with "
      "torch.triu on the diagonal block", r'''
def tiled_attention(q, k, v, block_size=64, causal=False):
    if block_size < 1:
        raise ValueError(f"block_size 必须 >= 1 / block_size must be >= 1, got {block_size}")
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError("causal=True 需要 T_q == T_k / causal=True needs T_q == T_k")
    scale = q.shape[-1] ** -0.5
    finished = []
    for qi, q_blk in enumerate(torch.split(q, block_size, dim=-2)):  # (..., b_q, d) each
        start = qi * block_size
        m = torch.full(q_blk.shape[:-1], -torch.inf, dtype=q.dtype)
        denom = torch.zeros_like(m)
        acc = torch.zeros(*q_blk.shape[:-1], v.shape[-1], dtype=q.dtype)
        k_blocks, v_blocks = torch.split(k, block_size, dim=-2), torch.split(v, block_size, dim=-2)
        for kj, (k_blk, v_blk) in enumerate(zip(k_blocks, v_blocks)):
            key_start = kj * block_size
            if causal and key_start > start + q_blk.shape[-2] - 1:
                break                                                     # every later block is in the future
            s = torch.einsum("...id,...jd->...ij", q_blk, k_blk) * scale  # (..., b_q, b_k)
            if causal and key_start + k_blk.shape[-2] > start:
                future = torch.ones(q_blk.shape[-2], k_blk.shape[-2], dtype=torch.bool).triu(start - key_start + 1)
                s = s.masked_fill(future, -torch.inf)
            new_m = torch.maximum(m, s.max(dim=-1).values)
            correction = torch.exp(m - new_m)
            p = torch.exp(s - new_m.unsqueeze(-1))
            denom = denom * correction + p.sum(-1)
            acc = acc * correction.unsqueeze(-1) + torch.einsum("...ij,...jd->...id", p, v_blk)
            m = new_m
        finished.append(acc / denom.unsqueeze(-1))
    return torch.cat(finished, dim=-2)                                # (..., T_q, d_v)
''')


idiom("top_k_router_mixtral_topk_then_softmax", "13_efficiency", "TopKRouter",
      "Mixtral's order when normalize=True (torch.topk of the logits, F.softmax over the k chosen), the full "
      "softmax then torch.gather otherwise", r'''
class TopKRouter(nn.Module):
    def __init__(self, d_model, num_experts, top_k=2, normalize=True):
        super().__init__()
        self.top_k, self.normalize = top_k, normalize
        self.gate = nn.Linear(d_model, num_experts, bias=False)

    def forward(self, x):
        logits = self.gate(x)                                          # (N, E)
        top_logits, indices = torch.topk(logits, self.top_k, dim=-1)   # (N, k): same order as the probabilities
        if self.normalize:                                             # softmax over the k: the renormalised weights
            weights = F.softmax(top_logits, dim=-1)
        else:
            weights = F.softmax(logits, dim=-1).gather(-1, indices)
        return weights, indices, logits
''')


idiom("moe_layer_dense_gates_scatter", "13_efficiency", "MoELayer",
      "a dense (N, E) gate matrix built with scatter, each expert run on the rows whose gate is non-zero "
      "(nonzero), torch.index_add_ in place", r'''
class MoELayer(nn.Module):
    def __init__(self, d_model, d_ff, num_experts, top_k=2, normalize=True):
        super().__init__()
        self.router = TopKRouter(d_model, num_experts, top_k, normalize)
        self.experts = nn.ModuleList([SwiGLU(d_model, d_ff) for _ in range(num_experts)])

    def forward(self, x):
        flat = x.view(-1, x.size(-1))                                  # (N, d_model)
        weights, indices, logits = self.router(flat)
        gates = torch.zeros_like(logits).scatter(1, indices, weights)  # (N, E), zero where not routed
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows = gates[:, e].nonzero().squeeze(1)                   # (n_e,)
            if len(rows) > 0:
                out.index_add_(0, rows, gates[rows, e].unsqueeze(1) * expert(flat[rows]))
        return out.view_as(x), logits, indices
''')


idiom("load_balancing_loss_one_hot_megatron_normalisation", "13_efficiency", "load_balancing_loss",
      "F.one_hot counts, f as the share of the T * k assignments (Megatron-LM's normalisation: the f sum to 1), "
      "torch.dot", r'''
def load_balancing_loss(router_logits, expert_index, num_experts):
    probs = F.softmax(router_logits, dim=-1)                           # (T, E)
    assignments = F.one_hot(expert_index, num_experts).flatten(0, -2)   # (T * k, E)
    f = assignments.to(probs.dtype).mean(0)                           # share of all assignments: sums to 1
    return num_experts * torch.dot(f, probs.mean(0))
''')


idiom("quantize_int8_keepdim_max_round_half_even", "13_efficiency", "quantize_int8",
      "Tensor.max(dim, keepdim).values, torch.where for zero rows, Tensor.round_().clamp_() in place, "
      "Tensor.type(torch.int8)", r'''
def quantize_int8(w):
    absmax = w.abs().max(dim=1, keepdim=True).values                   # (out, 1)
    scale = torch.where(absmax == 0, torch.ones_like(absmax), absmax / 127.0)
    q = (w / scale).round_().clamp_(-127, 127).type(torch.int8)
    return q, scale


def dequantize_int8(q, scale):
    return scale * q.to(scale.dtype)                                   # (out, 1) * (out, in)
''')
