"""The look every figure shares: blocked cells grey and hatched, numbers in cells, retina inline
figures, and the small helpers that turn tensors into arrays and label axes."""
import sys

import numpy as np
from matplotlib.collections import PatchCollection
from matplotlib.colors import ListedColormap
from matplotlib.patches import Rectangle

from .. import lang

# Figure text stays in English: matplotlib's default font has no CJK glyphs.

CELL_PT = 9  # numbers written inside heatmap cells
BLOCKED = {"facecolor": "#e4e4e4", "edgecolor": "#8c8c8c", "hatch": "///"}  # a cell that may not be attended
BLOCKED_TEXT = "#555555"


def _retina_inline_figures():
    """Inline figures at twice the pixel density in IPython (same size on screen); elsewhere nothing."""
    ipython = sys.modules.get("IPython")  # imported by every IPython kernel; never imported here
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        from matplotlib_inline.config import InlineBackend

        # The inline backend reads this setting when it starts, and follows it if already started.
        InlineBackend.instance(parent=shell).figure_formats = {"retina"}


_retina_inline_figures()


def draw_blocked(ax, blocked):
    """Paint the cells where ``blocked`` (2-D bool) is True grey and hatched, over whatever is below."""
    cells = [Rectangle((j - 0.5, i - 0.5), 1, 1) for i, j in zip(*np.nonzero(blocked))]
    if cells:
        ax.add_collection(PatchCollection(cells, linewidth=0.0, **BLOCKED))


def cell_text_colour(value, vmax=1.0):
    """Black on the bright half of viridis, white on the dark half."""
    return "black" if value > 0.55 * vmax else "white"

MASK_CMAP = ListedColormap([BLOCKED["facecolor"], "#9fd89f"])  # 0 = blocked (grey, hatched on top), 1 = may attend


def as_array(x, ndim, name):
    """Tensor or array -> NumPy array of ``ndim`` dims, dropping leading size-1 axes."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    while a.ndim > ndim and a.shape[0] == 1:
        a = a[0]
    if a.ndim != ndim:
        raise ValueError(lang.text(
            f"{name} 应为 {ndim} 维（可带前导的 1 维）/ {name} must be {ndim}-D "
            f"(leading size-1 axes allowed); got shape {tuple(np.shape(a))}"
        ))
    return a


def set_ticks(ax, n_x, n_y, x_labels, y_labels):
    ax.set_xticks(range(n_x))
    ax.set_yticks(range(n_y))
    if x_labels is not None:
        ax.set_xticklabels(x_labels, rotation=45, ha="right")
    if y_labels is not None:
        ax.set_yticklabels(y_labels)


def flow_diagram(ax, steps, skips, *, side=1.0, skip_label="residual", fontsize=10):
    """A block drawn bottom to top: ``steps`` (label, colour) as boxes ("+" as a circle) joined by
    arrows, and a red residual arrow around each ``(from, to)`` span of ``skips``, at ``x = side``
    (a number for every skip, or one per skip; a negative one draws that skip on the left, so two
    skips that meet at one "+" stay two paths). The caller sets the limits and the title."""
    ys = np.arange(len(steps)) * 1.15
    for y, (label, colour) in zip(ys, steps):
        shape = "circle,pad=0.3" if label == "+" else "round,pad=0.35"
        ax.text(0.0, y, label, ha="center", va="center", fontsize=fontsize,
                bbox={"boxstyle": shape, "facecolor": colour, "edgecolor": "black"})
    for y0, y1 in zip(ys[:-1], ys[1:]):
        ax.annotate("", xy=(0.0, y1 - 0.32), xytext=(0.0, y0 + 0.32), arrowprops={"arrowstyle": "->", "color": "black"})
    sides = list(side) if isinstance(side, (list, tuple)) else [side] * len(skips)
    for (skip_from, skip_to), x in zip(skips, sides):  # the line starts under the box it leaves (boxes are on top)
        inner = 0.2 if x > 0 else -0.2
        ax.plot([inner, x, x], [ys[skip_from], ys[skip_from], ys[skip_to]], color="tab:red", linewidth=1.8)
        ax.annotate("", xy=(inner, ys[skip_to]), xytext=(x, ys[skip_to]),
                    arrowprops={"arrowstyle": "->", "color": "tab:red", "linewidth": 1.8})
        ax.text(x + (0.08 if x > 0 else -0.08), (ys[skip_from] + ys[skip_to]) / 2, skip_label, color="tab:red",
                ha="left" if x > 0 else "right", va="center", fontsize=9)
    ax.set_ylim(-0.6, ys[-1] + 0.6)
    ax.axis("off")
    return ys
