"""grasp: GRanularity-Aware Search Policy for agentic RAG, as a research codebase.

Importing the package applies ``grasp.startup``'s process environment (JAX on the CPU, no XLA
preallocation; a value already set wins) before any submodule can import bm25s, which would
otherwise start JAX on the GPU and preallocate 75% of it. The entry points set the same
before their first import; this covers every other way in: a notebook, ``python -c``, pytest.
"""

import os as _os

from grasp.startup import process_environment as _process_environment

_os.environ.update(_process_environment())

__version__ = "0.1.0"
