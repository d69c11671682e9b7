# %% [markdown]
# # 00 · 导读：形状、掩码约定与检查方式
#
# 欢迎来到「手撕 Transformer」。这门课让你用 PyTorch 从零写出一个完整的 Transformer：
# 从缩放点积注意力（scaled dot-product attention）开始，到多头注意力（multi-head attention）、
# 位置编码（positional encoding）、前馈网络与层归一化（FFN, LayerNorm），再到编码器、解码器、
# 整个模型，最后在复制任务（copy task）上把它训练到几乎 100% 正确。
#
# 这一章没有要你写的代码，只做三件事：
#
# 1. 统一**形状词汇**（shape glossary）——全课程的注释、报错信息和检查都用这套字母；
# 2. 讲清**掩码约定**（mask convention）：`True` = 可以看（may attend），以及为什么反过来的约定是个陷阱；
# 3. 说明**检查与评分**（checks and grading）怎么工作、怎么运行这些笔记本。
#
# 每章的结构都一样：先讲原理和数学，再给一个桩函数（stub，里面是 `raise NotImplementedError`）让你填，
# 紧跟着一个检查单元（check cell）告诉你对不对、错在哪。

# %%
import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from tutor.plots import plot_mask_row

warnings.filterwarnings("ignore", category=UserWarning)
torch.manual_seed(0)
np.random.seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## 1. 形状词汇表（shape glossary）
#
# 张量一律**批次在前**（batch-first）。全课程的形状注释都写成 `# (B, H, T_q, d_k)` 这种样子：
#
# | 记号 | 含义 | 典型值（本课） |
# | --- | --- | --- |
# | `B` | 批大小（batch size）：一次并行处理多少条序列 | 2 – 128 |
# | `H` | 注意力头数（number of heads） | 1 – 8 |
# | `T_q` | 查询序列长度（query length）：有多少个位置在“提问” | 5 |
# | `T_k` | 键/值序列长度（key length）：有多少个位置可以被看 | 7 |
# | `d_model` | 模型宽度（model dimension）：每个 token（见下）的向量长度 | 32 – 512 |
# | `d_k` | 每个头里查询和键的维度，`d_k = d_model / H` | 8 – 64 |
# | `d_v` | 每个头里值的维度，本课取 `d_v = d_k` | 8 – 64 |
# | `d_ff` | 前馈网络隐藏层宽度（feed-forward dimension），常取 `4 · d_model` | 128 – 2048 |
# | `V` | 词表大小（vocabulary size） | 10 – 37000 |
#
# 这里的 **token** 是模型读写的最小单位：可以是一个词、一个子词片段或一个字符，第 07 章的复制任务里是一个符号。
# 全课程正文统一写 token，不翻译；单独的“词”只指自然语言里的词（例句、按词切分）。沿用的惯称“词表（vocabulary）”是所有 token 的集合，
# 大小为 `V`；“词嵌入（embedding）”是每个 token 的向量。
#
# 讲义、检查的报错和文档字符串里，下面几个词各只用一种写法：
#
# | 写法 | 英文 | 意思 |
# | --- | --- | --- |
# | token | token | 模型读写的最小单位（见上） |
# | 可以看 | may attend | 掩码为 `True`：这个查询可以看这个键（第 2 节） |
# | 遮挡、被遮挡 | masked | 掩码为 `False`：这个键对这个查询不可见；“整行被遮挡”指一个查询的所有键都被遮挡 |
# | 预热 | warmup | 训练开头的若干步把学习率从很小逐步升高（第 07 章） |
#
# 自注意力（self-attention）里 `T_q = T_k = T`；交叉注意力（cross-attention）里查询来自解码器、
# 键和值来自编码器，`T_q` 与 `T_k` 一般不相等。检查故意用 `T_q ≠ T_k` 的用例，
# 因为很多 bug（比如 softmax 做错了轴）只有在两者不等时才会暴露。
#
# 下面用随机张量走一遍注意力里的形状变化。`@` 是批量矩阵乘法（batched matmul）：
# 前面的维度逐个对齐（可广播），只有最后两维做矩阵乘。

# %%
B, H, T_q, T_k, d_model = 2, 4, 5, 7, 32
d_k = d_model // H  # 8

Q = torch.randn(B, H, T_q, d_k)  # (B, H, T_q, d_k)
K = torch.randn(B, H, T_k, d_k)  # (B, H, T_k, d_k)
V = torch.randn(B, H, T_k, d_k)  # (B, H, T_k, d_v), here d_v = d_k

scores = Q @ K.transpose(-2, -1)  # (B, H, T_q, d_k) @ (B, H, d_k, T_k) -> (B, H, T_q, T_k)
weights = scores.softmax(dim=-1)  # (B, H, T_q, T_k), each row sums to 1 over the keys
out = weights @ V  # (B, H, T_q, T_k) @ (B, H, T_k, d_v) -> (B, H, T_q, d_v)

print("scores :", tuple(scores.shape))
print("weights:", tuple(weights.shape))
print("out    :", tuple(out.shape))
print("每行权重之和 / row sums:", weights.sum(dim=-1)[0, 0])

# %% [markdown]
# 读形状的两个习惯，面试时也很有用：
#
# - **注意力矩阵的行是查询，列是键**：`weights[b, h, i, j]` 是第 `i` 个查询位置对第 `j` 个键位置的关注程度，
#   所以 softmax 一定沿最后一维（键，`dim=-1`）做。
# - **多头只是把 `d_model` 切成 `H` 份**：`(B, T, d_model)` → `view` 成 `(B, T, H, d_k)` →
#   `transpose(1, 2)` 成 `(B, H, T, d_k)`。第 02 章会细讲这里 `view`/`transpose`/`contiguous` 的坑。

# %% [markdown]
# ### 真实模型里这些符号是多少
#
# 本课的模型很小，为的是在 CPU 上很快跑完；形状规则与真实模型完全一样，只是数字不同。三个常被问到的配置：
#
# | 记号 | 原始 Transformer base（2017） | BERT-base（2018） | GPT-2 small（2019） |
# | --- | --- | --- | --- |
# | 结构与层数 | 编码器-解码器，6 + 6 层 | 仅编码器，12 层 | 仅解码器，12 层 |
# | `d_model` | 512 | 768 | 768 |
# | `H` | 8 | 12 | 12 |
# | `d_k = d_model / H` | 64 | 64 | 64 |
# | `d_ff` | 2048 | 3072 | 3072 |
# | `V` | 约 37000（英德共享 BPE 词表） | 30522（WordPiece，uncased） | 50257（字节级 BPE） |
# | 最长序列 `T` | 不固定（正弦位置编码） | 512 | 1024 |
# | 参数量 | 约 65M | 约 110M | 约 124M（论文写作 117M） |
#
# 三者都是 `d_k = 64`、`d_ff = 4 · d_model`：`d_model` 从 512 加到 768 时，加的是头数（8 → 12），每个头仍是 64 维。
# 第 06 章会按公式逐项数出 base 模型的参数。

# %% [markdown]
# ## 2. 掩码约定：`True` = 可以看
#
# 掩码（mask）决定“哪个查询可以看哪个键”。本课程**只用一种约定**：
#
# > 掩码是布尔张量（`0/1` 也接受），可广播到 `(B, H, T_q, T_k)`；**`True` 表示可以看（may attend）**，
# > `False` 表示遮挡（masked）。这与 PyTorch 的 `F.scaled_dot_product_attention` 的布尔 `attn_mask` 一致。
#
# 两种常见掩码：
#
# - **填充掩码**（padding mask）：批里的序列长短不一，短的用 PAD 补齐。PAD 位置不应该被任何查询看到，
#   所以它遮挡的是**键**（列），形状 `(B, 1, 1, T_k)`。常见误区：把 PAD 的查询行也一起遮挡——
#   那一行就一个键都看不见，softmax 得到 NaN（第 05 章第 1 节演示它怎样扩散到所有位置）。
# - **因果掩码**（causal mask / subsequent mask）：解码器生成第 `i` 个 token 时不能偷看 `i` 之后的 token，
#   所以是**下三角为 True**，形状 `(1, 1, T, T)`。

# %%
T = 5
causal = torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T), lower triangle True = may attend
print("因果掩码 / causal mask (1 = may attend):")
print(causal.int())

lengths = torch.tensor([5, 3])  # two sequences, the second one padded with 2 PAD tokens
key_is_real = torch.arange(T)[None, :] < lengths[:, None]  # (B, T_k)
pad_mask = key_is_real[:, None, None, :]  # (B, 1, 1, T_k): blocks PAD keys, never query rows
print("填充掩码 / padding mask, shape", tuple(pad_mask.shape))
print(pad_mask.int())

# %% [markdown]
# 用 PyTorch 自己的实现验证这个约定：把因果掩码交给 `F.scaled_dot_product_attention`，
# 第 `i` 行的权重只落在第 `0..i` 列上。（这里只是演示约定；从第 01 章起，你要自己写这个函数，
# 检查会确认你**没有**调用这个内置函数。）

# %%
x = torch.randn(1, 1, T, 8)  # (B=1, H=1, T, d_k=8)
out_builtin = F.scaled_dot_product_attention(x, x, x, attn_mask=causal)  # (1, 1, T, 8)

scores = x @ x.transpose(-2, -1) / math.sqrt(8)  # (1, 1, T, T)
weights = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)  # (1, 1, T, T)
print("因果注意力权重 / causal attention weights:")
print(weights[0, 0])
print("与内置函数一致 / matches the built-in:", torch.allclose(weights @ x, out_builtin, atol=1e-6))

# %% [markdown]
# ### 陷阱：反过来的约定
#
# 并不是所有代码都用 `True` = 可以看。**同一个 PyTorch 里就有两种相反的约定**，别人的代码里两种写法也都常见：
#
# | 接口 / 写法 | 掩码里 `True`（或 1）的意思 |
# | --- | --- |
# | `F.scaled_dot_product_attention(attn_mask=...)`、本课程 | 可以看 |
# | `nn.MultiheadAttention(attn_mask=..., key_padding_mask=...)`、`nn.Transformer*` | **不许看**（被遮挡） |
# | 常见写法 `scores.masked_fill(mask == 0, -inf)` | 1 = 可以看 |
# | 常见写法 `scores.masked_fill(mask == 1, -inf)` 或 `scores + mask * -1e9` | 1 = 遮挡 |
#
# 很多代码用的是后一种：因果掩码写成 `torch.triu(torch.ones(T, T), diagonal=1)`，**上三角为 1** 表示遮挡，
# 再用 `scores.masked_fill(mask == 1, -inf)` 遮挡。单独看它自洽；可一旦把这种掩码交给按 `True` = 可以看
# 写成的函数（或者反过来），掩码就被**悄悄取反**了，而且不会报任何错。
#
# 因果掩码取反后，每个位置**只能**看未来、看不到自己，最后一行更是一个可见的键都没有。后果取决于怎么填充被遮挡的分数：
#
# - **用有限值填充**（如 `-1e9`、`finfo.min`）时不出 NaN：训练时损失降得飞快（要预测的下一个 token 就摆在眼前），
#   推理时逐个 token 生成、未来还不存在，结果一塌糊涂——这种错最隐蔽；
# - **用 `-inf` 填充**时，最后一行 softmax 得到 `0/0 = NaN`：损失从第 1 步起就是 NaN，一次反向传播后所有参数都变成 NaN。
#
# 下面故意犯这个错（用 `-inf` 填充），并把两张掩码画出来（绿 = 可以看，深色 = 遮挡）：

# %%
blocked_future = torch.triu(torch.ones(T, T), diagonal=1)  # the other convention: 1 = blocked
wrong = blocked_future.bool()  # handed to a "True = may attend" function: inverted
scores = x @ x.transpose(-2, -1) / math.sqrt(8)  # (1, 1, T, T)
weights_wrong = scores.masked_fill(~wrong, float("-inf")).softmax(dim=-1)  # (1, 1, T, T)
print("取反后的权重 / weights with the inverted mask:")
print(weights_wrong[0, 0])
print("含 NaN 的行 / rows with NaN:", torch.isnan(weights_wrong[0, 0]).any(dim=-1).nonzero().flatten().tolist())

plot_mask_row([causal, wrong], ["course causal mask", "triu(ones, 1) (1 = blocked) read as True = may attend"],
              title="Course mask vs a 1 = blocked mask read the other way (True = may attend)")
plt.show()

# %% [markdown]
# 两条防线，全课程都会用到：
#
# 1. **只用一种约定**，并在每个接口的文档字符串里写明；从别的代码库搬来的掩码先确认它的约定，必要时取反（`~mask`）。
# 2. **整行被遮挡时不出 NaN**：用一个有限的极小值（`torch.finfo(dtype).min`）填充分数，softmax 之后再把被遮挡的
#    权重置为 0。这样一个“什么都看不见”的查询得到全零权重和零输出，而不是 NaN。（用 `-inf` 填充、softmax 后同样置 0
#    也能得到这个结果，只是中间会先算出 NaN 再被换掉；有限值更稳妥，第 01 章细讲。）第 01 章的检查专门有一个整行被遮挡的用例。
#
# 面试常问：*“`nn.MultiheadAttention` 的 `key_padding_mask` 里 True 是什么意思？”*——是“忽略这个键”，
# 与 `F.scaled_dot_product_attention` 的布尔 `attn_mask` 正好相反。第 05 章会把你写的编码器层与
# `nn.TransformerEncoderLayer` 对比，到时候要把掩码取反再交给它。

# %% [markdown]
# ## 3. 检查与评分怎么工作
#
# 每个练习的单元里是参考接口的签名和文档字符串（docstring），需要你写的部分被换成了：
#
# ```python
#     # YOUR CODE HERE / 在这里写你的代码
#     raise NotImplementedError("待实现：请按上面的说明完成这一段 / Not implemented yet: follow the instructions above")
# ```
#
# 删掉这两行，写上你的实现。练习下面的检查单元分两部分：
#
# - **可见测试**（visible tests）：几条关于形状和性质的 `assert`，你可以读、可以照着推理；
# - **参考检查**（reference check）：把你的函数或类与参考实现在几组随机用例上逐一比较
#   （`T_q ≠ T_k`、`B = 1`、`H = 1`、填充掩码、因果掩码、整行被遮挡、float64……），
#   类会先把参考权重按接口里的属性名（如 `W_q`、`W_o`）拷进你的模块。不一致时，它会指出哪个用例、什么形状、
#   最大误差在哪里，并且在输出与某个**经典错误**（漏了 `1/√d_k`、softmax 做错了轴、掩码取反、
#   合并头时漏了 `transpose`……）吻合时直接点名。
#
# 同一套检查有两种用法：
#
# | 你在用 | 检查单元里是 | 结果 |
# | --- | --- | --- |
# | `notebooks/`（自学版） | `report("名字", 你的对象)` | 打印 ✅ 或 ❌ 与诊断，从不抛异常 |
# | nbgrader 作业（`release/`） | 可见测试 + 隐藏测试 `grade("名字", 你的对象)` | 不通过就抛 `AssertionError`，这个单元得 0 分 |
#
# nbgrader 评分时（`nbgrader autograde`），老师的机器会从头到尾重新运行你的笔记本，
# 再把检查单元恢复成原样（你改了或删了也没用），每个检查单元通过就得到它的分数。几点须知：
#
# - 检查会确认你是**从零实现**的：运行你的注意力、多头注意力、LayerNorm 时，不能调用它们要替代的内置函数
#   （`F.scaled_dot_product_attention`、`nn.MultiheadAttention`、`F.layer_norm` 等），也不能直接导入参考包 `solutions`。
# - 后面章节需要前面章节的组件时，笔记本里会提供一个折叠起来的参考版本（provided，只读）。
#   所以某一章没做完，不会拖垮下一章，也不会把前一章的错误带到下一章。
# - 每个单元有执行时限；死循环会被中断并记 0 分。
#
# 下面演示一次失败的检查。这是一个“朴素”的 softmax：直接 `exp` 再归一化，对大的输入会溢出
# （`exp(1000) = inf`，`inf / inf = NaN`）。第 01 章你会写出数值稳定的版本。

# %%
def naive_softmax(x, axis=-1):
    """Softmax without the max-subtraction trick: overflows for large inputs."""
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


with np.errstate(over="ignore", invalid="ignore"):
    print("小输入 / small input:", naive_softmax(np.array([1.0, 2.0, 3.0])))
    print("大输入 / large input:", naive_softmax(np.array([1000.0, 1001.0])))

# %% [markdown]
# 把它交给检查。在自学版里你会看到 ❌ 和诊断；在 nbgrader 版里这个单元只是演示，不计分。

# %% check="softmax:naive_softmax"

# %% [markdown]
# ## 4. 怎么运行
#
# - **自学**：在仓库根目录运行 `make lab`，它会建好 `.venv`，把 `notebooks/` 里的笔记本复制到你的工作区 `workspace/`，
#   并在 JupyterLab 里打开它。按 00 → 07 的顺序做。
#   之后还有第 08 章（从 Transformer 到 GPT）、第 09 章（解码与开销）、第 10 章（手撕练习库）和附录 `11_tokenizers`
#   （子词分词：亲手写 BPE，再读 WordPiece、SentencePiece），附录学完第 06 章后随时可做。
#   第 08 章有一个训练单元格，在 2 核 CPU 上要跑几分钟（有进度条）；第 09 章直接加载第 08 章训练好的模型。
# - **从头运行**：菜单 *Kernel → Restart Kernel and Run All Cells*。每章开头的设置单元（setup cell）固定了随机种子，
#   所以重跑得到相同的数字；改了前面的单元，记得从头重跑，别依赖旧的变量。
# - **只在 CPU 上运行**：每章在双核 CPU 上一分钟左右跑完；第 07 章默认训练 4 个小模型（第 9、13、14 节），合计也在一分钟左右；
#   第 08 章训练一个小 GPT，要几分钟；第 09 章加载它（找不到第 08 章存下的模型时才重新训练，也要几分钟）。
# - **nbgrader**（老师）：见 `README.md` 的 Instructor path 和 `docs/INSTRUCTOR.md`。
#
# ## 5. 排错清单：损失不降、或者降了却不会做题时查什么
#
# 训练出了问题，按下面的顺序查，越靠前越常见、越便宜。每一条都链到讲它的那一节（链接打开工作区里的那一章）。
#
# 1. **形状。** 在前向里打印每一步的形状，对照 `# (B, H, T_q, d_k)` 式的注释；`F.cross_entropy` 要类别在第 1 维，
#    logits 摊平成 `(B·T, V)`、目标摊平成 `(B·T,)`。→ [02 第 4 节 形状追踪](02_multihead.ipynb)、[07 第 3 节](07_copy_task.ipynb)
# 2. **分头与合头。** 先 `view(B, T, H, d_k)` 再 `transpose(1, 2)`；合头先转回来再 `contiguous().view`。写错不报错，
#    却会把不同位置的数混在一起。→ [02 第 3 节](02_multihead.ipynb)
# 3. **掩码。** 约定 True = 可以看（本章第 2 节）；填充掩码只遮挡键（[05 第 1 节](05_layers.ipynb)）；
#    因果掩码含对角线（[05 第 2 节](05_layers.ipynb)）；掩码在 softmax **之前**加（[01 第 4、6 节](01_attention.ipynb)）。
# 4. **NaN。** 整行被遮挡时 `-inf` 会得到 NaN，并沿着梯度扩散到所有参数。→ [01 第 6 节](01_attention.ipynb)、[05 第 1 节](05_layers.ipynb)
# 5. **损失里的 PAD。** 用 `ignore_index` 排除 PAD，分母是非 PAD 的个数。→ [07 第 3 节](07_copy_task.ipynb)
# 6. **缩放。** 分数除以 $\sqrt{d_k}$（[01 第 5 节](01_attention.ipynb)）；嵌入乘 $\sqrt{d_{\text{model}}}$（[06 第 2 节](06_transformer.ipynb)）。
# 7. **位置编码。** 忘了加，自注意力就不知道顺序：把输入打乱，输出只是跟着打乱。→ [03 第 1 节](03_positional.ipynb)
# 8. **一步训练的顺序。** 前向 → 损失 → `zero_grad` → `backward` → `step` → `scheduler.step`。→ [07 第 6 节](07_copy_task.ipynb)
# 9. **学习率与预热。** 一开始就用大学习率容易发散；小批配大学习率会在噪声里来回跳。→ [07 第 5、13 节](07_copy_task.ipynb)、
#    [04 第 6 节 Post-LN 与 Pre-LN](04_ffn_layernorm.ipynb)
# 10. **数据量。** 先算模型见过多少条序列，再怀疑实现。→ [07 第 13 节](07_copy_task.ipynb)
# 11. **损失降了，贪心解码却全错。** 教师强制下的指标会被“泄漏未来”的 bug 骗过，以贪心解码为准。→ [07 第 7、14 节](07_copy_task.ipynb)
# 12. **评估时的模式。** 评估和解码前 `model.eval()`（关掉 dropout），训练时 `model.train()`。→ [06 第 6 节](06_transformer.ipynb)
#
# 准备好了就打开 `01_attention.ipynb`，从一个数值稳定的 softmax 开始。
