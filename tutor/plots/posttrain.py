"""Chapter 12: post-training by hand -- GRPO's reward and KL, and the form rate and shapes over steps."""
import matplotlib.pyplot as plt
import numpy as np

from .. import lang


def _steps(history, key):
    values = np.asarray(history.get(key, ()), dtype=float)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(lang.text(f"history['{key}'] 应为非空的一维序列 / history['{key}'] must be a non-empty "
                                   f"1-D sequence"))
    return np.arange(1, values.size + 1), values


def plot_reward_kl(history, title="GRPO: mean reward and KL to the reference per step"):
    """Mean reward per step (left axis) and the KL estimate to the frozen reference (right axis), as
    ``grpo_train`` records them in ``history['reward']`` and ``history['kl']``. Returns the Figure."""
    steps, reward = _steps(history, "reward")
    kl_steps, kl = _steps(history, "kl")
    fig, ax = plt.subplots(figsize=(7.0, 3.6), layout="constrained")
    ax.plot(steps, reward, color="tab:blue", lw=1.0, label="mean reward")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("mean reward of the step's samples", color="tab:blue")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax2 = ax.twinx()
    ax2.plot(kl_steps, kl, color="tab:orange", lw=1.0, label="KL to the reference (k3, per token)")
    ax2.set_ylabel("KL (nats per token)", color="tab:orange")
    lines = ax.get_lines() + ax2.get_lines()
    ax.legend(lines, [line.get_label() for line in lines], loc="center right", fontsize=8)
    ax.set_title(title)
    return fig


def plot_form_rate(history, target=99, title="GRPO: regular form and each shape's share per step"):
    """The share of each step's samples in regular form and in each shape (``history['form']`` and
    ``history['shapes']``, % per step, as ``grpo_train`` records them); ``target`` drawn dashed. A shape that
    takes over the samples shows here as one line rising and the others falling. Returns the Figure."""
    steps, form = _steps(history, "form")
    fig, ax = plt.subplots(figsize=(7.0, 3.6), layout="constrained")
    ax.plot(steps, form, color="black", lw=1.2, label="regular form")
    for (chars, lines), share in history.get("shapes", {}).items():
        ax.plot(steps, np.asarray(share, dtype=float), lw=0.8, label=f"{chars} characters x {lines} lines")
    if target is not None:
        ax.axhline(target, color="gray", ls="--", lw=0.8, label=f"{target} %")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("% of the step's samples")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    ax.set_title(title)
    return fig
