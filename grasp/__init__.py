"""grasp: GRanularity-Aware Search Policy for agentic RAG, as a research codebase."""

__version__ = "0.1.0"
