"""Chapters 01-02 and 05-06: masks, attention heatmaps, the sqrt(d_k) experiment, head splits,
mask panels, the parameter breakdown and the KV-cache timing."""
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

from .. import lang
from .style import BLOCKED, BLOCKED_TEXT, CELL_PT, MASK_CMAP, as_array, cell_text_colour, draw_blocked, set_ticks


def plot_mask(mask, title="Attention mask (True = may attend)", ax=None, x_labels=None, y_labels=None,
              legend=True):
    """Draw a boolean mask ``(T_q, T_k)`` (leading size-1 axes allowed) as an image.

    Green cells are True (the query may attend to that key), grey hatched cells are False (blocked).
    Rows are query positions i, columns are key positions j; ``legend=False`` leaves the colour key
    out (for side-by-side panels). Returns the Figure.
    """
    m = as_array(mask, 2, "mask").astype(bool)
    if ax is None:
        _, ax = plt.subplots(figsize=(0.45 * m.shape[1] + 2.8, 0.45 * m.shape[0] + 1.6), layout="constrained")
    ax.imshow(m.astype(float), cmap=MASK_CMAP, vmin=0, vmax=1)
    draw_blocked(ax, ~m)
    if m.size <= 256:
        for (i, j), v in np.ndenumerate(m):
            ax.text(j, i, "1" if v else "0", ha="center", va="center", fontsize=CELL_PT,
                    color="black" if v else BLOCKED_TEXT)
    set_ticks(ax, m.shape[1], m.shape[0], x_labels, y_labels)
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    ax.set_title(title)
    if legend:
        ax.legend(handles=[Patch(color=MASK_CMAP(1.0), label="True: may attend"),
                           Patch(**BLOCKED, label="False: blocked")],
                  loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    return ax.figure


def plot_attention(weights, x_labels=None, y_labels=None, title="Attention weights", ax=None, annotate=None):
    """Heatmap of attention weights ``(T_q, T_k)`` (leading size-1 axes allowed), colour scale 0..1.

    ``annotate`` writes each weight in its cell (default: when both sides are at most 10).
    A weight of exactly 0 comes from a mask (softmax does not underflow to 0 at these scales): it
    is drawn as a blocked cell, grey and hatched, marked "×". Rows are queries, columns are keys.
    Returns the Figure.
    """
    w = as_array(weights, 2, "weights").astype(float)
    if ax is None:
        _, ax = plt.subplots(figsize=(0.55 * w.shape[1] + 2.6, 0.5 * w.shape[0] + 1.6), layout="constrained")
    im = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=1.0)
    blocked = w == 0.0
    draw_blocked(ax, blocked)
    if annotate is None:
        annotate = max(w.shape) <= 10
    if annotate:
        for (i, j), v in np.ndenumerate(w):
            ax.text(j, i, "×" if blocked[i, j] else f"{v:.2f}", ha="center", va="center", fontsize=CELL_PT,
                    color=BLOCKED_TEXT if blocked[i, j] else cell_text_colour(v))
    set_ticks(ax, w.shape[1], w.shape[0], x_labels, y_labels)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04,
                       label="weight (grey hatched: blocked)" if blocked.any() else "weight")
    return ax.figure


def plot_heads(weights, x_labels=None, y_labels=None, title="Attention weights per head", ncols=4):
    """One heatmap per head for weights ``(H, T_q, T_k)`` (a leading batch axis of size 1 allowed).

    All heads share the colour scale 0..1; weights of exactly 0 (masked) are grey and hatched.
    Returns the Figure.
    """
    w = as_array(weights, 3, "weights").astype(float)
    n_heads = w.shape[0]
    ncols = min(ncols, n_heads)
    nrows = -(-n_heads // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.0 * ncols + 0.8, 2.8 * nrows + 0.6),
                             squeeze=False, layout="constrained")
    for h, ax in enumerate(axes.flat):
        if h >= n_heads:
            ax.axis("off")
            continue
        im = ax.imshow(w[h], cmap="viridis", vmin=0.0, vmax=1.0)
        draw_blocked(ax, w[h] == 0.0)
        set_ticks(ax, w.shape[2], w.shape[1], x_labels, y_labels)
        ax.set_title(f"head {h}")
        ax.set_xlabel("key")
        ax.set_ylabel("query")
    fig.suptitle(title, fontweight="bold")
    fig.colorbar(im, ax=axes.ravel().tolist(), fraction=0.02, pad=0.02,
                 label="weight (grey hatched: blocked)" if (w == 0.0).any() else "weight")
    return fig


def plot_scaling_experiment(d_ks, var_unscaled, var_scaled, max_w_unscaled, max_w_scaled,
                            grad_unscaled=None, grad_scaled=None,
                            title="Why divide by sqrt(d_k)"):
    """The sqrt(d_k) experiment, one panel per measured quantity, each against d_k (log axis).

    Panels: variance of q.k (with the line y = d_k); mean largest softmax weight (1 = one-hot);
    and, when given, the mean size of the softmax gradient. Each quantity comes as a pair:
    without scaling (q.k) and with scaling (q.k / sqrt(d_k)). Returns the Figure.
    """
    d = np.asarray(d_ks, dtype=float)
    panels = [
        ("Var(q.k)", var_unscaled, var_scaled, "loglog"),
        ("mean largest softmax weight", max_w_unscaled, max_w_scaled, "semilogx"),
    ]
    if grad_unscaled is not None and grad_scaled is not None:
        panels.append(("mean |d softmax / d score|", grad_unscaled, grad_scaled, "loglog"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.3 * len(panels), 3.6), layout="constrained")
    for ax, (label, raw, scaled, scale) in zip(axes, panels):
        plot = getattr(ax, scale)
        plot(d, np.asarray(raw, dtype=float), "o-", color="tab:red", label="q.k (no scaling)")
        plot(d, np.asarray(scaled, dtype=float), "s-", color="tab:blue", label="q.k / sqrt(d_k)")
        if label == "Var(q.k)":
            ax.loglog(d, d, "--", color="gray", linewidth=1, label="y = d_k")
        ax.set_xlabel("d_k")
        ax.set_ylabel(label)
        ax.set_title(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontweight="bold")
    return fig


def plot_head_split(x, heads_right, heads_wrong,
                    title="Splitting d_model into heads: which token does each number come from?"):
    """Where the numbers of each head come from, for a right and a wrong head split.

    ``x`` is ``(T, d_model)`` filled with ``arange`` (so element ``v`` belongs to token
    ``v // d_model``); ``heads_right`` and ``heads_wrong`` are ``(H, T, d_k)`` (a leading batch axis
    of size 1 allowed). Each cell shows its number, coloured by the token it came from. Returns the Figure.
    """
    x = as_array(x, 2, "x")
    n_tokens, d_model = x.shape
    panels = [("x  (T, d_model)", x.astype(float), None)]
    for name, heads in (("right: view(B,T,H,d_k).transpose(1,2)", heads_right),
                        ("wrong: view(B,H,T,d_k)", heads_wrong)):
        h = as_array(heads, 3, name).astype(float)  # (H, T, d_k)
        n_heads, _, d_k = h.shape
        grid = np.full((h.shape[1], n_heads * (d_k + 1) - 1), np.nan)  # heads side by side, one blank column between
        for k in range(n_heads):
            grid[:, k * (d_k + 1):k * (d_k + 1) + d_k] = h[k]
        centres = [k * (d_k + 1) + (d_k - 1) / 2 for k in range(n_heads)]
        panels.append((name, grid, centres))
    cmap = plt.get_cmap("tab10", n_tokens)
    fig, axes = plt.subplots(1, 3, figsize=(4.0 * 3, 0.6 * n_tokens + 1.6), layout="constrained")
    for ax, (name, grid, centres) in zip(axes, panels):
        ax.imshow(np.floor(grid / d_model), cmap=cmap, vmin=-0.5, vmax=n_tokens - 0.5)
        for (i, j), v in np.ndenumerate(grid):
            if not np.isnan(v):
                ax.text(j, i, f"{int(v)}", ha="center", va="center", fontsize=CELL_PT)
        ax.set_title(name, fontsize=9)
        if centres is None:
            ax.set_xticks(range(d_model))
            ax.set_xlabel("feature")
        else:
            ax.set_xticks(centres)
            ax.set_xticklabels([f"head {k}" for k in range(len(centres))])
            ax.set_xlabel("(B, H, T, d_k): heads side by side")
        ax.set_yticks(range(grid.shape[0]))
        ax.set_ylabel("row (token position)")
    axes[-1].legend(handles=[Patch(color=cmap(t), label=f"from token {t}") for t in range(n_tokens)],
                    loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    fig.suptitle(title, fontweight="bold")
    return fig


def plot_mask_row(masks, titles, x_labels=None, y_labels=None, title="Masks side by side (True = may attend)"):
    """Several boolean masks, each ``(T_q, T_k)`` (leading size-1 axes allowed), drawn side by side.

    ``titles`` names each panel; ``x_labels``/``y_labels`` (token names) apply to every panel.
    One colour key on the last panel. Returns the Figure.
    """
    masks = list(masks)
    if len(masks) != len(titles):
        raise ValueError(lang.text(f"masks 与 titles 数量不同 / got {len(masks)} masks but {len(titles)} titles"))
    first = as_array(masks[0], 2, "mask")
    width = 0.45 * first.shape[1] + 1.6
    fig, axes = plt.subplots(1, len(masks), figsize=(width * len(masks) + 1.8, 0.45 * first.shape[0] + 1.9),
                             squeeze=False, layout="constrained")
    for k, (ax, mask, name) in enumerate(zip(axes[0], masks, titles)):
        plot_mask(mask, title=name, ax=ax, x_labels=x_labels, y_labels=y_labels, legend=k == len(masks) - 1)
    fig.suptitle(title, fontweight="bold")
    return fig


def plot_param_breakdown(counts, title="Where the parameters are"):
    """Horizontal bars of parameter counts per component; ``counts`` maps a name to a count.

    Each bar is annotated with its count in millions and its share of the total. Returns the Figure.
    """
    names = list(counts)
    values = np.array([counts[n] for n in names], dtype=float)
    if values.size == 0 or np.any(values < 0):
        raise ValueError(lang.text("counts 应为非空且非负 / counts must be non-empty and non-negative"))
    total = values.sum()
    fig, ax = plt.subplots(figsize=(8.5, 0.42 * len(names) + 1.4), layout="constrained")
    y = np.arange(len(names))
    ax.barh(y, values / 1e6, color="tab:blue")
    for yi, v in zip(y, values):
        ax.text(v / 1e6, yi, f" {v / 1e6:.2f}M ({100 * v / total:.1f}%)", va="center", fontsize=8)
    ax.set_yticks(y)
    ax.set_yticklabels(names)
    ax.invert_yaxis()
    ax.set_xlim(0, values.max() / 1e6 * 1.35)
    ax.set_xlabel("parameters (millions)")
    ax.set_ylabel("component")
    ax.set_title(f"{title} (total {total / 1e6:.2f}M)")
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def plot_decode_timing(new_tokens, plain_seconds, cached_seconds,
                       title="Greedy decoding: re-run the prefix vs KV cache"):
    """Wall time of greedy decoding against the number of generated tokens, with and without a KV cache.

    Left: seconds per call for both; right: the speed-up (plain / cached) per length. Returns the Figure.
    """
    n = np.asarray(new_tokens, dtype=float)
    plain = np.asarray(plain_seconds, dtype=float)
    cached = np.asarray(cached_seconds, dtype=float)
    if not (n.shape == plain.shape == cached.shape) or n.ndim != 1:
        raise ValueError(lang.text("三个序列长度应相同 / "
                         "new_tokens, plain_seconds and cached_seconds must be 1-D and equally long"))
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.6), layout="constrained")
    axes[0].plot(n, plain * 1e3, "o-", color="tab:red", label="plain: decode the whole prefix each step")
    axes[0].plot(n, cached * 1e3, "s-", color="tab:blue", label="KV cache: only the newest token")
    axes[0].set_xlabel("new tokens generated")
    axes[0].set_ylabel("wall time (ms)")
    axes[0].set_title("time per greedy_decode call")
    axes[0].grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    speedup = plain / cached
    axes[1].bar([str(int(k)) for k in n], speedup, color="tab:green")
    for k, s in enumerate(speedup):
        axes[1].text(k, s, f"{s:.1f}x", ha="center", va="bottom", fontsize=8)
    axes[1].axhline(1.0, color="gray", linewidth=1, linestyle="--")
    axes[1].set_xlabel("new tokens generated")
    axes[1].set_ylabel("speed-up (plain / cached)")
    axes[1].set_title("speed-up of the KV cache")
    fig.suptitle(title, fontweight="bold")
    return fig
