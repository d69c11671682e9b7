"""Idioms of the exercises checked in tutor/checks/tokenizers.py (11 BPE)."""
from . import idiom

# ---------------------------------------------------------------- 11_tokenizers

idiom("learn_bpe_counter_most_common_lists", "11_tokenizers", "learn_bpe",
      "collections.Counter with most_common(1), words as lists in a list of [symbols, freq] pairs, itertools.pairwise",
      r"""
import collections
import itertools


def learn_bpe(word_freqs, num_merges):
    words = [[list(word) + [END_OF_WORD], freq] for word, freq in word_freqs.items()]
    merges = []
    while len(merges) < num_merges:
        counts = collections.Counter()
        for symbols, freq in words:
            for pair in itertools.pairwise(symbols):          # inside one word only
                counts[pair] += freq
        if not counts:
            break
        (best, n), = counts.most_common(1)                     # ties: first counted, as max()
        if n < 2:
            break
        for entry in words:
            entry[0] = list(merge_pair(tuple(entry[0]), best))
        merges.append(best)
    return merges
""")


idiom("bpe_encode_functools_reduce_decode_split", "11_tokenizers", "bpe_encode",
      "functools.reduce over the merges, decode through str.split and str.join", r"""
import functools


def bpe_encode(word, merges):
    start = tuple(word) + (END_OF_WORD,)
    return list(functools.reduce(merge_pair, merges, start))   # rank order: the list's order


def bpe_decode(tokens):
    words = "".join(tokens).split(END_OF_WORD)
    return " ".join(w for w in words if w)
""")

