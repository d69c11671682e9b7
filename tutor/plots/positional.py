"""Chapter 03: positional encodings, their similarity, the permutation demo and RoPE scores."""
import matplotlib.pyplot as plt
import numpy as np

from .style import CELL_PT, as_array, cell_text_colour, set_ticks


def plot_positional_encoding(pe, dims=(0, 1, 6, 7, 20, 21), title="Sinusoidal positional encoding"):
    """The PE table ``(max_len, d_model)`` (leading size-1 axes allowed) as a heatmap, and a few columns as curves.

    Left: value of every (position, dimension); right: the columns listed in ``dims`` against the
    position (even columns are sin, odd columns cos; low columns oscillate fast). Returns the Figure.
    """
    table = as_array(pe, 2, "pe").astype(float)
    n_pos, d_model = table.shape
    dims = [k for k in dims if k < d_model]
    fig, (ax_map, ax_lines) = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained",
                                           gridspec_kw={"width_ratios": [1.2, 1]})
    im = ax_map.imshow(table, cmap="RdBu_r", vmin=-1.0, vmax=1.0, aspect="auto", interpolation="nearest")
    ax_map.set_xlabel("dimension (even: sin, odd: cos)")
    ax_map.set_ylabel("position")
    ax_map.set_title(f"PE table ({n_pos} positions x {d_model} dims)")
    fig.colorbar(im, ax=ax_map, fraction=0.046, pad=0.02, label="value")
    for k in dims:
        ax_lines.plot(np.arange(n_pos), table[:, k], linestyle="-" if k % 2 == 0 else "--",
                      label=f"dim {k} ({'sin' if k % 2 == 0 else 'cos'})")
    ax_lines.set_xlabel("position")
    ax_lines.set_ylabel("PE value")
    ax_lines.set_title("a few columns: frequency falls as the dimension grows")
    ax_lines.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax_lines.grid(True, alpha=0.3)
    fig.suptitle(title, fontweight="bold")
    return fig


def plot_pe_similarity(sim, starts=(0, 20, 40), max_offset=40, title="Dot product of PE vectors"):
    """Similarity of PE vectors: the matrix ``sim[i, j] = PE[i] . PE[j]`` ``(T, T)`` and curves against the offset.

    Right panel: ``sim[p, p + k]`` against the offset ``k = 0 .. max_offset`` for each start ``p``
    in ``starts`` (the curves coincide: the dot product depends only on the offset). Returns the Figure.
    """
    s = as_array(sim, 2, "sim").astype(float)
    n = s.shape[0]
    fig, (ax_map, ax_lines) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    im = ax_map.imshow(s, cmap="viridis", interpolation="nearest")
    ax_map.set_xlabel("position j")
    ax_map.set_ylabel("position i")
    ax_map.set_title("PE[i] . PE[j]")
    fig.colorbar(im, ax=ax_map, fraction=0.046, pad=0.02, label="dot product")
    styles = ("-", "--", ":", "-.")
    for idx, p in enumerate(starts):
        k = np.arange(0, min(max_offset, n - 1 - p) + 1)
        ax_lines.plot(k, s[p, p + k], linestyle=styles[idx % len(styles)], linewidth=4.0 / (idx + 1),
                      label=f"start p = {p}")
    ax_lines.set_xlabel("offset k")
    ax_lines.set_ylabel("PE[p] . PE[p + k]")
    ax_lines.set_title("depends only on the offset k (the curves overlap)")
    ax_lines.legend(fontsize=8)
    ax_lines.grid(True, alpha=0.3)
    fig.suptitle(title, fontweight="bold")
    return fig


def plot_permutation_demo(tokens, perm, attn, attn_perm, err_no_pe, err_pe,
                          title="Self-attention without position information is permutation-equivariant"):
    """Shuffling the tokens only shuffles what attention computes, unless a PE is added.

    ``tokens``: the T token strings; ``perm``: the order of the shuffled sequence (``x[perm]``);
    ``attn``, ``attn_perm``: weights ``(T, T)`` (leading size-1 axes allowed) for the original and
    the shuffled sequence (no PE); ``err_no_pe``, ``err_pe``: per original token, the largest
    ``|out(x)[t] - out(x[perm])[position of t]|`` without and with a PE. Returns the Figure.
    """
    tokens = list(tokens)
    perm = [int(i) for i in perm]
    shuffled = [tokens[i] for i in perm]
    a = as_array(attn, 2, "attn").astype(float)
    b = as_array(attn_perm, 2, "attn_perm").astype(float)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), layout="constrained")
    vmax = max(a.max(), b.max())
    for ax, w, labels, name in ((axes[0], a, tokens, "original order (no PE)"),
                                (axes[1], b, shuffled, "shuffled order (no PE)")):
        ax.imshow(w, cmap="viridis", vmin=0.0, vmax=vmax)
        for (i, j), v in np.ndenumerate(w):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=CELL_PT, color=cell_text_colour(v, vmax))
        set_ticks(ax, len(labels), len(labels), labels, labels)
        ax.set_xlabel("key")
        ax.set_ylabel("query")
        ax.set_title(name)
    x = np.arange(len(tokens))
    width = 0.38
    axes[2].bar(x - width / 2, np.asarray(err_no_pe, dtype=float), width, label="no PE")
    axes[2].bar(x + width / 2, np.asarray(err_pe, dtype=float), width, label="with a position vector added")
    axes[2].set_xticks(x)
    axes[2].set_xticklabels(tokens, rotation=45, ha="right")
    axes[2].set_xlabel("token")
    axes[2].set_ylabel("max |output change| of that token")
    axes[2].set_title("output of each token after shuffling")
    axes[2].legend(fontsize=8)
    axes[2].grid(True, axis="y", alpha=0.3)
    fig.suptitle(title, fontweight="bold")
    return fig


def plot_rope_scores(scores_rope, scores_abs, title="q . k between positions m and n"):
    """Score matrices ``(T, T)``: ``score[m, n] = q_m . k_n`` with RoPE and with an added absolute PE.

    With RoPE every diagonal (fixed offset ``m - n``) is constant; with the PE added to the
    vectors it is not. Both panels share one colour scale. Returns the Figure.
    """
    r = as_array(scores_rope, 2, "scores_rope").astype(float)
    s = as_array(scores_abs, 2, "scores_abs").astype(float)
    vmax = max(np.abs(r).max(), np.abs(s).max())
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.4), layout="constrained")
    for ax, m, name in ((axes[0], r, "RoPE: rotate q by m, k by n"),
                        (axes[1], s, "absolute PE added to q and k")):
        im = ax.imshow(m, cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest")
        ax.set_xlabel("key position n")
        ax.set_ylabel("query position m")
        ax.set_title(name)
    fig.colorbar(im, ax=axes.ravel().tolist(), fraction=0.03, pad=0.02, label="q . k")
    fig.suptitle(title, fontweight="bold")
    return fig
