#!/usr/bin/env python3
"""Wraps a Draco bitstream of a unit box (POSITION only) in a GLB: python3 make_box.py box.drc box.glb"""
import json, struct, sys
drc = open(sys.argv[1], 'rb').read()
out = sys.argv[2]
pad = (4 - len(drc) % 4) % 4
binchunk = drc + b'\0' * pad
doc = {
  "asset": {"version": "2.0", "generator": "a hand-made Draco test file"},
  "extensionsUsed": ["KHR_draco_mesh_compression"],
  "extensionsRequired": ["KHR_draco_mesh_compression"],
  "buffers": [{"byteLength": len(binchunk)}],
  "bufferViews": [{"buffer": 0, "byteOffset": 0, "byteLength": len(drc)}],
  "accessors": [
    {"componentType": 5125, "count": 36, "type": "SCALAR"},
    {"componentType": 5126, "count": 8, "type": "VEC3", "min": [-0.5, -0.5, -0.5], "max": [0.5, 0.5, 0.5]}],
  "meshes": [{"primitives": [{"attributes": {"POSITION": 1}, "indices": 0, "mode": 4,
      "extensions": {"KHR_draco_mesh_compression": {"bufferView": 0, "attributes": {"POSITION": 0}}}}]}],
  "nodes": [{"mesh": 0}], "scenes": [{"nodes": [0]}], "scene": 0}
js = json.dumps(doc, separators=(',', ':')).encode()
js += b' ' * ((4 - len(js) % 4) % 4)
glb = b'glTF' + struct.pack('<II', 2, 12 + 8 + len(js) + 8 + len(binchunk))
glb += struct.pack('<I', len(js)) + b'JSON' + js + struct.pack('<I', len(binchunk)) + b'BIN\0' + binchunk
open(out, 'wb').write(glb)
