"""Wrong copy-task helpers."""
import torch
import torch.nn.functional as F


def copy_loss_with_pad(logits, tgt_out, pad_id=0):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1))  # bug: PAD counted


def exact_match_whole_row(pred, tgt_out, eos_id=2, pad_id=0):
    T = tgt_out.size(1)
    pred = F.pad(pred, (0, max(0, T - pred.size(1))), value=pad_id)[:, :T]
    return (pred == tgt_out).all(dim=1).float().mean().item()  # bug: compares past EOS


def make_copy_batch_no_eos(batch_size, vocab_size, min_len, max_len, generator=None):
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)
    x = torch.randint(3, vocab_size, (batch_size, max_len + 1), generator=generator)
    pos = torch.arange(max_len + 1)[None]
    src = x.masked_fill(pos >= lengths[:, None], 0)  # bug: no EOS
    tgt_in = torch.cat([torch.ones(batch_size, 1, dtype=torch.long), src[:, :-1]], dim=1)
    return src, tgt_in, src.clone()


CASES = [
    ("copy_loss", copy_loss_with_pad, "loss_includes_pad"),
    ("exact_match", exact_match_whole_row, "em_whole_row"),
    ("make_copy_batch", make_copy_batch_no_eos, None),
]
