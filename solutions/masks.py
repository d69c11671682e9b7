"""Chapter 05 (part 1): padding and causal masks. Convention: bool, True = may attend."""
import torch


def make_pad_mask(tokens, pad_id=0):
    """Key-padding mask: which keys are real tokens.

    ``tokens`` LongTensor ``(B, T)`` -> bool ``(B, 1, 1, T)``, True where ``tokens != pad_id``.
    The singleton axes broadcast over heads ``H`` and query positions ``T_q``: padding hides
    *keys* only. (Masking padded query rows too would leave rows with no visible key.)
    """
    if tokens.dim() != 2:
        raise ValueError(f"tokens 应为 2 维 (B, T) / tokens must be 2-D (B, T); got {tuple(tokens.shape)}")
    ### BEGIN SOLUTION
    return (tokens != pad_id)[:, None, None, :]  # (B, T) -> (B, 1, 1, T)
    ### END SOLUTION


def make_subsequent_mask(T, device=None):
    """Causal (look-ahead) mask: query ``i`` may attend to keys ``j <= i``.

    Returns bool ``(1, 1, T, T)``: the lower triangle including the diagonal is True.
    Combine with a padding mask by ``&`` (broadcasts to ``(B, 1, T, T)``).

    Hint: ``torch.tril(torch.ones(T, T, dtype=torch.bool, device=device))``.
    """
    ### BEGIN SOLUTION
    return torch.tril(torch.ones(T, T, dtype=torch.bool, device=device))[None, None]  # (1, 1, T, T)
    ### END SOLUTION
