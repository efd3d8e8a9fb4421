#!/usr/bin/env python3
"""Makes texgen golden sets at other texture sizes for the inpainting step (conventions §10).

The official set (../texgen) has one texture size, 128. The inpainting's texel rounding and the
8-bit truncation before cv2.inpaint behave differently at other sizes, so each set here holds:
  - the golden mesh (vtx_pos_normalized, vtx_uv_loaded, faces), copied;
  - bake_texture.npy / bake_trust_mask.png: the official merged texture and trust mask resized to
    T x T by nearest neighbour (a plausible merge with holes; it is an input, not a result);
  - inpaint_vertex_texture.npy, inpaint_vertex_mask.png, inpaint_final.png: §10 computed here with
    numpy 1.24 and OpenCV 4.6, the versions of the reference run, following the conventions
    document: float32 colours, float64 weights rounded into float32 products and sums, a float64
    weight total, half-to-even texel rounding, Gauss-Seidel sweeps, then NS inpaint (radius 3).
Run with Debian's python3-numpy and python3-opencv: python3 make_sets.py [SIZE ...]. The script
first checks that it reproduces the official set's own §10 files bit for bit.

Sets from a real bake instead of a resized one (the bake made by gen3d's bake, which matches the
reference's to 1e-5 at the official size; it is an input, not a result):
  python3 make_sets.py --noise-views SEED VIEWS DIR   golden-like DIR whose views (comma-separated
                                                      indices) are coarse noise (optional)
  GEN3D_TEXGEN_GOLDEN_DIR=DIR build/tests/gen3d_make_bake_set SIZE BAKE_DIR
  python3 make_sets.py --bake NAME BAKE_DIR [DIR]     set NAME from that bake (DIR: its views)
Used for t96bake (the official views, SIZE 96) and t96noise (--noise-views 4 0,2, SIZE 96).

NumPy >= 2 is refused: the reference's §10 arithmetic follows NumPy's type promotion, which NEP 50
changed (1.0 / a float32 distance stays float32 there), so its results differ in the last bits.
"""
import json
import os
import shutil
import sys

import cv2
import numpy as np

if int(np.__version__.split('.')[0]) >= 2:
    sys.exit('make_sets.py needs NumPy < 2 (the reference ran NumPy 1.24); see the docstring')

HERE = os.path.dirname(os.path.abspath(__file__))
OFFICIAL = os.path.join(HERE, '..', 'texgen')
MESH_FILES = ['vtx_pos_normalized.npy', 'vtx_uv_loaded.npy', 'faces.npy']


def texel(uv_original, size):
    # Python's round on float64 products: half to even.
    col = int(round(uv_original[0] * (size - 1)))
    row = int(round((1.0 - uv_original[1]) * (size - 1)))
    return row, col


def vertex_inpaint(texture, mask, positions, uvs, faces):
    size = texture.shape[0]
    channels = texture.shape[2]
    count = positions.shape[0]
    known = np.zeros(count, bool)
    colour = np.zeros((count, channels), np.float32)
    pending = []                         # one entry per unknown corner, duplicates kept
    successors = [[] for _ in range(count)]  # directed: corner k -> corner k+1
    for face in faces:
        for k in range(3):
            v = face[k]
            row, col = texel(uvs[v], size)
            if mask[row, col] > 0:
                known[v] = True
                colour[v] = texture[row, col]
            else:
                pending.append(v)
            successors[v].append(face[(k + 1) % 3])
    patience, previous = 2, 0
    while patience > 0:
        unreached = 0
        for v in pending:
            acc = np.zeros(channels, np.float32)
            total = 0.0
            for u in successors[v]:
                if not known[u]:
                    continue
                distance = np.sqrt(np.sum((positions[v] - positions[u]) ** 2))  # float32
                inverse = 1.0 / max(distance, 1e-4)                              # float64
                inverse *= inverse
                acc += colour[u] * inverse   # float32 array times a float64 scalar: float32
                total += inverse
            if total > 0:
                colour[v] = acc / total
                known[v] = True
            else:
                unreached += 1
        patience += -1 if unreached == previous else 1
        previous = unreached
    out_texture, out_mask = texture.copy(), mask.copy()
    for face in faces:
        for v in face:
            if known[v]:
                row, col = texel(uvs[v], size)
                out_texture[row, col] = colour[v]
                out_mask[row, col] = 255
    return out_texture, out_mask


def inpaint(directory):
    positions = np.load(os.path.join(directory, 'vtx_pos_normalized.npy')).astype(np.float32)
    uvs = np.load(os.path.join(directory, 'vtx_uv_loaded.npy')).astype(np.float32)
    uvs[:, 1] = 1 - uvs[:, 1]  # back to the original v, in float32
    faces = np.load(os.path.join(directory, 'faces.npy')).astype(np.int64)
    texture = np.load(os.path.join(directory, 'bake_texture.npy')).astype(np.float32)
    mask = cv2.imread(os.path.join(directory, 'bake_trust_mask.png'), cv2.IMREAD_GRAYSCALE)
    vertex_texture, vertex_mask = vertex_inpaint(texture, mask, positions, uvs, faces)
    final = cv2.inpaint((vertex_texture * 255).astype(np.uint8), 255 - vertex_mask, 3,
                        cv2.INPAINT_NS)
    return vertex_texture, vertex_mask, final


def check_official():
    vertex_texture, vertex_mask, final = inpaint(OFFICIAL)
    want = np.load(os.path.join(OFFICIAL, 'inpaint_vertex_texture.npy'))
    assert np.array_equal(vertex_texture, want), 'vertex texture differs from the official set'
    assert np.array_equal(vertex_mask, cv2.imread(os.path.join(OFFICIAL, 'inpaint_vertex_mask.png'),
                                                  cv2.IMREAD_GRAYSCALE))
    want_final = cv2.cvtColor(cv2.imread(os.path.join(OFFICIAL, 'inpaint_final.png')),
                              cv2.COLOR_BGR2RGB)
    assert np.array_equal(final, want_final), 'final texture differs from the official set'


def start_set(name, size, made_by, views=None):
    out = os.path.join(HERE, name)
    os.makedirs(out, exist_ok=True)
    for file in MESH_FILES:
        shutil.copy(os.path.join(OFFICIAL, file), out)
    with open(os.path.join(OFFICIAL, 'manifest.json')) as f:
        official = json.load(f)
    manifest = {key: official[key] for key in ('render_size', 'camera_distance', 'ortho_scale',
                                               'scale_factor', 'auto_center', 'views', 'mesh')}
    if views is not None:
        manifest['views'] = views
    manifest['texture_size'] = size
    manifest['made_by'] = made_by + f', §10 in numpy {np.__version__} / OpenCV {cv2.__version__}'
    manifest['vertex_inpaint_reference'] = 'python numpy<2'
    with open(os.path.join(out, 'manifest.json'), 'w') as f:
        json.dump(manifest, f, indent=1)
    return out


def finish_set(out):
    vertex_texture, vertex_mask, final = inpaint(out)
    np.save(os.path.join(out, 'inpaint_vertex_texture.npy'), vertex_texture)
    cv2.imwrite(os.path.join(out, 'inpaint_vertex_mask.png'), vertex_mask)
    cv2.imwrite(os.path.join(out, 'inpaint_final.png'), cv2.cvtColor(final, cv2.COLOR_RGB2BGR))


def make_set(size):
    out = start_set(f't{size}', size, 'make_sets.py: official bake resized (nearest)')
    texture = np.load(os.path.join(OFFICIAL, 'bake_texture.npy'))
    mask = cv2.imread(os.path.join(OFFICIAL, 'bake_trust_mask.png'), cv2.IMREAD_GRAYSCALE)
    texture = cv2.resize(texture, (size, size), interpolation=cv2.INTER_NEAREST)
    mask = cv2.resize(mask, (size, size), interpolation=cv2.INTER_NEAREST)
    texture[mask == 0] = 0
    np.save(os.path.join(out, 'bake_texture.npy'), texture.astype(np.float32))
    cv2.imwrite(os.path.join(out, 'bake_trust_mask.png'), mask)
    finish_set(out)


def noise_views(seed, views, directory):
    """A golden-like directory whose listed views are coarse noise (blur-free), others dropped."""
    os.makedirs(directory, exist_ok=True)
    for file in MESH_FILES:
        shutil.copy(os.path.join(OFFICIAL, file), directory)
    with open(os.path.join(OFFICIAL, 'manifest.json')) as f:
        manifest = json.load(f)
    manifest['views'] = [v for v in manifest['views'] if v['index'] in views]
    with open(os.path.join(directory, 'manifest.json'), 'w') as f:
        json.dump(manifest, f, indent=1)
    rng = np.random.default_rng(seed)
    size = manifest['render_size']
    for v in views:
        image = rng.random((size, size, 3)).astype(np.float32)
        image = (image - image.min()) / (image.max() - image.min())
        cv2.imwrite(os.path.join(directory, f'v{v}_view_input.png'), (image * 255).astype(np.uint8))


def make_set_from_bake(name, bake_dir, views_dir=None):
    texture = np.load(os.path.join(bake_dir, 'bake_texture.npy')).astype(np.float32)
    views = None
    if views_dir:
        with open(os.path.join(views_dir, 'manifest.json')) as f:
            views = json.load(f)['views']
    out = start_set(name, texture.shape[0], 'make_sets.py: gen3d_make_bake_set bake', views)
    np.save(os.path.join(out, 'bake_texture.npy'), texture)
    shutil.copy(os.path.join(bake_dir, 'bake_trust_mask.png'), out)
    finish_set(out)


if __name__ == '__main__':
    check_official()
    if sys.argv[1:2] == ['--noise-views']:
        noise_views(int(sys.argv[2]), [int(v) for v in sys.argv[3].split(',')], sys.argv[4])
        sys.exit()
    if sys.argv[1:2] == ['--bake']:
        make_set_from_bake(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
        sys.exit()
    for s in [int(a) for a in sys.argv[1:]] or [64, 96, 100, 129, 200]:
        make_set(s)
