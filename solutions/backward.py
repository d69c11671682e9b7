"""The drill bank: backward passes written by hand (equal to autograd), BatchNorm and cross-entropy.

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


def batch_norm_forward(x, weight, bias, eps=1e-5):
    """BatchNorm in training mode over the batch axis of ``x (N, D)``: each feature normalised with its
    batch mean and biased variance, then scaled and shifted.

    ``batch_norm_forward(x (N, D), weight (D,), bias (D,), eps=1e-5) -> out (N, D)``, equal to
    ``F.batch_norm(x, None, None, weight, bias, training=True, eps=eps)``: ``mean`` and ``var`` over dim 0
    (one per feature), ``var`` biased (divided by ``N``, as PyTorch normalises; the unbiased one only
    updates ``running_var``). No cache is returned: ``batch_norm_backward`` takes ``x`` and recomputes the
    statistics, as ``layer_norm_backward`` does.

    中文：训练模式的 BatchNorm：对 ``x (N, D)`` 的每个特征，用这一批的均值和有偏方差（除以 ``N``）归一化，
    再乘 ``weight``、加 ``bias``；统计量沿第 0 维（batch），与 ``F.batch_norm(..., training=True)`` 相等。
    不返回 cache：反向时由 ``x`` 重新算统计量。
    """
    ### BEGIN SOLUTION
    mean = x.mean(dim=0)  # (D,) one per feature, over the batch
    var = x.var(dim=0, unbiased=False)  # (D,) biased: divided by N
    return (x - mean) / torch.sqrt(var + eps) * weight + bias  # (N, D)
    ### END SOLUTION


def batch_norm_backward(x, weight, grad_out, eps=1e-5):
    """Gradients of training-mode BatchNorm over the batch axis of ``x (N, D)``, given ``dL/dout``.

    ``batch_norm_backward(x (N, D), weight (D,), grad_out (N, D), eps=1e-5)
    -> (grad_x (N, D), grad_weight (D,), grad_bias (D,))``, equal to autograd through
    ``F.batch_norm(x, None, None, weight, bias, training=True, eps=eps)``. LayerNorm's formula with the
    axes swapped: with ``x_hat = (x - mean) / sigma`` (statistics over dim 0), ``g = grad_out * weight``,
    ``grad_x = (g - mean(g) - x_hat * mean(g * x_hat)) / sigma`` (means over the batch, dim 0),
    ``grad_weight = sum(grad_out * x_hat, 0)``, ``grad_bias = sum(grad_out, 0)``.

    中文：训练模式 BatchNorm 的反向，与 autograd 相等；就是 LayerNorm 的公式换了轴：均值项都沿 batch（第 0 维）；
    ``grad_x`` 的两个均值项来自这一批的均值和方差依赖每个样本；``grad_weight``、``grad_bias`` 沿第 0 维求和。
    """
    ### BEGIN SOLUTION
    mean = x.mean(dim=0, keepdim=True)  # (1, D)
    sigma = torch.sqrt(x.var(dim=0, keepdim=True, unbiased=False) + eps)  # (1, D)
    x_hat = (x - mean) / sigma  # (N, D)
    g = grad_out * weight  # (N, D)
    grad_x = (g - g.mean(dim=0, keepdim=True) - x_hat * (g * x_hat).mean(dim=0, keepdim=True)) / sigma
    return grad_x, (grad_out * x_hat).sum(dim=0), grad_out.sum(dim=0)
    ### END SOLUTION


def mlp_backward(x, w1, b1, w2, b2, grad_out):
    """Gradients of a two-layer ReLU MLP ``y = relu(x @ w1.T + b1) @ w2.T + b2`` (``nn.Linear``'s layout,
    the course's ``FeedForward`` with its default ReLU), given ``dL/dy``.

    ``mlp_backward(x (..., d_in), w1 (h, d_in), b1 (h,), w2 (d_out, h), b2 (d_out,), grad_out (..., d_out))
    -> (grad_x (..., d_in), grad_w1 (h, d_in), grad_b1 (h,), grad_w2 (d_out, h), grad_b2 (d_out,))``, equal
    to autograd. With ``z = x @ w1.T + b1`` and ``a = relu(z)``: ``grad_a = grad_out @ w2``,
    ``grad_z = grad_a * (z > 0)``, ``grad_x = grad_z @ w1``; a weight's gradient is the upstream gradient's
    transpose times its layer's input (``grad_w2 = grad_out^T @ a``, ``grad_w1 = grad_z^T @ x``, every
    leading position summed), a bias's the upstream gradient summed over every leading position.

    中文：两层 ReLU MLP 的反向，与 autograd 相等：ReLU 的梯度是预激活 ``z > 0`` 的 0/1 掩码；权重的梯度是
    上游梯度的转置乘这一层的输入（形状与权重相同），偏置的梯度是上游梯度在所有前导维上求和。
    """
    ### BEGIN SOLUTION
    x2, go = x.reshape(-1, x.size(-1)), grad_out.reshape(-1, grad_out.size(-1))  # (M, d_in), (M, d_out)
    z = x2 @ w1.T + b1  # (M, d_in) @ (d_in, h) -> (M, h)
    a = torch.relu(z)  # (M, h)
    grad_w2 = go.T @ a  # (d_out, M) @ (M, h) -> (d_out, h)
    grad_z = (go @ w2) * (z > 0)  # (M, d_out) @ (d_out, h) -> (M, h), masked by ReLU's derivative
    grad_w1 = grad_z.T @ x2  # (h, M) @ (M, d_in) -> (h, d_in)
    grad_x = (grad_z @ w1).reshape(x.shape)  # (M, h) @ (h, d_in) -> (M, d_in) -> (..., d_in)
    return grad_x, grad_w1, grad_z.sum(dim=0), grad_w2, go.sum(dim=0)
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
