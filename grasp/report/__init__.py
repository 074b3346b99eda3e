"""Reports of run directories: loading (``load``), figures, tables and the HTML report.

from grasp.report import load_run, write_report
write_report(Path("runs/cpu_smoke"))          # runs/cpu_smoke/report.html
"""

from grasp.report.html import render_report, write_report
from grasp.report.load import RunData, RunDirectoryError, RunKind, TrajectorySet, load_run

__all__ = [
    "RunData",
    "RunDirectoryError",
    "RunKind",
    "TrajectorySet",
    "load_run",
    "render_report",
    "write_report",
]
