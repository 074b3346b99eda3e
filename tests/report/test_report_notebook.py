"""notebooks/run_directory.ipynb runs, top to bottom, on the report tests' run directory.

The notebook reads its run directory from GRASP_RUN_DIR; nbclient executes it in a fresh
kernel and raises on the first cell that fails.
"""

from __future__ import annotations

import nbformat
from nbclient import NotebookClient

from grasp.paths import REPO_ROOT
from grasp.report import load_run

NOTEBOOK = REPO_ROOT / "notebooks" / "run_directory.ipynb"


def _outputs(notebook, output_type: str) -> list:
    return [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == output_type
    ]


def test_the_notebook_runs_on_a_run_directory_and_draws_the_report_figures(run_dir, monkeypatch):
    monkeypatch.setenv("GRASP_RUN_DIR", str(run_dir))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    parameters = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(parameters) == 1 and "GRASP_RUN_DIR" in parameters[0].source
    client = NotebookClient(
        notebook,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()  # raises CellExecutionError naming the cell that failed

    assert _outputs(notebook, "error") == []
    displays = _outputs(notebook, "display_data")
    images = [d for d in displays if "image/png" in d.data]
    # Reward terms, tool use, recall by turns: the three figures of the HTML report.
    assert len(images) == 3
    [table] = [d for d in displays if "text/html" in d.data]
    assert '<table class="results">' in table.data["text/html"]
    assert "<th>before training</th><th>after training</th>" in table.data["text/html"]
    text = "".join(o.text for o in _outputs(notebook, "stream") if o.name == "stdout")
    run = load_run(run_dir)
    assert f"{run.title}: a training directory" in text
    assert "after training: 3 trajectories, {'correct': 1, 'partial': 1, 'no_answer': 1}" in text
    totals = [round(v, 3) for v in (r["reward/total"] for r in run.metrics)]
    assert f"reward/total by step: {totals}" in text
