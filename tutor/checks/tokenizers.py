"""Checks of chapter 11's BPE (``solutions/tokenizers.py``): ``learn_bpe`` and ``bpe_encode``.

Outputs are compared as text (merges written ``a+b``, tokens separated by spaces), so a message
shows both sides readably.
"""
from ..engine.messages import define_mistakes
from ..engine.running import solutions
from ..engine.specs import Case, FunctionCheck, wrong

END = "</w>"

MISTAKES = define_mistakes({
    "bpe_across_word_boundaries": (
        "把整个语料当作一条长序列统计相邻对，跨过了词的边界（如 `</w>` + 下一个词的首字母）：BPE 只在每个词的内部数"
        "相邻对，合并永远不跨词",
        "pairs counted over the corpus as one long sequence, across word boundaries (`</w>` + the next word's"
        " first letter): BPE counts pairs inside each word only, a merge never spans two words",
    ),
    "bpe_pairs_not_weighted": (
        "相邻对的次数没有乘词频：每个不同的词只数了一次；出现 5 次的词里的一对应算 5 次",
        "pair counts not weighted by word frequency: each distinct word counted once; a pair in a word that "
        "occurs 5 times counts 5 times",
    ),
    "bpe_merges_out_of_order": (
        "合并规则没有按学到的顺序（rank）应用：从左到右扫描、遇到任何一条学过的对就合并，结果与训练时的切分不同；应按顺序逐条"
        "把每条规则应用到整个词",
        "merges not applied in rank order: scanning left to right and merging any learned pair found gives "
        "another split than training did; apply the merges one by one, in the order learned, each to the "
        "whole word",
    ),
    "bpe_no_end_of_word": (
        "编码时忘了词尾标记 `</w>`：训练时每个词都以 `</w>` 结尾，`est</w>` 这样的合并就用不上了",
        "the end-of-word marker `</w>` forgotten when encoding: every training word ended in `</w>`, so "
        "merges such as `est</w>` no longer apply",
    ),
})


def _merges_text(merges):
    return ", ".join(f"{a}+{b}" for a, b in merges)


def _tokens_text(encode, words, merges):
    return " | ".join(" ".join(encode(word, list(merges))) for word in words)


def _merge(symbols, pair):
    out, i = [], 0
    while i < len(symbols):
        if tuple(symbols[i:i + 2]) == pair:
            out.append(pair[0] + pair[1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def _learn(sequences, num_merges):
    """BPE on ``sequences`` (a list of (symbols, weight)); pairs counted inside each sequence."""
    merges = []
    for _ in range(num_merges):
        pairs = {}
        for symbols, weight in sequences:
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] = pairs.get(pair, 0) + weight
        if not pairs or max(pairs.values()) < 2:
            break
        best = max(pairs, key=pairs.get)
        sequences = [(_merge(symbols, best), weight) for symbols, weight in sequences]
        merges.append(best)
    return merges


def learn_variants(ref, case):
    corpus, n = case["word_freqs"], case["num_merges"]
    words = [(list(word) + [END], freq) for word, freq in corpus.items()]
    one_sequence = [([s for word, freq in corpus.items() for _ in range(freq) for s in list(word) + [END]], 1)]
    return [wrong("bpe_across_word_boundaries", lambda: {"merges": _merges_text(_learn(one_sequence, n))}),
            wrong("bpe_pairs_not_weighted", lambda: {"merges": _merges_text(_learn([(s, 1) for s, _ in words], n))})]


def _learn_cases():
    return [Case(f"{label}, num_merges={n}", {}, {"word_freqs": corpus, "num_merges": n}) for label, corpus, n in [
        ("Sennrich 2016: low 5, lower 2, newest 6, widest 3", {"low": 5, "lower": 2, "newest": 6, "widest": 3}, 10),
        ("词频决定次序 / frequencies decide: hug 10, pug 5, pun 12, bun 4, hugs 5",
         {"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}, 6),
        ("单字词很多 / many one-letter words: a 4, b 3, ab 1", {"a": 4, "b": 3, "ab": 1}, 4),
        ("提前停止 / stops early: aaabdaaabac 1", {"aaabdaaabac": 1}, 20)]]


def encode_variants(ref, case):
    words, merges = case["words"], case["merges"]

    def out_of_order(word, merges):
        symbols, learned = list(word) + [END], set(merges)
        changed = True
        while changed:
            changed = False
            for i in range(len(symbols) - 1):
                if (symbols[i], symbols[i + 1]) in learned:
                    symbols = symbols[:i] + [symbols[i] + symbols[i + 1]] + symbols[i + 2:]
                    changed = True
                    break
        return symbols

    def no_end(word, merges):
        symbols = list(word)
        for pair in merges:
            symbols = _merge(symbols, pair)
        return symbols

    return [wrong("bpe_merges_out_of_order", lambda: {"tokens": _tokens_text(out_of_order, words, merges)}),
            wrong("bpe_no_end_of_word", lambda: {"tokens": _tokens_text(no_end, words, merges)})]


def _encode_cases():
    sennrich = solutions.learn_bpe({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 10)
    return [Case("Sennrich 的 10 条合并 / Sennrich's 10 merges: lowest, newer, wider, low", {},
                 {"words": ["lowest", "newer", "wider", "low"], "merges": sennrich}),
            Case("次序要紧 / order matters: merges b+c, a+b, then abc", {},
                 {"words": ["abc", "abcabc"], "merges": [("b", "c"), ("a", "b"), ("a", "bc")]}),
            Case("没有合并 / no merges", {}, {"words": ["xyz"], "merges": []})]


FunctionCheck("learn_bpe", cases=_learn_cases, outputs=("merges",), variants=learn_variants,
              call=lambda f, case, _: _merges_text(f(dict(case["word_freqs"]), case["num_merges"])),
              mistakes=("bpe_across_word_boundaries", "bpe_pairs_not_weighted"))

FunctionCheck("bpe_encode", cases=_encode_cases, outputs=("tokens",), variants=encode_variants,
              call=lambda f, case, _: _tokens_text(f, case["words"], case["merges"]),
              mistakes=("bpe_merges_out_of_order", "bpe_no_end_of_word"))
