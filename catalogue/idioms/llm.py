"""Idioms of the exercises checked in tutor/checks/llm.py (08 the GPT's parts and 09/10 costs)."""
from . import idiom

# ---------------------------------------------------------------- 08_gpt

idiom("gqa_repeat_interleave_partial_unflatten", "08_gpt", "repeat_kv",
      "torch.repeat_interleave for the KV heads, super(Cls, self).__init__(), functools.partial(nn.Linear, "
      "bias=False) as a layer factory, unflatten/flatten for the heads, `if cache:` on the (k, v) tuple", r'''
import functools


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, G, T, d_k) -> (B, G * n_rep, T, d_k): query head h reads KV head h // n_rep."""
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, rope=True, rope_base=10000.0, dropout=0.0):
        super(GroupedQueryAttention, self).__init__()
        if d_model % num_heads or num_heads % num_kv_heads:
            raise ValueError(f"num_heads must divide d_model and num_kv_heads must divide num_heads: "
                             f"{d_model}, {num_heads}, {num_kv_heads}")
        self.num_heads, self.num_kv_heads, self.d_k = num_heads, num_kv_heads, d_model // num_heads
        self.rope, self.rope_base, self.dropout = rope, rope_base, dropout
        linear = functools.partial(nn.Linear, bias=False)
        self.W_q, self.W_o = linear(d_model, d_model), linear(d_model, d_model)
        self.W_k, self.W_v = linear(d_model, num_kv_heads * self.d_k), linear(d_model, num_kv_heads * self.d_k)

    def _heads(self, t, n):
        return t.unflatten(-1, (n, self.d_k)).transpose(1, 2)          # (B, T, n * d_k) -> (B, n, T, d_k)

    def forward(self, x, mask=None, cache=None):
        if x.dim() != 3:
            raise ValueError(f"x must be 3-D (B, T, d_model); got {tuple(x.shape)}")
        q = self._heads(self.W_q(x), self.num_heads)                   # (B, H, T, d_k)
        k = self._heads(self.W_k(x), self.num_kv_heads)                # (B, G, T, d_k)
        v = self._heads(self.W_v(x), self.num_kv_heads)                # (B, G, T, d_k)
        start = cache[0].shape[-2] if cache else 0                     # T_past
        if self.rope:
            positions = start + torch.arange(x.shape[1], device=x.device)
            q, k = apply_rope(q, positions, self.rope_base), apply_rope(k, positions, self.rope_base)
        if cache:
            k, v = torch.cat((cache[0], k), dim=-2), torch.cat((cache[1], v), dim=-2)   # (B, G, T_past + T, d_k)
        n_rep = self.num_heads // self.num_kv_heads
        out, _ = scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask=mask,
                                              dropout_p=self.dropout, training=self.training)   # (B, H, T, d_k)
        return self.W_o(out.transpose(1, 2).flatten(2)), (k, v)        # (B, T, H, d_k) -> (B, T, d_model)
''')


idiom("swiglu_module_init_call_manual_silu_typed", "08_gpt", "SwiGLU",
      "nn.Module.__init__(self), SiLU written out as x * torch.sigmoid(x) in a module-level helper, "
      "setattr over a name table, type hints", r'''
def silu(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        nn.Module.__init__(self)
        for name, (n_in, n_out) in {"gate_proj": (d_model, d_ff), "up_proj": (d_model, d_ff),
                                    "down_proj": (d_ff, d_model)}.items():
            setattr(self, name, nn.Linear(n_in, n_out, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = silu(self.gate_proj(x)), self.up_proj(x)              # (..., d_ff) each
        return self.down_proj(gate * up)                                 # (..., d_model)
''')


idiom("gpt_block_residual_helper_keywords", "08_gpt", "GPTBlock",
      "super(Cls, self).__init__(), keyword arguments to the parts, a residual helper method taking a "
      "callable, a lambda that keeps the cache from the attention call", r'''
class GPTBlock(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, d_ff, dropout=0.0, rope_base=10000.0, eps=1e-6):
        super(GPTBlock, self).__init__()
        self.norm1 = RMSNorm(d_model, eps=eps)
        self.attn = GroupedQueryAttention(d_model, num_heads=num_heads, num_kv_heads=num_kv_heads,
                                          rope=True, rope_base=rope_base, dropout=dropout)
        self.norm2 = RMSNorm(d_model, eps=eps)
        self.ffn = SwiGLU(d_model, d_ff=d_ff)
        self.dropout = nn.Dropout(p=dropout)

    def _residual(self, x, norm, sublayer):
        """Pre-LN: x + dropout(sublayer(norm(x)))."""
        return x + self.dropout(sublayer(norm(x)))

    def forward(self, x, mask=None, cache=None):
        new_cache = []

        def attend(h):
            out, kv = self.attn(h, mask=mask, cache=cache)
            new_cache.append(kv)
            return out

        h = self._residual(x, self.norm1, attend)                       # (B, T, d_model)
        return self._residual(h, self.norm2, self.ffn), new_cache[0]
''')


idiom("gpt_apply_init_staticmethod_arange_mask", "08_gpt", "GPT",
      "nn.ModuleList comprehension, self.apply with a @staticmethod initialiser (the Hugging Face idiom), "
      "the cached causal mask from two aranges, zip over [None] * n caches, type hints", r'''
from typing import List, Optional, Tuple


class GPT(nn.Module):
    def __init__(self, vocab_size, d_model=64, num_heads=4, num_kv_heads=2, d_ff=172, num_layers=2,
                 max_len=256, dropout=0.0, tie_weights=False, rope_base=10000.0):
        super().__init__()
        self.max_len = max_len
        self.tok_embed = nn.Embedding(vocab_size, d_model)
        self.emb_dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(GPTBlock(d_model, num_heads, num_kv_heads, d_ff, dropout=dropout,
                                             rope_base=rope_base) for _ in range(num_layers))
        self.norm = RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.apply(self._init_weights)
        if tie_weights:
            self.lm_head.weight = self.tok_embed.weight

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        logits, _ = self.forward_cached(idx)
        return logits

    def forward_cached(self, idx: torch.Tensor, caches: Optional[List[Tuple[torch.Tensor, torch.Tensor]]] = None):
        if idx.dim() != 2:
            raise ValueError(f"idx must be 2-D (B, T); got {tuple(idx.shape)}")
        caches = caches or [None] * len(self.blocks)
        past = 0 if caches[0] is None else caches[0][0].shape[2]        # T_past
        total = past + idx.shape[1]
        if total > self.max_len:
            raise ValueError(f"length {total} exceeds max_len={self.max_len}")
        query_pos = torch.arange(past, total, device=idx.device)          # (T,)
        key_pos = torch.arange(total, device=idx.device)                  # (T_past + T,)
        mask = (key_pos[None, :] <= query_pos[:, None])[None, None]       # (1, 1, T, T_past + T)
        x = self.emb_dropout(self.tok_embed(idx))                         # (B, T, d_model)
        new_caches = []
        for block, cache in zip(self.blocks, caches):
            x, cache = block(x, mask, cache)
            new_caches.append(cache)
        return self.lm_head(self.norm(x)), new_caches                     # (B, T, vocab_size)
''')


# ---------------------------------------------------------------- 10_drills

idiom("gqa_grouped_einsum_no_repeat", "10_drills", "GroupedQueryAttention",
      "grouped einsum over (B, G, n_rep, T, d_k) query groups instead of repeating K/V, the mask expanded and "
      "unflattened to the groups, torch.where with finfo.min, F.dropout(training=...), permute + flatten", r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, rope: bool = True,
                 rope_base: float = 10000.0, dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % num_heads != 0 or num_heads % num_kv_heads != 0:
            raise ValueError(f"bad head counts: d_model={d_model}, num_heads={num_heads}, num_kv_heads={num_kv_heads}")
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.d_k = d_model // num_heads
        self.rope, self.rope_base, self.p = rope, rope_base, dropout
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k, bias=False)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None, cache=None):
        if x.dim() != 3:
            raise ValueError(f"x must be 3-D (B, T, d_model); got {tuple(x.shape)}")
        B, T, _ = x.shape
        H, G, d_k = self.num_heads, self.num_kv_heads, self.d_k
        r = H // G                                                                 # query heads per KV head
        q = self.W_q(x).view(B, T, G, r, d_k).permute(0, 2, 3, 1, 4)              # (B, G, r, T, d_k)
        k = self.W_k(x).view(B, T, G, d_k).permute(0, 2, 1, 3)                    # (B, G, T, d_k)
        v = self.W_v(x).view(B, T, G, d_k).permute(0, 2, 1, 3)                    # (B, G, T, d_k)
        past_k, past_v = cache if cache is not None else (k[:, :, :0], v[:, :, :0])
        if self.rope:
            positions = torch.arange(T, device=x.device) + past_k.shape[2]
            q, k = apply_rope(q, positions, self.rope_base), apply_rope(k, positions, self.rope_base)
        k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)               # (B, G, T_k, d_k)
        scores = torch.einsum("bgrqd,bgkd->bgrqk", q, k) / math.sqrt(d_k)          # (B, G, r, T, T_k)
        if mask is not None:
            keep = mask.bool().expand(B, H, T, k.shape[2]).unflatten(1, (G, r))    # (B, G, r, T, T_k)
            scores = torch.where(keep, scores, torch.finfo(scores.dtype).min)
        weights = scores.softmax(-1)
        if mask is not None:
            weights = torch.where(keep, weights, 0.0)                              # a blind row -> zeros
        weights = F.dropout(weights, self.p, training=self.training)
        out = torch.einsum("bgrqk,bgkd->bgrqd", weights, v)                        # (B, G, r, T, d_k)
        return self.W_o(out.permute(0, 3, 1, 2, 4).flatten(2)), (k, v)            # (B, T, G, r, d_k) -> (B, T, d_model)
''')


idiom("sliding_window_tril_triu_band", "10_drills", "make_sliding_window_mask",
      "the band as torch.ones(...).tril().triu(1 - window), [None, None] for the broadcast axes", r'''
def make_sliding_window_mask(T, window, device=None):
    if window < 1:
        raise ValueError(f"window must be at least 1; got {window}")
    band = torch.ones(T, T, dtype=torch.bool, device=device).tril().triu(1 - window)   # i - window < j <= i
    return band[None, None]                                                           # (1, 1, T, T)
''')


idiom("attention_cost_named_terms_namedtuple", "10_drills", "attention_flops_and_memory",
      "each matmul as a named term, a typing.NamedTuple result (still a tuple), `num_kv_heads or H`", r'''
from typing import NamedTuple


class AttentionCost(NamedTuple):
    flops: int
    attn_bytes: int


def attention_flops_and_memory(n, d, H, num_kv_heads=None, batch=1, bytes_per_element=4):
    G = num_kv_heads or H
    d_k = d // H
    q_proj = o_proj = 2 * n * d * d                 # (n, d) @ (d, d)
    k_proj = v_proj = 2 * n * d * (G * d_k)         # (n, d) @ (d, G * d_k)
    scores = 2 * H * n * n * d_k                    # Q K^T per head: (n, d_k) @ (d_k, n)
    mix = 2 * H * n * n * d_k                       # weights @ V per head: (n, n) @ (n, d_k)
    flops = batch * (q_proj + k_proj + v_proj + o_proj + scores + mix)
    return AttentionCost(flops, batch * H * n * n * bytes_per_element)
''')


idiom("kv_cache_bytes_math_prod", "10_drills", "kv_cache_bytes",
      "math.prod over the factors, keyword-only style names in a tuple", r'''
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len=1, batch=1, bytes_per_element=2):
    k_and_v = 2
    return math.prod((k_and_v, num_layers, num_kv_heads, head_dim, seq_len, batch, bytes_per_element))
''')

