"""More wrong implementations: the diagnoses beyond issue 3's list, one learner-style bug each."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .reference import load

R = load()
Transformer = R["Transformer"]


class FFNAlwaysReLU(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))  # bug: ignores activation="gelu"


class FFNReluAtOutput(FFNAlwaysReLU):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__(d_model, d_ff, dropout, activation)
        self.act = F.relu if activation == "relu" else F.gelu

    def forward(self, x):
        return self.act(self.fc2(self.act(self.fc1(x))))  # bug: activation after fc2 too


def pe_sin_then_cos(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.get_default_dtype())[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2) / d_model)
    angles = pos * freq
    return torch.cat([angles.sin(), angles.cos()[:, : d_model // 2]], dim=1)  # bug: halves, not interleaved


def rope_clockwise(x, positions=None, base=10000.0):
    T, d = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    ang = torch.arange(T, dtype=x.dtype)[:, None] * theta
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * ang.cos() + b * ang.sin(), -a * ang.sin() + b * ang.cos()], -1).flatten(-2)


class DecoderCrossOnItself(R["DecoderLayer"]):
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        s, sw = self.self_attn(y, y, tgt_mask)
        y = self.norm1(y, self.dropout(s))
        c, cw = self.cross_attn(y, y, tgt_mask)  # bug: attends to the target, not to memory
        y = self.norm2(y, self.dropout(c))
        return self.norm3(y, self.dropout(self.ffn(y))), (sw, cw)


class TransformerNoCausalMask(Transformer):
    def decode(self, tgt_in, memory, src_mask=None):
        mask = (tgt_in != self.pad_id)[:, None, None, :]  # bug: padding only, the future is visible
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, mask, src_mask)
        return y


class TransformerEncoderWithoutMask(Transformer):
    def encode(self, src):
        x = self.pos_enc(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x, _ = layer(x)  # bug: padding not masked
        return x


def greedy_without_bos(model, src, bos_id, eos_id, max_new_tokens):
    return R["greedy_decode"](model, src, bos_id, eos_id, max_new_tokens)[:, 1:]  # bug: drops the BOS column


@torch.no_grad()
def greedy_first_position(model, src, bos_id, eos_id, max_new_tokens):
    memory, src_mask = model.encode(src), (src != model.pad_id)[:, None, None, :]
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)  # (B, 1)
    done = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(max_new_tokens):
        logits = model.out_proj(model.decode(ys, memory, src_mask))  # (B, T, tgt_vocab)
        nxt = logits[:, 0].argmax(-1).masked_fill(done, model.pad_id)  # bug: the first position, not the last
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        done |= nxt == eos_id
        if done.all():
            break
    return ys


def copy_loss_summed(logits, tgt_out, pad_id=0):
    return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=pad_id, reduction="sum")


def exact_match_per_token(pred, tgt_out, eos_id=2, pad_id=0):
    T = min(pred.size(1), tgt_out.size(1))
    real = tgt_out[:, :T] != pad_id
    return (((pred[:, :T] == tgt_out[:, :T]) & real).sum() / real.sum()).item()


CASES = [
    ("FeedForward", FFNAlwaysReLU, "ffn_wrong_activation"),
    ("FeedForward", FFNReluAtOutput, "ffn_activation_after_fc2"),
    ("sinusoidal_positional_encoding", pe_sin_then_cos, "pe_sin_cos_halves"),
    ("apply_rope", rope_clockwise, "rope_rotation_inverted"),
    ("DecoderLayer", DecoderCrossOnItself, "cross_attn_wrong_source"),
    ("Transformer", TransformerNoCausalMask, "causal_missing"),
    ("Transformer", TransformerEncoderWithoutMask, "src_mask_missing"),
    ("greedy_decode", greedy_without_bos, "greedy_no_bos"),
    ("greedy_decode", greedy_first_position, "greedy_first_position"),
    ("copy_loss", copy_loss_summed, "loss_sum_not_mean"),
    ("exact_match", exact_match_per_token, "em_token_accuracy"),
]
