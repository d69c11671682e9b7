"""Right BPE implementations (chapter 11) written other ways than the reference."""
import collections
import re


def learn_bpe_counter_regex(word_freqs, num_merges):
    """Sennrich et al.'s own layout: words as space-separated symbols, a regex replaces the pair."""
    vocab = {" ".join(list(word) + ["</w>"]): freq for word, freq in word_freqs.items()}
    merges = []
    for _ in range(num_merges):
        pairs = collections.Counter()
        for word, freq in vocab.items():
            symbols = word.split()
            for i in range(len(symbols) - 1):
                pairs[symbols[i], symbols[i + 1]] += freq
        if not pairs:
            break
        best = max(pairs, key=pairs.get)  # first of the most frequent, in counting order
        if pairs[best] < 2:
            break
        pattern = re.compile(r"(?<!\S)" + re.escape(" ".join(best)) + r"(?!\S)")
        vocab = {pattern.sub("".join(best), word): freq for word, freq in vocab.items()}
        merges.append(best)
    return merges


def bpe_encode_rank_lookup(word, merges):
    """The GPT-2 way: repeatedly merge the adjacent pair of lowest rank, until none is a learned merge."""
    ranks = {tuple(pair): rank for rank, pair in enumerate(merges)}
    symbols = list(word) + ["</w>"]
    while len(symbols) > 1:
        pairs = [(ranks.get((a, b), float("inf")), i) for i, (a, b) in enumerate(zip(symbols, symbols[1:]))]
        rank, i = min(pairs)
        if rank == float("inf"):
            break
        a, b = symbols[i], symbols[i + 1]
        merged, j = [], 0
        while j < len(symbols):  # every occurrence of this pair, left to right
            if j < len(symbols) - 1 and (symbols[j], symbols[j + 1]) == (a, b):
                merged.append(a + b)
                j += 2
            else:
                merged.append(symbols[j])
                j += 1
        symbols = merged
    return symbols


CASES = [
    ("learn_bpe", learn_bpe_counter_regex),
    ("bpe_encode", bpe_encode_rank_lookup),
]
