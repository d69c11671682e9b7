"""Idioms of the exercises checked in tutor/checks/backward.py (10 backward passes and the loss)."""
from . import idiom

# ---------------------------------------------------------------- 10_drills

idiom("softmax_backward_jacobian_movedim", "10_drills", "softmax_backward",
      "the full Jacobian diag(y) - y y^T with torch.diag_embed, a batched matrix-vector product, movedim "
      "to put `dim` last and back", r'''
def softmax_backward(y, grad_y, dim=-1):
    y_last, g_last = y.movedim(dim, -1), grad_y.movedim(dim, -1)                 # (..., n)
    jacobian = torch.diag_embed(y_last) - y_last[..., :, None] * y_last[..., None, :]   # (..., n, n), symmetric
    grad = (jacobian @ g_last[..., None]).squeeze(-1)                            # (..., n, n) @ (..., n, 1)
    return grad.movedim(-1, dim)
''')


idiom("layer_norm_backward_var_mean_rsqrt_einsum", "10_drills", "layer_norm_backward",
      "torch.var_mean(correction=0), torch.rsqrt, the sum form (d * g - sum g - x_hat * sum(g x_hat)) / (d * sigma), "
      "einsum for the parameter gradients", r'''
def layer_norm_backward(x, weight, grad_out, eps=1e-5):
    d = x.shape[-1]
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)            # (..., 1) each
    rstd = torch.rsqrt(var + eps)                                                 # 1 / sigma
    x_hat = (x - mean) * rstd                                                     # (..., d)
    g = grad_out * weight                                                         # (..., d)
    grad_x = rstd / d * (d * g - g.sum(-1, keepdim=True) - x_hat * (g * x_hat).sum(-1, keepdim=True))
    rows_out, rows_hat = grad_out.reshape(-1, d), x_hat.reshape(-1, d)            # (N, d)
    grad_weight = torch.einsum("nd,nd->d", rows_out, rows_hat)
    return grad_x, grad_weight, rows_out.sum(0)
''')


idiom("batch_norm_forward_var_mean_addcmul", "10_drills", "batch_norm_forward",
      "torch.var_mean(correction=0) over dim 0, torch.rsqrt, torch.addcmul for the affine", r'''
def batch_norm_forward(x, weight, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=0, correction=0)                            # (D,) each: per feature
    x_hat = (x - mean) * torch.rsqrt(var + eps)                                   # (N, D)
    return torch.addcmul(bias, x_hat, weight)                                     # bias + x_hat * weight
''')


idiom("batch_norm_backward_staged_graph", "10_drills", "batch_norm_backward",
      "the computational graph walked back stage by stage (CS231n style: dxhat, dvar, dmean), unsqueezed "
      "per-feature statistics", r'''
def batch_norm_backward(x, weight, grad_out, eps=1e-5):
    N = x.shape[0]
    mean = x.mean(0).unsqueeze(0)                                                 # (1, D)
    centred = x - mean                                                            # (N, D)
    var = centred.pow(2).mean(0).unsqueeze(0)                                     # (1, D), biased
    inv_std = (var + eps).pow(-0.5)                                               # (1, D)
    x_hat = centred * inv_std
    dx_hat = grad_out * weight                                                    # (N, D)
    dvar = (dx_hat * centred).sum(0, keepdim=True) * -0.5 * inv_std ** 3          # (1, D)
    dmean = -(dx_hat * inv_std).sum(0, keepdim=True) - 2.0 * dvar * centred.mean(0, keepdim=True)
    grad_x = dx_hat * inv_std + dvar * 2.0 * centred / N + dmean / N
    return grad_x, (grad_out * x_hat).sum(0), grad_out.sum(0)
''')


idiom("mlp_backward_einsum_heaviside", "10_drills", "mlp_backward",
      "torch.einsum over any leading axes for the weight gradients, torch.heaviside for ReLU's derivative, "
      "a tuple of leading dims for the bias sums", r'''
def mlp_backward(x, w1, b1, w2, b2, grad_out):
    lead = tuple(range(x.dim() - 1))                                              # every leading axis
    z = torch.einsum("...i,hi->...h", x, w1) + b1                                 # (..., d_in) x (h, d_in) -> (..., h)
    a = torch.relu(z)
    dz = torch.einsum("...o,oh->...h", grad_out, w2) * torch.heaviside(z, torch.zeros_like(z))
    return (torch.einsum("...h,hi->...i", dz, w1),                                # (..., h) x (h, d_in) -> (..., d_in)
            torch.einsum("...h,...i->hi", dz, x), dz.sum(lead),                   # (h, d_in), (h,)
            torch.einsum("...o,...h->oh", grad_out, a), grad_out.sum(lead))       # (d_out, h), (d_out,)
''')


idiom("cross_entropy_log_softmax_one_hot_target", "10_drills", "cross_entropy",
      "F.log_softmax, the smoothed target distribution built with F.one_hot, masked_select(...).mean() "
      "over the kept positions", r'''
def cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0):
    C = logits.shape[-1]
    log_p = F.log_softmax(logits.reshape(-1, C), dim=-1)                          # (N, C)
    target = target.reshape(-1)                                                   # (N,)
    keep = target.ne(ignore_index)                                                # (N,)
    onehot = F.one_hot(torch.where(keep, target, 0), C).to(log_p.dtype)           # (N, C)
    q = (1.0 - label_smoothing) * onehot + label_smoothing / C                    # smoothed target
    per_position = -(q * log_p).sum(-1)                                           # (N,)
    return per_position.masked_select(keep).mean()                                # NaN if all ignored
''')

