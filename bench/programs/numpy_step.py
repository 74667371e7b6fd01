"""bench/programs/numpy_step.py - the numpy workload of bench/real.py: a few
hundred steps of full-batch logistic regression on a seeded random data set
(matrix products, elementwise temporaries, reductions): the allocation
pattern of array code, many large short-lived temporaries.  With
`--torch`, the same steps with torch CPU tensors instead (skipped by
bench/real.py when torch cannot be imported)."""
import sys

STEPS = 400


def numpy_run():
    import numpy as np
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4000, 64))
    true_w = rng.standard_normal(64)
    y = (x @ true_w + 0.1 * rng.standard_normal(4000) > 0).astype(np.float64)
    w = np.zeros(64)
    for _ in range(STEPS):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        grad = x.T @ (p - y) / len(y)
        w -= 0.5 * grad
    loss = -np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))
    print(f"loss={loss:.6f}")


def torch_run():
    import torch
    torch.manual_seed(7)
    torch.set_num_threads(1)
    x = torch.randn(4000, 64)
    true_w = torch.randn(64)
    y = ((x @ true_w + 0.1 * torch.randn(4000)) > 0).double().float()
    model = torch.nn.Linear(64, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    for _ in range(STEPS):
        opt.zero_grad()
        loss = loss_fn(model(x).squeeze(1), y)
        loss.backward()
        opt.step()
    print(f"loss={loss.item():.6f}")


if "--torch" in sys.argv:
    torch_run()
else:
    numpy_run()
