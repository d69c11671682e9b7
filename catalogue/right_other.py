"""Right alternatives for the other components."""
import math

import torch
import torch.nn as nn

from .reference import load

R = load()


def pe_loop(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for col in range(d_model):
            angle = pos / 10000 ** ((col - col % 2) / d_model)
            pe[pos, col] = math.sin(angle) if col % 2 == 0 else math.cos(angle)
    return pe


class LayerNormManual(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        centred = x - x.mean(-1, keepdim=True)
        var = (centred * centred).mean(-1, keepdim=True)
        return self.weight * centred * torch.rsqrt(var + self.eps) + self.bias


class FeedForwardSequential(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(activation)
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.act = nn.ReLU() if activation == "relu" else nn.GELU()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.fc2(self.dropout(self.act(self.fc1(x))))


def pad_mask_view(tokens, pad_id=0):
    return tokens.ne(pad_id).view(tokens.size(0), 1, 1, tokens.size(1))


def causal_from_arange(T, device=None):
    i = torch.arange(T, device=device)
    return (i[None, :] <= i[:, None])[None, None]


def copy_loss_manual(logits, tgt_out, pad_id=0):
    logp = logits.log_softmax(-1).gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)  # (B, T)
    real = tgt_out != pad_id
    return -(logp * real).sum() / real.sum()


def exact_match_loop(pred, tgt_out, eos_id=2, pad_id=0):
    hits = 0
    for p, t in zip(pred.tolist(), tgt_out.tolist()):
        end = t.index(eos_id) + 1
        p = (p + [pad_id] * end)[:end]
        hits += p == t[:end]
    return hits / len(tgt_out)


def make_copy_batch_loop(batch_size, vocab_size, min_len, max_len, generator=None):
    src = torch.zeros(batch_size, max_len + 1, dtype=torch.long)
    tgt_in = torch.zeros_like(src)
    for r in range(batch_size):
        L = int(torch.randint(min_len, max_len + 1, (1,), generator=generator))
        x = torch.randint(3, vocab_size, (L,), generator=generator)
        src[r, :L], src[r, L] = x, 2
        tgt_in[r, 0], tgt_in[r, 1:L + 1] = 1, x
    return src, tgt_in, src.clone()


class LearnedPositionsSliced(nn.Module):
    """The table's first T rows added directly, no lookup."""

    def __init__(self, d_model, max_len=512, dropout=0.0):
        super().__init__()
        self.embed = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(x + self.embed.weight[: x.size(1)])  # (B, T, d_model) + (T, d_model)


CASES = [
    ("sinusoidal_positional_encoding", pe_loop),
    ("PositionalEncoding", R["PositionalEncoding"]),
    ("LayerNorm", LayerNormManual),
    ("FeedForward", FeedForwardSequential),
    ("make_pad_mask", pad_mask_view),
    ("make_subsequent_mask", causal_from_arange),
    ("copy_loss", copy_loss_manual),
    ("exact_match", exact_match_loop),
    ("make_copy_batch", make_copy_batch_loop),
    ("LearnedPositionalEmbedding", LearnedPositionsSliced),
]
