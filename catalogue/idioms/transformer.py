"""Idioms of the exercises checked in tutor/checks/transformer.py (06 the Transformer)."""
from . import idiom

# ---------------------------------------------------------------- 06_transformer

idiom("transformer_modulelist_reset_while_where", "06_transformer", "Transformer",
      "nn.ModuleList comprehensions, reset_parameters override, a shared embed helper method, ** 0.5 scaling; "
      "greedy_decode as a while loop with new_full, torch.where for finished rows", r'''
class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.out_proj = nn.Linear(d_model, tgt_vocab)
        self.reset_parameters()

    def reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def embed(self, tokens, table):
        return self.pos_enc(table(tokens) * self.d_model ** 0.5)         # (B, T, d_model)

    def encode(self, src):
        src_mask = make_pad_mask(src, self.pad_id)                       # (B, 1, 1, T_s)
        x = self.embed(src, self.src_embed)
        for layer in self.encoder_layers:
            x, _ = layer(x, src_mask)
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        tgt_mask = make_pad_mask(tgt_in, self.pad_id) & make_subsequent_mask(tgt_in.size(1), tgt_in.device)
        y = self.embed(tgt_in, self.tgt_embed)
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, tgt_mask, src_mask)
        return y

    def forward(self, src, tgt_in):
        return self.out_proj(self.decode(tgt_in, self.encode(src), make_pad_mask(src, self.pad_id)))

    @torch.no_grad()
    def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
        memory, src_mask = self.encode(src), make_pad_mask(src, self.pad_id)
        ys = src.new_full((src.size(0), 1), bos_id)                      # (B, 1)
        done = torch.zeros_like(ys[:, 0], dtype=torch.bool)              # (B,)
        while ys.size(1) <= max_new_tokens and not done.all():
            logits = self.out_proj(self.decode(ys, memory, src_mask)[:, -1])      # (B, tgt_vocab)
            nxt = torch.where(done, torch.full_like(ys[:, 0], self.pad_id), logits.argmax(-1))
            ys = torch.cat((ys, nxt[:, None]), dim=1)
            done = done | (nxt == eos_id)
        return ys
''')


idiom("transformer_super_cls_itertools_columns", "06_transformer", "Transformer",
      "super(Cls, self).__init__(), import itertools, named_parameters loop, math.sqrt stored once, "
      "Optional hint; greedy_decode inside `with torch.no_grad()` collecting token columns in a list, "
      "itertools.repeat, boolean-index assignment, out_proj over every position", r'''
import itertools
from typing import Optional


class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super(Transformer, self).__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.scale = math.sqrt(d_model)
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_enc = PositionalEncoding(d_model, max_len=max_len, dropout=dropout)
        self.encoder_layers = nn.ModuleList(
            [EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.decoder_layers = nn.ModuleList(
            [DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.out_proj = nn.Linear(d_model, tgt_vocab)
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        mask = make_pad_mask(src, pad_id=self.pad_id)
        h = self.pos_enc(self.src_embed(src) * self.scale)
        for layer in self.encoder_layers:
            h = layer(h, mask)[0]
        return h

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: Optional[torch.Tensor] = None):
        causal = make_subsequent_mask(tgt_in.shape[1], device=tgt_in.device)
        mask = causal & make_pad_mask(tgt_in, self.pad_id)               # (B, 1, T_t, T_t)
        h = self.pos_enc(self.tgt_embed(tgt_in) * self.scale)
        for layer in self.decoder_layers:
            h, _weights = layer(h, memory, tgt_mask=mask, memory_mask=src_mask)
        return h

    def forward(self, src, tgt_in):
        src_mask = make_pad_mask(src, self.pad_id)
        memory = self.encode(src)
        hidden = self.decode(tgt_in, memory, src_mask)
        return self.out_proj(hidden)

    def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
        with torch.no_grad():
            src_mask = make_pad_mask(src, self.pad_id)
            memory = self.encode(src)
            columns = [torch.full((src.shape[0],), bos_id, dtype=torch.long, device=src.device)]
            alive = torch.ones(src.shape[0], dtype=torch.bool, device=src.device)
            for _ in itertools.repeat(None, max_new_tokens):
                ys = torch.stack(columns, dim=1)                              # (B, t)
                logits = self.out_proj(self.decode(ys, memory, src_mask))     # (B, t, tgt_vocab)
                token = logits[:, -1].argmax(dim=-1)                          # (B,)
                token[~alive] = self.pad_id
                columns.append(token)
                alive &= token != eos_id
                if not alive.any():
                    break
            return torch.stack(columns, dim=1)
''')


idiom("transformer_split_cells_preallocated_greedy", "06_transformer", "Transformer",
      "class split over two cells: greedy_decode written as a module-level @torch.no_grad() function "
      "(preallocated output buffer, masked_fill, early return of a slice) and attached with "
      "Transformer.greedy_decode = greedy_decode; helper method for masks", r'''
class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(
            [EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.decoder_layers = nn.ModuleList(
            [DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.out_proj = nn.Linear(d_model, tgt_vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def masks(self, src, tgt_in):
        """(src_mask (B, 1, 1, T_s), tgt_mask (B, 1, T_t, T_t)) from self.pad_id."""
        tgt_mask = make_pad_mask(tgt_in, self.pad_id) & make_subsequent_mask(tgt_in.size(1), tgt_in.device)
        return make_pad_mask(src, self.pad_id), tgt_mask

    def encode(self, src):
        src_mask = make_pad_mask(src, self.pad_id)
        x = self.pos_enc(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x, _ = layer(x, src_mask)
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        tgt_mask = self.masks(tgt_in, tgt_in)[1]
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, tgt_mask, src_mask)
        return y

    def forward(self, src, tgt_in):
        src_mask, _ = self.masks(src, tgt_in)
        return self.out_proj(self.decode(tgt_in, self.encode(src), src_mask))
''', r'''
@torch.no_grad()
def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
    B = src.size(0)
    src_mask = make_pad_mask(src, self.pad_id)
    memory = self.encode(src)                                                  # (B, T_s, d_model)
    ys = torch.full((B, 1 + max_new_tokens), self.pad_id, dtype=torch.long, device=src.device)
    ys[:, 0] = bos_id
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)
    for t in range(max_new_tokens):
        hidden = self.decode(ys[:, : t + 1], memory, src_mask)                 # (B, t + 1, d_model)
        next_token = self.out_proj(hidden[:, -1]).argmax(dim=-1)               # (B,)
        ys[:, t + 1] = next_token.masked_fill(finished, self.pad_id)
        finished |= ys[:, t + 1] == eos_id
        if finished.all():
            return ys[:, : t + 2]
    return ys


Transformer.greedy_decode = greedy_decode
''')


idiom("greedy_while_new_full_where", "06_transformer", "greedy_decode",
      "@torch.no_grad() on a while loop, src.new_full, torch.where for the finished rows, type hints", r'''
@torch.no_grad()
def greedy_decode(model: nn.Module, src: torch.Tensor, bos_id: int, eos_id: int,
                  max_new_tokens: int) -> torch.Tensor:
    memory, src_mask = model.encode(src), make_pad_mask(src, model.pad_id)
    ys = src.new_full((src.size(0), 1), bos_id)                          # (B, 1)
    done = torch.zeros_like(ys[:, 0], dtype=torch.bool)                  # (B,)
    while ys.size(1) <= max_new_tokens and not done.all():
        logits = model.out_proj(model.decode(ys, memory, src_mask)[:, -1])          # (B, tgt_vocab)
        nxt = torch.where(done, torch.full_like(ys[:, 0], model.pad_id), logits.argmax(-1))
        ys = torch.cat((ys, nxt[:, None]), dim=1)
        done = done | (nxt == eos_id)
    return ys
''')


idiom("greedy_preallocated_early_return", "06_transformer", "greedy_decode",
      "a preallocated (B, 1 + max_new_tokens) buffer filled with pad_id, column assignment, masked_fill, "
      "an early return of a slice", r'''
@torch.no_grad()
def greedy_decode(model, src, bos_id, eos_id, max_new_tokens):
    B = src.shape[0]
    src_mask = make_pad_mask(src, model.pad_id)
    memory = model.encode(src)
    out = torch.full((B, 1 + max_new_tokens), model.pad_id, dtype=torch.long, device=src.device)
    out[:, 0] = bos_id
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)
    for t in range(max_new_tokens):
        hidden = model.decode(out[:, : t + 1], memory, src_mask)           # (B, t + 1, d_model)
        out[:, t + 1] = model.out_proj(hidden[:, -1]).argmax(dim=-1).masked_fill(finished, model.pad_id)
        finished |= out[:, t + 1] == eos_id
        if finished.all():
            return out[:, : t + 2]
    return out
''')


idiom("greedy_columns_list_inference_mode", "06_transformer", "greedy_decode",
      "a `with torch.inference_mode()` block, token columns collected in a list and stacked, itertools.repeat, "
      "boolean-index assignment, logical_and/logical_not bookkeeping, out_proj over every position", r'''
import itertools


def greedy_decode(model, src, bos_id, eos_id, max_new_tokens):
    with torch.inference_mode():
        src_mask = make_pad_mask(src, pad_id=model.pad_id)
        memory = model.encode(src)
        columns = [torch.full((src.shape[0],), bos_id, dtype=torch.long, device=src.device)]
        alive = torch.ones(src.shape[0], dtype=torch.bool, device=src.device)
        for _ in itertools.repeat(None, max_new_tokens):
            ys = torch.stack(columns, dim=1)                                   # (B, t)
            logits = model.out_proj(model.decode(ys, memory, src_mask))        # (B, t, tgt_vocab)
            token = logits[:, -1].argmax(dim=-1)                               # (B,)
            token[torch.logical_not(alive)] = model.pad_id
            columns.append(token)
            alive = torch.logical_and(alive, token != eos_id)
            if not alive.any():
                break
        return torch.stack(columns, dim=1)
''')


idiom("transformer_annotated_layers_return_x", "06_transformer", "Transformer",
      "the Annotated Transformer's layers, which return x alone (subclasses of the chapter 05 layers), "
      "and a Transformer built on them: the visible tests must not assume (x, weights)", r'''
class EncoderLayerX(EncoderLayer):
    """The Annotated Transformer's encoder layer returns x alone."""

    def forward(self, x, src_mask=None):
        return super().forward(x, src_mask)[0]


class DecoderLayerX(DecoderLayer):
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        return super().forward(y, memory, tgt_mask, memory_mask)[0]


class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayerX(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayerX(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.out_proj = nn.Linear(d_model, tgt_vocab)

    def encode(self, src):
        src_mask = make_pad_mask(src, self.pad_id)
        x = self.pos_enc(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        tgt_mask = make_pad_mask(tgt_in, self.pad_id) & make_subsequent_mask(tgt_in.size(1), tgt_in.device)
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask, src_mask)
        return y

    def forward(self, src, tgt_in):
        return self.out_proj(self.decode(tgt_in, self.encode(src), make_pad_mask(src, self.pad_id)))

    def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
        return greedy_decode(self, src, bos_id, eos_id, max_new_tokens)
''')


idiom("transformer_clones_deepcopy_inference_mode", "06_transformer", "Transformer",
      "import copy and the Annotated Transformer's clones() helper (copy.deepcopy in an nn.ModuleList); "
      "greedy_decode under @torch.inference_mode() with boolean-row assignment and torch.logical_or", r'''
import copy


def clones(module, n):
    """n independent deep copies of a module, in an nn.ModuleList."""
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = clones(EncoderLayer(d_model, num_heads, d_ff, dropout), num_layers)
        self.decoder_layers = clones(DecoderLayer(d_model, num_heads, d_ff, dropout), num_layers)
        self.out_proj = nn.Linear(d_model, tgt_vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src):
        src_mask = make_pad_mask(src, self.pad_id)
        x = self.pos_enc(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)[0]
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        T = tgt_in.size(1)
        tgt_mask = make_subsequent_mask(T, tgt_in.device) & make_pad_mask(tgt_in, self.pad_id)
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask, src_mask)[0]
        return y

    def forward(self, src, tgt_in):
        memory = self.encode(src)
        return self.out_proj(self.decode(tgt_in, memory, make_pad_mask(src, self.pad_id)))

    @torch.inference_mode()
    def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
        src_mask = make_pad_mask(src, self.pad_id)
        memory = self.encode(src)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)      # (B, 1)
        finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)            # (B,)
        for _ in range(max_new_tokens):
            logits = self.out_proj(self.decode(ys, memory, src_mask)[:, -1])               # (B, tgt_vocab)
            next_token = logits.argmax(-1, keepdim=True)                                    # (B, 1)
            next_token[finished] = self.pad_id
            ys = torch.cat([ys, next_token], dim=-1)
            finished = torch.logical_or(finished, next_token.squeeze(-1) == eos_id)
            if torch.all(finished):
                break
        return ys
''')


idiom("transformer_padding_idx_hparams_eval_restore", "06_transformer", "Transformer",
      "hyper-parameters saved from locals() (a dict comprehension skipping self and __class__), "
      "nn.Embedding(padding_idx=pad_id), greedy_decode that switches to eval() and restores the mode in "
      "try/finally, torch.no_grad() as a context manager, finished rows via masked_fill", r'''
class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super().__init__()
        self.hparams = {k: v for k, v in locals().items() if k not in ("self", "__class__")}
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=pad_id)
        self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(
            [EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.decoder_layers = nn.ModuleList(
            [DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.out_proj = nn.Linear(d_model, tgt_vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def extra_repr(self):
        return ", ".join(f"{k}={v}" for k, v in self.hparams.items())

    def encode(self, src):
        src_mask = make_pad_mask(src, self.pad_id)
        x = self.pos_enc(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x, _ = layer(x, src_mask)
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        tgt_mask = make_pad_mask(tgt_in, self.pad_id) & make_subsequent_mask(tgt_in.size(1), device=tgt_in.device)
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, tgt_mask=tgt_mask, memory_mask=src_mask)
        return y

    def forward(self, src, tgt_in):
        return self.out_proj(self.decode(tgt_in, self.encode(src), src_mask=make_pad_mask(src, self.pad_id)))

    def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                memory, src_mask = self.encode(src), make_pad_mask(src, self.pad_id)
                ys = torch.full((len(src), 1), bos_id, dtype=torch.long, device=src.device)    # (B, 1)
                finished = torch.zeros(len(src), dtype=torch.bool, device=src.device)         # (B,)
                for _ in range(max_new_tokens):
                    next_token = self.out_proj(self.decode(ys, memory, src_mask)[:, -1]).argmax(-1)   # (B,)
                    next_token = next_token.masked_fill(finished, self.pad_id)
                    ys = torch.cat([ys, next_token.unsqueeze(-1)], dim=-1)
                    finished = finished | next_token.eq(eos_id)
                    if finished.all():
                        break
                return ys
        finally:
            self.train(was_training)
''')


idiom("transformer_greedy_calls_forward", "06_transformer", "Transformer",
      "the simplest greedy decoding: re-run the whole model self(src, ys) every step and take the last "
      "position's arg-max; `for step in range(...)` with an early break; nn.ModuleList of a list comprehension", r'''
class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(
            [EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.decoder_layers = nn.ModuleList(
            [DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.out_proj = nn.Linear(d_model, tgt_vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src):
        mask = make_pad_mask(src, self.pad_id)
        x = self.pos_enc(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x, _ = layer(x, mask)
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        mask = make_pad_mask(tgt_in, self.pad_id) & make_subsequent_mask(tgt_in.size(1), tgt_in.device)
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, mask, src_mask)
        return y

    def forward(self, src, tgt_in):
        memory = self.encode(src)
        return self.out_proj(self.decode(tgt_in, memory, make_pad_mask(src, self.pad_id)))

    @torch.no_grad()
    def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        for step in range(max_new_tokens):
            next_token = self(src, ys)[:, -1].argmax(dim=-1)          # (B,): the whole model again, last position
            next_token[done] = self.pad_id
            ys = torch.cat([ys, next_token[:, None]], dim=1)
            done |= next_token == eos_id
            if done.all():
                break
        return ys
''')

