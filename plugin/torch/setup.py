"""Builds conflux_torch, the torch.distributed backend over libconflux, against the torch installed in
the running environment:

    pip install --no-build-isolation plugin/torch

(--no-build-isolation: the extension is compiled against this environment's torch, which an isolated
build environment would not have.) Where libconflux comes from, first that applies:

    CONFLUX_HOME=<prefix>     an installed Conflux (<prefix>/include/conflux, <prefix>/lib/libconflux.so)
    CONFLUX_BUILD_DIR=<dir>   a CMake build tree of this repository (<dir>/src/libconflux.so)
    otherwise                 the library is built from this repository with CMake (Release, no tests;
                              CONFLUX_CUDA_ARCHITECTURES sets the GPU architectures, e.g. "90")

The library is copied into the package (conflux_torch/lib), so the installed package needs nothing else.
CUDA tensors are supported when torch has CUDA, the CUDA toolkit is found and libconflux was built with
CUDA; otherwise the backend handles CPU tensors and says so for CUDA ones.
"""

import ctypes
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from setuptools import setup
from torch.utils import cpp_extension

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def _cmake_build():
    """Builds libconflux from this repository; returns (include dir, library dir)."""
    build = Path(os.environ.get("CONFLUX_LIB_BUILD_DIR", REPO / "build" / "torch-lib"))
    args = ["cmake", "-S", str(REPO), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
            "-DCONFLUX_BUILD_TESTS=OFF", "-DCONFLUX_BUILD_PERF=OFF"]
    if os.environ.get("CONFLUX_CUDA_ARCHITECTURES"):
        args.append("-DCMAKE_CUDA_ARCHITECTURES=" + os.environ["CONFLUX_CUDA_ARCHITECTURES"])
    subprocess.check_call(args)
    subprocess.check_call(["cmake", "--build", str(build), "--target", "conflux", "-j", str(os.cpu_count() or 2)])
    return REPO / "include", build / "src"


def _library():
    """(include dir, library dir) of the libconflux to build against."""
    home = os.environ.get("CONFLUX_HOME")
    if home:
        lib = Path(home) / "lib"
        if not glob.glob(str(lib / "libconflux.so*")):
            lib = Path(home) / "lib64"
        return Path(home) / "include", lib
    tree = os.environ.get("CONFLUX_BUILD_DIR")
    if tree:
        if not Path(tree).is_absolute() and not Path(tree).exists():
            tree = str(REPO / tree)  # relative to the repository (pip builds in this folder)
        lib = Path(tree) / "src"
        if not (lib / "libconflux.so").exists():
            sys.exit(f"conflux_torch: CONFLUX_BUILD_DIR={tree} has no src/libconflux.so (build the 'conflux' target)")
        return REPO / "include", lib
    return _cmake_build()


def _has_cuda(lib_dir):
    """Whether that libconflux accepts CUDA buffers (cfxGetFeatures)."""
    lib = ctypes.CDLL(str(lib_dir / "libconflux.so"))
    features = ctypes.c_uint(0)
    lib.cfxGetFeatures(ctypes.byref(features))
    return bool(features.value & 1)


INCLUDE, LIB = _library()


def _torch_has_shrink():
    """Whether this torch's c10d::Backend declares shrink (torch.distributed.shrink_group, 2.10 and later)."""
    for d in cpp_extension.include_paths():
        header = Path(d) / "torch" / "csrc" / "distributed" / "c10d" / "Backend.hpp"
        if header.exists():
            return "supportsShrinking" in header.read_text()
    return False


CUDA = bool(torch.version.cuda) and cpp_extension.CUDA_HOME is not None and _has_cuda(LIB)
Extension = cpp_extension.CUDAExtension if CUDA else cpp_extension.CppExtension
SOURCES = sorted(str(p.relative_to(HERE)) for p in (HERE / "csrc").glob("*.cc"))
# Our code builds with warnings as errors; torch's headers are taken as system headers (-isystem
# overrides the -I torch adds), so their own warnings stay theirs.
SYSTEM_INCLUDES = [f"-isystem{d}" for d in cpp_extension.include_paths(device_type="cuda" if CUDA else "cpu")]


class BuildExt(cpp_extension.BuildExtension):
    """Also copies libconflux next to the extension (found through $ORIGIN/lib)."""

    def run(self):
        super().run()
        for dest in {Path(self.build_lib) / "conflux_torch" / "lib", HERE / "conflux_torch" / "lib"}:
            if dest.parent.exists():
                dest.mkdir(exist_ok=True)
                for so in glob.glob(str(LIB / "libconflux.so.*")):
                    shutil.copy2(so, dest / Path(so).name)


setup(
    ext_modules=[
        Extension(
            name="conflux_torch._C",
            sources=SOURCES,
            include_dirs=[str(INCLUDE), str(HERE / "csrc")],
            library_dirs=[str(LIB)],
            libraries=["conflux"],
            define_macros=[("CONFLUX_TORCH_CUDA", "1" if CUDA else "0"),
                           ("CONFLUX_TORCH_HAS_SHRINK", "1" if _torch_has_shrink() else "0")],
            extra_compile_args={"cxx": ["-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers", "-Werror", *SYSTEM_INCLUDES]},
            extra_link_args=["-Wl,-rpath,$ORIGIN/lib"],
        )
    ],
    cmdclass={"build_ext": BuildExt},
    package_data={"conflux_torch": ["lib/libconflux.so.*"]},
)
