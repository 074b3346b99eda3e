"""Where the checkout's bundled data and default output folders are."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The checkout this package lives in (data/, indexes/, models/ and runs/ hang off it)."""
