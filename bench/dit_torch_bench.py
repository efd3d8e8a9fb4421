#!/usr/bin/python3
"""PyTorch eager twin of `gen3d bench dit`: the same Hunyuan3DDiT structure (double-stream blocks
over [context; latent] tokens, single-stream blocks, adaLN modulation, QK RMSNorm, GELU-tanh MLPs)
with random weights, timed the same way; prints one JSON line. Needs python3-torch (Debian).

  python3 bench/dit_torch_bench.py --hidden 1024 --heads 16 --depth 1 --single 2 --tokens 512 \
      --context-tokens 257 --context-dim 1536 --in-channels 64 --batch 2 --threads 2 --reps 3
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.scale


def attention(q, k, v):  # [B, heads, L, D]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return (s.softmax(-1) @ v).transpose(1, 2).flatten(2)


class Modulation(nn.Module):
    def __init__(self, h, n):
        super().__init__()
        self.n = n
        self.lin = nn.Linear(h, n * h)

    def forward(self, vec):
        return self.lin(F.silu(vec))[:, None, :].chunk(self.n, dim=-1)


class DoubleBlock(nn.Module):
    def __init__(self, h, heads, m):
        super().__init__()
        self.heads = heads
        for s in ("img", "txt"):
            setattr(self, s + "_mod", Modulation(h, 6))
            setattr(self, s + "_norm1", nn.LayerNorm(h, elementwise_affine=False, eps=1e-6))
            setattr(self, s + "_qkv", nn.Linear(h, 3 * h))
            setattr(self, s + "_qn", RMSNorm(h // heads))
            setattr(self, s + "_kn", RMSNorm(h // heads))
            setattr(self, s + "_proj", nn.Linear(h, h))
            setattr(self, s + "_norm2", nn.LayerNorm(h, elementwise_affine=False, eps=1e-6))
            setattr(self, s + "_mlp", nn.Sequential(nn.Linear(h, m), nn.GELU(approximate="tanh"),
                                                    nn.Linear(m, h)))

    def qkv(self, s, x, mod):
        x = (1 + mod[1]) * getattr(self, s + "_norm1")(x) + mod[0]
        B, L, _ = x.shape
        q, k, v = getattr(self, s + "_qkv")(x).view(B, L, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        return getattr(self, s + "_qn")(q), getattr(self, s + "_kn")(k), v

    def forward(self, img, txt, vec):
        im, tm = self.img_mod(vec), self.txt_mod(vec)
        iq, ik, iv = self.qkv("img", img, im)
        tq, tk, tv = self.qkv("txt", txt, tm)
        a = attention(torch.cat([tq, iq], 2), torch.cat([tk, ik], 2), torch.cat([tv, iv], 2))
        ta, ia = a[:, :txt.shape[1]], a[:, txt.shape[1]:]
        img = img + im[2] * self.img_proj(ia)
        img = img + im[5] * self.img_mlp((1 + im[4]) * self.img_norm2(img) + im[3])
        txt = txt + tm[2] * self.txt_proj(ta)
        txt = txt + tm[5] * self.txt_mlp((1 + tm[4]) * self.txt_norm2(txt) + tm[3])
        return img, txt


class SingleBlock(nn.Module):
    def __init__(self, h, heads, m):
        super().__init__()
        self.h, self.heads, self.m = h, heads, m
        self.linear1 = nn.Linear(h, 3 * h + m)
        self.linear2 = nn.Linear(h + m, h)
        self.qn, self.kn = RMSNorm(h // heads), RMSNorm(h // heads)
        self.pre_norm = nn.LayerNorm(h, elementwise_affine=False, eps=1e-6)
        self.modulation = Modulation(h, 3)

    def forward(self, x, vec):
        mod = self.modulation(vec)
        y = (1 + mod[1]) * self.pre_norm(x) + mod[0]
        qkv, mlp = torch.split(self.linear1(y), [3 * self.h, self.m], dim=-1)
        B, L, _ = x.shape
        q, k, v = qkv.view(B, L, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = attention(self.qn(q), self.kn(k), v)
        return x + mod[2] * self.linear2(torch.cat([a, F.gelu(mlp, approximate="tanh")], 2))


class DiT(nn.Module):
    def __init__(self, a):
        super().__init__()
        h, m = a.hidden, 4 * a.hidden
        self.latent_in = nn.Linear(a.in_channels, h)
        self.time_in = nn.Sequential(nn.Linear(256, h), nn.SiLU(), nn.Linear(h, h))
        self.cond_in = nn.Linear(a.context_dim, h)
        self.double_blocks = nn.ModuleList(DoubleBlock(h, a.heads, m) for _ in range(a.depth))
        self.single_blocks = nn.ModuleList(SingleBlock(h, a.heads, m) for _ in range(a.single))
        self.final_mod = nn.Linear(h, 2 * h)
        self.final_norm = nn.LayerNorm(h, elementwise_affine=False, eps=1e-6)
        self.final = nn.Linear(h, a.in_channels)

    def forward(self, x, t, ctx):
        freqs = torch.exp(-math.log(1000) * torch.arange(128, dtype=torch.float32) / 128)
        arg = t[:, None] * 1000 * freqs[None]
        vec = self.time_in(torch.cat([torch.cos(arg), torch.sin(arg)], -1))
        img, txt = self.latent_in(x), self.cond_in(ctx)
        for b in self.double_blocks:
            img, txt = b(img, txt, vec)
        y = torch.cat([txt, img], 1)
        for b in self.single_blocks:
            y = b(y, vec)
        img = y[:, txt.shape[1]:]
        shift, scale = self.final_mod(F.silu(vec))[:, None, :].chunk(2, dim=-1)
        return self.final((1 + scale) * self.final_norm(img) + shift)


def main():
    p = argparse.ArgumentParser()
    for name, d in (("hidden", 1024), ("heads", 16), ("depth", 1), ("single", 2), ("tokens", 512),
                    ("context-tokens", 257), ("context-dim", 1536), ("in-channels", 64),
                    ("batch", 2), ("threads", 2), ("reps", 3)):
        p.add_argument("--" + name, type=int, default=d)
    p.add_argument("--autocast-bf16", action="store_true", help="torch.autocast(cpu, bfloat16)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = DiT(a).eval()
    x = torch.randn(a.batch, a.tokens, a.in_channels)
    ctx = torch.randn(a.batch, a.context_tokens, a.context_dim)
    t = torch.arange(1, a.batch + 1, dtype=torch.float32) / (a.batch + 1)
    times = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast_bf16):
        model(x, t, ctx)
        for _ in range(a.reps):
            t0 = time.perf_counter()
            model(x, t, ctx)
            times.append(1e3 * (time.perf_counter() - t0))
    times.sort()
    print(json.dumps({"bench": "dit", "runtime": "pytorch-eager " + torch.__version__,
                      "precision": "bf16-autocast" if a.autocast_bf16 else "fp32",
                      "threads": a.threads, "reps": a.reps, "ms_per_forward": times[len(times) // 2],
                      "ms_min": times[0]}))


if __name__ == "__main__":
    main()
