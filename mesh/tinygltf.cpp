// The tinygltf implementation, compiled once with the configuration in mesh/tinygltf.h.
#define TINYGLTF_IMPLEMENTATION
#include "mesh/tinygltf.h"
