# Blender's side of the Blender add-on test (tests/cli/serve_blender_test.cpp), run as
#
#   blender -b --factory-startup --python gltf_roundtrip.py -- export OUT.glb
#   blender -b --factory-startup --python gltf_roundtrip.py -- import IN.glb
#
# `export` writes a primitive the way Hunyuan3D-2's blender_addon.py sends the selected mesh
# (`bpy.ops.export_scene.gltf(filepath=..., use_selection=True)`, everything else at its default).
# `import` loads a GLB the way the add-on loads the answer (`bpy.ops.import_scene.gltf`) into an
# empty scene and prints one line, `GEN3D_BLENDER {...}`, describing what Blender made of it.
import json
import sys

import bpy
import numpy

# Debian bookworm's Blender 3.4 glTF importer uses `numpy.bool`, which NumPy 1.24 (the same
# release's) removed: io_scene_gltf2/blender/imp/gltf2_blender_mesh.py, set_poly_smoothing.
# Later releases of the importer use `bool`; the alias lets this one load meshes.
if "bool" not in numpy.__dict__:
    numpy.bool = bool


def export_primitive(path):
    bpy.ops.object.select_all(action="DESELECT")
    bpy.ops.mesh.primitive_monkey_add(size=2.0)  # Suzanne: 500 faces, with UVs; left selected
    bpy.ops.export_scene.gltf(filepath=path, use_selection=True)
    print("GEN3D_BLENDER " + json.dumps({"exported": path}))


def upstream_nodes(socket):
    """Every node that feeds `socket`, through any chain of links."""
    seen, todo = [], [link.from_node for link in socket.links]
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.append(node)
        for s in node.inputs:
            todo.extend(link.from_node for link in s.links)
    return seen


def import_glb(path):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_scene.gltf(filepath=path)
    meshes = [o for o in bpy.context.scene.objects if o.type == "MESH"]
    materials = {s.material.name: s.material
                 for o in meshes for s in o.material_slots if s.material}
    textured = []  # materials whose Principled BSDF takes its base colour from an image
    for name, m in materials.items():
        if not m.use_nodes:
            continue
        for node in m.node_tree.nodes:
            if node.type != "BSDF_PRINCIPLED":
                continue
            feeding = upstream_nodes(node.inputs["Base Color"])
            if any(n.type == "TEX_IMAGE" and n.image for n in feeding):
                textured.append(name)
    images = [i for i in bpy.data.images if i.type == "IMAGE"]
    print("GEN3D_BLENDER " + json.dumps({
        "mesh_objects": len(meshes),
        # The add-on moves bpy.context.selected_objects[0] to where the selected mesh was.
        "selected_mesh_objects": sum(1 for o in bpy.context.selected_objects if o.type == "MESH"),
        "faces": sum(len(o.data.polygons) for o in meshes),
        "uv_layers": min((len(o.data.uv_layers) for o in meshes), default=0),
        "materials": len(materials),
        "images": len(images),
        "image_sizes": [list(i.size) for i in images],
        "base_color_textured": sorted(textured),
    }))


argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
if len(argv) != 2 or argv[0] not in ("export", "import"):
    print("usage: blender -b --python gltf_roundtrip.py -- export|import FILE.glb", file=sys.stderr)
    sys.exit(2)
try:
    export_primitive(argv[1]) if argv[0] == "export" else import_glb(argv[1])
except Exception as e:  # Blender exits 0 after a failing --python script unless told otherwise
    print(f"GEN3D_BLENDER_ERROR {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)
