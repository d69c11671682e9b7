"""The class report's figures (``grader.insight``): one function a figure, each returning the PNG as
base64 text for an ``<img src="data:...">``, so the page needs no file and no network.

Figure text is English, as in every figure of the course (``tutor/plots/style.py``: matplotlib's
default font has no CJK glyphs); the page around each figure says the same in the course language.
"""
import base64
import io

import matplotlib

matplotlib.use("Agg")  # no display: the report is made in a terminal or a cluster job
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

DPI = 80
MARKS = {"timeout": "T", "memory": "M", "kernel_lost": "K", "voided": "V"}  # letters in the heat map


def _png(fig):
    """The figure as base64 PNG text (no metadata: the page holds no address of any kind); closes it."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def pass_rate_chart(labels, rates, title):
    """Horizontal bars: the share of the class that passed each exercise (``rates`` in 0..1)."""
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(labels) + 1.2))
    y = np.arange(len(labels))
    ax.barh(y, [100 * r for r in rates], color=["#4c9f70" if r >= 0.5 else "#d1495b" for r in rates])
    for i, rate in enumerate(rates):
        ax.text(min(100 * rate + 1, 92), i, f"{100 * rate:.0f} %", va="center", fontsize=9)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()  # the notebook's order, top to bottom
    ax.set_xlim(0, 100)
    ax.set_xlabel("students who passed (%)")
    ax.set_ylabel("graded cell")
    ax.set_title(title)
    return _png(fig)


def score_histogram(scores, max_score, title):
    """How many students got each score of one exercise (0 to ``max_score``)."""
    fig, ax = plt.subplots(figsize=(4, 2.6))
    if float(max_score).is_integer() and max_score <= 20:  # a bar per whole score
        edges = np.arange(max_score + 2) - 0.5
        ax.set_xticks(range(int(max_score) + 1))
    else:
        edges = np.linspace(0, max_score, 11)
    ax.hist(scores, bins=edges, color="#3b6ea5", edgecolor="white", rwidth=0.9)
    ax.set_xlabel(f"score (out of {max_score:g})")
    ax.set_ylabel("students")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_title(title)
    return _png(fig)


def mistake_chart(mistakes, counts, students, title):
    """Horizontal bars: how many of ``students`` each named mistake was found in."""
    fig, ax = plt.subplots(figsize=(6, 0.4 * len(mistakes) + 1.2))
    y = np.arange(len(mistakes))
    ax.barh(y, counts, color="#d1495b")
    for i, count in enumerate(counts):
        ax.text(count, i, f" {count} ({100 * count / students:.0f} %)", va="center", fontsize=9)
    ax.set_yticks(y, mistakes)
    ax.invert_yaxis()  # the most frequent first
    ax.set_xlim(0, students * 1.25)  # the whole class, and room for the last label
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xticks([t for t in ax.get_xticks() if 0 <= t <= students])  # no tick beyond the class
    ax.set_xlabel(f"students (of {students} graded)")
    ax.set_ylabel("mistake")
    ax.set_title(title)
    return _png(fig)


def class_heatmap(students, exercises, fractions, kinds, title):
    """Students x exercises: each cell the fraction of its points scored (blank: not graded), with a
    letter for a timeout (T), the memory cap (M), a lost kernel (K) or a voided exercise (V)."""
    values = np.array(fractions, dtype=float).reshape(len(students), len(exercises))
    fig, ax = plt.subplots(figsize=(0.32 * len(exercises) + 3, 0.26 * len(students) + 2))
    image = ax.imshow(np.ma.masked_invalid(values), cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    for (i, j), kind in np.ndenumerate(np.array(kinds, dtype=object).reshape(values.shape)):
        if kind in MARKS:
            ax.text(j, i, MARKS[kind], ha="center", va="center", fontsize=8, fontweight="bold")
    ax.set_xticks(range(len(exercises)), exercises, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(students)), students, fontsize=8)
    ax.set_xlabel("graded cell")
    ax.set_ylabel("student")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.03, label="share of the points")
    return _png(fig)
