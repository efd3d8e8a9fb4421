#!/usr/bin/python3
"""PyTorch twin of `gen3d bench dit`: the same Hunyuan3DDiT structure (double-stream blocks
over [context; latent] tokens, single-stream blocks, adaLN modulation, QK RMSNorm, GELU-tanh MLPs)
with random weights, timed the same way (wall clock around each forward, output on the host);
prints one JSON line. On the CPU (python3-torch from Debian) eager float32 or bf16 autocast; on a
GPU (--device cuda) the model in bf16 with scaled_dot_product_attention, as the official code
runs it, eager or through torch.compile (--compile).

  python3 bench/dit_torch_bench.py --hidden 1024 --heads 16 --depth 1 --single 2 --tokens 512 \
      --context-tokens 257 --context-dim 1536 --in-channels 64 --batch 2 --threads 2 --reps 3
  python3 bench/dit_torch_bench.py --device cuda --depth 16 --single 32 --tokens 3072 \
      --context-tokens 1370 --reps 20 [--compile]
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


SDPA = False  # set for GPU runs: the fused attention the official code calls


def attention(q, k, v):  # [B, heads, L, D]
    if SDPA:
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
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
        freqs = torch.exp(-math.log(1000) * torch.arange(128, dtype=torch.float32,
                                                         device=t.device) / 128)
        arg = t[:, None] * 1000 * freqs[None]
        vec = self.time_in(torch.cat([torch.cos(arg), torch.sin(arg)], -1).to(x.dtype))
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
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--compile", action="store_true", help="cuda: torch.compile the model")
    a = p.parse_args()
    if a.device == "cuda":
        return main_cuda(a)
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


def main_cuda(a):
    global SDPA
    SDPA = True
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = DiT(a).eval().to(dev, torch.bfloat16)
    x = torch.randn(a.batch, a.tokens, a.in_channels, device=dev, dtype=torch.bfloat16)
    ctx = torch.randn(a.batch, a.context_tokens, a.context_dim, device=dev, dtype=torch.bfloat16)
    t = torch.arange(1, a.batch + 1, dtype=torch.float32, device=dev) / (a.batch + 1)
    run = torch.compile(model) if a.compile else model
    times = []
    with torch.no_grad():
        t0 = time.perf_counter()
        for _ in range(3):  # warm-up (and compilation)
            run(x, t, ctx).float().cpu()
        warm_s = time.perf_counter() - t0
        for _ in range(a.reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            run(x, t, ctx).float().cpu()  # the output on the host, as gen3d returns it
            times.append(1e3 * (time.perf_counter() - t0))
    times.sort()
    print(json.dumps({"bench": "dit", "runtime": ("pytorch-compile " if a.compile else
                                                  "pytorch-eager ") + torch.__version__,
                      "device": torch.cuda.get_device_name(0), "precision": "bf16",
                      "reps": a.reps, "ms_per_forward": times[len(times) // 2],
                      "ms_min": times[0], "ms_max": times[-1], "warmup_s": warm_s}))


if __name__ == "__main__":
    main()
