#!/usr/bin/env python3
"""The error PyTorch's own bf16 autocast makes on convolutional networks like the golden UNets.

A stack of diffusers-style ResNet blocks (GroupNorm, SiLU, 3x3 convolutions, skip) with random
weights, at the golden UNets' widths and sizes and at a wider one, run in float32 and under
PyTorch's CPU bf16 autocast; prints the normalized MSE, sum (a - g)^2 / sum g^2, over 8 seeds.
It is the bar for the bf16 UNet and VAE tolerances (diffusers' own UNets cannot run here).
Needs Debian's python3-torch: python3 bench/conv_autocast_torch.py
"""
import torch, statistics
torch.manual_seed(0)
class Block(torch.nn.Module):
    def __init__(s, c, groups):
        super().__init__()
        s.n1 = torch.nn.GroupNorm(groups, c); s.c1 = torch.nn.Conv2d(c, c, 3, padding=1)
        s.n2 = torch.nn.GroupNorm(groups, c); s.c2 = torch.nn.Conv2d(c, c, 3, padding=1)
    def forward(s, x):
        # PyTorch 1.13's CPU autocast leaves GroupNorm out of its float32 list, so it would see
        # a bf16 input with float32 weights: normalize in float32, as gen3d's bf16 mode does.
        h = s.c1(torch.nn.functional.silu(s.n1(x.float())))
        h = s.c2(torch.nn.functional.silu(s.n2(h.float())))
        return x + h
class Float(torch.nn.Module):
    def forward(s, x):
        return x.float()
def run(c, groups, depth, hw, seed):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Conv2d(4, c, 3, padding=1), *[Block(c, groups) for _ in range(depth)],
                              Float(), torch.nn.GroupNorm(groups, c), torch.nn.SiLU(), torch.nn.Conv2d(c, 4, 3, padding=1)).eval()
    x = torch.randn(2, 4, hw, hw)
    with torch.no_grad():
        g = net(x)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            a = net(x).float()
    return float(((a - g) ** 2).sum() / (g ** 2).sum())
for c, groups, depth, hw in [(8, 4, 6, 16), (16, 4, 10, 16), (24, 4, 10, 12), (64, 32, 20, 32)]:
    v = [run(c, groups, depth, hw, s) for s in range(8)]
    print(f"channels {c} groups {groups} blocks {depth} {hw}x{hw}: nmse median {statistics.median(v):.2e} max {max(v):.2e}")
