"""Wrong BPE implementations (chapter 11), one classic mistake each."""


def _merge(symbols, pair):
    out, i = [], 0
    while i < len(symbols):
        if tuple(symbols[i:i + 2]) == tuple(pair):
            out.append(pair[0] + pair[1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def learn_bpe_one_sequence(word_freqs, num_merges):
    """The corpus written out as one long text: pairs span the end of one word and the start of the next."""
    text = []
    for word, freq in word_freqs.items():
        text += (list(word) + ["</w>"]) * freq  # bug: one sequence, no word boundaries
    merges = []
    for _ in range(num_merges):
        counts = {}
        for pair in zip(text, text[1:]):
            counts[pair] = counts.get(pair, 0) + 1
        if not counts or max(counts.values()) < 2:
            break
        best = max(counts, key=counts.get)
        text = _merge(text, best)
        merges.append(best)
    return merges


def learn_bpe_distinct_words(word_freqs, num_merges):
    words = [list(word) + ["</w>"] for word in word_freqs]  # bug: the frequencies are dropped
    merges = []
    for _ in range(num_merges):
        counts = {}
        for symbols in words:
            for pair in zip(symbols, symbols[1:]):
                counts[pair] = counts.get(pair, 0) + 1
        if not counts or max(counts.values()) < 2:
            break
        best = max(counts, key=counts.get)
        words = [_merge(symbols, best) for symbols in words]
        merges.append(best)
    return merges


def bpe_encode_scan(word, merges):
    """Merge whatever learned pair comes first from the left, again and again: not the rank order."""
    symbols, learned = list(word) + ["</w>"], {tuple(m) for m in merges}
    i = 0
    while i < len(symbols) - 1:
        if (symbols[i], symbols[i + 1]) in learned:  # bug: position order, not rank order
            symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
            i = 0
        else:
            i += 1
    return symbols


def bpe_encode_no_marker(word, merges):
    symbols = list(word)  # bug: no "</w>"
    for pair in merges:
        symbols = _merge(symbols, pair)
    return symbols


CASES = [
    ("learn_bpe", learn_bpe_one_sequence, "bpe_across_word_boundaries"),
    ("learn_bpe", learn_bpe_distinct_words, "bpe_pairs_not_weighted"),
    ("bpe_encode", bpe_encode_scan, "bpe_merges_out_of_order"),
    ("bpe_encode", bpe_encode_no_marker, "bpe_no_end_of_word"),
]
