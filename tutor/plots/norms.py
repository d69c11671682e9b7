"""Chapter 04: activations, which values a norm averages over, residual layouts and depth stability."""
import matplotlib.pyplot as plt
import numpy as np

from .style import flow_diagram


def plot_activations(x, curves, title="Activation functions of the FFN"):
    """Curves ``{name: values}`` over the inputs ``x`` (1-D), e.g. ReLU and GELU. Returns the Figure."""
    xs = np.asarray(x.detach().cpu() if hasattr(x, "detach") else x, dtype=float)
    fig, ax = plt.subplots(figsize=(5.8, 3.8), layout="constrained")
    for name, values in curves.items():
        ys = np.asarray(values.detach().cpu() if hasattr(values, "detach") else values, dtype=float)
        ax.plot(xs, ys, label=name)
    ax.axhline(0.0, color="gray", linewidth=0.8)
    ax.axvline(0.0, color="gray", linewidth=0.8)
    ax.set_xlabel("input x")
    ax.set_ylabel("activation(x)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


def plot_norm_axes(batch=3, seq_len=4, d_model=6, title="Which values share one mean and variance?"):
    """A ``(B, T, d_model)`` tensor drawn as ``B*T`` rows (one per token) by ``d_model`` columns.

    Cells with the same colour are normalised together. LayerNorm: one group per token (a row,
    over d_model). BatchNorm: one group per feature (a column, over B and T). Returns the Figure.
    """
    rows = batch * seq_len
    groups = {
        "LayerNorm: one (mean, var) per token\nover the last axis d_model":
            np.repeat(np.arange(rows)[:, None], d_model, 1),
        "BatchNorm: one (mean, var) per feature\nover the batch and time axes (B, T)":
            np.repeat(np.arange(d_model)[None, :], rows, 0),
    }
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.3 * rows + 1.8), layout="constrained")
    for ax, (name, g) in zip(axes, groups.items()):
        n_groups = int(g.max()) + 1
        ax.imshow(g, cmap=plt.get_cmap("tab20", n_groups), vmin=-0.5, vmax=n_groups - 0.5, aspect="auto")
        for b in range(1, batch):
            ax.axhline(b * seq_len - 0.5, color="black", linewidth=2.5)
        ax.set_xticks(range(d_model))
        ax.set_xlabel("feature (d_model axis)")
        ax.set_yticks(range(rows))
        ax.set_yticklabels([f"b{r // seq_len} t{r % seq_len}" for r in range(rows)])
        ax.set_ylabel("token (batch b, position t)")
        ax.set_title(name, fontsize=10)
    fig.suptitle(title, fontweight="bold")
    return fig


def plot_residual_variants(title="Where the LayerNorm sits"):
    """Diagram of Post-LN ``LN(x + F(x))`` (original Transformer) and Pre-LN ``x + F(LN(x))``. Returns the Figure."""
    box, sub, add, norm = "white", "#cfe2f3", "#fff2cc", "#d9ead3"
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 5.2), layout="constrained")
    layouts = [([("x", box), ("sublayer F\n(attention or FFN)", sub), ("+", add), ("LayerNorm", norm),
                 ("output", box)], (0, 2), "Post-LN (2017 paper, BERT):\nLN(x + F(x))"),
               ([("x", box), ("LayerNorm", norm), ("sublayer F\n(attention or FFN)", sub), ("+", add),
                 ("output", box)], (0, 3), "Pre-LN (GPT-2, Llama):\nx + F(LN(x)), one final LN after the stack")]
    for ax, (steps, skip, panel_title) in zip(axes, layouts):
        flow_diagram(ax, steps, [skip], skip_label="residual\n(identity)")
        ax.set_xlim(-1.4, 1.9)
        ax.set_title(panel_title, fontsize=10)
    fig.suptitle(title, fontweight="bold")
    return fig


def plot_norm_stability(act_post, act_pre, grad_post, grad_pre, depths, last_post, last_pre,
                        title="Post-LN vs Pre-LN at initialisation (random FFN blocks)"):
    """Three panels for stacks of random residual blocks, Post-LN against Pre-LN.

    ``act_*``: RMS of the hidden state after each layer; ``grad_*``: gradient norm of each
    layer's weight (same stack); ``depths`` with ``last_*``: gradient norm of the last layer's
    weight for stacks of those depths. Returns the Figure.
    """
    layers = np.arange(1, len(act_post) + 1)
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.9), layout="constrained")
    panels = (
        (axes[0], layers, act_post, act_pre, "layer", "RMS of hidden state", "activation scale per layer"),
        (axes[1], layers, grad_post, grad_pre, "layer", "grad norm of the layer's weight", "gradient per layer"),
        (axes[2], np.asarray(depths), last_post, last_pre, "number of layers L", "grad norm, last layer",
         "last layer's gradient vs depth"),
    )
    for ax, xs, post, pre, xlabel, ylabel, name in panels:
        ax.plot(xs, np.asarray(post, dtype=float), "o-", color="tab:red", markersize=3, label="Post-LN")
        ax.plot(xs, np.asarray(pre, dtype=float), "s-", color="tab:blue", markersize=3, label="Pre-LN")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(name)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    axes[2].set_xscale("log", base=2)
    fig.suptitle(title, fontweight="bold")
    return fig
