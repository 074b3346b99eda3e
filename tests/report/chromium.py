"""Find a headless Chromium for Playwright: its own build, or one the system installed.

``make browser`` installs one: Playwright's build where it can be downloaded, else Debian's
``chromium-headless-shell`` package. ``GRASP_CHROMIUM`` names a binary to use instead.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Any

SYSTEM_BINARIES = (
    "chromium-headless-shell",
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
)
"""Executable names of Chromium builds that distributions install, most headless first."""


@dataclass
class Launch:
    browser: Any | None
    """The launched browser; None when no Chromium could be started."""
    tried: list[str] = field(default_factory=list)
    """Why each candidate failed, for the skip message."""


def launch_chromium(playwright: Any) -> Launch:
    """Launch the first Chromium that starts: GRASP_CHROMIUM, Playwright's, then the system's."""
    from playwright.sync_api import Error

    tried = []
    candidates: list[str | None] = []
    if os.environ.get("GRASP_CHROMIUM"):
        candidates.append(os.environ["GRASP_CHROMIUM"])
    candidates.append(None)  # Playwright's own build, when `playwright install` fetched it
    candidates += [path for name in SYSTEM_BINARIES if (path := shutil.which(name))]
    for executable in candidates:
        try:
            return Launch(playwright.chromium.launch(executable_path=executable), tried)
        except Error as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else "failed"
            tried.append(f"{executable or 'Playwright build'}: {first_line}")
    return Launch(None, tried)
