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


def _counts(words):
    counts = {}
    for symbols, freq in words:
        for pair in zip(symbols, symbols[1:]):
            counts[pair] = counts.get(pair, 0) + freq
    return counts


def learn_bpe_no_stop(word_freqs, num_merges):
    """Merges until num_merges, whatever the count: max() of nothing raises once no pair is left."""
    words = [(list(word) + ["</w>"], freq) for word, freq in word_freqs.items()]
    merges = []
    for _ in range(num_merges):
        counts = _counts(words)
        best = max(counts, key=counts.get)  # bug: no stop below count 2 (nor when counts is empty)
        words = [(_merge(symbols, best), freq) for symbols, freq in words]
        merges.append(best)
    return merges


def learn_bpe_str_replace(word_freqs, num_merges):
    """Each word kept as its symbols joined by spaces; a merge is str.replace("a b", "ab")."""
    words = {" ".join(list(word) + ["</w>"]): freq for word, freq in word_freqs.items()}
    merges = []
    for _ in range(num_merges):
        counts = _counts([(w.split(" "), freq) for w, freq in words.items()])
        if not counts or max(counts.values()) < 2:
            break
        a, b = best = max(counts, key=counts.get)
        words = {w.replace(f"{a} {b}", a + b): freq for w, freq in words.items()}  # bug: crosses symbol boundaries
        merges.append(best)
    return merges


def learn_bpe_marker_glued(word_freqs, num_merges):
    words = [(list(word[:-1]) + [word[-1] + "</w>"], freq) for word, freq in word_freqs.items()]  # bug: glued
    merges = []
    for _ in range(num_merges):
        counts = _counts(words)
        if not counts or max(counts.values()) < 2:
            break
        best = max(counts, key=counts.get)
        words = [(_merge(symbols, best), freq) for symbols, freq in words]
        merges.append(best)
    return merges


def learn_bpe_ties_by_pair(word_freqs, num_merges):
    words = [(list(word) + ["</w>"], freq) for word, freq in word_freqs.items()]
    merges = []
    for _ in range(num_merges):
        counts = _counts(words)
        if not counts or max(counts.values()) < 2:
            break
        best = max(counts, key=lambda pair: (counts[pair], pair))  # bug: a tie goes to the largest pair
        words = [(_merge(symbols, best), freq) for symbols, freq in words]
        merges.append(best)
    return merges


def bpe_encode_longest_match(word, merges):
    """WordPiece-style: from the left, the longest merged token that fits."""
    vocabulary = {a + b for a, b in merges}
    symbols, tokens, i = list(word) + ["</w>"], [], 0
    while i < len(symbols):
        j = len(symbols)
        while j > i + 1 and "".join(symbols[i:j]) not in vocabulary:  # bug: longest match, not rank order
            j -= 1
        tokens.append("".join(symbols[i:j]))
        i = j
    return tokens


def bpe_encode_str_replace(word, merges):
    text = " ".join(list(word) + ["</w>"])
    for a, b in merges:
        text = text.replace(f"{a} {b}", a + b)  # bug: "a b" also matches the start of "a bc"
    return text.split(" ")


def bpe_encode_marker_last(word, merges):
    symbols = list(word)
    for pair in merges:
        symbols = _merge(symbols, pair)
    return symbols + ["</w>"]  # bug: the marker added after the merges


def bpe_encode_marker_glued(word, merges):
    symbols = list(word[:-1]) + [word[-1] + "</w>"]  # bug: glued to the last character
    for pair in merges:
        symbols = _merge(symbols, pair)
    return symbols


def bpe_encode_marker_stripped(word, merges):
    symbols = list(word) + ["</w>"]
    for pair in merges:
        symbols = _merge(symbols, pair)
    if symbols[-1] == "</w>":  # bug: the marker removed from the output
        return symbols[:-1]
    return symbols[:-1] + [symbols[-1].removesuffix("</w>")]


CASES = [
    ("learn_bpe", learn_bpe_one_sequence, "bpe_across_word_boundaries"),
    ("learn_bpe", learn_bpe_distinct_words, "bpe_pairs_not_weighted"),
    ("bpe_encode", bpe_encode_scan, "bpe_merges_out_of_order"),
    ("bpe_encode", bpe_encode_no_marker, "bpe_no_end_of_word"),
    ("learn_bpe", learn_bpe_no_stop, "bpe_no_min_count_stop"),
    ("learn_bpe", learn_bpe_str_replace, "bpe_replace_across_symbols"),
    ("learn_bpe", learn_bpe_marker_glued, "bpe_end_marker_glued"),
    ("learn_bpe", learn_bpe_ties_by_pair, "bpe_ties_by_largest_pair"),
    ("bpe_encode", bpe_encode_longest_match, "bpe_greedy_longest_match"),
    ("bpe_encode", bpe_encode_str_replace, "bpe_replace_across_symbols"),
    ("bpe_encode", bpe_encode_marker_last, "bpe_end_marker_after_merges"),
    ("bpe_encode", bpe_encode_marker_glued, "bpe_end_marker_glued"),
    ("bpe_encode", bpe_encode_marker_stripped, "bpe_end_marker_stripped"),
]
