"""The drill bank: backward passes written by hand (equal to autograd) and cross-entropy.

Contract: docs/CONTRACT_LLM.md.
"""
import torch


def softmax_backward(y, grad_y, dim=-1):
    """Gradient of ``y = softmax(x, dim)`` with respect to ``x``, given ``y`` and ``dL/dy``.

    ``softmax_backward(y, grad_y, dim=-1) -> grad_x`` (shape of ``y``). The Jacobian is
    ``diag(y) - y y^T`` per slice, so ``grad_x = y * (grad_y - sum(grad_y * y, dim))``; equals
    autograd through ``torch.softmax``. The subtracted sum is the term a diagonal-only answer misses.

    中文：softmax 的反向：``grad_x = y * (grad_y - (grad_y * y).sum(dim, keepdim=True))``，与 autograd 相等；
    只保留对角项（``y * grad_y`` 或 ``y (1 - y) grad_y``）是常见错误。
    """
    ### BEGIN SOLUTION
    return y * (grad_y - (grad_y * y).sum(dim=dim, keepdim=True))
    ### END SOLUTION


def layer_norm_backward(x, weight, grad_out, eps=1e-5):
    """Gradients of LayerNorm over the last axis (biased variance), given ``dL/dout``.

    ``layer_norm_backward(x (..., d), weight (d,), grad_out (..., d), eps=1e-5)
    -> (grad_x (..., d), grad_weight (d,), grad_bias (d,))``, equal to autograd through
    ``F.layer_norm(x, (d,), weight, bias, eps)``. With ``x_hat = (x - mean) / sigma``,
    ``sigma = sqrt(var + eps)`` and ``g = grad_out * weight``:
    ``grad_x = (g - mean(g) - x_hat * mean(g * x_hat)) / sigma`` (means over the last axis; the two
    mean terms come from the mean and the variance depending on every ``x``),
    ``grad_weight = sum(grad_out * x_hat)``, ``grad_bias = sum(grad_out)`` over all leading axes.

    中文：LayerNorm 的反向，与 autograd 相等；``grad_x`` 的两个均值项分别来自均值和方差对每个 ``x`` 的依赖，
    漏掉任何一个都不对；``grad_weight``、``grad_bias`` 在所有前导维上求和。
    """
    ### BEGIN SOLUTION
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    sigma = torch.sqrt(x.var(dim=-1, keepdim=True, unbiased=False) + eps)  # (..., 1)
    x_hat = (x - mean) / sigma  # (..., d)
    g = grad_out * weight  # (..., d)
    grad_x = (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True)) / sigma
    d = x.size(-1)
    grad_weight = (grad_out * x_hat).reshape(-1, d).sum(dim=0)  # (d,) summed over every position
    return grad_x, grad_weight, grad_out.reshape(-1, d).sum(dim=0)
    ### END SOLUTION


def cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0):
    """Mean cross-entropy with classes on the last axis, ``ignore_index`` and label smoothing.

    ``cross_entropy(logits (..., C), target LongTensor (...), ignore_index=-100,
    label_smoothing=0.0) -> scalar``, equal to ``F.cross_entropy(logits.reshape(-1, C),
    target.reshape(-1), ignore_index=ignore_index, label_smoothing=label_smoothing)``.
    Log-probabilities via ``logsumexp`` (stable); the smoothed target is
    ``(1 - eps) * onehot + eps / C`` (spread over all ``C`` classes, the true one included);
    the mean is over the positions whose target is not ``ignore_index``.

    中文：类别在最后一维的平均交叉熵，与 ``F.cross_entropy`` 相等：用 ``logsumexp`` 保证稳定；
    平滑目标是 ``(1 - eps)·onehot + eps / C``（均分给全部 ``C`` 个类，包括正确类）；
    只对非 ``ignore_index`` 的位置求平均。
    """
    ### BEGIN SOLUTION
    C = logits.size(-1)
    logits, target = logits.reshape(-1, C), target.reshape(-1)  # (N, C), (N,)
    log_probs = logits - torch.logsumexp(logits, dim=-1, keepdim=True)  # (N, C)
    keep = target != ignore_index  # (N,)
    safe = target.masked_fill(~keep, 0)  # any valid class where ignored
    nll = -log_probs.gather(-1, safe[:, None]).squeeze(-1)  # (N,)
    smooth = -log_probs.mean(dim=-1)  # (N,) cross-entropy with the uniform distribution
    loss = (1.0 - label_smoothing) * nll + label_smoothing * smooth  # (N,)
    return loss[keep].sum() / keep.sum()
    ### END SOLUTION
