"""Idioms of the exercises checked in tutor/checks/ffn_norm.py (04 feed-forward and norms)."""
from . import idiom

# ---------------------------------------------------------------- 04_ffn_layernorm

idiom("ffn_getattr_F_io_typing", "04_ffn_layernorm", "FeedForward",
      "import io and typing, getattr(F, activation) to pick the function, a typed class attribute, "
      "print(..., file=io.StringIO())", r'''
import io
import typing


class FeedForward(nn.Module):
    ACTIVATIONS: typing.Tuple[str, ...] = ("relu", "gelu")

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        if activation not in self.ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of {self.ACTIVATIONS}")
        self.activation = getattr(F, activation)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(self.activation(self.fc1(x))))  # (..., d_model) -> (..., d_ff) -> (..., d_model)

    def describe(self) -> str:
        buf = io.StringIO()
        print(f"{type(self).__name__}: {self.fc1.in_features} -> {self.fc1.out_features} -> {self.fc2.out_features}",
              file=buf)
        return buf.getvalue()
''')


idiom("ffn_classmethod_activation_modules", "04_ffn_layernorm", "FeedForward",
      "@classmethod factory, a dict of nn.ReLU/nn.GELU classes, KeyError re-raised as ValueError from None", r'''
class FeedForward(nn.Module):
    _activations = {"relu": nn.ReLU, "gelu": nn.GELU}

    @classmethod
    def make_activation(cls, name):
        try:
            return cls._activations[name]()
        except KeyError:
            raise ValueError(f"activation must be one of {sorted(cls._activations)}, got {name!r}") from None

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.act = self.make_activation(activation)
        self.dropout = nn.Dropout(dropout)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        h = self.act(self.fc1(x))        # (..., d_ff)
        return self.fc2(self.dropout(h))
''')


idiom("ffn_dataclass_partial_reset_parameters", "04_ffn_layernorm", "FeedForward",
      "import dataclasses and functools, a frozen @dataclass config with __post_init__ validation, "
      "functools.partial(F.gelu, approximate='none'), reset_parameters override, extra_repr from "
      "dataclasses.asdict", r'''
import dataclasses
import functools


@dataclasses.dataclass(frozen=True)
class FFNConfig:
    d_model: int
    d_ff: int
    dropout: float = 0.0
    activation: str = "relu"

    def __post_init__(self):
        if self.activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', got {self.activation!r}")


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        self.config = FFNConfig(d_model, d_ff, dropout, activation)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.act = functools.partial(F.gelu, approximate="none") if activation == "gelu" else F.relu
        self.reset_parameters()

    def reset_parameters(self):
        for layer in (self.fc1, self.fc2):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)

    def extra_repr(self):
        return ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(self.config).items())

    def forward(self, x):
        return self.fc2(self.dropout(self.act(self.fc1(x))))
''')


idiom("ffn_lambda_exact_gelu", "04_ffn_layernorm", "FeedForward",
      "lambdas stored as attributes, ReLU as clamp_min, exact GELU written with torch.erf and math.sqrt", r'''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation == "relu":
            self.activation = lambda h: h.clamp_min(0.0)
        elif activation == "gelu":
            self.activation = lambda h: 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))   # exact GELU
        else:
            raise ValueError(f"activation {activation!r} is neither 'relu' nor 'gelu'")
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.fc2(self.dropout(self.activation(self.fc1(x))))
''')


idiom("layernorm_helper_call_vars_repr", "04_ffn_layernorm", "LayerNorm",
      "a small helper class with __call__ and a __repr__ built from vars(self), stored on the module", r'''
class Standardize:
    """Callable helper: (x - mean) / sqrt(var + eps) over one axis (biased variance)."""

    def __init__(self, eps: float, dim: int = -1):
        self.eps = eps
        self.dim = dim

    def __call__(self, x):
        mean = x.mean(self.dim, keepdim=True)                     # (..., 1)
        var = ((x - mean) ** 2).mean(self.dim, keepdim=True)      # (..., 1)
        return (x - mean) / torch.sqrt(var + self.eps)

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.standardize = Standardize(eps)
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return self.standardize(x) * self.weight + self.bias
''')


idiom("layernorm_var_mean_rsqrt", "04_ffn_layernorm", "LayerNorm",
      "torch.var_mean(correction=0), torch.rsqrt, a normalized_shape tuple, extra_repr, type hints", r'''
class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.normalized_shape = (d_model,)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.normalized_shape))
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)    # (..., 1) each
        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"
''')


idiom("layernorm_reset_parameters_module_helper", "04_ffn_layernorm", "LayerNorm",
      "a helper function at module level, super(Cls, self).__init__(), torch.empty parameters filled by a "
      "reset_parameters override (nn.init.ones_/zeros_), ** 0.5, torch.addcmul", r'''
def normalize_last_dim(x: torch.Tensor, eps: float) -> torch.Tensor:
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred / (centred.pow(2).mean(dim=-1, keepdim=True) + eps) ** 0.5


class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super(LayerNorm, self).__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(d_model))
        self.bias = nn.Parameter(torch.empty(d_model))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)

    def forward(self, x):
        return torch.addcmul(self.bias, normalize_last_dim(x, self.eps), self.weight)
''')


idiom("residual_split_cells", "04_ffn_layernorm", "ResidualLayerNorm",
      "class split over two cells (ResidualLayerNorm.forward = _residual_forward), torch.add, keyword eps", r'''
class ResidualLayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.ln = LayerNorm(d_model, eps=eps)
''', r'''
def _residual_forward(self, x, sublayer_out):
    """Post-LN: add the sublayer's output to its input, then normalise."""
    return self.ln(torch.add(x, sublayer_out))


ResidualLayerNorm.forward = _residual_forward
''')


idiom("residual_module_init_call_assert", "04_ffn_layernorm", "ResidualLayerNorm",
      "nn.Module.__init__(self), assert on shapes with an f-string", r'''
class ResidualLayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        nn.Module.__init__(self)
        self.ln = LayerNorm(d_model, eps)

    def forward(self, x, sublayer_out):
        assert x.shape == sublayer_out.shape, f"shapes differ: {tuple(x.shape)} vs {tuple(sublayer_out.shape)}"
        return self.ln(x + sublayer_out)
''')


idiom("ffn_wraps_decorator_full_path_getattr", "04_ffn_layernorm", "FeedForward",
      "a learner-written decorator with functools.wraps around forward (shape assert), "
      "getattr(torch.nn.functional, name) by its full path", r'''
from functools import wraps


def keeps_shape(forward):
    """Decorator: the wrapped forward must return a tensor of its input's shape."""
    @wraps(forward)
    def wrapper(self, x):
        out = forward(self, x)
        assert out.shape == x.shape, f"{type(self).__name__}: {tuple(x.shape)} -> {tuple(out.shape)}"
        return out
    return wrapper


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', not {activation!r}")
        self.activation_name = activation
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    @keeps_shape
    def forward(self, x):
        act = getattr(torch.nn.functional, self.activation_name)
        return self.fc2(self.dropout(act(self.fc1(x))))
''')


idiom("layernorm_register_parameter_constants", "04_ffn_layernorm", "LayerNorm",
      "from torch.nn import Module, Parameter; Module.__init__(self); a __constants__ class attribute; "
      "register_parameter; torch.square", r'''
from torch.nn import Module, Parameter


class LayerNorm(Module):
    __constants__ = ["eps"]

    def __init__(self, d_model, eps=1e-5):
        Module.__init__(self)
        self.eps = eps
        self.register_parameter("weight", Parameter(torch.ones(d_model)))
        self.register_parameter("bias", Parameter(torch.zeros(d_model)))

    def forward(self, x):
        mu = torch.mean(x, dim=-1, keepdim=True)                            # (..., 1)
        sigma2 = torch.mean(torch.square(x - mu), dim=-1, keepdim=True)     # (..., 1)
        return self.weight * (x - mu) / torch.sqrt(sigma2 + self.eps) + self.bias
''')


idiom("ffn_sequential_sharing_named_layers", "04_ffn_layernorm", "FeedForward",
      "an nn.Sequential pipeline built from the contract's own fc1/dropout/fc2 modules (shared, so state_dict "
      "holds both names), activation chosen from a dict of module classes", r'''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        acts = {"relu": nn.ReLU, "gelu": nn.GELU}
        if activation not in acts:
            raise ValueError(f"unsupported activation {activation!r} (use one of {list(acts)})")
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.net = nn.Sequential(self.fc1, acts[activation](), self.dropout, self.fc2)   # same modules, one pipeline

    def forward(self, x):
        return self.net(x)
''')


# ---------------------------------------------------------------- 10_drills

idiom("rmsnorm_rsqrt_super_cls_extra_repr", "10_drills", "RMSNorm",
      "super(Cls, self).__init__(), torch.rsqrt of the mean square, extra_repr with type hints", r'''
class RMSNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super(RMSNorm, self).__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, eps={self.eps}"
''')


idiom("preln_callable_hint_module_init_call", "10_drills", "PreLNResidual",
      "nn.Module.__init__(self), typing.Callable hint for the sublayer argument, a named residual", r'''
from typing import Callable

import torch
from torch import nn


class PreLNResidual(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        nn.Module.__init__(self)
        self.ln = LayerNorm(d_model, eps=eps)

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        residual = x
        return residual + sublayer(self.ln(x))
''')

