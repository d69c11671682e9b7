"""Chapter 11: byte-pair encoding (BPE) on words, as Sennrich et al. (2016) learn and apply it.

A word is split into its characters plus the end-of-word marker ``"</w>"``; a merge ``(a, b)``
joins two adjacent symbols into ``a + b``. Pairs never cross a word boundary.
"""
END_OF_WORD = "</w>"


def merge_pair(symbols, pair):
    """``symbols`` (a tuple of str) with every occurrence of ``pair`` joined into one symbol,
    left to right, without overlaps: ``merge_pair(("a", "a", "a"), ("a", "a")) == ("aa", "a")``."""
    out, i = [], 0
    while i < len(symbols):
        if symbols[i:i + 2] == pair:
            out.append(pair[0] + pair[1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def learn_bpe(word_freqs, num_merges):
    """Learn up to ``num_merges`` BPE merges from ``word_freqs`` (a dict: word -> how often it occurs).

    Each word starts as ``tuple(word) + ("</w>",)``. Every round counts each pair of adjacent
    symbols **inside** each word, **weighted by the word's frequency** (pairs never span two words),
    takes the most frequent pair (ties: the pair counted first, going through the words in the
    dict's order and each word left to right), applies it to every word with ``merge_pair`` and
    records it. Stops early when no pair occurs at least twice. Returns the merges in the order
    learned (their rank), a list of ``(a, b)`` tuples.

    中文：从词频表学 BPE 合并规则：每个词拆成字符加 ``</w>``；每轮只在词的内部统计相邻符号对，
    **按词频加权**；合并次数最多的一对（并列时取先统计到的），记下这条规则；最多的一对不足 2 次时停止。
    """
    ### BEGIN SOLUTION
    words = {tuple(word) + (END_OF_WORD,): freq for word, freq in word_freqs.items()}
    merges = []
    for _ in range(num_merges):
        pairs = {}  # (a, b) -> count, in the order first seen
        for symbols, freq in words.items():
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] = pairs.get(pair, 0) + freq  # weighted by the word's frequency
        if not pairs:
            break
        best, count = max(pairs.items(), key=lambda item: item[1])
        if count < 2:
            break
        words = {merge_pair(symbols, best): freq for symbols, freq in words.items()}
        merges.append(best)
    return merges
    ### END SOLUTION


def bpe_encode(word, merges):
    """The BPE tokens of one ``word``: ``tuple(word) + ("</w>",)``, then every merge of ``merges``
    applied in rank order (the order they were learned), each to the whole word. Returns a list of str.

    中文：把一个词编码成 BPE token：拆成字符加 ``</w>``，再**按学到的顺序**逐条应用合并规则。
    """
    ### BEGIN SOLUTION
    symbols = tuple(word) + (END_OF_WORD,)
    for pair in merges:
        symbols = merge_pair(symbols, pair)
    return list(symbols)
    ### END SOLUTION


def bpe_decode(tokens):
    """The text of ``tokens`` (the tokens of one or more words, in order): the tokens joined, each
    ``"</w>"`` a space between words, no trailing space. ``bpe_decode(bpe_encode(w, m)) == w``.

    中文：把 token 拼回文本：``</w>`` 是词与词之间的空格，末尾不留空格。
    """
    ### BEGIN SOLUTION
    return "".join(tokens).replace(END_OF_WORD, " ").rstrip(" ")
    ### END SOLUTION
