"""Where the checkout's bundled data and default output folders are."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The checkout this package lives in (data/, indexes/, models/ and runs/ hang off it)."""


def default_index_dir(name: str, split: str, root: str | Path | None = None) -> Path:
    """``<root>/<dataset>-<split>``, the index of a dataset's split (the one folder
    build_index, evaluation and training agree on); ``root`` defaults to indexes/."""
    return (Path(root) if root else REPO_ROOT / "indexes") / f"{name}-{split}"
