"""bench/programs/torch_loop.py - the torchloop workload of bench/real.py: a
small MLP trained for a few thousand SGD steps on tiny CPU tensors (4 x 8),
so that each step's cost is the framework's own: dispatch, autograd nodes,
tensor and storage allocations (~570 allocation events a step), as a GPU
training step is from the host's side.  Skipped by bench/real.py when torch
cannot be imported."""
import sys

STEPS = 3000


def main():
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 8)
    y = torch.randn(4, 1)
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else STEPS
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    print(f"loss={loss.item():.3e}")


if __name__ == "__main__":
    main()
