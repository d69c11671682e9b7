# %% [markdown]
# # 10 · 附录：子词分词（Subword tokenization：BPE、WordPiece、SentencePiece）
#
# 这是一篇选做阅读的附录，**不计分**，也没有要你写的代码：从头运行一遍，读懂每一步的输出即可。
# 它回答第 06 章留下的一个问题：原论文那个“共享 BPE 词表，约 37000 个 token”（第 06 章第 8 节）是怎么来的。
#
# 1. 为什么要按子词切分；
# 2. BPE（Byte Pair Encoding）的训练与编码，附一个三十来行的纯 Python 实现；
# 3. WordPiece（BERT）：换一个合并标准；
# 4. SentencePiece 与 Unigram 语言模型（T5、LLaMA 1/2）；
# 5. 字节级 BPE（GPT-2 及之后的 GPT 系列）；
# 6. 分词与模型的关系；
# 7. 面试要点。

# %%
# Setup: the tokenizers below are pure Python; a Counter is all they need.
from collections import Counter

# %% [markdown]
# ## 1. 为什么要子词分词
#
# 模型只认 token id，分词器（tokenizer）负责把文本切成 token、再映射成整数。怎么切是一个折中：
#
# - **按词切**：词表太大，没见过的词只能变成 `<unk>`；
# - **按字符切**：序列太长（注意力是 $O(n^2)$）。第 08 章的字符级分词器就是这样：中文一个字一个 token；
# - **子词（subword）分词**折中：常见词是一个 token，罕见词拆成几个常见片段。

# %% [markdown]
# ## 2. BPE：训练与编码
#
# **BPE 的训练**：
#
# 1. 把语料里的每个词拆成字符（或字节），这些就是初始词表；
# 2. 统计所有**相邻符号对**出现的次数（按词频加权）；
# 3. 把出现最多的一对合并成一个新符号，加入词表，记下这条合并规则；
# 4. 重复 2–3，直到词表达到目标大小（或再没有出现 2 次以上的对）。
#
# **编码**一个新词时，先拆成字符，再**按学到的顺序**逐条应用合并规则。下面三十来行纯 Python 就是一个完整的 BPE：

# %%
def count_pairs(words):
    """words: {tuple of symbols: frequency} -> Counter of adjacent symbol pairs, weighted by frequency."""
    pairs = Counter()
    for symbols, freq in words.items():
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] += freq
    return pairs


def merge_pair(symbols, pair, new):
    """Replace each occurrence of `pair` in the tuple `symbols` by `new`, left to right, no overlaps."""
    out, i = [], 0
    while i < len(symbols):
        if symbols[i:i + 2] == pair:
            out.append(new)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def train_bpe(words, num_merges, new_names=None, show=str):
    """Learn up to num_merges merges, most frequent pair first (ties: the pair seen first); print each round."""
    merges = []
    for k in range(num_merges):
        pairs = count_pairs(words)
        if not pairs or max(pairs.values()) < 2:
            break
        best = max(pairs, key=pairs.get)
        new = new_names[k] if new_names else best[0] + best[1]
        words = {merge_pair(symbols, best, new): freq for symbols, freq in words.items()}
        merges.append((best, new))
        pair_text = f"{best[0]} + {best[1]}"
        print(f"merge {k + 1:2d}: {pair_text:15s} -> {new:10s} | " + ", ".join(show(w) for w in words))
    return merges


def bpe_encode(word, merges):
    """Characters plus the end-of-word marker, then every learned merge in order."""
    symbols = tuple(word) + ("</w>",)
    for pair, new in merges:
        symbols = merge_pair(symbols, pair, new)
    return symbols


# %% [markdown]
# 先看讲 BPE 时常用的例子 `aaabdaaabac`（一个“词”，新符号依次叫 `Z`、`Y`、`X`）：

# %%
toy_merges = train_bpe({tuple("aaabdaaabac"): 1}, 3, new_names="ZYX", show="".join)

# %% [markdown]
# `aa` 出现最多 → `Z`，得到 `ZabdZabac`；第 2 轮 `Za` 和 `ab` 都出现 2 次，平局。我们的规则取先出现的 `Za`
# （→ `YbdYbac` → `XdXac`）；另一种常见讲法取 `ab`（→ `ZYdZYac` → `XdXac`）。平局规则只要训练和编码一致即可。
#
# 再看 Sennrich 等 2016 的经典语料：四个词和它们的词频，学 10 条合并规则，然后编码三个训练时没见过的词：

# %%
corpus = {"low": 5, "lower": 2, "newest": 6, "widest": 3}                  # word -> frequency
words = {tuple(w) + ("</w>",): freq for w, freq in corpus.items()}        # "</w>" marks the end of a word
merges = train_bpe(words, 10, show=" ".join)
for w in ("lowest", "newer", "wider"):                                     # words never seen in training
    print(f"encode {w!r}: {bpe_encode(w, merges)}")

# %% [markdown]
# 没见过的 `lowest` 被拆成学过的 `low` + `est</w>`；只要字符都在初始词表里，
# 最坏也能退回单个字符，不会出现 `<unk>`（字节级 BPE 连这个前提都不需要，见第 5 节）。
# 词尾标记 `</w>` 让 `est</w>`（词尾的 est）和词中间的 est 成为不同的 token。

# %% [markdown]
# ## 3. WordPiece：按似然增益合并
#
# **WordPiece**（BERT）的训练流程同 BPE，但合并的标准不是次数，而是**似然增益**
# $\dfrac{\text{count}(ab)}{\text{count}(a)\cdot\text{count}(b)}$：两个符号“总是一起出现”才优先合并。
# 词中间的片段带 `##` 前缀表示“接在前一个片段后面”，如 `playing` → `play`, `##ing`；编码时从词首开始贪心地取词表里最长的匹配。
#
# 同一份语料上，BPE 与 WordPiece 第一步选的对就不同：

# %%
units = Counter()
for symbols, freq in words.items():
    for unit in symbols:
        units[unit] += freq
pairs = count_pairs(words)
wordpiece_best = max(pairs, key=lambda p: pairs[p] / (units[p[0]] * units[p[1]]))   # likelihood gain
for name, (a, b) in (("BPE", max(pairs, key=pairs.get)), ("WordPiece", wordpiece_best)):
    print(f"{name:9s} first merge: {a} + {b} (count {pairs[a, b]}, count({a}) = {units[a]}, count({b}) = {units[b]}, "
          f"score {pairs[a, b] / (units[a] * units[b]):.3f})")

# %% [markdown]
# BPE 选最常见的 `e + s`（9 次，与 `s + t` 并列，按第 2 节的规则取先出现的一对）；
# WordPiece 选 `i + d`：它只出现 3 次，但 `i` 和 `d` 各自也只出现 3 次，每次都在一起。

# %% [markdown]
# ## 4. SentencePiece 与 Unigram 语言模型
#
# **SentencePiece**（T5、LLaMA 1/2）不需要先按空格切词，把原始文本（包括空格，写成 `▁`：U+2581，不是下划线）整个当作字符序列，
# 所以中文、日文这类没有空格的语言也能直接用，解码时原样还原空格。它支持两种算法：BPE，以及 **Unigram 语言模型**
# （从一个很大的候选词表出发，反复删掉对语料似然影响最小的 token；编码时用 Viterbi 找概率最大的切分）。T5 用 Unigram，LLaMA 1/2 用 BPE。

# %% [markdown]
# ## 5. 字节级 BPE
#
# **字节级 BPE（byte-level BPE）**（GPT-2 及之后的 GPT 系列）：初始符号是 256 个**字节**而不是字符，任何 UTF-8 文本都能编码，
# 彻底没有 `<unk>`。GPT-2 的词表是 256 个字节 + 50000 次合并 + 1 个 `<|endoftext|>` = 50257。

# %% [markdown]
# ## 6. 分词与模型的关系
#
# 词表大小 $V$ 决定嵌入矩阵 $V \times d$ 的大小（第 06 章第 8 节），分词粒度决定序列长度 $n$（注意力的 $n^2$）。
# 源、目标共用一个词表（英德这种字母相近的语言对）时，源嵌入、目标嵌入和输出投影才能三者共用一个矩阵（权重共享，weight tying）。

# %% [markdown]
# ## 7. 面试要点（Q&A）
#
# **Q1：BPE 算法的基本流程？** 训练：把词拆成字符（或字节）作为初始词表；统计相邻符号对的频次；把最频繁的一对合并成新符号、
# 记下这条规则；重复直到词表达到目标大小。编码：把新词拆成字符，按学到的顺序逐条应用合并规则。
# 好处：词表大小可控，序列长度适中，没见过的词拆成已知子词，不会出现 `<unk>`（字符都在初始词表里时；字节级 BPE 则对任何文本都成立）。
#
# **Q2：BPE、WordPiece、SentencePiece、字节级 BPE 有什么区别？** WordPiece（BERT）按似然增益
# $\text{count}(ab) / (\text{count}(a)\,\text{count}(b))$ 选合并，词中片段带 `##`，编码用最长匹配；
# SentencePiece（T5、LLaMA 1/2）把含空格（`▁`）的原始文本直接当序列，不需要预分词，算法可选 BPE 或 Unigram 语言模型；
# 字节级 BPE（GPT-2）以 256 个字节为初始符号，任何文本都能编码。
