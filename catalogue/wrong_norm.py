"""Wrong FFN, LayerNorm, residual and RMSNorm implementations."""
import torch
import torch.nn as nn

from .reference import load

LayerNorm = load()["LayerNorm"]  # provided by the notebook for the residual exercises


class _LN(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))


class LNOverBatch(_LN):
    def forward(self, x):
        mean = x.mean(dim=0, keepdim=True)  # bug: BatchNorm's axis
        var = x.var(dim=0, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class LNUnbiased(_LN):
    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)  # bug: unbiased by default
        return (x - mean) / torch.sqrt(std ** 2 + self.eps) * self.weight + self.bias


class LNEpsOutside(_LN):
    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True, unbiased=False)
        return self.weight * (x - mean) / (std + self.eps) + self.bias  # bug: eps outside the root


class LNNoAffine(_LN):
    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps)


class ResidualMissing(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.ln = LayerNorm(d_model, eps)

    def forward(self, x, sublayer_out):
        return self.ln(sublayer_out)  # bug: no x +


class ResidualPreLN(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.ln = LayerNorm(d_model, eps)

    def forward(self, x, sublayer_out):
        return x + self.ln(sublayer_out)  # bug: normalises the branch, not the sum


class FFNNoActivation(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.fc2(self.dropout(self.fc1(x)))


class RMSNormWithMean(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        x = x - x.mean(-1, keepdim=True)  # bug: that is LayerNorm
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class PreLNResidualPost(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.ln = LayerNorm(d_model, eps)

    def forward(self, x, sublayer):
        return self.ln(x + sublayer(x))


CASES = [
    ("LayerNorm", LNOverBatch, "ln_wrong_axis"),
    ("LayerNorm", LNUnbiased, "ln_unbiased_var"),
    ("LayerNorm", LNEpsOutside, "ln_eps_outside_sqrt"),
    ("LayerNorm", LNNoAffine, "ln_no_affine"),
    ("ResidualLayerNorm", ResidualMissing, "missing_residual"),
    ("ResidualLayerNorm", ResidualPreLN, "pre_ln_instead_of_post"),
    ("FeedForward", FFNNoActivation, "ffn_no_activation"),
    ("RMSNorm", RMSNormWithMean, "rms_subtracts_mean"),
    ("PreLNResidual", PreLNResidualPost, "post_ln_instead_of_pre"),
]
