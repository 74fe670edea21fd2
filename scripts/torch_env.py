"""Prints what the GPU scripts need to know of a python's torch, as shell assignments (KEY='value')
for `eval`: scripts/gpu-check.sh and scripts/gpu-build.sh read the same facts from here."""
import glob
import os
import shlex

import torch

site = os.path.dirname(os.path.dirname(torch.__file__))


def first(pattern):
    hits = sorted(glob.glob(os.path.join(site, pattern), recursive=True))
    return hits[0] if hits else ""


gpu = torch.cuda.is_available()
values = {
    "TORCH_DIR": os.path.dirname(torch.__file__),
    "TORCH_VERSION": torch.__version__,
    "TORCH_CUDA_VERSION": torch.version.cuda or "",
    "TORCH_ABI": int(torch._C._GLIBCXX_USE_CXX11_ABI),
    "TORCH_CMAKE_PREFIX": torch.utils.cmake_prefix_path,
    "TORCH_SEES_GPU": int(gpu),
    "GPU_ARCH": "".join(map(str, torch.cuda.get_device_capability())) if gpu else "",
    "GPU_NAME": torch.cuda.get_device_name() if gpu else "",
    # cuDNN of the pip wheels (nvidia-cudnn-*): LibTorch's config looks for it in CUDA's folders only.
    "CUDNN_HEADER": first("nvidia/**/include/cudnn.h"),
    "CUDNN_LIB": first("nvidia/**/lib/libcudnn.so*"),
}
for key, value in values.items():
    print(f"{key}={shlex.quote(str(value))}")
