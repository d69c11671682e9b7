# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 09 解码与开销：采样、KV 缓存、束搜索、实测注意力
#
# 第 08 章写出了 GPT 并把它训练成能写出五言、七言格式的小模型。这一章只做一件事：**怎么用它生成**，以及生成要花多少。
# 先写几种解码方法（贪心、温度、top-k、top-p），再用 **KV 缓存**（KV cache）加速生成、写束搜索，
# 最后在你自己的机器上**量一量**注意力的时间和内存，算一算真实模型的 KV 缓存有多大。
#
# **本章共 14 分**，6 个评分单元格：
#
# | 练习 | 评分单元格（grade_id） | 检查什么 | 分值 |
# | --- | --- | --- | --- |
# | `top_k_filter` | `top_k_keeps_k_largest` | 只留每行最大的 k 个 logit | 2 |
# | `top_p_filter` | `top_p_keeps_nucleus` | 概率累计到 p 的最小前缀（越过 p 的那个也留下） | 2 |
# | `sampling_probs`、`sample_next_token` | `sampling_with_generator` | 温度 → top-k → top-p → softmax → 一次 `torch.multinomial` | 2 |
# | `generate` | `kv_cache_tokens_identical` | 带 KV 缓存与不带缓存生成的 token **逐个相同** | 3 |
# | `beam_search` | `beam_search_matches_reference` | 长度归一化；结束的束不再扩展 | 3 |
# | `kv_cache_bytes` | `kv_cache_bytes_table` | 每个 token 的 KV 缓存字节数：MHA / GQA / MQA | 2 |
#
# 全章只用 CPU。第 1 节加载第 08 章训练好的模型（几秒；找不到它时才按第 08 章的配方重新训练，要几分钟，有进度条），
# 其余单元格合计一两分钟。

# %%
# Setup: imports, seeds, threads, and warning filters (so that a library warning does not clutter a check's report).
import copy
import math
import os
import time
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import tutor
from tutor.plots import plot_attention_cost, plot_mask_row

warnings.filterwarnings("ignore")
np.random.seed(0)
torch.manual_seed(0)
torch.set_printoptions(precision=3, sci_mode=False)
FINISH_FIRST = "完成上面的练习后再运行 / finish the exercise above first"
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # nbgrader validate/autograde: no training
torch.set_num_threads(1)  # one thread: robust on a busy machine, and the same numbers on every run
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2  # the copy task's special tokens (chapter 07), for section 4
DATA = Path(tutor.__file__).resolve().parents[1] / "data"  # the course's data/ folder, wherever this notebook runs

# %% [markdown]
# 下面是前几章的参考实现（折叠着的只读单元格，提供给你使用，不计分）：第 01 章的注意力、第 05 章的掩码、第 06、07 章的 `Transformer`
# 和复制任务（第 4 节在复制任务上做束搜索），以及第 08 章的 `GPT`、分词器和训练循环。

# %% provided="earlier"

# %% [markdown]
# ## 1. 第 08 章的模型
#
# 与第 08 章相同的语料、分词器、验证集划分和训练配方：3 层、$d = 128$、GQA 4/2，
# 窗口 80、批 16，1300 步。第 08 章的训练单元格把训练好的权重存进了同一个文件夹里的 `gpt_poems.pt`：这里直接加载它（几秒），
# 用的就是你在第 08 章训练出的模型。找不到这个文件（没跑过第 08 章的训练，或在别的文件夹里），就用同样的种子和配方重新训练（几分钟），
# 得到的是第 08 章的代码写对时训练出的那个模型。训练前先留一份随机初始化的副本，第 3 节比较训练前后的样本。
# 评分（nbgrader）时不训练也不加载：要用训练好的模型的演示评分时跳过，其余的在随机初始化的模型上照样能运行。
# 与第 08 章一样，有 GPU 时模型放在 `pick_device()` 选出的 GPU 上，有 CUDA 时用第 08 章的 GPU 配置；下面的单元格打印设备和配置。
# 生成时提示词和 `torch.Generator` 都要建在模型所在的设备上（`torch.Generator(device=DEVICE)`）：随机数在哪个设备上抽，生成器就得在哪里。

# %%
VAL_POEMS = 1000
DEVICE = pick_device()                                                     # CUDA, or Apple's MPS, when present; otherwise the CPU
GPU_RECIPE = DEVICE.type == "cuda"                                         # chapter 08's bigger recipe
BEAM_DEVICE = torch.device("cpu") if DEVICE.type == "mps" else DEVICE      # beam_search sums in float64, which MPS lacks
MAX_STEPS = 0 if GRADING else 2000 if GPU_RECIPE else 1300
# Two threads train this model ~1.8x faster than one on an idle 2-core machine. A thread count can change the
# order of float additions, so training always takes two (one on a 1-core machine): the same numbers, busy or idle.
TRAIN_THREADS = min(2, os.cpu_count() or 1)
CHECKPOINT = Path("gpt_poems.pt")  # written by chapter 08's training cell, in the folder of both notebooks
print(f"device: {DEVICE}; recipe: {'GPU' if GPU_RECIPE else 'CPU'} (chapter 08, section 7)")
tokenizer = model = untrained_model = None
try:
    poems = load_poems(DATA / "tang_poems.txt")
    tokenizer = CharTokenizer("".join(poems))
    train_data = tokenizer.encode("".join(poems[:-VAL_POEMS]))  # (N_train,)
    val_data = tokenizer.encode("".join(poems[-VAL_POEMS:]))    # (N_val,)
    torch.manual_seed(0)
    if GPU_RECIPE:
        model = GPT(tokenizer.vocab_size, d_model=384, num_heads=4, num_kv_heads=2, d_ff=1024, num_layers=6,
                    max_len=128, dropout=0.1, tie_weights=False).to(DEVICE)
        recipe = dict(block_size=128, batch_size=64, lr=2e-3, eval_every=100)
    else:
        model = GPT(tokenizer.vocab_size, d_model=128, num_heads=4, num_kv_heads=2, d_ff=344, num_layers=3,
                    max_len=128, dropout=0.0, tie_weights=False).to(DEVICE)
        recipe = dict(block_size=80, batch_size=16, lr=5e-3, eval_every=260)
    untrained_model = copy.deepcopy(model).eval()                          # kept for the samples of section 3
    if MAX_STEPS:
        try:
            model.load_state_dict(torch.load(CHECKPOINT, map_location=DEVICE))  # chapter 08's trained model
            print(f"loaded chapter 08's trained model from {CHECKPOINT}")
        except (FileNotFoundError, RuntimeError):                          # none (or another model): train it here
            torch.set_num_threads(TRAIN_THREADS)
            try:
                train_gpt(model, train_data, val_data, **recipe, max_steps=MAX_STEPS, warmup=20, seed=0)
            finally:
                torch.set_num_threads(1)
        model.eval()
        print(f"vocab_size V = {tokenizer.vocab_size}; "
              f"validation loss ~{estimate_loss(model, val_data, recipe['block_size']):.2f} after {MAX_STEPS} steps")
    else:
        model.eval()
        print("评分时不训练 / not trained while grading")
except ValueError as err:  # the corpus file is missing or damaged: one line says how to get it back
    print(err)

# %% [markdown]
# ## 2. 解码：贪心、温度、top-k、top-p
#
# 每一步拿到最后一个位置的 logits $z \in \mathbb{R}^V$，怎么选下一个 token？
#
# - **贪心（greedy）**：取 $\arg\max$。确定、但容易重复打转。
# - **温度（temperature）** $\tau$：从 $\mathrm{softmax}(z/\tau)$ 采样。$\tau \to 0$ 趋于贪心，$\tau = 1$ 是模型原本的分布，$\tau > 1$ 更平、更“放飞”。
#   除的是 **logits**，不是概率。
# - **top-k**：只留最大的 $k$ 个 logit，其余设为 $-\infty$ 再 softmax。
# - **top-p（nucleus）**：把概率从大到小排，保留累计概率**达到** $p$（$\ge p$）的最小前缀——越过 $p$ 的那个 token 也留下，最大的那个永远留下。
#   分布尖时只留一两个，分布平时留很多：比固定的 $k$ 更自适应。
#   判断规则（本课程的约定，与检查和参考实现相同）：一个 token **之前**（比它大的那些）的累计概率已经 $\ge p$，它就被丢掉。
#   恰好等于 $p$ 也算达到：概率 0.5、0.3、0.15、0.05，$p = 0.8$ 时 $0.5 + 0.3 = 0.8$，只留前两个（比较用 $\ge$，不是 $>$；
#   下面的可见测试有这一条）。
#
# 顺序与 Hugging Face 的 `generate` 相同：温度 → top-k → top-p → softmax → 一次 `torch.multinomial`。随机数全部来自传入的
# `torch.Generator`：同一个种子，同样的 token——测试和复现都靠它。
#
# 练习 1：写 `top_k_filter`、`top_p_filter`、`sampling_probs`、`sample_next_token`。

# %% exercise="top_k_filter"

# %% grade_id="top_k_keeps_k_largest" points=2 check="top_k_filter:top_k_filter"
# Visible tests: a hand-checkable row, k >= V, ties at the boundary. Removed = -inf or the dtype's most negative number.
_removed = lambda t: t <= torch.finfo(t.dtype).min
_z = torch.tensor([[1.0, 3.0, 2.0, 0.5]])
_f = top_k_filter(_z, 2)
assert torch.equal(_removed(_f), torch.tensor([[True, False, False, True]])), f"应只留 3.0 和 2.0 / must keep 3.0 and 2.0 only, got {_f}"
assert torch.equal(_f[0, 1:3], _z[0, 1:3]), "留下的 logit 不应改变 / kept logits must be unchanged"
assert torch.equal(top_k_filter(_z, 10), _z), "k >= V 时不变 / k >= V leaves the row unchanged"
assert not _removed(top_k_filter(torch.tensor([[2.0, 1.0, 1.0]]), 2)).any(), "与第 k 大相等的都留下 / ties with the k-th are kept"

# %% exercise="top_p_filter"

# %% grade_id="top_p_keeps_nucleus" points=2 check="top_p_filter:top_p_filter"
# Visible tests: probabilities 0.5, 0.3, 0.15, 0.05 (as logits). Removed = -inf or the dtype's most negative number.
_removed = lambda t: t <= torch.finfo(t.dtype).min
_z = torch.log(torch.tensor([[0.15, 0.5, 0.05, 0.3]]))
assert torch.equal(_removed(top_p_filter(_z, 0.7)), torch.tensor([[True, False, True, False]])), \
    "p=0.7：0.5 还不够，0.5+0.3 越过 0.7，留下这两个 / p=0.7 keeps 0.5 and 0.3 (the token that crosses p is kept)"
assert torch.equal(_removed(top_p_filter(_z, 0.8)), torch.tensor([[True, False, True, False]])), \
    "p=0.8：0.5+0.3 恰好达到 0.8，不再多留 / p=0.8: 0.5+0.3 reaches 0.8, nothing more"
assert _removed(top_p_filter(_z, 0.1)).sum() == 3, "最大的 token 永远留下 / the top token is always kept"
assert torch.equal(top_p_filter(_z, 1.0), _z), "p=1 时不变 / p=1 leaves the row unchanged"

# %% exercise="sampling_probs,sample_next_token"

# %% grade_id="sampling_with_generator" points=2 check="sample_next_token:sample_next_token"
# Visible tests: rows sum to 1, filtered tokens get 0, temperature 0 is greedy, a fixed generator repeats.
_z = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.0, 0.0, 3.0, 0.0]])
_p = sampling_probs(_z, temperature=0.5, top_k=2)
assert torch.allclose(_p.sum(-1), torch.ones(2)) and (_p[0, 2:] == 0).all(), "每行和为 1，被过滤的概率为 0 / rows sum to 1, filtered tokens 0"
assert torch.allclose(_p[0, :2], torch.softmax(torch.tensor([4.0, 2.0]), -1)), "温度除的是 logits / temperature divides the logits"
assert sample_next_token(_z, temperature=0.0).tolist() == [0, 2], "温度 0 即贪心 / temperature 0 is greedy"
_a = sample_next_token(_z.repeat(50, 1), generator=torch.Generator().manual_seed(7))
_b = sample_next_token(_z.repeat(50, 1), generator=torch.Generator().manual_seed(7))
assert torch.equal(_a, _b) and _a.shape == (100,), "同一个 generator 种子应得到同样的 token / the same generator seed must give the same tokens"

# %% [markdown]
# 同一个训练好的模型，同一个开头，不同的解码方式：

# %%
def show_samples(model, prompt_text, max_new_tokens=40):
    """Continuations of one prompt under several decoding settings (generators seeded alike)."""
    prompt = tokenizer.encode(prompt_text)[None, :].to(DEVICE)  # (1, T0)
    settings = [("greedy", {}), ("temperature 0.8", {"temperature": 0.8}),
                ("temperature 1.5", {"temperature": 1.5}), ("top-k 5", {"temperature": 1.0, "top_k": 5}),
                ("top-p 0.9", {"temperature": 1.0, "top_p": 0.9})]
    for name, kwargs in settings:
        out = generate(model, prompt, max_new_tokens, generator=torch.Generator(device=DEVICE).manual_seed(0), **kwargs)
        print(f"{name:>16}: {tokenizer.decode(out[0]).replace(chr(10), ' ↵ ')}")  # ↵: a newline


# %% [markdown]
# ## 3. 生成与 KV 缓存
#
# 生成 $n$ 个 token，不用缓存时每一步都把整个前缀重新过一遍模型：第 $t$ 步的开销正比于 $t$，总共 $O(n^2)$ 次 token 计算。
# 但前缀里每个位置的 K、V 在之后**不会变**（因果掩码：前面的位置看不到后面），算一次存起来即可：
# 先把提示词（prompt）整个过一遍 `forward_cached` 得到缓存，之后每步只喂**一个**新 token。
#
# 带缓存和不带缓存生成的 token 必须**逐个相同**（贪心时；采样时 generator 种子相同也一样）。不相同就是 bug，
# 流行的实现里出现过的有：新 token 的 RoPE 位置从 0 算起、缓存的是复制之后的 K/V 却按组数切片、每步的掩码没有让新 token 看到全部缓存、
# 把提示词的最后一个 token 喂了两次。
#
# 练习 2：写 `generate(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None, use_cache=True)`。

# %% exercise="generate"

# %% grade_id="kv_cache_tokens_identical" points=3 check="generate:generate"
# Visible tests: length, the prompt kept, and cached == uncached, greedy and sampled.
torch.manual_seed(4)
_gpt = GPT(13, d_model=16, num_heads=4, num_kv_heads=2, d_ff=24, num_layers=2, max_len=32).eval()
_prompt = torch.randint(0, 13, (2, 3))
_plain = generate(_gpt, _prompt, 10, use_cache=False)
_cached = generate(_gpt, _prompt, 10, use_cache=True)
assert _plain.shape == (2, 13) and torch.equal(_plain[:, :3], _prompt), \
    f"应返回 (B, T0 + n) 且保留提示词 / must return (B, T0 + n) with the prompt, got {tuple(_plain.shape)}"
assert torch.equal(_plain, _cached), f"带缓存与不带缓存的 token 应逐个相同 / cached and uncached tokens must be identical:\n{_plain}\n{_cached}"
_s1 = generate(_gpt, _prompt, 10, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(1), use_cache=False)
_s2 = generate(_gpt, _prompt, 10, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(1), use_cache=True)
assert torch.equal(_s1, _s2), "采样时（同一个种子）也应逐个相同 / sampling with the same seed must give identical tokens too"

# %% [markdown]
# 训练前后的对比：同一个开头“春风”，同样的解码方式，先是训练前的模型（随机初始化），再是训练后的。

# %%
if GRADING:
    print("评分时跳过 / skipped while grading")
elif model is not None:
    try:
        print("before training")
        show_samples(untrained_model, "春风")
        print("after training")
        show_samples(model, "春风")
    except NotImplementedError:
        print(FINISH_FIRST)
else:
    print(FINISH_FIRST)

# %% [markdown]
# 训练前，温度 0.8、温度 1.5 和 top-p 0.9 的样本大部分字都相同——这不是温度没起作用的 bug。随机初始化的模型 logits 都很小、彼此相差不大，
# 除以 0.8 还是除以 1.5，softmax 后都接近均匀分布（top-p 0.9 也只去掉最不可能的一成）；几次生成的 generator 用的是同一个种子，
# `torch.multinomial` 拿到的是**同一串随机数**，在几乎相同的分布上，同一个随机数多半落在同一个 token 上。
# 训练后分布尖锐了，温度才真正改变分布，样本也就分开了。要看温度的效果，得在训练好的模型上比较（或者给几次生成不同的种子）。
#
# 读训练后的样本：训练前是在词表里随机乱抽字（词表里大多数字都少见，抽出来也就多是少见的字）；训练后，五字或七字一句、逗号句号交替、写完换行另起一首的格式出来了
# （下面按格式打分的单元格给出数字），用字也像唐诗。但句子大多不通——上面的验证损失说的正是这一点。
# 贪心解码和 top-k 5 容易陷进重复（同几个字翻来覆去）；温度 1.5 的分布太平，生僻字又多了起来。
#
# 按格式打分：一批采样 100 首（温度 0.7、top-p 0.9，一个固定种子），
# 数一数有几首是“至少 4 句，每句一样长、5 或 7 个字、逗号句号交替”的（`is_regular_poem`）。
# 提示词是“。”加换行——上一首诗的结尾。训练窗口从文本的任意位置开始，模型学会的是“在一首诗结束之后”开始下一首，
# 所以提示词也给它这样一个开头。

# %%
if GRADING:
    print("评分时跳过 / skipped while grading")
elif model is not None:
    try:
        _n = 100                                                                                  # one batch of poems
        _start = tokenizer.encode("。\n").repeat(_n, 1).to(DEVICE)                                # (n, 2)
        _out = generate(model, _start, 65, temperature=0.7, top_p=0.9, generator=torch.Generator(device=DEVICE).manual_seed(0))  # (n, 67)
        _samples = [tokenizer.decode(_row[2:]).split("\n")[0] for _row in _out]
        for _poem in _samples[:6]:
            print(("regular  " if is_regular_poem(_poem) else "irregular") + " | " + _poem)
        _regular = sum(map(is_regular_poem, _samples))
        print(f"~{_regular} of {_n} samples in regular form")
        print("target (chapter 08, section 9) at least 90 % regular:", "met" if _regular >= 0.9 * _n else "not met")
    except NotImplementedError:
        print(FINISH_FIRST)
else:
    print(FINISH_FIRST)

# %% [markdown]
# 实测：在训练好的模型上各生成 48 个 token，比较两种方式的 token 与耗时（各取 3 次里最快的一次）。

# %%
if GRADING:
    print("评分时跳过 / skipped while grading")
elif model is not None:
    try:
        _prompt = tokenizer.encode("春风")[None, :].repeat(4, 1).to(DEVICE)  # (4, 2)
        _times = {}
        for _use_cache in (False, True):
            _best = float("inf")
            for _ in range(3):
                _start = time.perf_counter()
                _out = generate(model, _prompt, 48, use_cache=_use_cache).cpu()  # .cpu(): waits for a GPU to finish
                _best = min(_best, time.perf_counter() - _start)
            _times[_use_cache] = (_best, _out)
        print(f"identical tokens: {torch.equal(_times[False][1], _times[True][1])}")
        print(f"48 new tokens: uncached {1e3 * _times[False][0]:.1f} ms, cached {1e3 * _times[True][0]:.1f} ms, "
              f"speed-up {_times[False][0] / _times[True][0]:.1f}x")
    except NotImplementedError:
        print(FINISH_FIRST)
else:
    print(FINISH_FIRST)

# %% [markdown]
# 加速比不大：模型这么小、序列这么短，每步的固定开销（Python 循环、小矩阵乘、拼接缓存）占了大头。序列越长，省下的重算越多
# （不用缓存时总计算量随生成长度平方增长，用缓存时线性增长）：把上面的 48 改成 16 或 62 再跑一次，比一比加速比。
# 大模型、长序列、GPU 上，KV 缓存是所有生成式推理的标配。

# %% [markdown]
# ### 推理时忘了因果掩码，会怎样？
#
# 一种常见的误解：“生成时只看最后一个位置，而最后一个位置本来就能看到全部，所以推理时掩码可有可无。”
# 只有一层时这话成立：最后一个位置的查询本来就看得到所有键。从**第二层**起就不成立了：第二层里最后一个位置读的是前面位置在第一层的输出，
# 而没有掩码时，那些输出已经“偷看”了它们之后的 token，与训练时的分布不同；用 KV 缓存时，这些被污染的 K、V 还被存进缓存，之后每一步都在用。
# 下面用训练好的（3 层）模型跑两件事：(1) 对 64 个训练窗口整段打分（算困惑度、或者生成前把提示词整段过一遍——prefill——都是这样），
# 有掩码和没掩码各一次；(2) 提示词不加掩码地建缓存，再照常逐个生成，与正确的生成比较。

# %% demo=true
def prefill_without_mask(model, idx):
    """Run the prompt through the blocks with no mask (the bug) and return (logits, caches) like forward_cached."""
    x = model.tok_embed(idx)  # (B, T, d_model)
    caches = []
    for block in model.blocks:
        x, cache = block(x, None, None)  # every query sees every key of the prompt
        caches.append(cache)
    return model.lm_head(model.norm(x)), caches  # (B, T, V)


if model is not None:
    try:
        _x, _y = (t.to(DEVICE) for t in next_token_batch(train_data, 32, 64, torch.Generator().manual_seed(5)))  # (64, 32) each
        with torch.no_grad():
            _masked, _unmasked = model(_x), prefill_without_mask(model, _x)[0]             # (64, 32, V) each
        _ce = lambda logits: F.cross_entropy(logits.reshape(-1, logits.size(-1)), _y.reshape(-1)).item()
        _tv = 0.5 * (_masked[:, -1].softmax(-1) - _unmasked[:, -1].softmax(-1)).abs().sum(-1).mean().item()
        print(f"64 training windows: loss with the mask ~{_ce(_masked):.3f}, without ~{_ce(_unmasked):.3f}; "
              f"arg-max predictions that change: ~{(_masked.argmax(-1) != _unmasked.argmax(-1)).float().mean().item():.1%}; "
              f"last position only: total variation ~{_tv:.3f}")
        _prompt = tokenizer.encode("白日依山尽，黄河")[None, :].to(DEVICE)  # (1, 8)
        with torch.no_grad():
            _logits, _caches = prefill_without_mask(model, _prompt)
            _tokens = [_logits[:, -1].argmax(-1)]
            for _ in range(15):
                _logits, _caches = model.forward_cached(_tokens[-1][:, None], _caches)
                _tokens.append(_logits[:, -1].argmax(-1))
        _right = generate(model, _prompt, 16)
        print("with the causal mask:   ", tokenizer.decode(_right[0]))
        print("prompt without the mask:", tokenizer.decode(torch.cat([_prompt[0], torch.stack(_tokens)[:, 0]])))
        print(f"generated tokens that differ: ~{(_right[0, 8:] != torch.stack(_tokens)[:, 0]).sum().item()} of 16")
    except NotImplementedError:
        print(FINISH_FIRST)
else:
    print(FINISH_FIRST)

# %% [markdown]
# 读数：整段打分时，没有掩码的每个位置都“看见了答案”之后的字，却没被训练过怎么用它们，损失反而变差（上面第一行的两个损失），
# 过半的预测变了——任何要用到每个位置输出的地方（困惑度评估、prefill、打分排序）都会错。对最后一个位置，这个 3 层的小模型差得少得多
# （总变差距离（total variation distance）：0 = 分布相同，1 = 完全不重叠；上面第一行最后一个数），但这点差别足以让贪心生成
# 在十几个字里就分岔（上面最后三行）；层数越多、模型越依赖上下文，偏差越大。
# 差一点点也是错：缓存里存下的第 2 层 K、V 已经与训练时的计算不同，这类 bug 不会报错，只会让输出悄悄变差。
# 推理与训练必须用同一个掩码；最稳妥的写法就是像 `GPT.forward_cached` 那样，在模型内部根据位置自己构造掩码。

# %% [markdown]
# ## 4. 束搜索（beam search）
#
# 贪心每步只留一个最好的；束搜索每步保留 $k$ 个（束宽 beam size）累计对数概率最高的前缀：每个活着的束 × 每个 token 打分
# $\sum \log p$，取最好的 $k$ 个；以 EOS 结尾的束**结束**，不再扩展（常见 bug：结束的束继续被扩展，或者一直占着名额）。
# 对数概率只减不增，所以原始的和偏爱**短**输出；**长度归一化**（length normalisation）用 $\sum \log p \,/\, n^{\alpha}$ 比较候选
# （$n$ 是生成的 token 数，含 EOS；$\alpha = 0$ 不归一化，常用 0.6–1。GNMT 用的是另一种长度惩罚 $\big((5 + n)/6\big)^{\alpha}$，作用相同）。
#
# **走一步看看。** 束宽 $k = 2$，词表 3 个 token（0 是 EOS），就用下面可见测试里的那张表：第一步的概率是 0.5、0.4、0.1；
# 接在 1 后面是 0.01、0.09、0.9；其余情况下一定是 EOS（$\log p = 0$）。
#
# | 步 | 存活的束（$\sum \log p$） | 分数摊平成 $N \cdot V$ 个 | `topk` 的下标 $i$ → 束 $i /\!/ V$、token $i \% V$ | 结果 |
# | --- | --- | --- | --- | --- |
# | 1 | `[9]`（0） | $-0.69,\ -0.92,\ -2.30$ | 0 → (0, 0)；1 → (0, 1) | `[9, 0]` **结束**（$-0.69$）；存活 `[9, 1]`（$-0.92$） |
# | 2 | `[9, 1]`（$-0.92$） | $-5.52,\ -3.32,\ -1.02$ | 2 → (0, 2)；1 → (0, 1) | 存活 `[9, 1, 2]`（$-1.02$）、`[9, 1, 1]`（$-3.32$） |
# | 3 | 上面两个 | $-1.02,\ -31,\ -31,\ -3.32,\ -33,\ -33$ | 0 → (0, 0)；3 → (1, 0) | 两个都以 EOS 结尾；结束的已有 3 个 $\ge k$，停止 |
#
# 最后在所有结束的（和还存活的）束里选：`[9, 0]` 的和是 $-0.69$（$n = 1$），`[9, 1, 2, 0]` 是 $-1.02$（$n = 3$），`[9, 1, 1, 0]` 是 $-3.32$。
# $\alpha = 0$ 比原始的和，$-0.69$ 最大，选了立刻结束的 `[9, 0]`；$\alpha = 1$ 比平均每个 token 的对数概率：$-0.69$、$-0.34$、$-1.11$，
# 选 `[9, 1, 2, 0]`。摊平后的下标 `i` 同时编码了“哪个束”和“接哪个 token”：`i // V` 和 `i % V`；结束的束从存活的束里拿掉，
# 存入结束列表，之后不再扩展。
#
# `beam_search(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha)` 不关心模型是什么：`step_fn(ys)` 给出 `N` 个前缀的下一个 token 的
# 对数概率 `(N, V)`。下面提供了两个：`gpt_step_fn(model)`（本章的 GPT）和 `transformer_step_fn(model, src)`（第 06/07 章的编码器-解码器）。

# %% provided="gpt_step_fn,transformer_step_fn"

# %% [markdown]
# 练习 3：写 `beam_search`。

# %% exercise="beam_search"

# %% grade_id="beam_search_matches_reference" points=3 check="beam_search:beam_search"
# Visible tests: a two-step table where greedy and beam search disagree, and a finished beam that stops.
_table = {(): [math.log(0.5), math.log(0.4), math.log(0.1)],   # token 0 = EOS; first step: p = .5, .4, .1
          (1,): [math.log(0.01), math.log(0.09), math.log(0.9)]}  # after 1: p = .01, .09, .9; anything else: EOS
def _step(ys):
    return torch.tensor([_table.get(tuple(row.tolist()[1:]), [0.0, -30.0, -30.0]) for row in ys])  # (N, 3)
_tokens, _score = beam_search(_step, torch.tensor([9]), beam_size=2, max_new_tokens=3, eos_id=0)
assert _tokens.tolist() == [9, 0], f"alpha=0 时 EOS（0.5）胜过 1,2,EOS（0.36）/ with alpha=0, EOS (0.5) beats 1,2,EOS (0.36); got {_tokens.tolist()}"
assert abs(_score - math.log(0.5)) < 1e-6, f"分数应为 log 0.5 / score must be log 0.5, got {_score}"
_tokens, _score = beam_search(_step, torch.tensor([9]), beam_size=2, max_new_tokens=3, eos_id=0, alpha=1.0)
assert _tokens.tolist() == [9, 1, 2, 0], f"alpha=1 时长度归一化选 1,2,EOS / with alpha=1 the normalised score picks 1,2,EOS; got {_tokens.tolist()}"

# %% [markdown]
# 在本章的 GPT 上（“EOS”取换行：一首诗写完了），束宽 4，看 $\alpha = 0$ 和 $\alpha = 1$ 选出什么：

# %% demo=true
if model is not None:
    try:
        _newline = tokenizer.encode("\n").item()
        model.to(BEAM_DEVICE)                                                 # the CPU instead of MPS (float64)
        _prompt = tokenizer.encode("明月").to(BEAM_DEVICE)
        for _alpha in (0.0, 1.0):
            _tokens, _score = beam_search(gpt_step_fn(model), _prompt, beam_size=4, max_new_tokens=30, eos_id=_newline, alpha=_alpha)
            print(f"beam 4, alpha {_alpha}: {tokenizer.decode(_tokens).strip()!r}  (score ~{_score:.2f})")
        print("greedy           :", repr(tokenizer.decode(generate(model, _prompt[None, :], 30)[0]).split(chr(10))[0]))
    except NotImplementedError:
        print(FINISH_FIRST)
else:
    print(FINISH_FIRST)

# %% [markdown]
# $\alpha = 0$ 选的是很短的“明月。”：没写诗，接着就换行结束了（换行就是这里的 EOS）。这不是 bug，而是**找最可能的序列**这件事本身的结果：
# 每多一个 token 就多乘一个小于 1 的概率，原始的和偏爱短输出；诗里的字又本来就难猜——验证损失约 5.2 nats/字（第 1 节打印的），
# 一首 20 多个字的诗要付 20 多次这样的代价，比不过“。”接换行这两个很可能的 token。
# $\alpha = 1$ 比的是平均每个 token 的对数概率，减轻了这种偏爱，但上面第二行同样远不到一首完整的律诗或绝句：长度归一化不能消除对短输出的偏爱。
# Holtzman 等人（2020，*The Curious Case of Neural Text Degeneration*）指出：对开放式生成，最大化概率的解码（贪心、束搜索）会得到短、平淡、
# 重复的文本，而人写的文本并不是模型眼里最可能的那一个；所以写诗、对话这类任务用采样（top-p 就出自这篇论文），束搜索留给答案基本确定的任务。
#
# 在第 07 章的复制任务上：先用第 07 章的配方训练一个复制模型（这里最多 400 步），再比较贪心与束搜索。
# 复制任务的答案是唯一的，训练好的模型很自信，束搜索和贪心给出同样的结果；束搜索的用武之地是答案不唯一、贪心会“走错第一步”的任务（如翻译）。

# %%
if GRADING:
    print("评分时跳过 / skipped while grading")
elif model is not None:
    try:
        torch.manual_seed(0)
        copy_model = Transformer(13, 13, d_model=64, num_heads=4, d_ff=128, num_layers=1, dropout=0.0, max_len=64).to(DEVICE)
        _eval_src, _, _eval_tgt = make_copy_batch(200, 13, 10, 10, torch.Generator().manual_seed(10_000))
        _h = train_copy_model(copy_model, vocab_size=13, min_len=1, max_len=10, eval_src=_eval_src, eval_tgt=_eval_tgt,
                              batch_size=128, max_steps=400, lr_factor=1.0, warmup=100, eval_every=50, seed=0, target=0.99)
        print(f"copy model: greedy exact match on 200 held-out ~{_h['exact_match']:.3f} after ~{_h['steps']} steps")
        copy_model.to(BEAM_DEVICE)                                            # the CPU instead of MPS (float64)
        _src, _, _tgt = (t.to(BEAM_DEVICE) for t in make_copy_batch(5, 13, 3, 8, torch.Generator().manual_seed(7)))
        for _i in range(5):
            _beam, _ = beam_search(transformer_step_fn(copy_model, _src[_i:_i + 1]), torch.tensor([BOS_ID], device=BEAM_DEVICE), 3, 11, EOS_ID, alpha=1.0)
            _greedy = copy_model.greedy_decode(_src[_i:_i + 1], BOS_ID, EOS_ID, 11)[0]
            print(f"src {_src[_i].tolist()}  beam {_beam[1:].tolist()}  greedy == beam: {_greedy[:len(_beam)].tolist() == _beam.tolist()}")
    except NotImplementedError:
        print(FINISH_FIRST)
else:
    print(FINISH_FIRST)

# %% [markdown]
# ## 5. 实测开销：朴素注意力 vs 融合内核
#
# 第 01 章的 `scaled_dot_product_attention` 把 $T \times T$ 的分数矩阵和权重矩阵**实实在在地**存了下来（materialise）；
# `F.scaled_dot_product_attention` 在 CPU 上用分块的融合内核（fused kernel，FlashAttention 的思路：按块算 softmax，不存整张矩阵）。
# 下面在一个头数 4、$d_k = 64$ 的因果注意力上，T 从 128 翻倍到 4096，量每次调用的时间，以及进程驻留内存（RSS）的峰值比调用前多了多少
# （`peak_memory_increase`，Linux 上读 `/proc/self/status`；其他系统显示 nan）。

# %% provided="peak_memory_increase"

# %%
cost_T = [128, 256] if GRADING else [128, 256, 512, 1024, 2048, 4096]  # grading: only that it runs
cost = {"naive_s": [], "fused_s": [], "naive_b": [], "fused_b": []}
for _T in cost_T:
    _q, _k, _v = (torch.randn(1, 4, _T, 64, generator=torch.Generator().manual_seed(i)) for i in range(3))  # (B, H, T, d_k)
    _mask = make_subsequent_mask(_T)                                                                      # (1, 1, T, T)
    _naive = lambda q=_q, k=_k, v=_v, mask=_mask: scaled_dot_product_attention(q, k, v, mask)
    _fused = lambda q=_q, k=_k, v=_v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(_naive()[0], _fused(), atol=1e-4)  # the same attention
    for _name, _fn in (("naive", _naive), ("fused", _fused)):
        cost[f"{_name}_b"].append(peak_memory_increase(_fn))
        _start = time.perf_counter()
        _fn()
        cost[f"{_name}_s"].append(time.perf_counter() - _start)
for _i, _T in enumerate(cost_T):
    print(f"T={_T:>5}: naive ~{cost['naive_b'][_i] / 2**20:.0f} MiB, {1e3 * cost['naive_s'][_i]:.1f} ms | "
          f"fused ~{cost['fused_b'][_i] / 2**20:.0f} MiB, {1e3 * cost['fused_s'][_i]:.1f} ms | "
          f"naive/fused time {cost['naive_s'][_i] / cost['fused_s'][_i]:.1f}x")
print(f"one T x T float32 matrix for 4 heads at T={cost_T[-1]}: {4 * cost_T[-1] ** 2 * 4 / 2**20:.0f} MiB")
plot_attention_cost(cost_T, cost["naive_s"], cost["fused_s"], cost["naive_b"], cost["fused_b"],
                    title="Causal attention, B=1, H=4, d_k=64, float32, on this CPU (log-log)")
plt.show()

# %% [markdown]
# 读图：朴素注意力的内存随 $T^2$ 增长（斜率 2 的虚线），峰值是**几张** $4 \times T \times T$ 的 float32 矩阵同时存在（分数、填了掩码的分数、softmax 后的权重；
# 实测大 T 时约 3 张，小 T 时内存分配器复用已释放的页，量出来偏小甚至为 0）；
# 融合内核几乎不要额外内存（分块算完就扔）。时间上两者都是 $O(T^2 d)$ 的计算量，斜率都趋近 2；融合内核快的是常数（少读写内存）。
# 你机器上的具体数字会不同；形状（斜率）不会。读上面打印的几行：
#
# T 翻倍，朴素注意力的额外内存约翻四倍；T = 4096 时约是 3 张 256 MiB 的矩阵（最后一行打印了一张的大小）。
# 时间比（最后一列）在很多 CPU 上到 T = 2048 前后陡增：矩阵大过 CPU 缓存，时间花在搬内存上，这正是融合内核省下的部分。
#
# ### 自己估算注意力矩阵占多少内存，哪些推理对？
#
# 一个很自然的推理：序列长度 $n$ 时，每层每个头的注意力矩阵是 $n^2$ 个数；fp16 下 $n = 2048$ 每个头 8 MiB，$n = 32\text{k}$ 每个头 2 GiB，
# 再乘上头数和层数，所以“长上下文训练不可能”。逐条看：
#
# 1. **$n^2$ 个数、fp16 每个 2 字节**：对——$2048^2 \times 2 = 8$ MiB，$32768^2 \times 2 = 2$ GiB，上面实测的斜率 2 也印证了 $n^2$。
# 2. **乘上头数和层数就是总占用**：只在**朴素实现、训练时为反向传播把每层的权重都存下来**时对。推理时一层算完就扔，峰值只有一层的量。
# 3. **“所以长上下文不可能”**：不对。融合内核（FlashAttention，PyTorch 的 `F.scaled_dot_product_attention`）从不存整张矩阵，
#    反向时重算；上面实测它的额外内存几乎为 0。长上下文真正的内存大头变成了 KV 缓存——下一节。
#
# ## 6. KV 缓存有多大：MHA vs GQA vs MQA
#
# 每个 token、每层、每个 K/V 头存一个 key 和一个 value，各 $d_k$ 个数：
#
# $$
# \text{bytes per token} = 2 \times N_{\text{layers}} \times G \times d_k \times \text{bytes per value}
# $$
#
# MHA 的 $G = H$，GQA 的 $G$ 是组数，MQA 的 $G = 1$。
#
# 练习 4：写 `kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len=1, batch=1, bytes_per_element=2)`。

# %% exercise="kv_cache_bytes"

# %% grade_id="kv_cache_bytes_table" points=2 check="kv_cache_bytes:kv_cache_bytes"
# Visible tests: one layer by hand, the 2 for K and V, and the linear factors.
assert kv_cache_bytes(1, 1, 1) == 4, f"1 层 1 头 d_k=1 fp16：K 和 V 各 2 字节 / 1 layer, 1 head, d_k=1: 4 bytes, got {kv_cache_bytes(1, 1, 1)}"
assert isinstance(kv_cache_bytes(2, 8, 128), int), "应返回 Python int / must return a Python int"
assert kv_cache_bytes(32, 8, 128) == 131072, f"32 层、8 个 K/V 头、d_k=128、fp16：128 KiB / expected 131072, got {kv_cache_bytes(32, 8, 128)}"
assert kv_cache_bytes(32, 8, 128, seq_len=10, batch=3, bytes_per_element=4) == 131072 * 10 * 3 * 2, \
    "seq_len、batch、字节数都是乘数 / seq_len, batch and bytes multiply"

# %% [markdown]
# 用你的函数算几个真实模型（公开的配置；fp16/bf16，每值 2 字节）：

# %%
REAL_MODELS = [  # name, layers, query heads, KV heads, head dim
    ("GPT-2 small (MHA)", 12, 12, 12, 64),
    ("Llama 2 7B (MHA)", 32, 32, 32, 128),
    ("Llama 2 70B (GQA)", 80, 64, 8, 128),
    ("Llama 3 8B (GQA)", 32, 32, 8, 128),
    ("Falcon 7B (MQA)", 32, 71, 1, 64),
]
try:
    print(f"{'model':<20} {'H':>3} {'G':>3} {'KiB/token':>10} {'GiB at 4k tokens':>17} {'vs MHA':>7}")
    for _name, _L, _H, _G, _dk in REAL_MODELS:
        _per_token = kv_cache_bytes(_L, _G, _dk)
        print(f"{_name:<20} {_H:>3} {_G:>3} {_per_token / 1024:>10.0f} {kv_cache_bytes(_L, _G, _dk, seq_len=4096) / 2**30:>17.2f} "
              f"{_per_token / kv_cache_bytes(_L, _H, _dk):>7.3f}")
except NotImplementedError:
    print(FINISH_FIRST)
# Llama 2 7B's weights (public config: vocabulary 32000, d 4096, 32 layers, FFN 11008, untied output, RMSNorm).
_V, _d, _L, _ff = 32000, 4096, 32, 11008
_llama2_7b = 2 * _V * _d + _L * (4 * _d * _d + 3 * _d * _ff + 2 * _d) + _d   # embeddings + output + layers + final norm
print(f"Llama 2 7B: {_llama2_7b:,} parameters; fp16 weights {2 * _llama2_7b / 2**30:.1f} GiB")

# %% [markdown]
# “4k tokens”一列只是为了在同一长度上比较：GPT-2 的上下文只有 1,024 个 token，Falcon 7B 是 2,048。
#
# Llama 2 7B 每个 token 的 KV 缓存是 512 KiB，4k 个 token 就是 2 GiB——一条序列；批 32 就是 64 GiB，比 12.6 GiB 的权重（上面最后一行）大得多。
# GQA 把 Llama 2 70B 的缓存缩到 MHA 的 1/8，MQA 缩到 $1/H$。这就是 GQA/MQA 的动机：省的是推理时的缓存和内存带宽，不是参数。
#
# ## 7. 面试桥梁：三种结构，和为什么仅解码器赢了
#
# | 结构 | 代表 | 注意力 | 训练目标 | 擅长 |
# | --- | --- | --- | --- | --- |
# | 仅编码器（encoder-only） | BERT | 双向 | 掩码语言模型（填空） | 理解、分类、检索表示 |
# | 编码器-解码器（encoder–decoder） | 原始 Transformer、T5、BART | 编码器双向；解码器因果 + 交叉注意力 | 序列到序列 | 翻译、摘要 |
# | 仅解码器（decoder-only） | GPT、Llama、Qwen | 因果 | 下一个 token | 生成；什么任务都能写成“续写” |
#
# **前缀语言模型**（prefix LM）介于中间：前缀（比如指令）内部双向可见，生成部分因果。三种掩码（True = 可以看）：

# %%
_T, _prefix = 6, 3
_names = ["p1", "p2", "p3", "g1", "g2", "g3"]                                       # prefix p*, generated part g*
_bidirectional = torch.ones(_T, _T, dtype=torch.bool)                              # (T, T)
_causal = make_subsequent_mask(_T)[0, 0]                                           # (T, T)
_prefix_lm = _causal | (torch.arange(_T) < _prefix)[None, :]                       # (T, T): + every prefix key
plot_mask_row([_bidirectional, _causal, _prefix_lm],
              ["encoder-only: bidirectional", "decoder-only: causal", f"prefix LM: first {_prefix} bidirectional"],
              x_labels=_names, y_labels=_names, title="Three attention masks (True = may attend)")
plt.show()

# %% [markdown]
# 为什么仅解码器赢了（面试常问，答三点就够）：
#
# 1. **一个目标吃下所有数据**：下一个 token 预测不需要标注，任何文本都能用，每个位置都贡献损失
#    （BERT 只在随机选中的 15 % 位置上有损失：其中 80 % 换成 `[MASK]`、10 % 换成随机 token、10 % 不变）；
#    任务（翻译、问答、代码）都能写成“提示词 + 续写”，一个模型、一个接口。
# 2. **工程简单、推理便宜**：一种块、一个计算图，训练和生成一致；KV 缓存天然适用，多轮对话能复用前面的缓存。
# 3. **规模化的实证**：GPT-3 展示了零样本/少样本能力随规模出现；之后的大模型多沿用这一结构，生态于是集中过来。
#
# 代价也要会说：因果注意力看不到右边的上下文，纯理解任务上同尺寸的双向编码器常常更好；这正是 prefix LM 与编码器-解码器仍有一席之地的原因。
# 第 3 节跑过的“推理时忘了因果掩码”也是这一结构的常见面试追问：训练时每个位置只见过左边，推理时就必须保持同样的掩码。
#
# ## 小结
#
# - 解码：温度除 logits；top-k 留最大的 k 个；top-p 留累计概率达到 p（≥ p）的最小前缀；随机数来自 `torch.Generator`。
# - KV 缓存：新 token 的位置从 $T_{\text{past}}$ 开始；带缓存与不带缓存的 token 必须逐个相同。
# - 朴素注意力的内存是 $O(T^2)$，融合内核几乎为 0；长上下文推理的内存大头是 KV 缓存。
# - 束搜索：每步保留 $k$ 个累计对数概率最高的前缀（摊平 $N \cdot V$ 个分数、`topk`、`// V` 与 `% V`），结束的束不再扩展；
#   长度归一化减轻、但不能消除对短输出的偏爱，开放式生成用采样（Holtzman 等，2020）。
