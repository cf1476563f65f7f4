"""The results page in headless Chromium (Debian's /usr/bin/chromium driven by playwright).

The page lists the queries with their status and plots each query's
aggregate per window, one line per group; rows stored while the page is open
arrive over server-sent events and the plot grows without a reload. The
screenshot is kept in the test's tmp folder (path printed) for a person to look at.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_helpers import API_KEY, FLUSH, Q1, Service, sample_events, settled, wait_for, write_file

from greta_stream import evaluate

pytestmark = [pytest.mark.service, pytest.mark.browser]

CHROMIUM = Path("/usr/bin/chromium")
DEADLINE_MS = 180_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium is missing: run scripts/setup_system.sh (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is missing: pip install -e '.[dev]'")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield b
        b.close()


def test_results_page_plots_each_query_live(service: Service, browser: Any, tmp_path: Path) -> None:
    events = sorted(sample_events(), key=lambda e: e["time"])
    expected = evaluate(Q1, events)
    src = service.root / "in-page"
    base = time.time() - 3600
    write_file(src, "first.jsonl", events[:1000], stamp=base)
    with service.client() as api:
        r = api.post("/queries", json={"name": "q1-page", "text": Q1, "source": {"format": "jsonl", "path": str(src)},
                                       "options": {"shards": 2}})
        assert r.status_code == 201, r.text
        query_id = r.json()["id"]
        # a window's row leaves in the batch its events close, which can be before Spark's first watermark:
        # the page is read once there is a watermark to show
        first = wait_for(lambda: (info := settled(api, query_id, 1)()) and info["progress"]["watermark_s"] is not None
                         and info, "first rows and a watermark", service)["progress"]["result_rows"]

        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.route("**/queries**", lambda route: route.abort())  # the first view comes with the page itself
        page.goto(service.url + f"/?key={API_KEY}")  # once: the key goes into a cookie, the page loads as /
        assert page.url == service.url + "/"
        plot = 'details[data-query="q1-page"] svg'
        assert int(page.locator(plot).get_attribute("data-rows")) >= first > 0
        check_readable(page, plot)
        early = tmp_path / "first-view.png"
        page.screenshot(path=str(early), full_page=True)
        print(f"screenshot: {early}")
        page.unroute("**/queries**")
        page.reload()
        page.wait_for_function(f"document.querySelector('{plot}')?.dataset.rows >= {first}", timeout=DEADLINE_MS)
        assert page.locator('tr[data-query="q1-page"]').get_attribute("data-status") == "running"

        write_file(src, "second.jsonl", [*events[1000:], FLUSH], stamp=base + 1)  # pushed to the open page
        wait_for(settled(api, query_id, len(expected)), "every window", service)
        page.wait_for_function(f"document.querySelector('{plot}').dataset.rows == {len(expected)}",
                               timeout=DEADLINE_MS)
        assert api.post(f"/queries/{query_id}/stop").status_code == 200
    groups = {r["sector"] for r in expected}
    assert page.locator(plot).get_attribute("data-series") == str(len(groups))
    assert page.locator(f"{plot} polyline.series").count() == len(groups)
    assert page.locator('details[data-query="q1-page"] .legend span').all_inner_texts() == \
        [f"sector={g}" for g in sorted(groups)]
    shot = tmp_path / "results-page.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"screenshot: {shot}")
    page.close()


def test_the_page_shows_a_querys_problem(service: Service, browser: Any) -> None:
    """A query whose type no event has (`stock` for `Stock`): its row and its card say so,
    not an empty error column and "no results yet"."""
    src = service.root / "in-page-lower"
    write_file(src, "events.jsonl", sample_events()[:200], stamp=time.time() - 3600)
    with service.client() as api:
        r = api.post("/queries", json={"name": "lower-page", "text": Q1.replace("PATTERN Stock", "PATTERN stock"),
                                       "source": {"format": "jsonl", "path": str(src)}, "options": {"shards": 2}})
        assert r.status_code == 201, r.text
        query_id = r.json()["id"]
        problem = wait_for(lambda: api.get(f"/queries/{query_id}").json()["progress"]["problem"], "the problem",
                           service)
        page = browser.new_page()
        page.goto(service.url + f"/?key={API_KEY}")
        row = page.locator('tr[data-query="lower-page"] td.problem')
        assert row.inner_text() == problem and "did you mean 'Stock' for 'stock'?" in problem
        page.locator('details[data-query="lower-page"] summary').click()
        assert page.locator('details[data-query="lower-page"] svg text').first.text_content() == problem
        page.close()
        assert api.delete(f"/queries/{query_id}").status_code == 204


def check_readable(page: Any, plot: str) -> None:
    """Axis titles with units, x ticks on round window starts, the watermark's unit, the query
    without its comment lines, a favicon."""
    assert page.locator(f"{plot} text.x-title").text_content() == "window start (seconds of event time)"
    assert page.locator(f"{plot} text.y-title").text_content() in ("count per window", "log scale: count per window")
    ticks = [float(t) for t in page.locator(f"{plot} text.tick").all_text_contents()]
    steps = {round(b - a, 6) for a, b in zip(ticks, ticks[1:], strict=False)}
    assert 3 <= len(ticks) <= 9 and len(steps) == 1, ticks
    (step,) = steps
    assert step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600) and all(t % step == 0 for t in ticks)
    cells = page.locator('tr[data-query="q1-page"] td').all_inner_texts()
    assert cells[7].endswith(" s"), cells  # the watermark, in seconds of event time
    text = page.locator('details[data-query="q1-page"] pre.query').inner_text()
    assert text.startswith("RETURN sector") and "--" not in text and text.endswith("SLIDE 10 seconds")
    assert page.locator('link[rel="icon"]').count() == 1


def test_api_docs_render_without_the_internet(service: Service, browser: Any) -> None:
    page = browser.new_page()
    outside: list[str] = []

    def local_only(route: Any) -> None:
        if route.request.url.startswith(service.url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", local_only)
    page.goto(service.url + "/")
    assert "needs its API key" in page.content()  # reads need the key: the page says how to give it
    page.goto(service.url + f"/?key={API_KEY}")  # once, into a cookie: the docs and their schema read with it
    page.goto(service.url + "/docs")
    page.wait_for_selector(".opblock-summary-path", timeout=60_000)  # Swagger UI drew the operations
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert any("/queries/{query_id}/results" in p for p in paths), paths
    page.goto(service.url + "/redoc")
    page.wait_for_selector("[data-section-id]", timeout=60_000)  # ReDoc drew its sections
    assert "greta-stream" in page.locator("h1").first.inner_text()
    assert outside == []
    page.close()
