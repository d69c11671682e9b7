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

