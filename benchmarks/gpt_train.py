"""Chapter 08's training target: best validation loss and seconds of the lesson's GPT run, per seed.

    .venv/bin/python benchmarks/gpt_train.py            # seeds 0 and 1
    .venv/bin/python benchmarks/gpt_train.py --seeds 0 1 2

For each seed: ``torch.manual_seed(seed)``, a fresh ``solutions.GPT`` with the recipe of lesson 08
section 6 (``RECIPE``/``TRAIN`` below), trained by ``solutions.train_gpt`` on the first 82 poems
of ``data/tang_poems.txt`` and scored on the last 10 (never seen in training). One thread, as in
the notebook. Prints the best and final validation loss, the final training loss, the seconds and
the load average (on a shared machine the seconds mean little without it). The target the
lesson states and ``tests/test_gpt_target.py`` checks: best validation loss below ``TARGET``.
"""
import argparse
import math
import os
from pathlib import Path

import torch

from solutions import GPT, CharTokenizer, train_gpt

ROOT = Path(__file__).resolve().parents[1]
RECIPE = dict(d_model=64, num_heads=4, num_kv_heads=2, d_ff=172, num_layers=2, max_len=64, dropout=0.2,
              tie_weights=True)
TRAIN = dict(block_size=32, batch_size=32, max_steps=150, lr=3e-3, warmup=30, eval_every=25)
VAL_POEMS = 10
TARGET = 6.2  # best validation loss (nats per character); uniform guessing is ln 926 = 6.83


def run(seed, progress=False):
    """Train the lesson's GPT with ``seed``; returns (history, tokenizer)."""
    text = (ROOT / "data" / "tang_poems.txt").read_text(encoding="utf-8")
    poems = text.splitlines(keepends=True)
    tokenizer = CharTokenizer(text)
    train_data = tokenizer.encode("".join(poems[:-VAL_POEMS]))  # (N_train,)
    val_data = tokenizer.encode("".join(poems[-VAL_POEMS:]))    # (N_val,)
    torch.manual_seed(seed)
    model = GPT(tokenizer.vocab_size, **RECIPE)
    return train_gpt(model, train_data, val_data, seed=seed, progress=progress, **TRAIN), tokenizer


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = parser.parse_args()
    torch.set_num_threads(1)
    for seed in args.seeds:
        history, tokenizer = run(seed)
        best = min(v for _, _, v in history["evals"])
        print(f"seed {seed}: best validation {best:.3f}, final validation {history['val_loss']:.3f}, "
              f"final train {history['evals'][-1][1]:.3f} (ln V = {math.log(tokenizer.vocab_size):.3f}); "
              f"{history['seconds']:.1f} s; target best < {TARGET}: {'met' if best < TARGET else 'MISSED'}; "
              f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
