"""Idioms of chapter 08's data exercise (solutions/gpt_data.py; its graded cell's visible tests judge it)."""
from . import idiom

# ---------------------------------------------------------------- 08_gpt

idiom("char_tokenizer_dict_as_tensor", "08_gpt", "CharTokenizer",
      "dict.fromkeys for the distinct characters, an itos dict, torch.as_tensor, str.join over a generator", r'''
class CharTokenizer:
    def __init__(self, text: str) -> None:
        self.chars = sorted(dict.fromkeys(text))
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        self.itos = dict(enumerate(self.chars))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, s: str) -> torch.Tensor:
        return torch.as_tensor([self.stoi[ch] for ch in s], dtype=torch.long)

    def decode(self, ids) -> str:
        return "".join(self.itos[int(i)] for i in ids)
''')

