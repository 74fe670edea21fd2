"""The PyTorch operator (python/csrc/operator.cpp) and its Python package, built against the torch
of the environment pip installs into:

    pip install --no-build-isolation .

--no-build-isolation: the operator must be compiled against the torch it will run with (an isolated
build would download another). Builds the CUDA kernels too where this torch has CUDA and nvcc is
found (CUDA_HOME), unless SCALE_INVARIANT_ATTENTION_CUDA=0; TORCH_CUDA_ARCH_LIST picks the GPU
architectures (default 8.0;9.0, as the CMake build). Only torch and a C++17 compiler are needed: the
attention engine's files below use nothing else.
"""
import os

from setuptools import setup
import torch
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

# The engine's part the operator runs: the method registry, rotary tables, learned bias tables and
# the fused CPU kernel (attention/README.md says what each file does).
SOURCES = [
    "python/csrc/operator.cpp",
    "attention/method.cpp",
    "attention/parameters.cpp",
    "attention/transforms.cpp",
    "attention/method_tensors.cpp",
    "attention/learned_bias.cpp",
    "attention/fused_cpu.cpp",
    "attention/fused_cpu_kernels.cpp",
]
CUDA_SOURCES = [
    "attention/cuda/binding.cpp",
    "attention/cuda/fused_attention.cu",
    "attention/cuda/fused_attention_tc.cu",
]
# As the CMake build: the kernels' parallel loops need OpenMP (at::parallel_for's OpenMP backend
# is header-only), and -fno-trapping-math lets GCC vectorise their selects.
CXX_FLAGS = ["-O3", "-std=c++17", "-fopenmp", "-fno-trapping-math"]


def with_cuda():
    wanted = os.environ.get("SCALE_INVARIANT_ATTENTION_CUDA", "auto")
    if wanted == "0":
        return False
    available = torch.version.cuda is not None and CUDA_HOME is not None
    if wanted == "1" and not available:
        raise RuntimeError("SCALE_INVARIANT_ATTENTION_CUDA=1 but this torch has no CUDA or nvcc was not found")
    return available


def extension():
    common = dict(name="scale_invariant_attention._C", include_dirs=[os.path.dirname(os.path.abspath(__file__))],
                  extra_link_args=["-fopenmp"])
    if not with_cuda():
        return CppExtension(sources=SOURCES, extra_compile_args={"cxx": CXX_FLAGS}, **common)
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
    return CUDAExtension(sources=SOURCES + CUDA_SOURCES, define_macros=[("SCALE_INVARIANT_WITH_CUDA", "1")],
                         extra_compile_args={"cxx": CXX_FLAGS, "nvcc": ["-O3", "-std=c++17", "-lineinfo"]},
                         **common)


# Not ./build, the CMake build folder; ctest puts it inside that folder instead.
BUILD_BASE = os.environ.get("SCALE_INVARIANT_ATTENTION_BUILD_BASE", "build-python")
os.makedirs(BUILD_BASE, exist_ok=True)
setup(
    packages=["scale_invariant_attention"],
    package_dir={"": "python"},
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExtension},
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
)
