"""Chapter 08: the character tokenizer, next-token batches, the training loop for the GPT.

The model parts (grouped-query attention, RoPE, SwiGLU, RMSNorm, the decoder-only block and GPT,
KV-cache decoding, sampling, beam search) live in their own modules (docs/CONTRACT_LLM.md); this
module holds what only chapter 08 needs around them.
"""
import torch
import torch.nn.functional as F

from .training import AdamW, clip_grad_norm, warmup_cosine_lr


class CharTokenizer:
    """A character-level tokenizer: every distinct character of ``text`` is one token.

    ``chars`` is the sorted list of the distinct characters; token id ``i`` is ``chars[i]``.
    ``vocab_size = len(chars)``. ``encode(s)`` -> LongTensor ``(len(s),)`` of ids (a character
    not in the vocabulary raises ``KeyError``); ``decode(ids)`` -> str, for a LongTensor or a
    list of ints; ``decode(encode(s)) == s``.

    中文：字符级分词器：``text`` 中每个不同的字符是一个 token，按字符排序编号；
    ``encode`` 把字符串变成 id 的 LongTensor，``decode`` 把 id 变回字符串，二者互逆。
    """

    def __init__(self, text):
        ### BEGIN SOLUTION
        self.chars = sorted(set(text))
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        ### END SOLUTION

    @property
    def vocab_size(self):
        return len(self.chars)

    def encode(self, s):
        ### BEGIN SOLUTION
        return torch.tensor([self.stoi[ch] for ch in s], dtype=torch.long)  # (len(s),)
        ### END SOLUTION

    def decode(self, ids):
        ### BEGIN SOLUTION
        ids = ids.tolist() if torch.is_tensor(ids) else ids
        return "".join(self.chars[i] for i in ids)
        ### END SOLUTION


def load_poems(path, sha256="665f376d719cf248303b843d5daedac0b75554455dea27cbcefb93a53d6b93df"):
    """The poems of the corpus file at ``path``, one string per poem, each ending in ``"\\n"``.

    Raises ``ValueError`` with one bilingual line saying how to restore or regenerate the file when
    it is missing or its SHA-256 is not ``sha256`` (damaged, truncated, re-encoded, or regenerated
    without updating this default: tools/make_corpus.py prints the new one).
    """
    import hashlib
    from pathlib import Path

    path = Path(path)
    data = path.read_bytes() if path.is_file() else None
    if data is None or hashlib.sha256(data).hexdigest() != sha256:
        zh, en = ("缺失", "is missing") if data is None else ("已损坏", "is damaged")
        raise ValueError(f"data/{path.name} {zh}：用 git checkout -- data/{path.name} 恢复，或按 data/README.md 运行 "
                         f"tools/make_corpus.py 重新生成 / data/{path.name} {en}: restore it with git checkout -- "
                         f"data/{path.name}, or regenerate it with tools/make_corpus.py (data/README.md)")
    return data.decode("utf-8").splitlines(keepends=True)


def is_regular_poem(poem):
    """True when ``poem`` (one line of the corpus, ``"\\n"`` optional) is in regular form.

    Regular form: at least 4 lines, every line the same length, 5 or 7 characters without
    punctuation, the lines ending alternately in "，" and "。" (so the poem ends in "。").
    """
    import re

    lines = re.findall(r"([^，。\n]*)([，。])", poem)
    if "".join(text + mark for text, mark in lines) != poem.rstrip("\n") or len(lines) < 4 or len(lines) % 2:
        return False
    return len(lines[0][0]) in (5, 7) and all(
        len(text) == len(lines[0][0]) and mark == "，。"[i % 2] for i, (text, mark) in enumerate(lines))


def next_token_batch(data, block_size, batch_size, generator=None):
    """``batch_size`` random windows of ``data`` (a 1-D LongTensor) as next-token pairs.

    Draws ``batch_size`` start positions ``i`` uniformly from ``[0, len(data) - block_size)``
    (``torch.randint(..., generator=generator)``) and returns ``x = data[i : i + block_size]`` and
    ``y = data[i + 1 : i + block_size + 1]``, both LongTensors ``(batch_size, block_size)``:
    ``y[:, t]`` is the token that follows ``x[:, t]``.

    中文：从 ``data`` 随机截取 ``batch_size`` 段长 ``block_size`` 的窗口：``x`` 是窗口，
    ``y`` 是右移一位的窗口（每个位置的下一个 token）。
    """
    ### BEGIN SOLUTION
    starts = torch.randint(0, len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    offsets = torch.arange(block_size)  # (T,)
    idx = starts[:, None] + offsets[None, :]  # (B, T)
    return data[idx], data[idx + 1]  # (B, T), (B, T)
    ### END SOLUTION


@torch.no_grad()
def estimate_loss(model, data, block_size, batch_size=32, num_batches=8, seed=1234):
    """Mean next-token cross-entropy of ``model`` (eval mode) on ``num_batches`` fixed random windows of ``data``.

    The windows are drawn on the CPU and moved to the model's device (the CPU for a model without parameters)."""
    device = next(model.parameters(), torch.empty(0)).device
    gen = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    losses = []
    for _ in range(num_batches):
        x, y = (t.to(device) for t in next_token_batch(data, block_size, batch_size, gen))  # (B, T), (B, T)
        logits = model(x)  # (B, T, V)
        losses.append(F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).item())
    model.train(was_training)
    return sum(losses) / len(losses)


def train_gpt(model, train_data, val_data, *, block_size, batch_size=32, max_steps=600, lr=3e-3,
              warmup=50, eval_every=50, seed=0, progress=True):
    """Train ``model`` (``model(idx) -> logits (B, T, V)``) on random windows of ``train_data``.

    The three pieces of chapter 08: ``AdamW`` (betas 0.9/0.95; two parameter groups: weight decay
    0.1 on matrices, none on vectors), the learning rate
    ``warmup_cosine_lr`` (``warmup`` steps, then cosine decay to 10 % of ``lr``), gradients clipped
    by ``clip_grad_norm`` at a global norm of 1. Batches come from their own ``torch.Generator``
    seeded with ``seed`` (on the CPU, the same on every device) and are moved to the model's device.
    Every ``eval_every`` steps (and at the last) ``estimate_loss`` scores ``train_data`` and
    ``val_data`` on fixed windows. ``progress``: a tqdm bar on stdout.

    Returns a dict: ``loss`` (one per step), ``evals`` (list of ``(step, train_loss, val_loss)``),
    ``val_loss`` (the last evaluation), ``steps`` and ``seconds`` (wall time).
    """
    import sys
    import time

    from tqdm import tqdm

    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    optimizer = AdamW([{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": 0.1},
                       {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}],
                      lr=lr, betas=(0.9, 0.95))
    history = {"loss": [], "evals": [], "val_loss": float("nan"), "steps": 0, "seconds": 0.0}
    start = time.perf_counter()
    bar = tqdm(range(max_steps), desc="train", disable=not progress, mininterval=1.0, ascii=True,
               file=sys.stdout)
    for step in bar:
        model.train()
        x, y = (t.to(device) for t in next_token_batch(train_data, block_size, batch_size, gen))  # (B, T), (B, T)
        logits = model(x)  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))  # (B*T, V) vs (B*T,)
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm(model.parameters(), 1.0)
        for group in optimizer.param_groups:
            group["lr"] = warmup_cosine_lr(step, lr, warmup, max_steps, min_lr=0.1 * lr)
        optimizer.step()
        history["loss"].append(loss.item())
        if (step + 1) % eval_every == 0 or step + 1 == max_steps:
            train_loss = estimate_loss(model, train_data, block_size)
            val_loss = estimate_loss(model, val_data, block_size)
            history["evals"].append((step + 1, train_loss, val_loss))
            bar.set_postfix(train=f"{train_loss:.2f}", val=f"{val_loss:.2f}", refresh=False)
    bar.close()
    model.eval()
    history["val_loss"] = history["evals"][-1][2]
    history["steps"] = max_steps
    history["seconds"] = time.perf_counter() - start
    return history


def peak_memory_increase(fn):
    """Run ``fn()`` and return how far the process's resident memory peaked above where it started, in bytes.

    Linux only (``/proc/self/clear_refs`` resets the high-water mark ``VmHWM``); elsewhere returns
    ``float("nan")``. Large tensors get fresh pages from the operating system, so the increase is
    the memory ``fn`` needed at its peak (temporaries included), not what it returns.
    """
    import os

    def status(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))

    if not os.path.exists("/proc/self/clear_refs"):
        fn()
        return float("nan")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current resident size
    before = status("VmRSS:")
    fn()
    return max(0, status("VmHWM:") - before)  # 0 when the call needed no new memory
