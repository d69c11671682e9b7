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
# # 12 后训练：亲手写 GRPO、DPO 与 LoRA
#
# 第 08 章把 GPT 预训练（pre-training）成了能写五言、七言格式的小模型，但不是每首都合格律。预训练之后，大模型还要经过
# **后训练**（post-training）：用奖励或人的偏好继续调整它。这一章从第 08 章存下的模型出发，亲手写三样面试最常考的东西：
# GRPO（DeepSeekMath 的强化学习损失）、DPO（从偏好对直接学）和 LoRA（只训练很少的参数），最后用它们把格律率推到接近 100 %。
#
# **本章共 14 分**，6 个评分单元格：
#
# | 练习 | 评分单元格（grade_id） | 检查什么 | 分值 |
# | --- | --- | --- | --- |
# | `completion_mask` | `completion_mask_prompt_and_padding` | 只有策略写出的 token（含第一个结束符）为 True | 2 |
# | `completion_logprobs` | `completion_logprobs_shifted` | logits 与 token 错开一位；提示与填充处为 0；梯度流回模型 | 2 |
# | `ppo_clip_loss` | `ppo_clip_both_sides` | 比率两侧都裁剪、取较小者、先序列内再序列间平均 | 2 |
# | `grpo_loss` | `grpo_group_advantages_k3` | 组内标准化的优势；对冻结参考模型的 k3 KL | 3 |
# | `dpo_loss` | `dpo_bradley_terry` | beta 在 logsigmoid 里；减去参考模型；选中的胜出 | 2 |
# | `LoRALinear` | `lora_merge_unmerge` | 底座冻结、B 初始为 0、缩放 alpha / r；合并前后输出相同 | 3 |
#
# 1. 第 08 章的模型：策略、参考模型、奖励；
# 2. 补全的掩码与对数概率（练习 1、2）；
# 3. 组内标准化的优势与裁剪的比率：PPO 与 GRPO（练习 3、4）；
# 4. DPO：从偏好对直接学（练习 5）；
# 5. LoRA：只训练低秩的增量（练习 6）；
# 6. 跑起来：GRPO、DPO 与 LoRA 在你的诗模型上；
# 7. 面试要点。
#
# 全章只用 CPU；练习部分几秒就能跑完，第 6 节的训练各要几分钟（有进度），学完全章约 3 小时。

# %%
# Setup: imports, seeds, threads, and warning filters (so that a library warning does not clutter a check's report).
import copy
import math
import os
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import tutor
from tutor.plots import plot_form_rate, plot_reward_kl

warnings.filterwarnings("ignore")
np.random.seed(0)
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
FINISH_FIRST = "完成上面的练习后再运行 / finish the exercise above first"
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # nbgrader validate/autograde: no training
torch.set_num_threads(1)  # one thread: robust on a busy machine, and the same numbers on every run
DATA = Path(tutor.__file__).resolve().parents[1] / "data"  # the course's data/ folder, wherever this notebook runs
SHAPES = ((5, 4), (7, 4), (5, 8), (7, 8))  # five/seven characters a line x a quatrain/eight lines

# %% [markdown]
# 下面是前几章的参考实现（折叠着的只读单元格，提供给你使用，不计分）：第 08 章的 `GPT`、分词器和训练循环，第 09 章的 `generate`。

# %% provided="earlier"

# %% [markdown]
# ## 1. 第 08 章的模型：策略、参考模型、奖励
#
# 强化学习的说法里，正在训练的语言模型叫**策略**（policy，$\pi_\theta$）：给定提示（prompt），它一个 token 一个 token 地
# “采取动作”，写出一段补全（completion）。**奖励**（reward）给整段补全打一个分；这里的奖励是“这首诗合不合格律”
# （第 08 章的 `is_regular_poem`：至少 4 句、每句一样长、5 或 7 个字、逗号句号交替），合格为 1，不合格为 0——
# 一条可以直接验证的规则，正是 GRPO 这类方法擅长的那种奖励。
#
# **参考模型**（reference model，$\pi_{\mathrm{ref}}$）是训练开始前的策略的一份冻结的副本。只追奖励，策略会越走越偏
# （比如只会写同一首诗）；损失里加一项“别离参考模型太远”（KL 惩罚），它才能在拿到奖励的同时保住预训练学到的东西。
#
# 下面加载第 08 章训练好的模型（与第 09 章一样：同一个文件夹里的 `gpt_poems.pt`；找不到时按第 08 章的配方重新训练，几分钟）。
# 评分（nbgrader）时不加载也不训练。

# %%
VAL_POEMS = 1000
DEVICE = pick_device()                                                     # CUDA, or Apple's MPS, when present; otherwise the CPU
GPU_RECIPE = DEVICE.type == "cuda"                                         # chapter 08's bigger recipe
CHECKPOINT = Path("gpt_poems.pt")  # written by chapter 08's training cell, in the folder of this notebook
print(f"device: {DEVICE}; recipe: {'GPU' if GPU_RECIPE else 'CPU'} (chapter 08, section 7)")
tokenizer = model = None
try:
    poems = load_poems(DATA / "tang_poems.txt")
    tokenizer = CharTokenizer("".join(poems))
    train_data = tokenizer.encode("".join(poems[:-VAL_POEMS]))  # (N_train,)
    val_data = tokenizer.encode("".join(poems[-VAL_POEMS:]))    # (N_val,)
    torch.manual_seed(0)
    if GPU_RECIPE:
        model = GPT(tokenizer.vocab_size, d_model=384, num_heads=4, num_kv_heads=2, d_ff=1024, num_layers=6,
                    max_len=128, dropout=0.1, tie_weights=False).to(DEVICE)
        recipe = dict(block_size=128, batch_size=64, lr=2e-3, eval_every=100, max_steps=2000)
    else:
        model = GPT(tokenizer.vocab_size, d_model=128, num_heads=4, num_kv_heads=2, d_ff=344, num_layers=3,
                    max_len=128, dropout=0.0, tie_weights=False).to(DEVICE)
        recipe = dict(block_size=80, batch_size=16, lr=5e-3, eval_every=260, max_steps=1300)
    if GRADING:
        print("评分时不加载 / not loaded while grading")
    else:
        try:
            model.load_state_dict(torch.load(CHECKPOINT, map_location=DEVICE))  # chapter 08's trained model
            print(f"loaded chapter 08's trained model from {CHECKPOINT}")
        except (FileNotFoundError, RuntimeError):                          # none (or another model): train it here
            torch.set_num_threads(min(2, os.cpu_count() or 1))
            try:
                train_gpt(model, train_data, val_data, **recipe, warmup=20, seed=0)
            finally:
                torch.set_num_threads(1)
        print(f"validation loss ~{estimate_loss(model, val_data, recipe['block_size']):.2f}")
    model.eval()
except ValueError as err:  # the corpus file is missing or damaged: one line says how to get it back
    print(err)

# %% [markdown]
# ## 2. 补全的掩码与对数概率
#
# 采样时把同一个提示复制成一批（batch），每行接着写，写到换行符（`"\n"`，一首诗的结尾）为止。各行写的长度不同，
# 而一批张量必须一样长：先写完的行后面还跟着一些 token，它们是**填充**（padding），不是这首诗的一部分。
# 所以每行的 token 分三段：
#
# | 列 | `0 … prompt_len-1` | `prompt_len …` 第一个结束符（含） | 之后 |
# | --- | --- | --- | --- |
# | 是什么 | 提示（给定的） | 补全（策略写的） | 填充 |
# | 掩码 | False | True | False |
#
# 结束符本身要算进补全：“在这里停下”也是策略做出的一个选择，奖励正取决于它停在哪里。
# 提示里的结束符不算（提示是给定的）；没有结束符的行一直为 True 到末尾。
#
# 练习 1：写 `completion_mask(ids, prompt_len, end_id)`，返回 `(B, T)` 的布尔张量。提示：`cumsum` 可以数出每一列之前出现过几个结束符。

# %% exercise="completion_mask"

# %% grade_id="completion_mask_prompt_and_padding" points=2 check="completion_mask:completion_mask"
# Visible tests: the prompt, the end token kept, the padding after it, a row without an end.
_ids = torch.tensor([[7, 8, 3, 4, 0, 5, 0], [7, 0, 3, 4, 5, 6, 2]])
_m = completion_mask(_ids, 2, 0)
assert isinstance(_m, torch.Tensor) and _m.dtype == torch.bool and _m.shape == (2, 7), f"应为 (2, 7) 的布尔张量 / must be a bool (2, 7) tensor, got {_m!r}"
assert _m[0].tolist() == [False, False, True, True, True, False, False], \
    f"第 0 行：提示 2 列、补全到第一个 0（含）/ row 0: 2 prompt columns, the completion up to the first 0 (kept); got {_m[0].tolist()}"
assert _m[1].tolist() == [False, False, True, True, True, True, True], \
    f"第 1 行：提示里的 0 不算，没有结束符就到末尾 / row 1: the 0 in the prompt does not count, no end: True to the end; got {_m[1].tolist()}"

# %% [markdown]
# 有了掩码，就能算策略给自己写出的每个 token 的**对数概率**（log-probability）：GRPO 和 DPO 的损失都从它出发。
# 模型一次前向得到 `logits (B, T, V)`；第 `t` 列的 logits 是在看到 `ids[:, :t+1]` 之后对**下一个** token 的预测，
# 所以它要和 `ids[:, t+1]` 配对——与第 08 章训练时 `x`、`y` 错开一位是同一件事：
#
# $$\text{out}[b, t] = \log \pi_\theta(\text{ids}[b, t+1] \mid \text{ids}[b, :t+1]), \qquad t = 0, \dots, T-2 .$$
#
# 输出有 `T-1` 列，第 `t` 列属于第 `t+1` 个 token，所以用的掩码是 `mask[:, 1:]`：那里为 False（提示和填充）的位置置 0。
# `log_softmax` 在词表维（最后一维）上做。梯度要能流回模型：策略的对数概率正是我们要训练的量（参考模型的则在 `torch.no_grad()` 下算）。
#
# 练习 2：写 `completion_logprobs(model, ids, mask)`，返回 `(B, T-1)`。提示：`gather` 取出真实 token 那一项。

# %% exercise="completion_logprobs"

# %% grade_id="completion_logprobs_shifted" points=2 check="completion_logprobs:completion_logprobs"
# Visible tests: the shape, zeros on the prompt and the padding, one position against a log_softmax by hand, gradients.
torch.manual_seed(0)
_gpt = GPT(10, d_model=16, num_heads=2, num_kv_heads=1, d_ff=32, num_layers=1, max_len=16)
_ids = torch.tensor([[1, 2, 3, 4, 0, 5]])
_lp = completion_logprobs(_gpt, _ids, completion_mask(_ids, 2, 0))
assert isinstance(_lp, torch.Tensor) and _lp.shape == (1, 5), f"应为 (B, T-1) = (1, 5) / must be (B, T-1) = (1, 5), got {getattr(_lp, 'shape', _lp)}"
assert _lp[0, 0] == 0 and _lp[0, 4] == 0, \
    f"第 0 列（提示里的 token 1）和第 4 列（填充）应为 0 / column 0 (token 1, in the prompt) and column 4 (padding) must be 0; got {_lp[0].tolist()}"
_by_hand = F.log_softmax(_gpt(_ids[:, :3])[0, -1], dim=-1)[_ids[0, 3]]  # log p(token 3 | tokens 0..2)
assert torch.isclose(_lp[0, 2], _by_hand, atol=1e-5), \
    f"第 2 列应为 log p(ids[3] | ids[:3]) = {_by_hand.item():.4f}，得到 {_lp[0, 2].item():.4f} / column 2 must be log p(ids[3] | ids[:3])"
assert _lp.requires_grad, "对数概率要带梯度，不要在 no_grad 下算 / the log-probabilities must carry gradients: not under no_grad"

# %% [markdown]
# ## 3. 组内标准化的优势与裁剪的比率：PPO 与 GRPO
#
# **优势**（advantage）$A$ 说的是“这段补全比平常好多少”：比平常好的，提高它的概率；比平常差的，降低。
# PPO 用一个价值网络（critic）估计“平常”；**GRPO**（Group Relative Policy Optimization，DeepSeekMath 2024）省掉了它：
# 同一个提示采样一组 $G$ 段补全，用**这一组**的奖励均值当“平常”，再除以组内标准差：
#
# $$A_i = \frac{r_i - \operatorname{mean}(r_1, \dots, r_G)}{\operatorname{std}(r_1, \dots, r_G) + 10^{-4}} .$$
#
# 只在组内比：不同提示的难度不同，整批一起标准化会把“简单提示的普通答案”当成好答案。std 用 torch 的默认（无偏，除以 $G-1$）；
# $10^{-4}$ 防止一组奖励全相同（std 为 0）时除以零——那时这组所有优势都是 0，这组不提供学习信号。
# 一个算出来的例子：一组 8 首，其中 3 首合格律：

# %%
_r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])  # one group of G = 8 rewards
_adv = (_r - _r.mean()) / (_r.std() + 1e-4)
print(f"mean {_r.mean():.3f}, std (unbiased) {_r.std():.4f}")
print("advantages:", _adv)
print("a group of equal rewards:", (torch.ones(4) - 1) / (torch.ones(4).std() + 1e-4))

# %% [markdown]
# 合格律的 3 首各得约 +1.21，不合格的 5 首各得约 −0.72：少数的好答案被推得更多。优势对一段补全里的每个 token 都一样。
#
# **裁剪的比率**。采样用的是更新前的策略 $\pi_{\text{old}}$；同一批样本可以拿来更新几次，每个 token 的**概率比**
# $\rho = \pi_\theta / \pi_{\text{old}} = \exp(\log\pi_\theta - \log\pi_{\text{old}})$ 衡量策略已经变了多少。
# PPO 的替代目标（surrogate）是
#
# $$\min\big(\rho A,\ \operatorname{clip}(\rho, 1-\varepsilon, 1+\varepsilon)\, A\big) .$$
#
# $A > 0$ 时，$\rho$ 超过 $1+\varepsilon$ 后目标不再增长（不会因为一批样本把好答案推得太猛）；$A < 0$ 时，$\rho$ 低于
# $1-\varepsilon$ 后同理。两侧都要裁：只裁一侧，另一种符号的优势就没有刹车。取**较小者**（min）是悲观的下界：
# 裁剪只能让目标变小，从不让它变大。优化器做最小化，损失取负。每条序列先在自己被掩码选中的 token 上平均，再在序列间平均
# （本课的约定，也是 GRPO 原文的；DAPO 等改成了所有 token 一起平均，长补全的权重就更大）。
#
# 练习 3：写 `ppo_clip_loss(logprobs, old_logprobs, advantages, mask, clip_eps=0.2)`。`advantages` 可以是 `(B,)`（每行一个，广播到它的 token）或 `(B, T-1)`。

# %% exercise="ppo_clip_loss"

# %% grade_id="ppo_clip_both_sides" points=2 check="ppo_clip_loss:ppo_clip_loss"
# Visible tests: ratio 1 gives -mean(A); a ratio of 2 with A > 0 is clipped at 1.2; a ratio of 0.5 with A < 0 at 0.8.
_lp, _all = torch.full((2, 3), -1.0), torch.ones(2, 3, dtype=torch.bool)
_loss = ppo_clip_loss(_lp, _lp, torch.tensor([1.0, -3.0]), _all)
assert torch.isclose(_loss, torch.tensor(1.0)), f"比率为 1 时损失 = -mean(A) = 1.0，得到 {_loss} / ratio 1: the loss is -mean(A) = 1.0"
_loss = ppo_clip_loss(_lp + math.log(2.0), _lp, torch.tensor([1.0, 1.0]), _all)
assert torch.isclose(_loss, torch.tensor(-1.2)), f"比率 2、A = 1：上界裁在 1.2，损失 -1.2，得到 {_loss} / ratio 2, A = 1: clipped at 1.2, loss -1.2"
_loss = ppo_clip_loss(_lp + math.log(0.5), _lp, torch.tensor([-1.0, -1.0]), _all)
assert torch.isclose(_loss, torch.tensor(0.8)), f"比率 0.5、A = -1：下界裁在 0.8，损失 0.8，得到 {_loss} / ratio 0.5, A = -1: clipped at 0.8, loss 0.8"

# %% [markdown]
# **对参考模型的 KL 惩罚**。GRPO 把 $\beta \cdot \mathrm{KL}(\pi_\theta \,\|\, \pi_{\mathrm{ref}})$ 直接加进损失（PPO 的 RLHF 实现则把它扣在奖励里）。
# 精确的 KL 要对整个词表求和；我们手里只有采样出的 token，所以逐 token 用一个**估计量**（Schulman 2020 的记法，
# 记 $d = \log\pi_{\mathrm{ref}} - \log\pi_\theta$，token 从 $\pi_\theta$ 采样）：
#
# | 估计量 | 公式 | 无偏？ | 单个 token 上 |
# | --- | --- | --- | --- |
# | k1 | $-d$ | 是 | 可以为负，方差大 |
# | k2 | $d^2 / 2$ | 否（有偏） | 非负 |
# | **k3** | $e^{d} - d - 1$ | 是 | **非负**，方差小 |
#
# GRPO（DeepSeekMath）用 k3：无偏（因为 $\mathbb{E}_{\pi_\theta}[e^{d}] = 1$），又不会出现负的 KL。下面在两个相近的分布上量一量：

# %%
_g = torch.Generator().manual_seed(0)
_policy = torch.softmax(torch.randn(50, generator=_g), -1)                 # pi_theta over 50 tokens
_ref = torch.softmax(torch.log(_policy) + 0.3 * torch.randn(50, generator=_g), -1)  # a nearby reference
_x = torch.multinomial(_policy, 20000, replacement=True, generator=_g)     # tokens sampled from the policy
_d = torch.log(_ref[_x]) - torch.log(_policy[_x])                          # log(ref / policy) per token
_true = (_policy * (_policy.log() - _ref.log())).sum()
print(f"exact KL(policy || ref) = {_true:.5f}")
for _name, _k in (("k1", -_d), ("k2", _d ** 2 / 2), ("k3", _d.exp() - _d - 1)):
    print(f"{_name}: mean {_k.mean():.5f}  std {_k.std():.5f}  negative on {100 * (_k < 0).float().mean():.1f} % of tokens")

# %% [markdown]
# k3 的均值几乎就是精确值；k1 同样无偏，但标准差大得多（两万个样本的均值仍偏离几个百分点），而且一半以上的 token 上是负的；
# k2 每个 token 都非负，但有偏（这里偏大）。
#
# 合在一起，GRPO 每个 token 的损失是 $-(\text{surrogate} - \beta \cdot \text{k3})$，平均方式同 PPO。
# 参考模型是冻结的：它的对数概率只是常数，在 `torch.no_grad()` 下算（第 6 节的训练代码就是这样），梯度不会流进去；
# 损失里再 `detach` 一次也无妨。
#
# 练习 4：写 `grpo_loss(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1)`。
# `rewards (B,)` 按组连续排列（前 `group_size` 行是第一组），`mask` 是 `(B, T-1)`（补全掩码的 `[:, 1:]`）。
# 可以调用你的 `ppo_clip_loss`。

# %% exercise="grpo_loss"

# %% grade_id="grpo_group_advantages_k3" points=3 check="grpo_loss:grpo_loss"
# Visible tests: gradients follow the group-normalised advantage; the KL term alone is beta * k3.
_all = torch.ones(4, 3, dtype=torch.bool)
_lp = torch.full((4, 3), -1.0, requires_grad=True)
grpo_loss(_lp, _lp.detach(), _lp.detach(), torch.tensor([1.0, 0.0, 1.0, 1.0]), _all, 2).backward()
assert (_lp.grad[0] < 0).all() and (_lp.grad[1] > 0).all(), \
    f"第 0 组：奖励高的行概率升、低的降 / group 0: the better row goes up, the worse one down; grad {_lp.grad}"
assert (_lp.grad[2:] == 0).all(), \
    "第 1 组奖励相同，优势为 0，不该有梯度（在整批上标准化了？）/ group 1's rewards are equal: no gradient (normalised over the batch?)"
_half = torch.full((4, 3), math.log(0.5))
_loss = grpo_loss(_half, _half, torch.full((4, 3), math.log(0.25)), torch.ones(4), _all, 2, beta=0.1)
assert torch.isclose(_loss, torch.tensor(0.1 * (0.5 + math.log(2) - 1)), atol=1e-6), \
    f"只剩 KL 项：beta * (e^d - d - 1)，d = log(0.25 / 0.5) / only the KL term: beta * k3 = {0.1 * (0.5 + math.log(2) - 1):.6f}, got {_loss}"

# %% [markdown]
# ## 4. DPO：从偏好对直接学
#
# 很多时候没有一条能自动打分的规则，只有人的**偏好**：同一个提示的两段回答，哪段更好。**Bradley–Terry 模型**说：
# 若每段回答有一个（看不见的）奖励 $r$，那么“选中的 $y_w$ 胜过拒绝的 $y_l$”的概率是 $\sigma(r(y_w) - r(y_l))$。
#
# RLHF 的老办法是先用偏好训练一个奖励模型，再用 PPO 按它优化。**DPO**（Direct Preference Optimization，Rafailov 等 2023）
# 注意到：带 KL 约束的奖励最大化，最优策略满足 $\pi^*(y) \propto \pi_{\mathrm{ref}}(y)\, e^{r(y)/\beta}$，反过来
# $r(y) = \beta \log\frac{\pi^*(y)}{\pi_{\mathrm{ref}}(y)} + \beta\log Z$。代进 Bradley–Terry，与回答无关的 $\beta \log Z$ 在相减时消掉，
# 得到一个只用策略和参考模型的对数概率的损失：
#
# $$\mathcal{L}_{\text{DPO}} = -\log\sigma\Big(\beta\big[(\log\pi_\theta(y_w) - \log\pi_{\mathrm{ref}}(y_w))
#   - (\log\pi_\theta(y_l) - \log\pi_{\mathrm{ref}}(y_l))\big]\Big) .$$
#
# $\beta \log(\pi_\theta/\pi_{\mathrm{ref}})$ 就是“隐式奖励”；$\beta$ 在 $\log\sigma$ **里面**，调的是这个奖励的尺度（$\beta$ 越小，
# 允许离参考模型越远）。这里的 $\log\pi(y)$ 是整段回答的对数概率：`completion_logprobs` 按行求和。参考模型依旧冻结。
#
# 练习 5：写 `dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1)`：四个参数都是 `(B,)`，返回批均值。
# `F.logsigmoid` 比 `torch.log(torch.sigmoid(...))` 数值上更稳。

# %% exercise="dpo_loss"

# %% grade_id="dpo_bradley_terry" points=2 check="dpo_loss:dpo_loss"
# Visible tests: no preference yet gives log 2; a margin of 1 with beta = 1 gives -log sigmoid(1).
_z = torch.zeros(3)
_loss = dpo_loss(_z, _z, _z, _z)
assert torch.isclose(_loss, torch.tensor(math.log(2.0))), f"策略与参考相同时损失为 log 2 = 0.6931，得到 {_loss} / policy equal to the reference: log 2"
_loss = dpo_loss(torch.ones(3), _z, _z, _z, beta=1.0)
assert torch.isclose(_loss, torch.tensor(math.log(1 + math.exp(-1.0)))), \
    f"margin 1、beta 1：-logsigmoid(1) = 0.3133，得到 {_loss} / margin 1, beta 1: -logsigmoid(1)"

# %% [markdown]
# ## 5. LoRA：只训练低秩的增量
#
# 全量微调要为每个参数存梯度和 AdamW 的两个矩。**LoRA**（Low-Rank Adaptation，Hu 等 2021）把一个线性层的权重
# $W \in \mathbb{R}^{d_{\text{out}} \times d_{\text{in}}}$ 冻结，只学一个低秩的增量：
#
# $$h = W x + b + \frac{\alpha}{r}\, B A x, \qquad A \in \mathbb{R}^{r \times d_{\text{in}}},\ B \in \mathbb{R}^{d_{\text{out}} \times r},\ r \ll d .$$
#
# - 要训练的参数从 $d_{\text{out}} d_{\text{in}}$ 降到 $r(d_{\text{in}} + d_{\text{out}})$（下一个单元格算一算）；
# - $B$ 初始化为 0、$A$ 取小随机值：训练开始时 LoRA 层与原来的层**完全相同**，$A$ 和 $B$ 也都能拿到梯度（两者都为 0 就都拿不到）；
# - 缩放 $\alpha / r$：换一个秩 $r$ 时，增量的大小大致不变，学习率不必重调；
# - 训练完可以把 $\frac{\alpha}{r} B A$ **合并**（merge）进 $W$：推理时没有任何额外开销；`unmerge()` 再减回去，换另一个适配器。

# %%
if model is not None:
    _linears = [m for m in model.blocks.modules() if isinstance(m, nn.Linear)]
    _full = sum(m.weight.numel() for m in _linears)
    _lora = sum(4 * (m.in_features + m.out_features) for m in _linears)   # r = 4
    print(f"{len(_linears)} linear layers in the blocks: {_full:,} weights; LoRA r=4 trains {_lora:,} "
          f"({100 * _lora / _full:.1f} %); the whole model has {sum(p.numel() for p in model.parameters()):,}")

# %% [markdown]
# 练习 6：写 `LoRALinear(base, r=4, alpha=8)`：冻结 `base`（一个 `nn.Linear`），参数 `A (r, in_features)`（Kaiming 均匀初始化，
# 如 `nn.Linear` 的权重）、`B (out_features, r)`（全零），`scaling = alpha / r`；`forward`、`merge()`、`unmerge()` 如上。
# 合并之后 `forward` 只算 `base(x)`（否则增量算了两次）：记下是否已合并。

# %% exercise="LoRALinear"

# %% grade_id="lora_merge_unmerge" points=3 check="LoRALinear:LoRALinear"
# Visible tests: no change at init, the trainable count, outputs equal after merge() and after unmerge().
torch.manual_seed(0)
_base = nn.Linear(6, 4)
_layer = LoRALinear(_base, r=2, alpha=4)
_x = torch.randn(3, 6)
assert torch.allclose(_layer(_x), _base(_x)), "初始化时输出应与底座相同（B = 0）/ at initialisation the output must equal the base's (B = 0)"
_trainable = sum(p.numel() for p in _layer.parameters() if p.requires_grad)
assert _trainable == 2 * (6 + 4), f"只训练 A 和 B：r * (in + out) = 20 个参数，得到 {_trainable} / only A and B train: 20 parameters"
with torch.no_grad():
    _layer.B.normal_()
_y = _layer(_x)
_layer.merge()
assert torch.allclose(_layer(_x), _y, atol=1e-5), "merge() 之后输出应不变 / the output must not change after merge()"
_layer.unmerge()
assert torch.allclose(_layer(_x), _y, atol=1e-5), "unmerge() 之后输出应不变 / the output must not change after unmerge()"

# %% [markdown]
# ## 6. 跑起来：GRPO、DPO 与 LoRA 在你的诗模型上
#
# 下面这些训练代码是提供的（只读，不计分），它们调用的正是你上面写的 `completion_mask`、`completion_logprobs`、`grpo_loss`、
# `dpo_loss` 和 `LoRALinear`。每一步 GRPO：用当前策略对提示“。”加换行（上一首诗的结尾）采样 8 组、每组 8 首（温度 1.0），
# 每首按格律打 0 或 1 分，算组内优势，对冻结的参考模型（训练前的模型）加 $\beta = 0.1$ 的 k3 KL，做一步 AdamW（学习率 $2\times10^{-4}$）。
# 每批样本只更新一次，所以旧策略就是当前策略（比率为 1，裁剪不起作用；同一批更新几次时它才起作用）。
# `poem_shape` 给出一首格律诗的体裁：五言或七言 × 绝句（4 句）或律诗（8 句）。

# %% provided="poem_shape, poem_reward, sample_stats, decode_poems, sample_group, frozen_copy, grpo_train"

# %% [markdown]
# 先量训练前：按第 09 章的方式（温度 0.7、top-p 0.9）采样 500 首，数格律率和重复率（与前面某首一模一样的比例），
# 看前 10 首；再按策略本来的样子（温度 1.0，GRPO 训练时就这样采样）采样 500 首，数四种体裁各占多少。
# 体裁为什么要在温度 1.0 下数：低温偏爱“就此收住”的那一个 token（逗号、句号、换行），不爱可以接着写的成千上万个字，
# 所以温度 0.7 会把任何模型都往最短的五言绝句上挤——量出来的是采样方式的偏向，不是模型的。下面打印的两个数可以对照。

# %%
PROMPT, MAX_POEM, N_SAMPLES = "。\n", 65, 500  # the end of a poem; 8 lines of 7 characters and their marks, then "\n"
RUN_THREADS = min(2, os.cpu_count() or 1)      # the runs below take two threads, as chapter 08's training


def measure(m, seed=0):
    """500 poems sampled as chapter 09 samples them and their statistics, the shapes of 500 sampled at the policy's
    own temperature 1.0, and the validation loss."""
    _, sampled = sample_group(m, tokenizer, PROMPT, N_SAMPLES, MAX_POEM, torch.Generator(device=DEVICE).manual_seed(seed),
                              temperature=0.7, top_p=0.9)
    _, own = sample_group(m, tokenizer, PROMPT, N_SAMPLES, MAX_POEM, torch.Generator(device=DEVICE).manual_seed(seed))
    return sampled, sample_stats(sampled), Counter(map(poem_shape, own)), estimate_loss(m, val_data, recipe["block_size"])


def show(sampled, stats, shapes, val, name):
    mix = ", ".join(f"{chars}x{lines} {100 * shapes[chars, lines] / N_SAMPLES:.0f} %" for chars, lines in SHAPES)
    print(f"{name}: {stats['form']:.1f} % regular, {stats['dup']:.1f} % duplicates, validation loss {val:.3f}\n"
          f"  shapes at temperature 1.0: {mix}; at 0.7 the most common holds {stats['top_shape']:.0f} %")
    for poem in sampled[:10]:
        print(("  regular   | " if poem_reward(poem) else "  irregular | ") + poem)


if GRADING:
    print("评分时跳过 / skipped while grading")
elif model is None:
    print(FINISH_FIRST)
else:
    try:
        before = measure(model)
        show(*before, "chapter 08's model")
    except NotImplementedError:
        print(FINISH_FIRST)

# %% [markdown]
# GRPO 150 步（两个线程，在空闲的 2 核机器上约两三分钟）。训练的是模型的一份副本，第 08 章的模型留着给 DPO 和 LoRA 用。

# %%
if GRADING:
    print("评分时跳过 / skipped while grading")
elif model is None:
    print(FINISH_FIRST)
else:
    try:
        policy = copy.deepcopy(model)
        torch.set_num_threads(RUN_THREADS)
        try:
            history = grpo_train(policy, tokenizer, PROMPT, steps=150, max_new_tokens=MAX_POEM, seed=0)
        finally:
            torch.set_num_threads(1)
        print(f"GRPO: {history['steps']} steps; mean reward {history['reward'][0]:.2f} -> {history['reward'][-1]:.2f}; "
              f"KL {history['kl'][-1]:.4f} at the last step")
        plot_reward_kl(history)
        plot_form_rate(history)
        plt.show()
        after = measure(policy)
        show(*after, "after GRPO")
        print(f"validation loss change: {after[3] - before[3]:+.3f} nats per character")
    except NotImplementedError:
        print(FINISH_FIRST)

# %% [markdown]
# 读这两张图：平均奖励（这一步样本的格律率，温度 1.0 下采样）一开始就很高——第 08 章的模型本来就大多写得合格律，
# GRPO 要压下去的是剩下那一点不合格的；KL 从 0 开始慢慢变大——策略离参考模型越来越远，但 KL 惩罚把它拴住了。
# 按第 09 章的方式采样（温度 0.7），格律率从训练前的数字升到 99 % 以上，
# 验证损失（没见过的真诗上）只变了约百分之一 nat：格律好了，预训练学到的东西基本保住。前后各 10 首里，很多首只改了几个字：
# GRPO 是把模型已经会的东西推得更稳。要盯住的代价是多样性：奖励只问合不合格律、不管体裁。比较上面两次打印的温度 1.0 下的体裁分布：
# 哪一种若越占越多，模型就在向它最拿手的那种体裁收窄（GRPO 采样、打分用的正是这个分布）；$\beta$ 越小，KL 把策略拴得越松，越容易收窄
# （不妨把上面的调用加上 `beta=0.02` 再跑一次，比较体裁分布）。
#
# **DPO**：不用打分函数，只用偏好对。从第 08 章的模型自己的样本里凑 64 对“合格律的胜过不合格律的”，再按 DPO 训练。

# %% provided="preference_pairs, sequence_logprobs, dpo_train"

# %%
if GRADING:
    print("评分时跳过 / skipped while grading")
elif model is None:
    print(FINISH_FIRST)
else:
    try:
        dpo_model = copy.deepcopy(model)
        end_id = tokenizer.encode("\n")[0].item()
        probe = tokenizer.encode(PROMPT * 2)[None, :].to(DEVICE)  # (1, 4): your functions run once before the sampling
        dpo_loss(*[sequence_logprobs(dpo_model, probe, len(PROMPT), end_id)] * 4, beta=0.1)
        torch.set_num_threads(RUN_THREADS)
        try:
            chosen, rejected = preference_pairs(dpo_model, tokenizer, PROMPT, 64, MAX_POEM,
                                                torch.Generator(device=DEVICE).manual_seed(0))
            dpo_history = dpo_train(dpo_model, chosen, rejected, len(PROMPT), end_id, steps=150)
        finally:
            torch.set_num_threads(1)
        print(f"DPO on {chosen.size(0)} pairs, {dpo_history['steps']} steps: loss {dpo_history['loss'][0]:.3f} -> "
              f"{dpo_history['loss'][-1]:.3f}, pairs ranked right {dpo_history['accuracy'][-1]:.0%} at the last step")
        dpo_after = measure(dpo_model)
        show(*dpo_after, "after DPO")
    except NotImplementedError:
        print(FINISH_FIRST)

# %% [markdown]
# DPO 的损失从 $\log 2 \approx 0.693$（策略与参考相同）一路降到接近 0，64 对全都排对了——格律率却大跌，验证损失也大涨
# （见上面打印的数字）。这是 DPO 有名的失败方式，过度优化（over-optimisation）：只有 64 对、反复训练 150 步，
# 损失只要求“选中的”相对“拒绝的”概率比拉开，并不要求“选中的”本身概率升高；常见的解释是两者一起被压低（拒绝的压得更多），
# 整个分布就被推坏了。GRPO 每一步都用当前策略的新样本（在线，on-policy），KL 惩罚又把它拴在参考模型附近；
# DPO 只用一批固定的旧样本（离线），约束只有 $\beta$。实际使用时要更多、更多样的偏好对，少训几步（看留出样本上的格律率，
# 而不是损失），或者调大 $\beta$。
#
# **LoRA**：把模型每个块里的线性层都包进你的 `LoRALinear`（秩 8，$\alpha = 16$），冻结其余一切，再跑 60 步同样的 GRPO
# （LoRA 的增量从 0 开始、参数少，学习率取大 10 倍：$2\times10^{-3}$）。最后把适配器合并进权重：输出不变，推理时没有额外开销。

# %% provided="add_lora"

# %%
if GRADING:
    print("评分时跳过 / skipped while grading")
elif model is None:
    print(FINISH_FIRST)
else:
    try:
        lora_model = copy.deepcopy(model)
        trained = add_lora(lora_model, r=8, alpha=16)
        total = sum(p.numel() for p in lora_model.parameters())
        print(f"LoRA r=8: {trained:,} parameters trained of {total:,} ({100 * trained / total:.1f} %)")
        torch.set_num_threads(RUN_THREADS)
        try:
            lora_history = grpo_train(lora_model, tokenizer, PROMPT, steps=60, max_new_tokens=MAX_POEM, lr=2e-3,
                                      seed=0)
        finally:
            torch.set_num_threads(1)
        lora_after = measure(lora_model)
        show(*lora_after, "after GRPO through LoRA")
        probe = tokenizer.encode(PROMPT + "春风")[None, :].to(DEVICE)    # (1, 4)
        with torch.no_grad():
            unmerged = lora_model(probe)
            for layer in lora_model.modules():
                if isinstance(layer, LoRALinear):
                    layer.merge()
            print(f"merged: largest change of a logit {(lora_model(probe) - unmerged).abs().max():.2e}")
    except NotImplementedError:
        print(FINISH_FIRST)

# %% [markdown]
# ## 7. 面试要点（Q&A）
#
# **Q1：GRPO 和 PPO 有什么区别？** PPO 用价值网络估计基线（GAE 算优势），KL 通常扣在奖励里；GRPO 对同一提示采样一组，
# 用组内奖励的均值和标准差标准化出优势，不要价值网络（省一个和策略一样大的模型），KL（k3 估计量）直接加进损失。
# 两者都用裁剪的概率比 $\min(\rho A, \operatorname{clip}(\rho, 1\pm\varepsilon) A)$。
#
# **Q2：为什么优势要在组内标准化？** 不同提示难度不同：一个简单提示的普通答案，整批比下来也像好答案。
# 组内比较只问“在同一个问题上，这个答案比它的兄弟们好多少”；一组奖励全相同时优势为 0，这组不提供梯度。
#
# **Q3：k1、k2、k3 估计量？** 记 $d = \log\pi_{\mathrm{ref}} - \log\pi_\theta$：k1 $= -d$ 无偏但可为负、方差大；
# k2 $= d^2/2$ 非负但有偏；k3 $= e^d - d - 1$ 无偏且非负，GRPO 用它。
#
# **Q4：DPO 的损失怎么来的？β 的作用？** Bradley–Terry 偏好模型 + KL 约束下最优策略的闭式解，奖励写成
# $\beta\log(\pi/\pi_{\mathrm{ref}})$，配分函数在相减时消掉；损失 $-\log\sigma(\beta\,[\ldots])$。$\beta$ 越大越贴近参考模型。
# 常见错误：$\beta$ 放到 $\log\sigma$ 外面、漏了参考模型的项、选中与拒绝放反、参考模型没冻结。
#
# **Q5：LoRA 为什么 B 初始化为 0？α/r 是做什么的？** B = 0 让训练从原模型出发（输出不变）；A 随机保证梯度能流到 B。
# $\alpha / r$ 让换秩时增量的尺度不变。合并 $W + \frac{\alpha}{r}BA$ 后推理零开销。
#
# **Q6：算对数概率时最容易错在哪？** logits 与 token 没错开一位（第 $t$ 列预测第 $t+1$ 个）；掩码用成 `mask[:, :-1]`；
# 提示和填充没掩掉；`log_softmax` 沿错了维度；参考模型的对数概率带着梯度。
