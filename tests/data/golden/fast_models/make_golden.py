#!/usr/bin/env python3
"""Golden data for Hunyuan3D-2's speed models (turbo / fast), made by the official code.

    python3 make_golden.py /path/to/Hunyuan3D-2 [--out DIR]

The first argument is a checkout of github.com/Tencent-Hunyuan/Hunyuan3D-2 (the folder holding
`hy3dgen/`). Its modules are imported from there and run unchanged: the DiT (`Hunyuan3DDiT`), the
schedulers, the ShapeVAE and its volume decoder, and `Hunyuan3DDiTFlowMatchingPipeline.__call__`,
which drives the sampling loop. Nothing of it is copied here.

Each variant is a tiny random configuration written as an official model folder (`config.yaml` +
`model.fp16.safetensors`, the layout `from_pretrained` reads), plus `golden.safetensors` with the
inputs and results of one pipeline run. See README.md beside this script.

Only the standard library, numpy, PyYAML and torch are needed. Third-party packages the official
modules import but this run does not exercise (diffusers' config mixins, einops, tqdm, trimesh,
PIL, skimage, torchvision, transformers, safetensors) are replaced by the small stand-ins below;
einops' rearrange / repeat, diffusers' register_to_config and FeedForward are reimplemented with
the same meaning. Older torch lacks F.scaled_dot_product_attention (torch 2.0) and nn.RMSNorm
(2.4): math versions of the same formulas stand in, and torch.backends.cuda.sdp_kernel (a fused
kernel choice) is a no-op.
"""

import argparse
import contextlib
import dataclasses
import inspect
import json
import math
import os
import struct
import subprocess
import sys
import types

import numpy as np
import torch
import yaml

# ---- stand-ins for third-party modules ---------------------------------------------------------


def _sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    w = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * s, dim=-1)
    return torch.matmul(w, v)


if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
    torch.nn.functional.scaled_dot_product_attention = _sdpa


class _RMSNorm(torch.nn.Module):
    """torch.nn.RMSNorm (torch >= 2.4): x * rsqrt(mean(x^2) + eps) * weight."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(normalized_shape)) if elementwise_affine else None

    def forward(self, x):
        eps = self.eps if self.eps is not None else torch.finfo(x.dtype).eps
        y = x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)
        return y * self.weight if self.weight is not None else y


if not hasattr(torch.nn, "RMSNorm"):
    torch.nn.RMSNorm = _RMSNorm

# torch.backends.cuda.sdp_kernel(enable_flash=..., enable_math=..., enable_mem_efficient=...)
# only picks a fused kernel; older torch has other keywords. A no-op keeps the math path.
torch.backends.cuda.sdp_kernel = lambda *a, **k: contextlib.nullcontext()


class _GELU(torch.nn.Module):
    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = torch.nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, x):
        return torch.nn.functional.gelu(self.proj(x), approximate=self.approximate)


class FeedForward(torch.nn.Module):
    """diffusers.models.attention.FeedForward for activation_fn "gelu" / "gelu-approximate":
    net = [GELU(dim, inner) with .proj, Dropout, Linear(inner, dim_out)] (+ Dropout if final)."""

    def __init__(self, dim, dim_out=None, mult=4, dropout=0.0, activation_fn="geglu",
                 final_dropout=False, inner_dim=None, bias=True):
        super().__init__()
        inner_dim = inner_dim if inner_dim is not None else int(dim * mult)
        dim_out = dim_out if dim_out is not None else dim
        if activation_fn not in ("gelu", "gelu-approximate"):
            raise NotImplementedError(activation_fn)
        approx = "tanh" if activation_fn == "gelu-approximate" else "none"
        self.net = torch.nn.ModuleList([_GELU(dim, inner_dim, approx, bias),
                                        torch.nn.Dropout(dropout),
                                        torch.nn.Linear(inner_dim, dim_out, bias=bias)])
        if final_dropout:
            self.net.append(torch.nn.Dropout(dropout))

    def forward(self, x):
        for m in self.net:
            x = m(x)
        return x


def _parse_side(side):
    groups, cur, depth = [], None, 0
    for tok in side.replace("(", " ( ").replace(")", " ) ").split():
        if tok == "(":
            cur, depth = [], depth + 1
        elif tok == ")":
            groups.append(cur)
            cur, depth = None, depth - 1
        elif depth:
            cur.append(tok)
        else:
            groups.append([tok])
    return groups


def rearrange(x, pattern, **sizes):
    left, right = (s.strip() for s in pattern.split("->"))
    lg, rg = _parse_side(left), _parse_side(right)
    known = dict(sizes)
    for g, n in zip(lg, x.shape):
        unknown = [a for a in g if a not in known]
        prod = 1
        for a in g:
            if a in known:
                prod *= known[a]
        if len(unknown) == 1:
            known[unknown[0]] = n // prod
    flat = [a for g in lg for a in g]
    x = x.reshape([known[a] for a in flat])
    order = [a for g in rg for a in g]
    new = [a for a in order if a not in flat]  # repeat axes
    for a in new:
        x = x.unsqueeze(0)
        flat = [a] + flat
    x = x.permute([flat.index(a) for a in order])
    if new:
        x = x.expand([known[a] for a in order])
    return x.reshape([int(np.prod([known[a] for a in g])) for g in rg])


def repeat(x, pattern, **sizes):
    return rearrange(x, pattern, **sizes).contiguous()


def _module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def register_to_config(init):
    sig = inspect.signature(init)

    def wrapper(self, *args, **kwargs):
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        self.config = types.SimpleNamespace(
            **{k: v for k, v in bound.arguments.items() if k not in ("self", "kwargs")})
        init(self, *args, **kwargs)

    return wrapper


class _Logger:
    def __getattr__(self, name):
        return lambda *a, **k: None


NOISE = {}


def randn_tensor(shape, generator=None, device=None, dtype=None):
    noise = NOISE["latents"]
    assert tuple(noise.shape) == tuple(shape), (noise.shape, shape)
    return noise.clone().to(dtype=dtype)


def _load_safetensors(path, device="cpu"):
    return {k: torch.from_numpy(v.astype(np.float32)) for k, v in read_safetensors(path).items()}


def install_stand_ins():
    _module("einops", rearrange=rearrange, repeat=repeat)
    _module("tqdm", tqdm=lambda it=None, *a, **k: it)
    _module("trimesh", Trimesh=type("Trimesh", (), {}))
    pil = _module("PIL")
    pil.Image = _module("PIL.Image", Image=type("Image", (), {}))
    _module("cv2")
    _module("skimage")
    sys.modules["skimage"].measure = _module("skimage.measure")
    tv = _module("torchvision")
    tv.transforms = _module("torchvision.transforms")
    _module("transformers", **{n: type(n, (), {}) for n in (
        "CLIPVisionModelWithProjection", "CLIPVisionConfig", "Dinov2Model", "Dinov2Config")})
    st = _module("safetensors")
    st.torch = _module("safetensors.torch", load_file=_load_safetensors)
    d = _module("diffusers")
    d.configuration_utils = _module("diffusers.configuration_utils",
                                    ConfigMixin=type("ConfigMixin", (), {}),
                                    register_to_config=register_to_config)
    d.schedulers = _module("diffusers.schedulers")
    d.schedulers.scheduling_utils = _module("diffusers.schedulers.scheduling_utils",
                                            SchedulerMixin=type("SchedulerMixin", (), {}))
    d.utils = _module("diffusers.utils", BaseOutput=type("BaseOutput", (), {}),
                      logging=types.SimpleNamespace(get_logger=lambda *a: _Logger()))
    d.models = _module("diffusers.models")
    d.models.attention = _module("diffusers.models.attention", FeedForward=FeedForward)
    d.utils.torch_utils = _module("diffusers.utils.torch_utils", randn_tensor=randn_tensor)
    d.utils.import_utils = _module("diffusers.utils.import_utils",
                                   is_accelerate_version=lambda *a: False,
                                   is_accelerate_available=lambda: False)


def import_official(checkout):
    """The official shape modules without running the package __init__ files of hy3dgen/ and
    hy3dgen/shapegen/ (they import the texture pipeline and the mesh post-processors); every
    module imported is the checkout's own file."""
    root = os.path.join(os.path.abspath(checkout), "hy3dgen")
    if not os.path.isdir(root):
        sys.exit(f"{checkout}: no hy3dgen/ folder (pass a Hunyuan3D-2 checkout)")
    for name, path in (("hy3dgen", root), ("hy3dgen.shapegen", os.path.join(root, "shapegen"))):
        pkg = types.ModuleType(name)
        pkg.__path__ = [path]
        sys.modules[name] = pkg
    sys.path.insert(0, os.path.abspath(checkout))
    import importlib
    mods = types.SimpleNamespace()
    mods.pipelines = importlib.import_module("hy3dgen.shapegen.pipelines")
    mods.models = importlib.import_module("hy3dgen.shapegen.models")
    mods.schedulers = importlib.import_module("hy3dgen.shapegen.schedulers")
    return mods


# ---- safetensors (numpy) -----------------------------------------------------------------------

_DT = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64}


def write_safetensors(path, tensors, metadata):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        dt = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
              np.dtype(np.int32): "I32", np.dtype(np.int64): "I64"}[a.dtype]
        b = a.tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    header["__metadata__"] = {k: v if isinstance(v, str) else json.dumps(v, sort_keys=True)
                              for k, v in metadata.items()}
    h = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=_DT[info["dtype"]]).reshape(info["shape"])
    return out


# ---- variants ----------------------------------------------------------------------------------

SCHEDULERS = {
    "consistency": {"target": "hy3dgen.shapegen.schedulers.ConsistencyFlowMatchEulerDiscreteScheduler",
                    "params": {"num_train_timesteps": 1000, "pcm_timesteps": 100}},
    "flow": {"target": "hy3dgen.shapegen.schedulers.FlowMatchEulerDiscreteScheduler",
             "params": {"num_train_timesteps": 1000}},
}


def dino_config(hidden, heads, layers, image_size, swiglu):
    return {"attention_probs_dropout_prob": 0.0, "drop_path_rate": 0.0, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.0, "hidden_size": hidden, "image_size": image_size,
            "initializer_range": 0.02, "layer_norm_eps": 1e-6, "layerscale_value": 1.0,
            "mlp_ratio": 4, "model_type": "dinov2", "num_attention_heads": heads,
            "num_channels": 3, "num_hidden_layers": layers, "patch_size": 14, "qkv_bias": True,
            "torch_dtype": "float32", "use_swiglu_ffn": swiglu}


# Two variants with different sizes (a second set keeps size-reading tests honest). The turbo
# variant ships a turbo VAE folder beside the DiT folder, as enable_flashvdm() loads it: its
# geometry decoder exercises the options a lighter decoder uses (downsample ratio: narrower
# width and fewer heads behind latents_proj; MLP expand ratio; no ln_post, which also turns the
# decoder's q/k norm off).
VARIANTS = {
    "v2-0-turbo": dict(
        dit_folder="hunyuan3d-dit-v2-0-turbo", scheduler="consistency", steps=5, guidance=5.0,
        batch=2, seed=3101,
        dit=dict(in_channels=8, context_in_dim=8, hidden_size=16, mlp_ratio=2.0, num_heads=2,
                 depth=1, depth_single_blocks=2, axes_dim=[8], theta=10000, qkv_bias=True,
                 guidance_embed=True),
        vae=dict(num_latents=16, embed_dim=8, num_freqs=4, include_pi=False, heads=2, width=16,
                 num_decoder_layers=1, qkv_bias=False, qk_norm=True, scale_factor=0.875),
        turbo_vae=dict(folder="hunyuan3d-vae-v2-0-turbo",
                       geo=dict(geo_decoder_mlp_expand_ratio=1, geo_decoder_downsample_ratio=2,
                                geo_decoder_ln_post=False)),
        dino=dino_config(8, 2, 1, 28, False), octree_resolution=8),
    "v2-0-fast": dict(
        dit_folder="hunyuan3d-dit-v2-0-fast", scheduler="flow", steps=4, guidance=3.5,
        batch=1, seed=3201,
        dit=dict(in_channels=4, context_in_dim=12, hidden_size=8, mlp_ratio=4.0, num_heads=2,
                 depth=2, depth_single_blocks=1, axes_dim=[4], theta=10000, qkv_bias=True,
                 guidance_embed=True),
        vae=dict(num_latents=12, embed_dim=4, num_freqs=3, include_pi=False, heads=3, width=12,
                 num_decoder_layers=1, qkv_bias=False, qk_norm=True, scale_factor=1.125),
        turbo_vae=None,
        dino=dino_config(12, 2, 1, 28, True), octree_resolution=7),
    # Hunyuan3D-2mini's turbo: the U-ViT DiT with mixture-of-experts blocks (HunYuanDiTPlain) run
    # with CFG (it has no guidance embedding; its guidance_cond_proj_dim projection is not used by
    # the flow-matching pipeline), the consistency scheduler, and the mini turbo VAE beside it.
    "v2-mini-turbo": dict(
        dit_folder="hunyuan3d-dit-v2-mini-turbo", scheduler="consistency", steps=5, guidance=5.0,
        batch=1, seed=3301,
        dit_target="hy3dgen.shapegen.models.denoisers.hunyuandit.HunYuanDiTPlain",
        dit=dict(input_size=20, in_channels=4, hidden_size=16, context_dim=8, depth=3,
                 num_heads=2, qk_norm=True, text_len=5, with_decoupled_ca=False,
                 use_attention_pooling=False, qk_norm_type="rms", qkv_bias=False,
                 use_pos_emb=False, num_moe_layers=1, num_experts=2, moe_top_k=1,
                 guidance_cond_proj_dim=4),
        vae=dict(num_latents=20, embed_dim=4, num_freqs=3, include_pi=False, heads=2, width=8,
                 num_decoder_layers=1, qkv_bias=False, qk_norm=True, scale_factor=1.0625),
        turbo_vae=dict(folder="hunyuan3d-vae-v2-mini-turbo",
                       geo=dict(geo_decoder_mlp_expand_ratio=2, geo_decoder_downsample_ratio=2,
                                geo_decoder_ln_post=False)),
        dino=dino_config(8, 2, 1, 28, False), octree_resolution=6),
}


def f16(t):
    return t.detach().to(torch.float16).to(torch.float32)


def init_weights(module, gen, gain_names=()):
    """Seeded init; every value exactly representable in float16."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("bias") and ("norm" in name or "ln_" in name):
                v = torch.randn(p.shape, generator=gen) * 0.1
            elif "norm" in name or "ln_" in name or name.endswith(".scale"):
                v = 1.0 + torch.randn(p.shape, generator=gen) * 0.15
            elif name.endswith("bias"):
                v = torch.randn(p.shape, generator=gen) * 0.1
            else:
                v = torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1])
                if any(g in name for g in gain_names):
                    v = v * 1.25
            p.copy_(f16(v))


def dino_weights(cfg, gen):
    H, P = cfg["hidden_size"], cfg["patch_size"]
    n = (cfg["image_size"] // P) ** 2 + 1
    M = H * cfg["mlp_ratio"]
    w = {"embeddings.cls_token": [1, 1, H], "embeddings.mask_token": [1, H],
         "embeddings.position_embeddings": [1, n, H],
         "embeddings.patch_embeddings.projection.weight": [H, 3, P, P],
         "embeddings.patch_embeddings.projection.bias": [H],
         "layernorm.weight": [H], "layernorm.bias": [H]}
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for x in ("query", "key", "value"):
            w[p + f"attention.attention.{x}.weight"] = [H, H]
            w[p + f"attention.attention.{x}.bias"] = [H]
        w[p + "attention.output.dense.weight"] = [H, H]
        w[p + "attention.output.dense.bias"] = [H]
        for k in ("norm1", "norm2"):
            w[p + k + ".weight"] = [H]
            w[p + k + ".bias"] = [H]
        w[p + "layer_scale1.lambda1"] = [H]
        w[p + "layer_scale2.lambda1"] = [H]
        if cfg["use_swiglu_ffn"]:
            hidden = (int(M * 2 / 3) + 7) // 8 * 8
            w[p + "mlp.weights_in.weight"] = [2 * hidden, H]
            w[p + "mlp.weights_in.bias"] = [2 * hidden]
            w[p + "mlp.weights_out.weight"] = [H, hidden]
            w[p + "mlp.weights_out.bias"] = [H]
        else:
            w[p + "mlp.fc1.weight"] = [M, H]
            w[p + "mlp.fc1.bias"] = [M]
            w[p + "mlp.fc2.weight"] = [H, M]
            w[p + "mlp.fc2.bias"] = [H]
    out = {}
    for name, shape in w.items():
        if "norm" in name and name.endswith("weight"):
            v = 1.0 + torch.randn(shape, generator=gen) * 0.15
        elif "lambda1" in name:
            v = 0.5 + torch.randn(shape, generator=gen) * 0.1
        elif name.endswith("bias") or "token" in name or "position" in name:
            v = torch.randn(shape, generator=gen) * 0.1
        else:
            fan_in = int(np.prod(shape[1:]))
            v = torch.randn(shape, generator=gen) / math.sqrt(fan_in)
        out[name] = f16(v)
    return out


def centre_logits(vae, gen, num_latents, embed_dim):
    """Shift the output bias so that the zero level crosses the box (about a third inside)."""
    with torch.no_grad():
        z = torch.randn(1, num_latents, embed_dim, generator=gen)
        dec = vae(z)
        pts = torch.rand(1, 512, 3, generator=gen) * 2.02 - 1.01
        logits = vae.geo_decoder(queries=pts, latents=dec)
        shift = torch.quantile(logits.flatten(), 0.65)
        b = vae.geo_decoder.output_proj.bias
        b.copy_(f16(b - shift))


def section(target, params):
    return {"target": target, "params": params}


def make_variant(mods, name, v, out_root, reference):
    gen = torch.Generator().manual_seed(v["seed"])
    folder = os.path.join(out_root, name)
    dit_dir = os.path.join(folder, v["dit_folder"])
    os.makedirs(dit_dir, exist_ok=True)
    dino = v["dino"]
    config = {
        "model": section(v.get("dit_target", "hy3dgen.shapegen.models.Hunyuan3DDiT"), v["dit"]),
        "vae": section("hy3dgen.shapegen.models.ShapeVAE", v["vae"]),
        "conditioner": section("hy3dgen.shapegen.models.SingleImageEncoder", {
            "main_image_encoder": {"type": "DinoImageEncoder",
                                   "kwargs": {"config": dino, "image_size": dino["image_size"]}}}),
        "image_processor": section("hy3dgen.shapegen.preprocessors.ImageProcessorV2",
                                   {"size": 64, "border_ratio": 0.15}),
        "scheduler": SCHEDULERS[v["scheduler"]],
    }
    with open(os.path.join(dit_dir, "config.yaml"), "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)

    # The networks, as Hunyuan3DDiTPipeline.from_single_file builds them from config.yaml.
    inst = mods.pipelines.instantiate_from_config
    model = inst(config["model"]).eval()
    vae = inst(config["vae"]).eval()
    scheduler = inst(config["scheduler"])
    init_weights(model, gen, gain_names=("_mod.", "modulation.", "time_in.", "guidance_in.",
                                         "adaLN_modulation.", "gate."))
    init_weights(vae, gen)
    centre_logits(vae, gen, v["vae"]["num_latents"], v["vae"]["embed_dim"])
    dino_w = dino_weights(dino, gen)
    ckpt = {}
    for k, t in model.state_dict().items():
        ckpt["model." + k] = t
    for k, t in vae.state_dict().items():
        if k.startswith("geo_decoder.fourier_embedder") or k.startswith("fourier_embedder"):
            continue
        if k.startswith("encoder.") or k.startswith("pre_kl."):
            continue  # the official decoders ship without the encoder (loaded with strict=False)
        ckpt["vae." + k] = t
    for k, t in dino_w.items():
        ckpt["conditioner.main_image_encoder.model." + k] = t
    meta = {"format": "pt", "reference": reference, "weights_dtype": "F16",
            "init": "seeded random, every value exactly representable in float16"}
    write_safetensors(os.path.join(dit_dir, "model.fp16.safetensors"),
                      {k: t.numpy().astype(np.float16) for k, t in ckpt.items()}, meta)

    vaes = {v["dit_folder"]: vae}
    if v["turbo_vae"]:
        tv = v["turbo_vae"]
        vae_dir = os.path.join(folder, tv["folder"])
        os.makedirs(vae_dir, exist_ok=True)
        tcfg = section("hy3dgen.shapegen.models.ShapeVAE", dict(v["vae"], **tv["geo"]))
        with open(os.path.join(vae_dir, "config.yaml"), "w") as f:
            yaml.safe_dump(tcfg, f, sort_keys=False)
        turbo = inst(tcfg).eval()
        init_weights(turbo, gen)
        centre_logits(turbo, gen, v["vae"]["num_latents"], v["vae"]["embed_dim"])
        sd = {k: t for k, t in turbo.state_dict().items()
              if not (k.startswith("encoder.") or k.startswith("pre_kl.") or "fourier" in k)}
        write_safetensors(os.path.join(vae_dir, "model.fp16.safetensors"),
                          {k: t.numpy().astype(np.float16) for k, t in sd.items()}, meta)
        # Read back the way the official VAE loader does (from_single_file, strict=False).
        turbo = mods.models.ShapeVAE.from_single_file(
            os.path.join(vae_dir, "model.fp16.safetensors"), os.path.join(vae_dir, "config.yaml"),
            device="cpu", dtype=torch.float32, use_safetensors=True).eval()
        vaes[tv["folder"]] = turbo

    # One run of the official flow-matching pipeline on condition tokens (the conditioner's
    # output is an input here: DINOv2 has its own golden set).
    B, L, C = v["batch"], v["vae"]["num_latents"], v["dit"]["in_channels"]
    Lc = (dino["image_size"] // 14) ** 2 + 1
    width = v["dit"].get("context_in_dim", v["dit"].get("context_dim"))
    cond = f16(torch.randn(B, Lc, width, generator=gen))
    noise = torch.randn(B, L, C, generator=gen)
    NOISE["latents"] = noise

    class Conditioner(torch.nn.Module):
        def forward(self, image, **kw):
            return {"main": cond}

        def unconditional_embedding(self, batch_size, **kw):
            return {"main": torch.zeros_like(cond)}

    pipe = mods.pipelines.Hunyuan3DDiTFlowMatchingPipeline(
        vae=vae, model=model, scheduler=scheduler, conditioner=Conditioner(),
        image_processor=lambda img, **kw: {"image": torch.zeros(1, 3, 2, 2)},
        device="cpu", dtype=torch.float32)
    calls = []

    def hook(mod, args, output):
        calls.append((args[1].clone(), output.clone()))

    h = model.register_forward_hook(hook)
    guid = []
    orig_forward = model.forward

    def forward(x, t, contexts, **kw):
        guid.append(None if kw.get("guidance") is None else kw["guidance"].clone())
        return orig_forward(x, t, contexts, **kw)

    model.forward = forward
    steps_out = []
    final = pipe(image=[None] * B, num_inference_steps=v["steps"], guidance_scale=v["guidance"],
                 output_type="latent", enable_pbar=False, callback_steps=1,
                 callback=lambda i, t, o: steps_out.append(o.prev_sample.clone()))
    h.remove()
    model.forward = orig_forward

    g = {"in.cond": cond, "in.noise": noise, "out.final_latents": final,
         "schedule.timesteps": scheduler.timesteps.float()}
    sig = getattr(scheduler, "sigmas_", scheduler.sigmas)
    g["schedule.sigmas"] = sig.float()
    for i, ((t, pred), lat) in enumerate(zip(calls, steps_out)):
        g[f"step.{i}.t"] = t.float()
        g[f"step.{i}.pred"] = pred
        g[f"step.{i}.latents"] = lat
        if guid[i] is not None:
            g[f"step.{i}.guidance"] = guid[i].float()
    cfg_rows = calls[0][1].shape[0] != B

    # Decoding of the final latents by each VAE, as Hunyuan3DDiTPipeline._export does it, on a
    # dense grid (VanillaVolumeDecoder).
    decode = {}
    for folder_name, net in vaes.items():
        with torch.no_grad():
            z = 1.0 / net.scale_factor * final
            dec = net(z)
            grid = mods.models.autoencoders.VanillaVolumeDecoder()(
                dec, net.geo_decoder, bounds=1.01, num_chunks=8000,
                octree_resolution=v["octree_resolution"], enable_pbar=False)
        g[f"decode.{folder_name}.decoded_latents"] = dec
        g[f"decode.{folder_name}.grid_logits"] = grid
        decode[folder_name] = {"grid_positive": float((grid > 0).float().mean())}

    run = {"variant": name, "dit_folder": v["dit_folder"], "vae_folders": list(vaes),
           "turbo_vae_folder": v["turbo_vae"]["folder"] if v["turbo_vae"] else None,
           "batch": B, "latent_tokens": L, "context_tokens": Lc, "steps": v["steps"],
           "guidance_scale": v["guidance"], "scheduler": config["scheduler"],
           "cfg": cfg_rows, "model_calls": len(calls), "octree_resolution": v["octree_resolution"],
           "bounds": 1.01, "seed": v["seed"], "decode": decode}
    write_safetensors(os.path.join(folder, "golden.safetensors"),
                      {k: t.detach().float().numpy() for k, t in g.items()},
                      {"format": "pt", "golden_kind": "fast_models", "reference": reference,
                       "run": run})
    print(f"{name}: {len(calls)} model calls, cfg {cfg_rows}, grid > 0: "
          + ", ".join(f"{k} {d['grid_positive']:.2f}" for k, d in decode.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkout", help="Hunyuan3D-2 checkout (the folder holding hy3dgen/)")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--commit", default=None, help="commit of the checkout (default: git's)")
    args = ap.parse_args()
    commit = args.commit
    if commit is None:
        try:
            commit = subprocess.check_output(["git", "-C", args.checkout, "rev-parse", "HEAD"],
                                             text=True, stderr=subprocess.DEVNULL).strip()
        except (subprocess.CalledProcessError, FileNotFoundError):
            commit = "unknown"
    reference = {"repo": "Tencent-Hunyuan/Hunyuan3D-2", "commit": commit,
                 "torch": torch.__version__}
    torch.set_num_threads(1)
    install_stand_ins()
    mods = import_official(args.checkout)
    for name, v in VARIANTS.items():
        make_variant(mods, name, v, args.out, reference)


if __name__ == "__main__":
    main()
