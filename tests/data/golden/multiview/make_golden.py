#!/usr/bin/env python3
"""Golden data for Hunyuan3D-2mv (multiview shape models), made by the official code.

    python3 make_golden.py /path/to/Hunyuan3D-2 [--out DIR]

The sibling of ../fast_models/make_golden.py, whose stand-ins, weight initialisation and file
writer it reuses. Each variant is a tiny random model folder in the published layout
(`hunyuan3d-dit-v2-mv[-fast|-turbo]/config.yaml` + `model.fp16.safetensors`) and one run of the
official pipeline, loaded as `from_single_file` loads it, on a dict of view images
(`pipeline(image={"front": path, ...})`): `MVImageProcessorV2`, `SingleImageEncoder` with
`DinoImageEncoderMV`, `Hunyuan3DDiTFlowMatchingPipeline.__call__`, the schedulers, `ShapeVAE` and
`VanillaVolumeDecoder`, all run unchanged from the checkout.

Besides numpy, PyYAML and torch this needs OpenCV (the processor reads and resizes the PNGs with
it) and torchvision (the encoder's transform); Debian: python3-opencv, python3-torchvision.
transformers is not needed: `Dinov2Model` is replaced by `Dinov2Reference` below, a plain
restatement of Hugging Face's eager DINOv2 for grids that need no position interpolation (the
DINOv2 golden set pins gen3d's encoder against the real transformers sources). See README.md.
"""

import argparse
import os
import subprocess
import sys
import types

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fast_models"))
import make_golden as fm  # noqa: E402  (the fast-model generator: stand-ins and helpers)

import cv2  # noqa: E402  (real OpenCV: MVImageProcessorV2 reads and resizes with it)
import torchvision  # noqa: E402,F401  (real transforms for the encoder)

# ---- transformers stand-in ---------------------------------------------------------------------


class _Attention(torch.nn.Module):
    def __init__(self, H):
        super().__init__()
        self.query = torch.nn.Linear(H, H)
        self.key = torch.nn.Linear(H, H)
        self.value = torch.nn.Linear(H, H)


class _Layer(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, eps = cfg.hidden_size, cfg.layer_norm_eps
        self.heads = cfg.num_attention_heads
        self.norm1 = torch.nn.LayerNorm(H, eps=eps)
        self.norm2 = torch.nn.LayerNorm(H, eps=eps)
        self.attention = torch.nn.Module()
        self.attention.attention = _Attention(H)
        self.attention.output = torch.nn.Module()
        self.attention.output.dense = torch.nn.Linear(H, H)
        self.layer_scale1 = torch.nn.Module()
        self.layer_scale1.lambda1 = torch.nn.Parameter(torch.ones(H))
        self.layer_scale2 = torch.nn.Module()
        self.layer_scale2.lambda1 = torch.nn.Parameter(torch.ones(H))
        self.mlp = torch.nn.Module()
        self.swiglu = cfg.use_swiglu_ffn
        M = int(H * cfg.mlp_ratio)
        if self.swiglu:
            hidden = (int(M * 2 / 3) + 7) // 8 * 8
            self.mlp.weights_in = torch.nn.Linear(H, 2 * hidden)
            self.mlp.weights_out = torch.nn.Linear(hidden, H)
        else:
            self.mlp.fc1 = torch.nn.Linear(H, M)
            self.mlp.fc2 = torch.nn.Linear(M, H)

    def forward(self, x):
        B, T, H = x.shape
        d = H // self.heads
        a = self.attention.attention
        y = self.norm1(x)
        q, k, v = (m(y).view(B, T, self.heads, d).transpose(1, 2) for m in (a.query, a.key, a.value))
        w = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * d ** -0.5, dim=-1)
        y = torch.matmul(w, v).transpose(1, 2).reshape(B, T, H)
        x = x + self.layer_scale1.lambda1 * self.attention.output.dense(y)
        y = self.norm2(x)
        if self.swiglu:
            x1, x2 = self.mlp.weights_in(y).chunk(2, dim=-1)
            y = self.mlp.weights_out(torch.nn.functional.silu(x1) * x2)
        else:
            y = self.mlp.fc2(torch.nn.functional.gelu(self.mlp.fc1(y)))
        return x + self.layer_scale2.lambda1 * y


class Dinov2Reference(torch.nn.Module):
    """transformers' Dinov2Model (eager attention) with its state_dict names, for inputs whose
    patch grid is the stored one (interpolate_pos_encoding returns the table unchanged)."""

    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        H, P = cfg.hidden_size, cfg.patch_size
        n = (cfg.image_size // P) ** 2 + 1
        e = self.embeddings = torch.nn.Module()
        e.cls_token = torch.nn.Parameter(torch.zeros(1, 1, H))
        e.mask_token = torch.nn.Parameter(torch.zeros(1, H))
        e.position_embeddings = torch.nn.Parameter(torch.zeros(1, n, H))
        e.patch_embeddings = torch.nn.Module()
        e.patch_embeddings.projection = torch.nn.Conv2d(cfg.num_channels, H, P, stride=P)
        self.encoder = torch.nn.Module()
        self.encoder.layer = torch.nn.ModuleList(_Layer(cfg) for _ in range(cfg.num_hidden_layers))
        self.layernorm = torch.nn.LayerNorm(H, eps=cfg.layer_norm_eps)

    @property
    def device(self):
        return self.layernorm.weight.device

    @property
    def dtype(self):
        return self.layernorm.weight.dtype

    def forward(self, pixel_values):
        e = self.embeddings
        x = e.patch_embeddings.projection(pixel_values).flatten(2).transpose(1, 2)
        assert x.shape[1] + 1 == e.position_embeddings.shape[1], "no position interpolation here"
        x = torch.cat([e.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + e.position_embeddings
        for layer in self.encoder.layer:
            x = layer(x)
        return types.SimpleNamespace(last_hidden_state=self.layernorm(x))


class _Dinov2Config(types.SimpleNamespace):
    @classmethod
    def from_dict(cls, d):
        return cls(**d)


def install_stand_ins():
    # The fast-model generator stubs out OpenCV, PIL and torchvision; the multiview run uses the
    # real ones (imported above), so they are put back.
    real = {n: m for n, m in sys.modules.items()
            if n.split(".")[0] in ("cv2", "PIL", "torchvision")}
    fm.install_stand_ins()
    for n in list(sys.modules):
        if n.split(".")[0] in ("cv2", "PIL", "torchvision"):
            del sys.modules[n]
    sys.modules.update(real)
    tr = sys.modules["transformers"]
    tr.Dinov2Model = Dinov2Reference
    tr.Dinov2Config = _Dinov2Config


# ---- view images -------------------------------------------------------------------------------

VIEWS = ("front", "left", "back", "right")  # MVImageProcessorV2.view2idx order


def make_view_images(folder, seed):
    """Small RGBA PNGs, one per view: a soft-edged blob of another shape and colour each, on a
    transparent background whose hidden colours differ (the processor must not show them)."""
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    paths = {}
    for i, view in enumerate(VIEWS):
        H, W = 30 + 4 * i, 40 - 3 * i
        y, x = np.mgrid[0:H, 0:W].astype(np.float32)
        cy, cx = H * (0.45 + 0.05 * i), W * (0.5 - 0.04 * i)
        ry, rx = H * (0.3 + 0.03 * i), W * (0.35 - 0.05 * i)
        r = np.sqrt(((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2)
        alpha = np.clip((1.15 - r) * 4.0, 0.0, 1.0)
        rgb = np.stack([60 + 40 * i + 100 * x / W, 200 - 30 * i - 80 * y / H,
                        90 + 50 * np.sin(x / 3 + i)], axis=-1)
        rgb += rng.normal(0, 6, rgb.shape)
        bgra = np.zeros((H, W, 4), np.uint8)
        bgra[..., :3] = np.clip(rgb[..., ::-1], 0, 255).astype(np.uint8)
        bgra[..., 3] = np.round(alpha * 255).astype(np.uint8)
        bgra[alpha == 0, :3] = rng.integers(0, 256, (int((alpha == 0).sum()), 3))
        path = os.path.join(folder, f"{view}.png")
        cv2.imwrite(path, bgra)
        paths[view] = path
    return paths


# ---- variants ----------------------------------------------------------------------------------

# Three variants with different sizes and view subsets. `views` is the dict given to the pipeline,
# in that order (the processor sorts it by view index).
VARIANTS = {
    # The standard 2mv DiT: no guidance embedding, so the pipeline runs CFG ([cond; uncond]); all
    # four views, given out of order.
    "v2-mv": dict(
        dit_folder="hunyuan3d-dit-v2-mv", scheduler="flow", steps=4, guidance=4.5, seed=4101,
        views=("right", "front", "back", "left"), dino=fm.dino_config(8, 2, 1, 28, False),
        dit=dict(in_channels=4, context_in_dim=8, hidden_size=8, mlp_ratio=2.0, num_heads=2,
                 depth=1, depth_single_blocks=1, axes_dim=[4], theta=10000, qkv_bias=True,
                 guidance_embed=False),
        vae=dict(num_latents=10, embed_dim=4, num_freqs=3, include_pi=False, heads=2, width=8,
                 num_decoder_layers=1, qkv_bias=False, qk_norm=True, scale_factor=1.0625),
        turbo_vae=None, octree_resolution=6),
    # The turbo DiT (guidance-embedded, consistency scheduler) with Hunyuan3D-2's turbo VAE
    # beside it (enable_flashvdm's mapping for 2mv); three views.
    "v2-mv-turbo": dict(
        dit_folder="hunyuan3d-dit-v2-mv-turbo", scheduler="consistency", steps=5, guidance=5.0,
        seed=4201, views=("back", "front", "left"), dino=fm.dino_config(12, 2, 1, 28, True),
        dit=dict(in_channels=8, context_in_dim=12, hidden_size=16, mlp_ratio=2.0, num_heads=2,
                 depth=1, depth_single_blocks=1, axes_dim=[8], theta=10000, qkv_bias=True,
                 guidance_embed=True),
        vae=dict(num_latents=12, embed_dim=8, num_freqs=4, include_pi=False, heads=2, width=16,
                 num_decoder_layers=1, qkv_bias=False, qk_norm=True, scale_factor=0.875),
        turbo_vae=dict(folder="hunyuan3d-vae-v2-0-turbo",
                       geo=dict(geo_decoder_mlp_expand_ratio=1, geo_decoder_downsample_ratio=2,
                                geo_decoder_ln_post=False)),
        octree_resolution=7),
    # The fast DiT (guidance-embedded, flow matching) on two views that are not neighbours in the
    # view order: the view embedding rows are 0 and 3, not 0 and 1.
    "v2-mv-fast": dict(
        dit_folder="hunyuan3d-dit-v2-mv-fast", scheduler="flow", steps=3, guidance=3.5,
        seed=4301, views=("right", "front"), dino=fm.dino_config(8, 2, 1, 28, True),
        dit=dict(in_channels=4, context_in_dim=8, hidden_size=8, mlp_ratio=4.0, num_heads=2,
                 depth=1, depth_single_blocks=1, axes_dim=[4], theta=10000, qkv_bias=True,
                 guidance_embed=True),
        vae=dict(num_latents=8, embed_dim=4, num_freqs=3, include_pi=False, heads=2, width=8,
                 num_decoder_layers=1, qkv_bias=False, qk_norm=True, scale_factor=1.0),
        turbo_vae=None, octree_resolution=5),
}

PROCESSOR_SIZE = 32  # MVImageProcessorV2 size (the published folders: 512)


def make_variant(mods, name, v, out_root, images, reference):
    gen = torch.Generator().manual_seed(v["seed"])
    folder = os.path.join(out_root, name)
    dit_dir = os.path.join(folder, v["dit_folder"])
    os.makedirs(dit_dir, exist_ok=True)
    dino = v["dino"]
    S = fm.section
    config = {
        "model": S("hy3dgen.shapegen.models.Hunyuan3DDiT", v["dit"]),
        "vae": S("hy3dgen.shapegen.models.ShapeVAE", v["vae"]),
        "conditioner": S("hy3dgen.shapegen.models.SingleImageEncoder", {
            "main_image_encoder": {"type": "DinoImageEncoderMV",
                                   "kwargs": {"config": dino, "image_size": dino["image_size"]}}}),
        "scheduler": fm.SCHEDULERS[v["scheduler"]],
        "image_processor": S("hy3dgen.shapegen.preprocessors.MVImageProcessorV2",
                             {"size": PROCESSOR_SIZE, "border_ratio": 0.15}),
        "pipeline": {"target": "hy3dgen.shapegen.pipelines.Hunyuan3DDiTFlowMatchingPipeline"},
    }
    import yaml
    config_path = os.path.join(dit_dir, "config.yaml")
    with open(config_path, "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)

    inst = mods.pipelines.instantiate_from_config
    model = inst(config["model"]).eval()
    vae = inst(config["vae"]).eval()
    fm.init_weights(model, gen, gain_names=("_mod.", "modulation.", "time_in.", "guidance_in.",
                                            "gate."))
    fm.init_weights(vae, gen)
    fm.centre_logits(vae, gen, v["vae"]["num_latents"], v["vae"]["embed_dim"])
    ckpt = {"model." + k: t for k, t in model.state_dict().items()}
    for k, t in vae.state_dict().items():
        if "fourier_embedder" in k or k.startswith("encoder.") or k.startswith("pre_kl."):
            continue
        ckpt["vae." + k] = t
    for k, t in fm.dino_weights(dino, gen).items():
        ckpt["conditioner.main_image_encoder.model." + k] = t
    meta = {"format": "pt", "reference": reference, "weights_dtype": "F16",
            "init": "seeded random, every value exactly representable in float16"}
    ckpt_path = os.path.join(dit_dir, "model.fp16.safetensors")
    fm.write_safetensors(ckpt_path, {k: t.numpy().astype(np.float16) for k, t in ckpt.items()},
                         meta)

    vae_folders = [v["dit_folder"]]
    if v["turbo_vae"]:
        tv = v["turbo_vae"]
        vae_dir = os.path.join(folder, tv["folder"])
        os.makedirs(vae_dir, exist_ok=True)
        tcfg = S("hy3dgen.shapegen.models.ShapeVAE", dict(v["vae"], **tv["geo"]))
        with open(os.path.join(vae_dir, "config.yaml"), "w") as f:
            yaml.safe_dump(tcfg, f, sort_keys=False)
        turbo = inst(tcfg).eval()
        fm.init_weights(turbo, gen)
        fm.centre_logits(turbo, gen, v["vae"]["num_latents"], v["vae"]["embed_dim"])
        sd = {k: t for k, t in turbo.state_dict().items()
              if not (k.startswith("encoder.") or k.startswith("pre_kl.") or "fourier" in k)}
        fm.write_safetensors(os.path.join(vae_dir, "model.fp16.safetensors"),
                             {k: t.numpy().astype(np.float16) for k, t in sd.items()}, meta)
        vae_folders.append(tv["folder"])

    # The pipeline as from_pretrained builds it from the folder (config.yaml + safetensors).
    pipe = mods.pipelines.Hunyuan3DDiTFlowMatchingPipeline.from_single_file(
        ckpt_path, config_path, device="cpu", dtype=torch.float32, use_safetensors=True)
    vaes = {v["dit_folder"]: pipe.vae}
    if v["turbo_vae"]:
        d = os.path.join(folder, v["turbo_vae"]["folder"])
        vaes[v["turbo_vae"]["folder"]] = mods.models.ShapeVAE.from_single_file(
            os.path.join(d, "model.fp16.safetensors"), os.path.join(d, "config.yaml"),
            device="cpu", dtype=torch.float32, use_safetensors=True).eval()

    # What the run passes between its parts.
    seen = {}
    processor = pipe.image_processor
    orig_processor_call = type(processor).__call__

    def processor_call(self, image_dict, **kw):
        out = orig_processor_call(self, image_dict, **kw)
        seen["images"] = out["image"].clone()
        seen["view_idxs"] = list(out["view_idxs"])
        return out

    type(processor).__call__ = processor_call
    encoder = pipe.conditioner.main_image_encoder
    h_dino = encoder.model.register_forward_hook(
        lambda m, a, o: seen.update(pixel_values=a[0].clone(), hidden=o.last_hidden_state.clone()))
    orig_cond = pipe.conditioner.forward

    def cond_forward(image, **kw):
        out = orig_cond(image, **kw)
        seen["cond"] = out["main"].clone()
        return out

    pipe.conditioner.forward = cond_forward
    orig_uncond = pipe.conditioner.unconditional_embedding

    def uncond(batch_size, **kw):
        out = orig_uncond(batch_size, **kw)
        seen["uncond"] = out["main"].clone()
        return out

    pipe.conditioner.unconditional_embedding = uncond

    B, L, C = 1, v["vae"]["num_latents"], v["dit"]["in_channels"]
    noise = torch.randn(B, L, C, generator=gen)
    fm.NOISE["latents"] = noise
    calls, guid, steps_out = [], [], []
    h_model = pipe.model.register_forward_hook(lambda m, a, o: calls.append((a[1].clone(),
                                                                             o.clone())))
    orig_forward = pipe.model.forward

    def forward(x, t, contexts, **kw):
        guid.append(None if kw.get("guidance") is None else kw["guidance"].clone())
        return orig_forward(x, t, contexts, **kw)

    pipe.model.forward = forward
    given = {view: images[view] for view in v["views"]}
    final = pipe(image=given, num_inference_steps=v["steps"], guidance_scale=v["guidance"],
                 output_type="latent", enable_pbar=False, callback_steps=1,
                 callback=lambda i, t, o: steps_out.append(o.prev_sample.clone()))
    h_model.remove()
    h_dino.remove()
    type(processor).__call__ = orig_processor_call

    V = len(v["views"])
    T = (dino["image_size"] // 14) ** 2 + 1
    g = {"in.cond": seen["cond"], "in.noise": noise, "out.final_latents": final,
         "views.images": seen["images"][0], "views.pixel_values": seen["pixel_values"],
         "cond.hidden": seen["hidden"], "cond.main": seen["cond"],
         "cond.view_embed": encoder.view_embed[0, :, 0, :].clone(),
         "schedule.timesteps": pipe.scheduler.timesteps.float()}
    assert tuple(seen["cond"].shape) == (1, V * T, dino["hidden_size"])
    assert seen["images"].shape[0] == 1  # one object: stored without that axis (rank <= 4)
    if "uncond" in seen:
        g["cond.uncond"] = seen["uncond"]
    g["schedule.sigmas"] = getattr(pipe.scheduler, "sigmas_", pipe.scheduler.sigmas).float()
    for i, ((t, pred), lat) in enumerate(zip(calls, steps_out)):
        g[f"step.{i}.t"] = t.float()
        g[f"step.{i}.pred"] = pred
        g[f"step.{i}.latents"] = lat
        if guid[i] is not None:
            g[f"step.{i}.guidance"] = guid[i].float()
    cfg_rows = calls[0][1].shape[0] != B

    decode = {}
    for folder_name, net in vaes.items():
        with torch.no_grad():
            dec = net(1.0 / net.scale_factor * final)
            grid = mods.models.autoencoders.VanillaVolumeDecoder()(
                dec, net.geo_decoder, bounds=1.01, num_chunks=8000,
                octree_resolution=v["octree_resolution"], enable_pbar=False)
        g[f"decode.{folder_name}.decoded_latents"] = dec
        g[f"decode.{folder_name}.grid_logits"] = grid
        decode[folder_name] = {"grid_positive": float((grid > 0).float().mean())}

    run = {"variant": name, "dit_folder": v["dit_folder"], "vae_folders": vae_folders,
           "turbo_vae_folder": v["turbo_vae"]["folder"] if v["turbo_vae"] else None,
           "batch": B, "latent_tokens": L, "context_tokens": V * T, "steps": v["steps"],
           "guidance_scale": v["guidance"], "scheduler": config["scheduler"], "cfg": cfg_rows,
           "model_calls": len(calls), "octree_resolution": v["octree_resolution"],
           "bounds": 1.01, "seed": v["seed"], "decode": decode,
           "views_given": list(v["views"]), "view_idxs": seen["view_idxs"],
           "view_images": {view: os.path.relpath(images[view], folder) for view in v["views"]},
           "tokens_per_view": T, "processor_size": PROCESSOR_SIZE, "border_ratio": 0.15}
    fm.write_safetensors(os.path.join(folder, "golden.safetensors"),
                         {k: t.detach().float().numpy() for k, t in g.items()},
                         {"format": "pt", "golden_kind": "multiview", "reference": reference,
                          "run": run})
    print(f"{name}: views {list(v['views'])} -> idx {seen['view_idxs']}, {len(calls)} model calls,"
          f" cfg {cfg_rows}, grid > 0: "
          + ", ".join(f"{k} {d['grid_positive']:.2f}" for k, d in decode.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkout", help="Hunyuan3D-2 checkout (the folder holding hy3dgen/)")
    ap.add_argument("--out", default=HERE)
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
                 "torch": torch.__version__, "torchvision": torchvision.__version__,
                 "opencv": cv2.__version__}
    torch.set_num_threads(1)
    install_stand_ins()
    mods = fm.import_official(args.checkout)
    images = make_view_images(os.path.join(args.out, "views"), 4001)
    for name, v in VARIANTS.items():
        make_variant(mods, name, v, args.out, images, reference)


if __name__ == "__main__":
    main()
