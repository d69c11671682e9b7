# %% [markdown]
# # 11 · 附录：子词分词（Subword tokenization：BPE、WordPiece、SentencePiece）
#
# 它回答第 06 章留下的一个问题：原论文那个“共享 BPE 词表，约 37000 个 token”（第 06 章第 8 节）是怎么来的。
# 你要亲手写 BPE 的训练和编码（面试常考，二十来行纯 Python）；WordPiece、SentencePiece 等是阅读材料。
#
# **本章共 6 分**，2 个评分单元格：
#
# | 练习 | 评分单元格（grade_id） | 检查什么 | 分值 |
# | --- | --- | --- | --- |
# | `learn_bpe` | `bpe_learns_sennrich_merges` | 只在词内数相邻对、按词频加权、取最多的一对 | 3 |
# | `bpe_encode`、`bpe_decode` | `bpe_round_trip` | 按学到的顺序应用合并；编码再解码得回原文 | 3 |
#
# 1. 为什么要按子词切分；
# 2. BPE（Byte Pair Encoding）的训练与编码（练习）；
# 3. WordPiece（BERT）：换一个合并标准；
# 4. SentencePiece 与 Unigram 语言模型（T5、LLaMA 1/2）；
# 5. 字节级 BPE（GPT-2 及之后的 GPT 系列）；
# 6. 分词与模型的关系；
# 7. 面试要点。

# %%
# Setup: the tokenizers below are pure Python; a Counter is all they need.
from collections import Counter

END_OF_WORD = "</w>"  # marks the end of a word, so that "est</w>" (a word ending) differs from "est" inside a word

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
# **编码**一个新词时，先拆成字符（加 `</w>`），再**按学到的顺序**（rank）逐条把每条合并规则应用到整个词。
#
# 三个常见错误：把整个语料当成一条长序列去数相邻对（会数到“上一个词的 `</w>` + 下一个词的首字母”这种跨词的对；
# BPE 的合并永远在词内）；数相邻对时忘了乘词频（出现 5 次的词里的一对要算 5 次）；编码时不按学到的顺序、
# 而是从左往右遇到学过的对就合并（切分会与训练时不同）。
#
# 下面提供了 `merge_pair(symbols, pair)`：把元组 `symbols` 里所有相邻的 `pair` 从左到右（不重叠）合并成一个符号 `a + b`。

# %% provided="merge_pair"

# %% [markdown]
# 练习 1：写 `learn_bpe(word_freqs, num_merges)`：`word_freqs` 是词 → 词频的字典；每个词从 `tuple(word) + (END_OF_WORD,)` 开始；
# 每轮在每个词内部按词频加权数相邻对，取次数最多的一对（并列时取先数到的，字典的 `max` 正是这样），用 `merge_pair` 合并所有词、
# 记下这条规则；最多的一对不足 2 次时提前停止。返回合并规则的列表 `[(a, b), ...]`，按学到的顺序。

# %% exercise="learn_bpe"

# %% grade_id="bpe_learns_sennrich_merges" points=3 check="learn_bpe:learn_bpe"
# Visible tests: the first merges of Sennrich et al.'s example, and the early stop.
_merges = learn_bpe({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 4)
assert isinstance(_merges, list) and len(_merges) == 4, f"应返回 4 条合并的列表 / must return a list of 4 merges, got {_merges!r}"
assert [tuple(_m) for _m in _merges[:3]] == [("e", "s"), ("es", "t"), ("est", "</w>")], \
    f"前三条应为 e+s（9 次）、es+t、est+</w> / the first three must be e+s (9 times), es+t, est+</w>; got {_merges[:3]}"
assert tuple(_merges[3]) == ("l", "o"), f"第 4 条应为 l+o（low 5 + lower 2 = 7 次）/ the 4th must be l+o (7 times), got {_merges[3]}"
assert learn_bpe({"abc": 1}, 10) == [], "没有出现 2 次的对时不合并 / no pair occurring twice: no merge"

# %% [markdown]
# 在 Sennrich 等 2016 的经典语料上学 10 条规则：

# %%
corpus = {"low": 5, "lower": 2, "newest": 6, "widest": 3}                  # word -> frequency
try:
    merges = learn_bpe(corpus, 10)
    for _k, (_a, _b) in enumerate(merges, start=1):
        print(f"merge {_k:2d}: {_a} + {_b} -> {_a + _b}")
except NotImplementedError:
    merges = None
    print("完成上面的练习后再运行 / finish the exercise above first")

# %% [markdown]
# 练习 2：写 `bpe_encode(word, merges)`（返回 token 的列表）和 `bpe_decode(tokens)`（把一个或多个词的 token 拼回文本：
# `</w>` 是词与词之间的空格，末尾不留空格）。

# %% exercise="bpe_encode,bpe_decode"

# %% grade_id="bpe_round_trip" points=3 check="bpe_encode:bpe_encode"
# Visible tests: merges applied in order, the end-of-word marker, and decode(encode(text)) == text.
assert bpe_encode("abc", [("b", "c"), ("a", "b")]) == ["a", "bc", "</w>"], \
    f"按顺序：先 b+c，a+b 就用不上了 / in order: b+c first, then a+b no longer applies; got {bpe_encode('abc', [('b', 'c'), ('a', 'b')])}"
assert bpe_encode("low", []) == ["l", "o", "w", "</w>"], "没有合并时是字符加 </w> / with no merges: the characters and </w>"
_m = learn_bpe({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 10)
assert bpe_encode("lowest", _m) == ["low", "est</w>"], f"lowest 应编码为 low + est</w> / lowest must be low + est</w>, got {bpe_encode('lowest', _m)}"
_text = "the newest lower widest low"
_tokens = [_t for _w in _text.split() for _t in bpe_encode(_w, _m)]
assert bpe_decode(_tokens) == _text, f"解码应得回原文 / decoding must give the text back: {bpe_decode(_tokens)!r}"

# %% [markdown]
# 编码三个训练时没见过的词，再解码回去：

# %%
if merges is not None:
    try:
        for w in ("lowest", "newer", "wider"):                                 # words never seen in training
            print(f"encode {w!r}: {bpe_encode(w, merges)} -> decode: {bpe_decode(bpe_encode(w, merges))!r}")
    except NotImplementedError:
        print("完成上面的练习后再运行 / finish the exercise above first")

# %% [markdown]
# 没见过的 `lowest` 被拆成学过的 `low` + `est</w>`；只要字符都在初始词表里，
# 最坏也能退回单个字符，不会出现 `<unk>`（字节级 BPE 连这个前提都不需要，见第 5 节）。
# 词尾标记 `</w>` 让 `est</w>`（词尾的 est）和词中间的 est 成为不同的 token。
#
# 讲 BPE 时另一个常用的例子是 `aaabdaaabac`（一个词）：`a + a` 出现最多（4 次），先合并；第 2 轮 `aa + a` 和 `a + b`
# 都出现 2 次，并列时取先数到的 `aa + a`（另一种常见讲法取 `a + b`）。平局规则只要训练和编码一致即可。

# %%
try:
    print(learn_bpe({"aaabdaaabac": 1}, 5))
except NotImplementedError:
    print("完成上面的练习后再运行 / finish the exercise above first")

# %% [markdown]
# ## 3. WordPiece：按似然增益合并
#
# **WordPiece**（BERT）的训练流程同 BPE，但合并的标准不是次数，而是**似然增益**
# $\dfrac{\text{count}(ab)}{\text{count}(a)\cdot\text{count}(b)}$：两个符号“总是一起出现”才优先合并
# （Google 没有公开 WordPiece 的训练代码；这个公式是 Hugging Face 教程里的重现）。
# 词中间的片段带 `##` 前缀表示“接在前一个片段后面”，如 bert-base-uncased 把 `unaffable` 切成 `un`, `##aff`, `##able`；编码时从词首开始贪心地取词表里最长的匹配。
#
# 同一份语料上，BPE 与 WordPiece 第一步选的对就不同：

# %%
words = [list(w) + [END_OF_WORD] for w in corpus]                         # the four words as symbols
freqs = list(corpus.values())
units, pair_counts = Counter(), Counter()
for symbols, freq in zip(words, freqs):
    units.update({s: freq * symbols.count(s) for s in set(symbols)})     # each symbol, weighted by the word
    pair_counts.update({p: freq for p in zip(symbols, symbols[1:])})    # (no pair repeats inside these words)
bpe_best = max(pair_counts, key=pair_counts.get)
wordpiece_best = max(pair_counts, key=lambda p: pair_counts[p] / (units[p[0]] * units[p[1]]))   # likelihood gain
for name, (a, b) in (("BPE", bpe_best), ("WordPiece", wordpiece_best)):
    print(f"{name:9s} first merge: {a} + {b} (count {pair_counts[a, b]}, count({a}) = {units[a]}, count({b}) = {units[b]}, "
          f"score {pair_counts[a, b] / (units[a] * units[b]):.3f})")

# %% [markdown]
# BPE 选最常见的 `e + s`（9 次，与 `s + t`、`t + </w>` 三者并列，按第 2 节的规则取先数到的一对）；
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
