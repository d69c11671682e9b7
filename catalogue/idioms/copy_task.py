"""Idioms of the exercises checked in tutor/checks/copy_task.py (07 the copy task)."""
from . import idiom

# ---------------------------------------------------------------- 07_copy_task

idiom("copy_batch_rows_namedtuple", "07_copy_task", "make_copy_batch",
      "import collections, a namedtuple return value, a Python loop building rows as lists, .tolist()", r'''
import collections

CopyBatch = collections.namedtuple("CopyBatch", ["src", "tgt_in", "tgt_out"])


def make_copy_batch(batch_size, vocab_size, min_len, max_len, generator=None):
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator).tolist()
    src_rows, tgt_rows = [], []
    for L in lengths:
        x = torch.randint(3, vocab_size, (L,), generator=generator).tolist()
        pad = [PAD_ID] * (max_len - L)
        src_rows.append(x + [EOS_ID] + pad)
        tgt_rows.append([BOS_ID] + x + pad)
    src = torch.tensor(src_rows, dtype=torch.long)                       # (B, max_len + 1)
    return CopyBatch(src, torch.tensor(tgt_rows, dtype=torch.long), src.clone())
''')


idiom("copy_batch_where_roll_typed", "07_copy_task", "make_copy_batch",
      "Optional[torch.Generator]/Tuple hints, nested torch.where with scalars, roll for the shift right, expand", r'''
from typing import Optional, Tuple


def make_copy_batch(batch_size: int, vocab_size: int, min_len: int, max_len: int,
                    generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    lengths = torch.randint(min_len, max_len + 1, (batch_size, 1), generator=generator)       # (B, 1)
    content = torch.randint(3, vocab_size, (batch_size, max_len + 1), generator=generator)    # (B, max_len + 1)
    pos = torch.arange(max_len + 1).expand(batch_size, -1)                                     # (B, max_len + 1)
    src = torch.where(pos < lengths, content, torch.where(pos == lengths, EOS_ID, PAD_ID))
    shifted = content.roll(1, dims=1)  # shifted[:, p] = content[:, p - 1]
    tgt_in = torch.where(pos == 0, BOS_ID, torch.where(pos <= lengths, shifted, PAD_ID))
    return src, tgt_in, src.clone()
''')


idiom("copy_loss_log_softmax_gather", "07_copy_task", "copy_loss",
      "log_softmax + gather, torch.where with zeros_like, sum over a count of real tokens", r'''
def copy_loss(logits, tgt_out, pad_id=PAD_ID):
    log_probs = logits.log_softmax(dim=-1)                                   # (B, T, V)
    nll = -log_probs.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)          # (B, T)
    keep = tgt_out != pad_id                                                 # (B, T)
    return torch.where(keep, nll, torch.zeros_like(nll)).sum() / keep.sum()
''')


idiom("copy_loss_flatten_nll_loss", "07_copy_task", "copy_loss",
      "type hints, ValueError with an f-string, F.nll_loss of F.log_softmax with ignore_index, flatten(0, 1)", r'''
def copy_loss(logits: torch.Tensor, tgt_out: torch.Tensor, pad_id: int = PAD_ID) -> torch.Tensor:
    if logits.shape[:2] != tgt_out.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and tgt_out {tuple(tgt_out.shape)} disagree on (B, T)")
    log_probs = F.log_softmax(logits, dim=-1).flatten(0, 1)                  # (B*T, V)
    return F.nll_loss(log_probs, tgt_out.flatten(), ignore_index=pad_id)
''')


idiom("copy_loss_boolean_index", "07_copy_task", "copy_loss",
      "boolean indexing keeps the real tokens, F.cross_entropy without ignore_index", r'''
def copy_loss(logits, tgt_out, pad_id=PAD_ID):
    real = tgt_out.ne(pad_id)                                # (B, T)
    return F.cross_entropy(logits[real], tgt_out[real])     # (N, V) vs (N,)
''')


idiom("exact_match_python_itertools", "07_copy_task", "exact_match",
      "import itertools, a Python loop over .tolist() rows, list.index, chain/repeat/islice to pad short rows", r'''
import itertools


def exact_match(pred, tgt_out, eos_id=EOS_ID, pad_id=PAD_ID):
    correct = 0
    for p_row, t_row in zip(pred.tolist(), tgt_out.tolist()):
        end = t_row.index(eos_id) + 1                                     # up to and including the first EOS
        p_prefix = list(itertools.islice(itertools.chain(p_row, itertools.repeat(pad_id)), end))
        correct += p_prefix == t_row[:end]
    return correct / len(tgt_out)
''')


idiom("exact_match_nograd_cumsum_pad", "07_copy_task", "exact_match",
      "@torch.no_grad() (no gradient is compared), F.pad with a value, cumsum to find what follows the first EOS, "
      "float() of a mean", r'''
@torch.no_grad()
def exact_match(pred, tgt_out, eos_id=EOS_ID, pad_id=PAD_ID):
    T = tgt_out.size(1)
    pred = F.pad(pred, (0, max(0, T - pred.size(1))), value=pad_id)[:, :T]     # (B, T)
    is_eos = tgt_out == eos_id
    after_eos = (is_eos.cumsum(dim=1) - is_eos.long()) > 0                      # (B, T): strictly after the first EOS
    row_ok = (pred.eq(tgt_out) | after_eos).all(dim=1)                          # (B,)
    return float(row_ok.float().mean())
''')


idiom("train_step_zero_grad_first", "07_copy_task", "train_step",
      "model.train(), optimizer.zero_grad(set_to_none=True) before the forward pass, float(loss), return hint", r'''
def train_step(model, optimizer, scheduler, src, tgt_in, tgt_out) -> float:
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss = copy_loss(model(src, tgt_in), tgt_out)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return float(loss)
''')


idiom("train_step_typed_model_zero_grad", "07_copy_task", "train_step",
      "full type hints (nn.Module, torch.optim.Optimizer, LRScheduler), model.zero_grad(), loss.detach().item()", r'''
def train_step(model: nn.Module, optimizer: torch.optim.Optimizer,
               scheduler: torch.optim.lr_scheduler.LRScheduler,
               src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> float:
    logits = model(src, tgt_in)                               # (B, T, V)
    loss = copy_loss(logits, tgt_out, pad_id=PAD_ID)
    model.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.detach().item()
''')


idiom("copy_loss_reduction_sum_typed_imports", "07_copy_task", "copy_loss",
      "re-imports (import torch.nn.functional as F, from torch import Tensor), shape unpacking, view, "
      "reduction='sum' divided by the count of real tokens", r'''
import torch.nn.functional as F
from torch import Tensor


def copy_loss(logits: Tensor, tgt_out: Tensor, pad_id: int = PAD_ID) -> Tensor:
    B, T, V = logits.shape
    total = F.cross_entropy(logits.reshape(B * T, V), tgt_out.reshape(B * T), ignore_index=pad_id, reduction="sum")
    return total / (tgt_out != pad_id).sum()
''')


idiom("exact_match_numpy_rows", "07_copy_task", "exact_match",
      "NumPy: .cpu().numpy(), np.pad with constant_values, argmax for the first EOS, np.array_equal per row, "
      "float(np.mean(...))", r'''
def exact_match(pred, tgt_out, eos_id=EOS_ID, pad_id=PAD_ID):
    p, t = pred.cpu().numpy(), tgt_out.cpu().numpy()
    T = t.shape[1]
    if p.shape[1] < T:
        p = np.pad(p, ((0, 0), (0, T - p.shape[1])), constant_values=pad_id)       # (B, T)
    ends = (t == eos_id).argmax(axis=1)                                             # (B,): first EOS
    hits = [np.array_equal(p[i, : e + 1], t[i, : e + 1]) for i, e in enumerate(ends)]
    return float(np.mean(hits))
''')

