#!/usr/bin/env python3
"""Tile PNG renders side by side for docs/images/gallery/.

Usage: tile_images.py OUT.png IN1.png [IN2.png ...] [--pad N] [--scale S]

The inputs (RGB or RGBA, 8 bits a channel, non-interlaced: what gen3d's save_images writes) are
composited over white, cropped to the one box that holds every input's object (the pixels that are
not white) plus a margin of N pixels (default 12), optionally shrunk by an integer factor S (box
filter), and placed left to right with a light grey rule between them. Needs only numpy and the
standard library (no PIL).
"""
import struct
import sys
import zlib

import numpy as np


def read_png(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, hdr = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    w, h, depth, ctype, _, _, interlace = hdr
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(ctype)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"{path}: only 8-bit grey/RGB(A) non-interlaced PNGs")
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(h, 1 + w * channels)
    stride, bpp = w * channels, channels
    out = bytearray(h * stride)
    prev = bytearray(stride)
    for y in range(h):
        ftype, line = raw[y, 0], raw[y, 1:]
        if ftype == 0:
            cur = bytearray(line.tobytes())
        elif ftype == 1:  # sub: a running sum per channel
            cur = bytearray((np.cumsum(line.reshape(w, bpp).astype(np.int64), 0) & 255).astype(np.uint8).tobytes())
        elif ftype == 2:
            cur = bytearray(((line.astype(np.int32) + np.frombuffer(prev, np.uint8)) & 255).astype(np.uint8).tobytes())
        elif ftype in (3, 4):  # average, Paeth: sequential, byte by byte
            cur, lb = bytearray(line.tobytes()), prev
            for x in range(stride):
                a = cur[x - bpp] if x >= bpp else 0
                b = lb[x]
                if ftype == 3:
                    pred = (a + b) >> 1
                else:
                    c = lb[x - bpp] if x >= bpp else 0
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (cur[x] + pred) & 255
        else:
            raise ValueError(f"{path}: bad filter {ftype}")
        out[y * stride:(y + 1) * stride] = cur
        prev = cur
    out = np.frombuffer(bytes(out), np.uint8)
    img = out.reshape(h, w, channels).astype(np.float32)
    if channels in (1, 2):
        img = np.concatenate([img[..., :1]] * 3 + ([img[..., 1:]] if channels == 2 else []), -1)
    if img.shape[2] == 4:
        alpha = img[..., 3:] / 255.0
        img = img[..., :3] * alpha + 255.0 * (1.0 - alpha)
    return img


def write_png(path, img):
    img = np.ascontiguousarray(img.astype(np.uint8))
    h, w, _ = img.shape
    flat = img.reshape(h, w * 3).astype(np.int16)
    # "Up" filter on every row but the first ("sub" there): renders have long runs of equal rows.
    sub = flat.copy()
    sub[:, 3:] -= flat[:, :-3]
    up = flat.copy()
    up[1:] -= flat[:-1]
    rows = []
    for y in range(h):
        cand_sub = (sub[y] & 255).astype(np.uint8)
        cand_up = (up[y] & 255).astype(np.uint8)
        # pick the filter with the smaller sum of absolute signed residuals (the libpng heuristic)
        score_sub = np.abs(cand_sub.astype(np.int8).astype(np.int32)).sum()
        score_up = np.abs(cand_up.astype(np.int8).astype(np.int32)).sum() if y else 1 << 62
        rows.append((b"\x02" + cand_up.tobytes()) if score_up < score_sub else (b"\x01" + cand_sub.tobytes()))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(b"".join(rows), 9)))
        f.write(chunk(b"IEND", b""))


def main(argv):
    pad, scale, paths = 12, 1, []
    it = iter(argv)
    for a in it:
        if a == "--pad":
            pad = int(next(it))
        elif a == "--scale":
            scale = int(next(it))
        else:
            paths.append(a)
    if len(paths) < 2:
        sys.exit(__doc__)
    out, ins = paths[0], [read_png(p) for p in paths[1:]]
    h, w = ins[0].shape[:2]
    if any(i.shape[:2] != (h, w) for i in ins):
        sys.exit("tile_images.py: the inputs differ in size")
    mask = np.zeros((h, w), bool)
    for i in ins:
        mask |= (i < 250).any(-1)
    ys, xs = np.nonzero(mask)
    if len(ys) == 0:
        y0, y1, x0, x1 = 0, h, 0, w
    else:
        y0, y1 = max(ys.min() - pad, 0), min(ys.max() + 1 + pad, h)
        x0, x1 = max(xs.min() - pad, 0), min(xs.max() + 1 + pad, w)
    y1 -= (y1 - y0) % scale
    x1 -= (x1 - x0) % scale
    tiles = []
    for i in ins:
        t = i[y0:y1, x0:x1]
        if scale > 1:
            t = t.reshape(t.shape[0] // scale, scale, t.shape[1] // scale, scale, 3).mean((1, 3))
        tiles.append(t)
    rule = np.full((tiles[0].shape[0], 2, 3), 220.0)
    parts = []
    for k, t in enumerate(tiles):
        if k:
            parts.append(rule)
        parts.append(t)
    write_png(out, np.clip(np.concatenate(parts, 1) + 0.5, 0, 255))


if __name__ == "__main__":
    main(sys.argv[1:])
