"""Wrong BatchNorm forward/backward and MLP backward passes (solutions/backward.py), each a classic mistake."""
import torch


def _bn_stats(x, eps, dim=0, unbiased=False):
    mean = x.mean(dim, keepdim=True)
    std = torch.sqrt(x.var(dim, keepdim=True, unbiased=unbiased) + eps)
    return (x - mean) / std, std


def batch_norm_forward_unbiased(x, weight, bias, eps=1e-5):
    x_hat, _ = _bn_stats(x, eps, unbiased=True)  # bug: divides by N - 1
    return x_hat * weight + bias


def batch_norm_forward_feature_axis(x, weight, bias, eps=1e-5):
    x_hat, _ = _bn_stats(x, eps, dim=-1)  # bug: statistics per sample (that is LayerNorm)
    return x_hat * weight + bias


def batch_norm_forward_eps_outside(x, weight, bias, eps=1e-5):
    x_hat = (x - x.mean(0)) / (x.std(0, unbiased=False) + eps)  # bug: sqrt(var) + eps
    return x_hat * weight + bias


def batch_norm_forward_no_affine(x, weight, bias, eps=1e-5):
    return _bn_stats(x, eps)[0]  # bug: weight and bias never applied


def batch_norm_forward_eps_1e_8(x, weight, bias, eps=1e-5):
    x_hat, _ = _bn_stats(x, 1e-8)  # bug: a fixed eps, the argument ignored
    return x_hat * weight + bias


def batch_norm_backward_only_direct(x, weight, grad_out, eps=1e-5):
    x_hat, std = _bn_stats(x, eps)
    grad_x = grad_out * weight / std  # bug: as if the batch mean and variance were constants
    return grad_x, (grad_out * x_hat).sum(0), grad_out.sum(0)


def batch_norm_backward_no_variance_term(x, weight, grad_out, eps=1e-5):
    x_hat, std = _bn_stats(x, eps)
    g = grad_out * weight
    grad_x = (g - g.mean(0)) / std  # bug: the variance term is missing
    return grad_x, (grad_out * x_hat).sum(0), grad_out.sum(0)


def _bn_backward(x, weight, grad_out, eps, dim=0, unbiased=False):
    x_hat, std = _bn_stats(x, eps, dim, unbiased)
    g = grad_out * weight
    grad_x = (g - g.mean(dim, keepdim=True) - x_hat * (g * x_hat).mean(dim, keepdim=True)) / std
    return grad_x, (grad_out * x_hat).sum(0), grad_out.sum(0)


def batch_norm_backward_bias_axis_1(x, weight, grad_out, eps=1e-5):
    grad_x, grad_weight, _ = _bn_backward(x, weight, grad_out, eps)
    return grad_x, grad_weight, grad_out.sum(1)  # bug: one number per sample, not per feature


def batch_norm_backward_unbiased(x, weight, grad_out, eps=1e-5):
    return _bn_backward(x, weight, grad_out, eps, unbiased=True)  # bug: var / (N - 1)


def batch_norm_backward_feature_axis(x, weight, grad_out, eps=1e-5):
    return _bn_backward(x, weight, grad_out, eps, dim=1)  # bug: LayerNorm's axis for the statistics


def batch_norm_backward_keepdim(x, weight, grad_out, eps=1e-5):
    grad_x, _, _ = _bn_backward(x, weight, grad_out, eps)
    x_hat, _ = _bn_stats(x, eps)
    return grad_x, (grad_out * x_hat).sum(0, keepdim=True), grad_out.sum(0, keepdim=True)  # bug: (1, D)


def batch_norm_backward_var_term_without_eps(x, weight, grad_out, eps=1e-5):
    N = x.shape[0]
    xmu = x - x.mean(0)
    var = (xmu ** 2).mean(0)
    dxhat = grad_out * weight
    dvar = -0.5 * (dxhat * xmu).sum(0) * var ** -1.5  # bug: (var + eps) ** -1.5 without its eps
    dmu = -(dxhat / torch.sqrt(var + eps)).sum(0)
    grad_x = dxhat / torch.sqrt(var + eps) + dvar * 2 * xmu / N + dmu / N
    x_hat = xmu / torch.sqrt(var + eps)
    return grad_x, (grad_out * x_hat).sum(0), grad_out.sum(0)


def batch_norm_backward_eps_outside(x, weight, grad_out, eps=1e-5):
    xmu = x - x.mean(0)
    std = xmu.pow(2).mean(0).sqrt() + eps  # bug: sqrt(var) + eps, as in the forward it differentiates
    x_hat, g = xmu / std, grad_out * weight
    grad_x = (g - g.mean(0) - x_hat * (g * x_hat).mean(0)) / std
    return grad_x, (grad_out * x_hat).sum(0), grad_out.sum(0)


def batch_norm_backward_eps_1e_6(x, weight, grad_out, eps=1e-5):
    return _bn_backward(x, weight, grad_out, 1e-6)  # bug: a fixed eps, the argument ignored


def _mlp(x, w1, b1, w2, b2, grad_out, relu_grad):
    shape, x, grad_out = x.shape, x.reshape(-1, x.shape[-1]), grad_out.reshape(-1, grad_out.shape[-1])  # (N, ...)
    z = x @ w1.T + b1  # (N, d_in) @ (d_in, h) -> (N, h)
    a = z.clamp(min=0)
    da = grad_out @ w2  # (N, d_out) @ (d_out, h) -> (N, h)
    dz = relu_grad(da, z, a)
    return (dz @ w1).reshape(shape), dz.T @ x, dz.sum(0), grad_out.T @ a, grad_out.sum(0)  # (h, N) @ (N, d_in)


def mlp_backward_no_relu_grad(x, w1, b1, w2, b2, grad_out):
    return _mlp(x, w1, b1, w2, b2, grad_out, lambda da, z, a: da)  # bug: ReLU as if it were the identity


def mlp_backward_times_activation(x, w1, b1, w2, b2, grad_out):
    return _mlp(x, w1, b1, w2, b2, grad_out, lambda da, z, a: da * a)  # bug: times relu(z), not (z > 0)


def mlp_backward_transposed(x, w1, b1, w2, b2, grad_out):
    gx, gw1, gb1, gw2, gb2 = _mlp(x, w1, b1, w2, b2, grad_out, lambda da, z, a: da * (z > 0))
    return gx, gw1.T, gb1, gw2.T, gb2  # bug: x^T @ dz, (d_in, h), the math notes' layout, not nn.Linear's


def mlp_backward_bias_mean(x, w1, b1, w2, b2, grad_out):
    gx, gw1, gb1, gw2, gb2 = _mlp(x, w1, b1, w2, b2, grad_out, lambda da, z, a: da * (z > 0))
    n = x.numel() // x.shape[-1]  # the number of rows
    return gx, gw1, gb1 / n, gw2, gb2 / n  # bug: the bias gradients averaged over the batch


def mlp_backward_bias_dim0(x, w1, b1, w2, b2, grad_out):
    z = x @ w1.T + b1  # (..., h)
    dz = (grad_out @ w2) * (z > 0)  # (..., d_out) @ (d_out, h) -> (..., h)
    gw1 = torch.einsum("...h,...i->hi", dz, x)
    gw2 = torch.einsum("...o,...h->oh", grad_out, torch.relu(z))
    return dz @ w1, gw1, dz.sum(0), gw2, grad_out.sum(0)  # bug: summed over dim 0 only, (T, h) for a 3-D x


CASES = [
    ("batch_norm_forward", batch_norm_forward_unbiased, "bn_unbiased_var"),
    ("batch_norm_forward", batch_norm_forward_feature_axis, "bn_stats_wrong_axis"),
    ("batch_norm_forward", batch_norm_forward_eps_outside, "ln_eps_outside_sqrt"),
    ("batch_norm_forward", batch_norm_forward_no_affine, "ln_no_affine"),
    ("batch_norm_forward", batch_norm_forward_eps_1e_8, "ln_eps_value"),
    ("batch_norm_backward", batch_norm_backward_only_direct, "bn_backward_missing_mean_terms"),
    ("batch_norm_backward", batch_norm_backward_no_variance_term, "bn_backward_missing_variance_term"),
    ("batch_norm_backward", batch_norm_backward_bias_axis_1, "bn_param_grads_wrong_axis"),
    ("batch_norm_backward", batch_norm_backward_unbiased, "bn_unbiased_var"),
    ("batch_norm_backward", batch_norm_backward_feature_axis, "bn_stats_wrong_axis"),
    ("batch_norm_backward", batch_norm_backward_keepdim, "bn_param_grads_keepdim"),
    ("batch_norm_backward", batch_norm_backward_var_term_without_eps, "bn_backward_eps_dropped"),
    ("batch_norm_backward", batch_norm_backward_eps_1e_6, "ln_eps_value"),
    ("batch_norm_backward", batch_norm_backward_eps_outside, "ln_eps_outside_sqrt"),
    ("mlp_backward", mlp_backward_no_relu_grad, "mlp_relu_no_mask"),
    ("mlp_backward", mlp_backward_times_activation, "mlp_relu_times_activation"),
    ("mlp_backward", mlp_backward_transposed, "mlp_weight_grad_transposed"),
    ("mlp_backward", mlp_backward_bias_mean, "mlp_bias_grad_not_summed"),
    ("mlp_backward", mlp_backward_bias_dim0, "mlp_bias_grad_not_summed"),
]
