#!/usr/bin/env python3
"""Writes the nested checkpoint files of this folder with real PyTorch (Debian's python3-torch).

The official checkpoints that are not a flat state dict are a dict of state dicts:
Hunyuan3D-2.1's `model.fp16.ckpt` holds {'model': sd, 'vae': sd, 'conditioner': sd} (fp16), and
RealESRGAN's `RealESRGAN_x4plus.pth` holds {'params_ema': sd} (BasicSR's save_network; other
BasicSR files add 'params'). The files here are those forms on tiny modules, plus the forms a
reader must refuse. nested_expected.json lists, per file, the flattened tensors (dtype, shape,
values) or the words its error must contain.

Run: /usr/bin/python3 make_nested.py  (in this folder)
"""
import collections
import json
import os

import torch
from torch import nn

torch.manual_seed(2101)


class Attn(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.to_q = nn.Linear(w, w, bias=False)
        self.q_norm = nn.LayerNorm(w)


class Block(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.norm1 = nn.LayerNorm(w)
        self.attn1 = Attn(w)


class TinyDiT(nn.Module):
    def __init__(self):
        super().__init__()
        self.x_embedder = nn.Linear(3, 4)
        self.blocks = nn.ModuleList([Block(4)])


class TinyVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.post_kl = nn.Linear(2, 4)
        self.register_buffer("steps", torch.tensor(7, dtype=torch.int64))


class TinyDino(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls_token = nn.Parameter(torch.randn(1, 1, 4))
        self.layernorm = nn.LayerNorm(4)


class TinyRRDB(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_first = nn.Conv2d(3, 2, 3)
        self.body = nn.ModuleList([nn.Conv2d(2, 2, 1)])


def randomized(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p))
    return module


def values(t):
    return [float(v) for v in t.detach().to(torch.float64).reshape(-1).tolist()]


def flat(prefix, sd, out):
    for k, v in sd.items():
        out[prefix + k] = {"dtype": str(v.dtype).replace("torch.", ""),
                           "shape": list(v.shape), "values": values(v)}


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


expected = {}

# Hunyuan3D-2.1 shape checkpoint: a plain dict of OrderedDict state dicts, fp16.
shape = {"model": randomized(TinyDiT()).half().state_dict(),
         "vae": randomized(TinyVAE()).half().state_dict(),
         "conditioner": randomized(TinyDino()).half().state_dict()}
torch.save(shape, "nested_shape.ckpt")
tensors = {}
for name, sd in shape.items():
    flat(name + ".", sd, tensors)
expected["nested_shape.ckpt"] = {"tensors": tensors}

# RealESRGAN / BasicSR: {'params': sd, 'params_ema': sd}, fp32.
esr = {"params": randomized(TinyRRDB()).state_dict(),
       "params_ema": randomized(TinyRRDB()).state_dict()}
torch.save(esr, "nested_realesrgan.pth")
tensors = {}
for name, sd in esr.items():
    flat(name + ".", sd, tensors)
expected["nested_realesrgan.pth"] = {"tensors": tensors}

# Training bookkeeping beside the state dicts (numbers, text, flags, None): skipped.
book = collections.OrderedDict(
    [("epoch", 3), ("global_step", 1200), ("lr", 1e-4), ("name", "tiny"), ("ema", True),
     ("scheduler", None), ("model", randomized(TinyVAE()).state_dict())])
torch.save(book, "nested_bookkeeping.ckpt")
tensors = {}
flat("model.", book["model"], tensors)
expected["nested_bookkeeping.ckpt"] = {"tensors": tensors}

# Refused: a foreign global inside a nested dict, a list leaf, nesting past the bound, and a
# flattened name that collides with a flat one.
torch.save({"model": {"w": torch.ones(2), "hook": Evil()}}, "nested_foreign.ckpt")
expected["nested_foreign.ckpt"] = {"error": ["refuses to import", "posix.system"]}
torch.save({"model": TinyVAE().state_dict(), "shapes": [1, 2]}, "nested_list.ckpt")
expected["nested_list.ckpt"] = {"error": ["'shapes'", "a list"]}
torch.save({"a": {"b": {"c": {"d": {"e": torch.ones(1)}}}}}, "nested_deep.ckpt")
expected["nested_deep.ckpt"] = {"error": ["'a.b.c.d'", "nested deeper than 4"]}
torch.save({"model.w": torch.ones(1), "model": {"w": torch.zeros(1)}}, "nested_collision.ckpt")
expected["nested_collision.ckpt"] = {"error": ["'model.w' appears twice"]}

# A key that is not valid UTF-8 (pickle writes a lone surrogate as its 3 bytes).
torch.save({"model": {"w\udce9": torch.ones(1)}}, "nested_bad_name.ckpt")
expected["nested_bad_name.ckpt"] = {"error": ["not valid UTF-8"]}

# A name past the reader's bound (4096 bytes; module paths are far shorter).
torch.save({"model": {"w" * 5000: torch.ones(1)}}, "nested_long_name.ckpt")
expected["nested_long_name.ckpt"] = {"error": ["longer than 4096 bytes"]}

with open("nested_expected.json", "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
    f.write("\n")
