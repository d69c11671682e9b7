"""Chapter 07: the copy task -- batches, masked loss, exact match, warmup, one training step.

Token ids: ``PAD_ID = 0``, ``BOS_ID = 1``, ``EOS_ID = 2``; content tokens are ``3 .. vocab_size-1``.
"""
import torch
import torch.nn.functional as F

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2


def make_copy_batch(batch_size, vocab_size, min_len, max_len, generator=None):
    """A batch of copy-task examples with variable lengths, padded to ``max_len + 1``.

    Each row draws a length ``L`` uniformly from ``[min_len, max_len]`` and ``L`` content tokens
    ``x`` uniformly from ``[3, vocab_size)``. Returns three LongTensors of shape ``(B, max_len + 1)``:

    - ``src     = x + [EOS_ID] + [PAD_ID] * (max_len - L)``
    - ``tgt_in  = [BOS_ID] + x + [PAD_ID] * (max_len - L)``   (the decoder's input, shifted right)
    - ``tgt_out = x + [EOS_ID] + [PAD_ID] * (max_len - L)``   (what the decoder must predict; equals ``src``)

    Draw with ``generator`` (a ``torch.Generator``, or None for the global one), lengths first:
    ``torch.randint(min_len, max_len + 1, (B,), generator=generator)``, then the tokens
    ``torch.randint(3, vocab_size, (B, max_len), generator=generator)``; the columns past each
    row's length are overwritten. Hint: compare ``torch.arange(max_len + 1)`` with the lengths.

    中文：一批变长的复制任务样本，补齐到 ``max_len + 1`` 宽：``src = tgt_out = x + EOS + PAD…``，
    ``tgt_in = BOS + x + PAD…``；随机数全部从 ``generator`` 抽取，先长度、后符号。
    """
    if not 1 <= min_len <= max_len:
        raise ValueError(f"需要 1 <= min_len <= max_len / need 1 <= min_len <= max_len; got {min_len}, {max_len}")
    if vocab_size < 4:
        raise ValueError(f"vocab_size 至少为 4（3 个特殊符号 + 内容）/ vocab_size must be >= 4; got {vocab_size}")
    ### BEGIN SOLUTION
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)  # (B,)
    x = torch.randint(3, vocab_size, (batch_size, max_len), generator=generator)  # (B, max_len)
    pos = torch.arange(max_len + 1)[None, :]  # (1, max_len + 1)
    L = lengths[:, None]  # (B, 1)
    x = torch.cat([x, torch.full((batch_size, 1), PAD_ID)], dim=1)  # (B, max_len + 1)
    src = x.masked_fill(pos == L, EOS_ID).masked_fill(pos > L, PAD_ID)  # (B, max_len + 1)
    bos = torch.full((batch_size, 1), BOS_ID)  # (B, 1)
    tgt_in = torch.cat([bos, x[:, :-1]], dim=1).masked_fill(pos > L, PAD_ID)  # (B, max_len + 1)
    return src, tgt_in, src.clone()
    ### END SOLUTION


def copy_loss(logits, tgt_out, pad_id=PAD_ID):
    """Mean cross-entropy over the non-PAD target positions.

    ``logits`` ``(B, T, V)`` (no softmax), ``tgt_out`` LongTensor ``(B, T)`` -> scalar tensor.
    Positions where ``tgt_out == pad_id`` contribute nothing, to the sum or to the count.
    Hint: flatten to ``(B*T, V)`` and ``(B*T,)``; ``F.cross_entropy`` has ``ignore_index``.

    中文：只在非 PAD 目标位置上求平均的交叉熵：PAD 位置既不进分子，也不进分母。
    """
    if logits.dim() != 3 or logits.shape[:2] != tgt_out.shape:
        raise ValueError(
            f"logits 应为 (B, T, V)，tgt_out 应为 (B, T) / logits must be (B, T, V) and tgt_out (B, T); "
            f"got {tuple(logits.shape)} and {tuple(tgt_out.shape)}"
        )
    ### BEGIN SOLUTION
    V = logits.size(-1)
    return F.cross_entropy(logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=pad_id)  # (B*T, V) vs (B*T,)
    ### END SOLUTION


def exact_match(pred, tgt_out, eos_id=EOS_ID, pad_id=PAD_ID):
    """Fraction of rows decoded exactly right, as a Python float in ``[0, 1]``.

    ``pred`` ``(B, T')``: decoded tokens **without** the leading BOS (``greedy_decode(...)[:, 1:]``);
    ``tgt_out`` ``(B, T)``: the targets (``x + [EOS] + PAD...``). A row counts when its tokens up to
    and including the target's first EOS equal the target's; whatever ``pred`` holds after that is
    ignored. A ``pred`` shorter than that prefix is wrong there (as if padded with ``pad_id``).

    中文：整行解码全对的比例（Python ``float``）。``pred`` 不含开头的 BOS；只比较到目标第一个 EOS（含）为止，
    之后的内容不管；``pred`` 比这段短就算错。
    """
    if pred.dim() != 2 or tgt_out.dim() != 2 or pred.size(0) != tgt_out.size(0):
        raise ValueError(
            f"pred 与 tgt_out 应为 (B, T') 与 (B, T) / pred and tgt_out must be (B, T') and (B, T); "
            f"got {tuple(pred.shape)} and {tuple(tgt_out.shape)}"
        )
    if not bool((tgt_out == eos_id).any(dim=1).all()):
        raise ValueError("tgt_out 的每一行都应含 EOS / every row of tgt_out must contain EOS")
    ### BEGIN SOLUTION
    B, T = tgt_out.shape
    if pred.size(1) < T:
        pred = torch.cat([pred, pred.new_full((B, T - pred.size(1)), pad_id)], dim=1)  # (B, T)
    pred = pred[:, :T]  # (B, T)
    eos_pos = (tgt_out == eos_id).int().argmax(dim=1, keepdim=True)  # (B, 1): first EOS
    counted = torch.arange(T, device=tgt_out.device)[None, :] <= eos_pos  # (B, T): positions up to and including it
    row_ok = ((pred == tgt_out) | ~counted).all(dim=1)  # (B,)
    return row_ok.sum().item() / B
    ### END SOLUTION


def noam_lr(step, d_model, warmup):
    """Learning-rate multiplier of "Attention Is All You Need" (Noam schedule), for ``step >= 1``.

    ``d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)``: a linear warmup over
    ``warmup`` steps to the peak ``(d_model * warmup) ** -0.5``, then an inverse-square-root decay.
    Use it with ``torch.optim.lr_scheduler.LambdaLR(opt, lambda s: noam_lr(s + 1, d_model, warmup))``;
    the optimizer's ``lr`` then acts as a scale factor.
    """
    if step < 1 or warmup < 1:
        raise ValueError(f"step 与 warmup 需 >= 1 / step and warmup must be >= 1; got {step}, {warmup}")
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def train_step(model, optimizer, scheduler, src, tgt_in, tgt_out):
    """One optimisation step on one batch; returns the batch's loss as a Python float.

    Forward ``model(src, tgt_in)`` -> logits ``(B, T, V)``, ``copy_loss`` against ``tgt_out``,
    clear old gradients, back-propagate, ``optimizer.step()``, then ``scheduler.step()`` (in this
    order: PyTorch warns when the scheduler steps first). ``model`` must be in train mode.

    中文：在一批数据上做一步优化：前向、``copy_loss``、清梯度、反向、``optimizer.step()``、``scheduler.step()``
    （按这个顺序），返回这一批的损失（Python ``float``）。
    """
    ### BEGIN SOLUTION
    logits = model(src, tgt_in)  # (B, T, V)
    loss = copy_loss(logits, tgt_out)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()
    ### END SOLUTION


def pick_device():
    """The device to train and generate on: a CUDA GPU, else Apple's MPS, else the CPU.

    ``pick_device() -> torch.device``: ``cuda`` when ``torch.cuda.is_available()``, else ``mps`` when
    ``torch.backends.mps.is_available()``, else ``cpu``. The environment variable ``COURSE_DEVICE``
    (``cpu``, ``cuda``, ``cuda:1``, ``mps``) chooses instead, e.g. ``COURSE_DEVICE=cpu`` to reproduce the CPU
    numbers on a machine with a GPU. Put the model there (``model.to(device)``), the batches too, and draw
    with generators made there (``torch.Generator(device=device)``).
    """
    import os

    available = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available(), "cpu": True}
    chosen = os.environ.get("COURSE_DEVICE")
    if not chosen:
        return torch.device(next(name for name, here in available.items() if here))
    try:
        device = torch.device(chosen)
    except RuntimeError:  # not a device name at all
        device = None
    if device is None or not available.get(device.type):
        here = ", ".join(name for name, ok in available.items() if ok)
        raise ValueError(f"COURSE_DEVICE={chosen!r} 不是这台机器上的设备（这里有：{here}）/ "
                         f"COURSE_DEVICE={chosen!r} is not a device of this machine (it has: {here})")
    return device


def train_copy_model(model, *, vocab_size, min_len, max_len, eval_src, eval_tgt, batch_size=64,
                     max_steps=2000, lr_factor=1.0, warmup=100, eval_every=25, target=0.999, seed=0,
                     progress=True):
    """Train ``model`` on fresh copy batches until held-out exact match reaches ``target``.

    Adam (betas 0.9/0.98, eps 1e-9) with ``lr = lr_factor * noam_lr(step, d_model, warmup)``; training
    batches come from their own ``torch.Generator`` seeded with ``seed``, one ``train_step`` each, moved
    to the model's device (as is the held-out set). Every ``eval_every`` steps (and at the last step) the
    held-out set ``eval_src``/``eval_tgt`` is scored with one teacher-forced forward pass: for a causal
    decoder, a row whose every arg-max token is right is exactly a row that greedy decoding gets right
    (greedy decoding feeds back its own tokens, which are then the true ones). A model whose future leaks
    past the causal mask scores high here and not under greedy decoding, so when that score reaches
    ``target``, ``model.greedy_decode`` confirms it with ``exact_match``; training stops at the first
    confirmed evaluation or after ``max_steps``. ``progress``: a tqdm bar on stdout.

    Returns a dict: ``loss`` and ``lr`` (one per step), ``evals`` (list of ``(step, score)``,
    teacher-forced), ``exact_match`` (greedy, last confirmation or the final step), ``steps``,
    ``seconds`` (wall time, evaluations included) and ``reached`` (bool).
    """
    import sys
    import time

    from tqdm import tqdm

    device = next(model.parameters()).device  # batches are drawn on the CPU, then moved to the model's device
    eval_src, eval_tgt = eval_src.to(device), eval_tgt.to(device)
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr_factor, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: noam_lr(s + 1, model.d_model, warmup))
    eval_tgt_in = torch.cat([torch.full_like(eval_tgt[:, :1], BOS_ID), eval_tgt[:, :-1]], dim=1)  # (N, T)
    eval_tgt_in = eval_tgt_in.masked_fill(eval_tgt_in == EOS_ID, PAD_ID)  # shifted right, EOS dropped
    history = {"loss": [], "lr": [], "evals": [], "exact_match": 0.0, "steps": 0, "seconds": 0.0, "reached": False}
    start = time.perf_counter()
    bar = tqdm(total=max_steps, desc="train", disable=not progress, mininterval=1.0, ascii=True,
               file=sys.stdout)
    for step in range(1, max_steps + 1):
        model.train()
        history["lr"].append(optimizer.param_groups[0]["lr"])
        src, tgt_in, tgt_out = (t.to(device) for t in make_copy_batch(batch_size, vocab_size, min_len, max_len, gen))
        history["loss"].append(train_step(model, optimizer, scheduler, src, tgt_in, tgt_out))
        bar.update()  # counted before a possible early stop, so the bar ends at the last step taken
        if step % eval_every and step != max_steps:
            continue
        model.eval()
        with torch.no_grad():
            pred = model(eval_src, eval_tgt_in).argmax(dim=-1)  # (N, T, V) -> (N, T)
        score = exact_match(pred, eval_tgt)
        history["evals"].append((step, score))
        bar.set_postfix(loss=f"{history['loss'][-1]:.3f}", exact=f"{score:.3f}", refresh=False)
        if score >= target or step == max_steps:
            decoded = model.greedy_decode(eval_src, BOS_ID, EOS_ID, max_new_tokens=eval_tgt.size(1))  # (N, <= T + 1)
            history["exact_match"] = exact_match(decoded[:, 1:], eval_tgt)
            if history["exact_match"] >= target:
                history["reached"] = True
                break
    bar.close()
    model.eval()
    history["steps"] = step
    history["seconds"] = time.perf_counter() - start
    return history
