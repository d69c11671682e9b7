"""Chapters 07-09: learning-rate schedules, training curves, the GPT block diagram, language-model
training against a baseline, and the measured cost of attention."""
import matplotlib.pyplot as plt
import numpy as np

from .. import lang
from .style import flow_diagram


def plot_lr_schedule(curves, title="Learning-rate schedules"):
    """Learning rate against training step, one line per schedule.

    ``curves`` maps a label to a sequence of learning rates (index 0 = step 1). Returns the Figure.
    """
    if not curves:
        raise ValueError(lang.text("curves 不能为空 / curves must not be empty"))
    fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
    for label, lrs in curves.items():
        lrs = np.asarray(lrs, dtype=float)
        ax.plot(np.arange(1, len(lrs) + 1), lrs, label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("learning rate")
    ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3)
    return fig


def plot_training_curves(losses, evals=(), target=None, title="Copy task: training loss and held-out exact match"):
    """Training loss per step (log scale, left) and held-out exact match (right), as ``train_copy_model``
    measures it at each evaluation: the arg-max of one teacher-forced pass, whole rows right.

    ``losses``: one loss per step (index 0 = step 1); ``evals``: ``(step, exact_match)`` pairs;
    ``target``: an exact-match level drawn as a dashed line. Returns the Figure.
    """
    losses = np.asarray(losses, dtype=float)
    if losses.ndim != 1 or losses.size == 0:
        raise ValueError(lang.text("losses 应为非空的一维序列 / losses must be a non-empty 1-D sequence"))
    fig, ax = plt.subplots(figsize=(7.0, 3.6), layout="constrained")
    steps = np.arange(1, losses.size + 1)
    ax.plot(steps, losses, color="tab:blue", lw=0.8, label="training loss")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (non-PAD tokens)", color="tab:blue")
    ax.grid(alpha=0.3)
    ax.set_title(title)
    if len(evals):
        ev = np.asarray(evals, dtype=float)
        ax2 = ax.twinx()
        ax2.plot(ev[:, 0], ev[:, 1], "o-", color="tab:orange", ms=3,
                 label="held-out exact match (teacher-forced arg-max)")
        if target is not None:
            ax2.axhline(target, color="tab:orange", ls="--", lw=0.8)
        ax2.set_ylim(-0.02, 1.02)
        ax2.set_ylabel("exact match (teacher-forced)", color="tab:orange")
        lines = ax.get_lines() + ax2.get_lines()[:1]
        ax.legend(lines, [line.get_label() for line in lines], loc="center right", fontsize=8)
    return fig


# --- chapter 08: from the Transformer to a GPT --------------------------------------------------


def plot_gpt_block(title="One decoder-only block (Pre-LN, as in Llama)"):
    """Diagram of one GPT block: RMSNorm -> causal GQA with RoPE -> + -> RMSNorm -> SwiGLU -> +. Returns the Figure."""
    box, sub, add, norm = "white", "#cfe2f3", "#fff2cc", "#d9ead3"
    steps = [("x  (B, T, d_model)", box), ("RMSNorm", norm),
             ("causal grouped-query attention\nRoPE on q, k; H query heads, G K/V heads", sub), ("+", add),
             ("RMSNorm", norm), ("SwiGLU FFN\ndown(silu(gate(x)) * up(x))", sub), ("+", add),
             ("output  (B, T, d_model)", box)]
    fig, ax = plt.subplots(figsize=(6.4, 7.0), layout="constrained")
    # one residual around each sublayer: the attention's on the right, the FFN's on the left (two paths)
    ys = flow_diagram(ax, steps, [(0, 3), (3, 6)], side=(1.45, -1.45), fontsize=9)
    ax.text(-2.4, ys[1], "no cross-attention,\nno bias in linears,\nno positional table", fontsize=8,
            ha="left", va="center", color="#444444")
    ax.set_xlim(-2.45, 2.1)
    ax.set_title("N blocks, then a final RMSNorm and lm_head (optionally tied to the embedding)", fontsize=9)
    fig.suptitle(title, fontweight="bold")
    return fig


def plot_lm_training(losses, evals, baseline=None, baseline_label="uniform guess ln V",
                     title="Character-level GPT: next-token loss"):
    """Training loss per step and the periodic (step, train, validation) estimates.

    ``losses``: one loss per step; ``evals``: ``(step, train_loss, val_loss)`` triples;
    ``baseline``: a loss drawn dashed, named ``baseline_label`` in the legend (e.g. ln V, uniform
    guessing, or the unigram loss on the validation split). Returns the Figure.
    """
    losses = np.asarray(losses, dtype=float)
    if losses.ndim != 1 or losses.size == 0:
        raise ValueError(lang.text("losses 应为非空的一维序列 / losses must be a non-empty 1-D sequence"))
    fig, ax = plt.subplots(figsize=(7.0, 3.6), layout="constrained")
    ax.plot(np.arange(1, losses.size + 1), losses, color="tab:blue", lw=0.6, alpha=0.6, label="training batch")
    if len(evals):
        ev = np.asarray(evals, dtype=float)
        ax.plot(ev[:, 0], ev[:, 1], "o-", color="tab:blue", ms=3, label="train (fixed windows)")
        ax.plot(ev[:, 0], ev[:, 2], "s-", color="tab:orange", ms=3, label="validation (held-out poems)")
    if baseline is not None:
        ax.axhline(baseline, color="gray", ls="--", lw=0.8, label=f"{baseline_label} = {baseline:.2f}")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per character)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def plot_attention_cost(lengths, naive_seconds, fused_seconds, naive_bytes, fused_bytes,
                        title="Attention cost as the sequence grows (log-log)"):
    """Time (left) and peak extra memory (right) of naive attention against the fused kernel, log-log.

    All arguments are 1-D sequences over ``lengths`` (tokens T); memory in bytes. Reference slopes
    T^1 and T^2 are drawn dashed. Returns the Figure.
    """
    T = np.asarray(lengths, dtype=float)
    series = [np.asarray(s, dtype=float) for s in (naive_seconds, fused_seconds, naive_bytes, fused_bytes)]
    if T.ndim != 1 or any(s.shape != T.shape for s in series):
        raise ValueError(lang.text("所有序列长度应相同 / every series must be 1-D and as long as lengths"))
    naive_s, fused_s, naive_b, fused_b = series
    floor_mib = 0.1  # a log axis cannot show 0: memory below this is drawn on it
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.8), layout="constrained")
    for ax, naive, fused, unit, scale, label in ((axes[0], naive_s, fused_s, "ms", 1e3, "time per call"),
                                                 (axes[1], naive_b, fused_b, "MiB", 2.0 ** -20, "peak extra memory")):
        if unit == "MiB":
            naive, fused = (np.maximum(s * scale, floor_mib) / scale for s in (naive, fused))
            label_floor = f" (below {floor_mib} MiB drawn at {floor_mib})"
        else:
            label_floor = ""
        ax.loglog(T, naive * scale, "o-", color="tab:red", label="naive: materialise T x T weights")
        ax.loglog(T, fused * scale, "s-", color="tab:blue", label="F.scaled_dot_product_attention" + label_floor)
        ref = naive[-1] * scale
        ax.loglog(T, ref * (T / T[-1]) ** 2, ":", color="gray", lw=1, label="slope 2 (T^2)")
        ax.loglog(T, ref * (T / T[-1]), "--", color="gray", lw=1, label="slope 1 (T)")
        ax.set_xticks(T, [str(int(t)) for t in T])
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_xlabel("sequence length T (tokens)")
        ax.set_ylabel(f"{label} ({unit})")
        ax.set_title(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(title, fontweight="bold")
    return fig
