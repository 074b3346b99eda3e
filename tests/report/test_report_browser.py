"""The report rendered in headless Chromium: no script errors, no requests, a working viewer.

Skipped only when no headless Chromium can be started (``make browser`` installs one).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chromium import launch_chromium
from report_fixture import EXPECTED_OUTCOMES, EXPECTED_PARSE_ERRORS, INJECTION

from grasp.report import write_report


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launch = launch_chromium(playwright)
        if launch.browser is None:
            pytest.skip(
                "no headless Chromium found (run `make browser`); tried: " + "; ".join(launch.tried)
            )
        yield launch.browser
        launch.browser.close()


class Page:
    """A loaded report, with what the browser reported while loading and using it."""

    def __init__(self, browser, path: Path, fragment: str = "") -> None:
        self.page = browser.new_page()
        self.page.set_default_timeout(10_000)  # a local file: fail fast when the page is wrong
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.url = path.resolve().as_uri() + fragment
        self.page.goto(self.url)

    def visible(self, selector: str) -> int:
        return self.page.locator(f"{selector}:visible").count()

    def filter(self, source: str | None = None, outcome: str | None = None) -> None:
        if source is not None:
            self.page.select_option("#source-filter", source)
        if outcome is not None:
            self.page.select_option("#outcome-filter", outcome)


@pytest.fixture(scope="module")
def report_path(run_dir) -> Path:
    return write_report(run_dir)


@pytest.fixture
def page(browser, report_path):
    loaded = Page(browser, report_path)
    yield loaded
    loaded.page.close()


def _expected(source: str, outcome: str) -> int:
    if outcome == "all":
        return len(EXPECTED_OUTCOMES[source])
    if outcome == "parse_errors":
        return sum(1 for n in EXPECTED_PARSE_ERRORS[source].values() if n)
    return sum(1 for o in EXPECTED_OUTCOMES[source].values() if o == outcome)


def test_loads_without_errors_or_requests(page):
    assert page.errors == []
    assert page.requests == [page.url]
    assert page.page.evaluate("typeof window.__injected") == "undefined"
    # The injected script is on the page as text, in the model text of q-curie's first turn.
    assert INJECTION in page.page.locator("#t0-0 pre.text").first.text_content()
    assert page.page.locator("#trajectory-list script").count() == 0


def test_the_first_set_is_shown_with_its_count(page):
    assert page.page.locator("#source-filter").input_value() == "eval_after"
    assert page.visible(".traj") == 3
    assert page.visible("#question-list li") == 3
    assert page.page.inner_text("#visible-count") == "3 of 3 shown"
    assert page.visible(".traj[open]") == 0


@pytest.mark.parametrize(
    ("source", "outcome"),
    [
        ("eval_after", "correct"),
        ("eval_after", "partial"),
        ("eval_after", "wrong"),
        ("eval_after", "no_answer"),
        ("eval_after", "parse_errors"),
        ("eval_before", "wrong"),
        ("eval_before", "parse_errors"),
        ("eval_before", "all"),
    ],
)
def test_filters_show_the_matching_trajectories(page, source, outcome):
    page.filter(source, outcome)
    expected = _expected(source, outcome)
    assert page.visible(".traj") == expected
    assert page.visible("#question-list li") == expected
    total = len(EXPECTED_OUTCOMES[source])
    assert page.page.inner_text("#visible-count") == f"{expected} of {total} shown"
    assert page.errors == []


def test_the_correct_filter_leaves_the_curie_question(page, tiny_questions):
    page.filter(outcome="correct")
    [summary] = page.page.locator(".traj:visible > summary").all_inner_texts()
    assert tiny_questions[0].question in summary and "correct" in summary


def test_the_training_samples_are_a_set_of_their_own(page):
    page.filter(source="step_4")
    assert page.visible(".traj") == 2
    page.filter(source="step_2", outcome="wrong")
    assert page.visible(".traj") == 2  # step 2 ran the eval_before script


def test_clicking_a_question_opens_its_trajectory(page, tiny_questions):
    link = page.page.locator("#question-list .qlink:visible").nth(1)
    target = link.get_attribute("data-target")
    link.click()
    item = page.page.locator(f"#{target}")
    assert item.get_attribute("open") is not None
    assert "current" in item.get_attribute("class")
    assert tiny_questions[1].question in item.locator("summary").inner_text()
    assert item.locator(".turn").count() == 3
    assert page.page.evaluate("location.hash") == f"#{target}"
    assert page.errors == []


def test_a_link_to_a_trajectory_of_another_set_switches_the_set(browser, report_path):
    """#t1-0 is the first trajectory of the second set (eval_before)."""
    linked = Page(browser, report_path, "#t1-0")
    try:
        assert linked.page.locator("#source-filter").input_value() == "eval_before"
        assert linked.page.locator("#t1-0").get_attribute("open") is not None
        assert linked.visible(".traj") == 3 and linked.errors == []
    finally:
        linked.page.close()


def test_an_evaluation_directory_report_renders(browser, run_dir, tmp_path):
    path = write_report(run_dir / "eval_after", tmp_path / "evaluation.html")
    loaded = Page(browser, path)
    try:
        assert loaded.errors == [] and loaded.requests == [loaded.url]
        assert loaded.visible(".traj") == 3
        loaded.filter(outcome="parse_errors")
        assert loaded.visible(".traj") == 2
    finally:
        loaded.page.close()
