"""Checks of chapter 11's BPE (``solutions/tokenizers.py``): ``learn_bpe`` and ``bpe_encode``.

Outputs are compared as text (merges written ``a+b``, tokens separated by spaces), so a message
shows both sides readably.
"""
from ..engine.diagnosis import combine
from ..engine.messages import define_mistakes
from ..engine.running import solutions
from ..engine.specs import Bug, Case, FunctionCheck

END = "</w>"

MISTAKES = define_mistakes({
    "bpe_across_word_boundaries": (
        "把整个语料当作一条长序列统计相邻对，跨过了词的边界（如 </w> + 下一个词的首字母）：BPE 只在每个词的内部数"
        "相邻对，合并永远不跨词",
        "pairs counted over the corpus as one long sequence, across word boundaries (</w> + the next word's"
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
    "bpe_no_min_count_stop": (
        "没有在最多的一对不足 2 次时停止：只出现一次的对也被合并了（这样的合并什么也没压缩），对都合并完后 max() "
        "面对空的统计表就报错；最多的一对少于 2 次（或已没有对）时停止",
        "no stop when the most frequent pair occurs fewer than 2 times: pairs seen once are merged too (a merge "
        "that compresses nothing), and once no pair is left max() of the empty counts raises; stop when the best "
        "pair occurs fewer than 2 times (or no pair is left)",
    ),
    "bpe_replace_across_symbols": (
        "用 str.replace 在空格连接的符号串上合并：\"a b\" 也会匹配到 \"a bc\" 的开头，把 a 和符号 bc 的一半拼在一起，"
        "跨过了符号的边界（原版 subword-nmt 脚本的著名错误）；按符号逐个比较相邻的一对（merge_pair），"
        "或用带边界的正则 (?<!\\S)a b(?!\\S)",
        "merged with str.replace on the symbols joined by spaces: \"a b\" also matches the start of \"a bc\", "
        "gluing a to half of the symbol bc across a symbol boundary (the original subword-nmt script's famous "
        "bug); compare adjacent symbols pair by pair (merge_pair), or use a bounded regex (?<!\\S)a b(?!\\S)",
    ),
    "bpe_end_marker_glued": (
        "</w> 粘在了最后一个字符上（如 subword-nmt 0.2 的 ('l', 'o', 'w</w>')）：本章的契约里 </w> "
        "是单独的符号，tuple(word) + ('</w>',)，合并规则（如 w+</w>）才能和学到的一致",
        "</w> glued to the last character (as subword-nmt 0.2 does: ('l', 'o', 'w</w>')): in this chapter's "
        "contract </w> is a symbol of its own, tuple(word) + ('</w>',), so that merges such as w+</w> match "
        "the learned ones",
    ),
    "bpe_end_marker_stripped": (
        "输出里去掉了 </w>（subword-nmt 的 apply_bpe 为了打印会这样做）：契约的 bpe_encode 返回的 token 保留 "
        "</w>（如 'est</w>'），bpe_decode 靠它知道词在哪里结束",
        "</w> removed from the output (subword-nmt's apply_bpe does so for printing): the contract's bpe_encode "
        "keeps it in the tokens (e.g. 'est</w>'), which is how bpe_decode knows where a word ends",
    ),
    "bpe_end_marker_after_merges": (
        "</w> 是在所有合并之后才加上的：合并时词尾没有 </w>，est</w> 这样的合并就用不上；"
        "应先 tuple(word) + ('</w>',)，再按顺序合并",
        "</w> appended after the merges: while merging the word had no </w>, so merges such as est</w> never "
        "apply; start from tuple(word) + ('</w>',), then merge in order",
    ),
    "bpe_greedy_longest_match": (
        "按词表贪心地取最长匹配（WordPiece 的做法）：BPE 的切分由合并顺序决定，不是由最长的 token 决定；"
        "按学到的顺序逐条把每条合并应用到整个词",
        "greedy longest match against the vocabulary (WordPiece's way): a BPE split is decided by the order of the "
        "merges, not by the longest token; apply the merges one by one, in the order learned, each to the whole "
        "word",
    ),
    "bpe_ties_by_largest_pair": (
        "次数并列时取了字典序最大的一对（subword-nmt 的 max(stats, key=lambda x: (stats[x], x))）：契约取先统计到的"
        "那一对（按词的顺序、每个词从左到右），max(pairs, key=pairs.get) 正是这样",
        "a tie goes to the largest pair in string order (subword-nmt's max(stats, key=lambda x: (stats[x], x))): "
        "the contract takes the pair counted first (words in order, each left to right), which is what "
        "max(pairs, key=pairs.get) does",
    ),
    "bpe_no_end_of_word": (
        "编码时忘了词尾标记 </w>：训练时每个词都以 </w> 结尾，est</w> 这样的合并就用不上了",
        "the end-of-word marker </w> forgotten when encoding: every training word ended in </w>, so "
        "merges such as est</w> no longer apply",
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


def _replace(symbols, pair):
    """``str.replace`` of ``"a b"`` by ``"ab"`` on the symbols joined by spaces (crosses symbol boundaries)."""
    return " ".join(symbols).replace(f"{pair[0]} {pair[1]}", pair[0] + pair[1]).split(" ")


def _learn(sequences, num_merges, least=2, merge=_merge, ties="first"):
    """BPE on ``sequences`` (a list of (symbols, weight)); pairs counted inside each sequence;
    stops when the best pair occurs fewer than ``least`` times or no pair is left; ``ties="largest"``:
    a tie goes to the larger pair (subword-nmt's ``max(stats, key=lambda x: (stats[x], x))``)."""
    merges = []
    for _ in range(num_merges):
        pairs = {}
        for symbols, weight in sequences:
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] = pairs.get(pair, 0) + weight
        if not pairs or max(pairs.values()) < least:
            break
        best = max(pairs, key=pairs.get) if ties == "first" else max(pairs, key=lambda x: (pairs[x], x))
        sequences = [(merge(symbols, best), weight) for symbols, weight in sequences]
        merges.append(best)
    return merges


LEARN_BUGS = [Bug("bpe_across_word_boundaries", dict(data="one sequence")),
              Bug("bpe_pairs_not_weighted", dict(data="unweighted")), Bug("bpe_end_marker_glued", dict(data="glued")),
              Bug("bpe_no_min_count_stop", dict(least=1)), Bug("bpe_replace_across_symbols", dict(merge=_replace)),
              Bug("bpe_ties_by_largest_pair", dict(ties="largest"))]


def learn_variants(ref, case):
    corpus, n = case["word_freqs"], case["num_merges"]
    data = {"words": [(list(word) + [END], freq) for word, freq in corpus.items()],
            "one sequence": [([s for word, freq in corpus.items() for _ in range(freq)
                               for s in list(word) + [END]], 1)],
            "unweighted": [(list(word) + [END], 1) for word in corpus],
            "glued": [(list(word[:-1]) + [word[-1] + END], freq) for word, freq in corpus.items()]}

    def run(data_kind="words", **switches):
        return {"merges": _merges_text(_learn(data[data_kind], n, **switches))}
    return combine(LEARN_BUGS, lambda data="words", **switches: run(data, **switches))


def _learn_error(case, error):
    """max() of the empty pair counts: the loop never stopped below count 2."""
    text = str(error)
    return "bpe_no_min_count_stop" if isinstance(error, ValueError) and "max()" in text and "empty" in text else None


def _learn_cases():
    return [Case(f"{label}, num_merges={n}", {}, {"word_freqs": corpus, "num_merges": n}) for label, corpus, n in [
        ("Sennrich 2016: low 5, lower 2, newest 6, widest 3", {"low": 5, "lower": 2, "newest": 6, "widest": 3}, 10),
        ("词频决定次序 / frequencies decide: hug 10, pug 5, pun 12, bun 4, hugs 5",
         {"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}, 6),
        ("单字词很多 / many one-letter words: a 4, b 3, ab 1", {"a": 4, "b": 3, "ab": 1}, 4),
        ("提前停止 / stops early: aaabdaaabac 1", {"aaabdaaabac": 1}, 20),
        ("没有出现两次的对 / no pair occurs twice: abcd 1", {"abcd": 1}, 2),
        ("合并不能跨符号 / a merge never crosses a symbol: ab 10, abc 3, bc 9", {"ab": 10, "abc": 3, "bc": 9}, 6)]]


ENCODE_BUGS = [Bug("bpe_merges_out_of_order", dict(order="scan")),
               Bug("bpe_greedy_longest_match", dict(order="greedy")),
               Bug("bpe_replace_across_symbols", dict(order="replace")), Bug("bpe_no_end_of_word", dict(end="none")),
               Bug("bpe_end_marker_after_merges", dict(end="after")), Bug("bpe_end_marker_glued", dict(end="glued")),
               Bug("bpe_end_marker_stripped", dict(stripped=True))]


def _scan(symbols, merges):
    """Merge any learned pair found scanning left to right, again and again (rank ignored)."""
    learned, changed = set(merges), True
    while changed:
        changed = False
        for i in range(len(symbols) - 1):
            if (symbols[i], symbols[i + 1]) in learned:
                symbols = symbols[:i] + [symbols[i] + symbols[i + 1]] + symbols[i + 2:]
                changed = True
                break
    return symbols


def _greedy(symbols, merges):
    """Longest match from the left against the merged tokens (WordPiece's way)."""
    vocabulary, out, i = {a + b for a, b in merges}, [], 0
    while i < len(symbols):
        j = next((j for j in range(len(symbols), i + 1, -1) if "".join(symbols[i:j]) in vocabulary), i + 1)
        out.append("".join(symbols[i:j]))
        i = j
    return out


def _in_order(symbols, merges, merge=_merge):
    for pair in merges:
        symbols = merge(symbols, pair)
    return symbols


def _encoder(order="rank", end="symbol", stripped=False):
    """A wrong ``bpe_encode``: the merges applied in another way, ``</w>`` handled otherwise, or stripped."""
    apply = {"rank": _in_order, "scan": _scan, "greedy": _greedy,
             "replace": lambda symbols, merges: _in_order(symbols, merges, _replace)}[order]

    def encode(word, merges):
        if end == "glued":
            symbols = list(word[:-1]) + [word[-1] + END]
        else:
            symbols = list(word) + ([END] if end == "symbol" else [])
        tokens = apply(symbols, merges) + ([END] if end == "after" else [])
        if stripped and tokens[-1] == END:
            tokens = tokens[:-1]
        elif stripped and tokens[-1].endswith(END):
            tokens[-1] = tokens[-1][:-len(END)]
        return tokens
    return encode


def encode_variants(ref, case):
    words, merges = case["words"], case["merges"]
    return combine(ENCODE_BUGS, lambda **switches: {"tokens": _tokens_text(_encoder(**switches), words, merges)})


def _encode_cases():
    sennrich = solutions.learn_bpe({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 10)
    return [Case("Sennrich 的 10 条合并 / Sennrich's 10 merges: lowest, newer, wider, low", {},
                 {"words": ["lowest", "newer", "wider", "low"], "merges": sennrich}),
            Case("次序要紧 / order matters: merges b+c, a+b, then abc", {},
                 {"words": ["abc", "abcabc"], "merges": [("b", "c"), ("a", "b"), ("a", "bc")]}),
            Case("次序决定切分 / the order decides the split: merges b+c, then a+b", {},
                 {"words": ["abc", "cabc"], "merges": [("b", "c"), ("a", "b")]}),
            Case("先合并 t+</w>，再 s+t / t+</w> first, then s+t", {},
                 {"words": ["st", "best"], "merges": [("t", END), ("s", "t")]}),
            Case("没有合并 / no merges", {}, {"words": ["xyz"], "merges": []})]


FunctionCheck("learn_bpe", cases=_learn_cases, outputs=("merges",), variants=learn_variants,
              call=lambda f, case, _: _merges_text(f(dict(case["word_freqs"]), case["num_merges"])),
              on_error=_learn_error,
              mistakes=("bpe_across_word_boundaries", "bpe_pairs_not_weighted", "bpe_no_min_count_stop",
                        "bpe_replace_across_symbols", "bpe_end_marker_glued", "bpe_ties_by_largest_pair"))

FunctionCheck("bpe_encode", cases=_encode_cases, outputs=("tokens",), variants=encode_variants,
              call=lambda f, case, _: _tokens_text(f, case["words"], case["merges"]),
              mistakes=("bpe_merges_out_of_order", "bpe_greedy_longest_match", "bpe_replace_across_symbols",
                        "bpe_no_end_of_word", "bpe_end_marker_after_merges", "bpe_end_marker_glued",
                        "bpe_end_marker_stripped"))
