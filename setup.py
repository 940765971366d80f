"""Build the compiled extensions in kraft/_native; all metadata lives in pyproject.toml.

Both steps run in parallel, one job per core: Cython translates the .pyx files in a process
pool, and build_ext compiles the extensions concurrently (`-j N` on the command line overrides
it). Release builds are linked with ``-s`` so the .so files carry no symbol table; the dynamic
symbols Python needs (``PyInit_*``) stay.

Switches (environment variables):
  KRAFT_DEBUG=1     -O0 -g, Cython bounds/wraparound checks and line tracing on, not stripped
  KRAFT_ANNOTATE=1  also write Cython's annotated HTML (cython -a) next to each .pyx
"""

import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

DEBUG = os.environ.get("KRAFT_DEBUG") == "1"
ANNOTATE = os.environ.get("KRAFT_ANNOTATE") == "1"

NATIVE = "kraft/_native"
# Plain C sources compile without Python headers and are shared by the extensions.
C_SOURCES = [f"{NATIVE}/crc32c.c"]

if DEBUG:
    extra_compile_args = ["-O0", "-g3", "-UNDEBUG"]
    macros = [("CYTHON_TRACE_NOGIL", "1")]
else:
    extra_compile_args = ["-O3", "-fno-strict-aliasing"]
    macros = []
# Stripped at link time, so every route (pip, build, setup.py) gets the same small .so files.
extra_link_args = [] if DEBUG else ["-s"]
JOBS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
macros.append(("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"))


# Every kraft/_native/_*.pyx is one extension module (they share declarations via .pxd).
MODULES = sorted(f[:-4] for f in os.listdir(NATIVE) if f.startswith("_") and f.endswith(".pyx"))


def ext(name: str) -> Extension:
    return Extension(
        f"kraft._native.{name}",
        sources=[f"{NATIVE}/{name}.pyx", *C_SOURCES],
        include_dirs=[NATIVE, numpy.get_include()],
        define_macros=macros,
        extra_compile_args=extra_compile_args,
        extra_link_args=extra_link_args,
    )


class ParallelBuildExt(build_ext):
    """build_ext that compiles the extensions concurrently unless told otherwise (`-j`)."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = JOBS


directives = {
    "language_level": "3",
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": True,
    "embedsignature": True,
    "linetrace": DEBUG,
}

setup(
    cmdclass={"build_ext": ParallelBuildExt},
    ext_modules=cythonize(
        [ext(name) for name in MODULES],
        compiler_directives=directives,
        annotate=ANNOTATE,
        nthreads=JOBS if JOBS > 1 else 0,
    ),
)
