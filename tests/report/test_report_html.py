"""`orch report`: one self-contained HTML page, checked as text and in headless Chromium.

Chromium loads the page over the DevTools protocol (chromium.py), which reports every
request the page itself makes (the browser's own background traffic is not the page's):
none may leave the file. A control page with one external image proves that such a
request would be seen. The DOM then says whether the tables rendered, the images decoded
and anything is wider than the page; a screenshot of the whole page is kept next to it
(report.png) for a person to look at.
"""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import pytest
from chromium import CHROMIUM, visit
from PIL import Image
from runmaker import Runs

from orchestrator.cli import main

PIVOTS = ("kimi-nvfp4", "minimax-m2.5", "kimi-int4")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs Debian's chromium (scripts/setup installs it)"
)]


HALF, WIDE = (770, 462), (1540, 462)  # one plot; a row of panels across the page
# in page order: throughput, latency, TTFT, ITL; the CDFs; the server per level, through the
# knee; tokens per joule (the varied run's GPUs were sampled)
IMAGES = [HALF, HALF, WIDE, WIDE, WIDE, WIDE, WIDE, HALF]


@pytest.fixture(scope="module")
def page(runs: Runs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three pivots and the varied run (longer sweep, queueing, goodput, cut answers)."""
    out = tmp_path_factory.mktemp("html") / "report.html"
    refs = [str(runs.sim[name]) for name in PIVOTS] + [str(runs.varied)]
    assert main(["report", *refs, "-o", str(out)]) == 0
    return out


def external(requests: list[str]) -> list[str]:
    return [url for url in requests if not url.startswith(("file:", "data:"))]


def test_report_prints_where_the_page_is_and_defaults_under_the_runs_root(runs: Runs, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "sim-kimi-int4", "--runs-dir", str(runs.root)]) == 0
    printed = Path(capsys.readouterr().out.strip())
    assert printed.parent == runs.root / "reports"
    assert printed.name.endswith("-sim-kimi-int4.html") and printed.is_file()


def test_the_page_is_self_contained(page: Path) -> None:
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"<script|<link|<iframe|@import|url\(", html, re.IGNORECASE)
    references = re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)""", html, re.IGNORECASE)
    assert references and all(ref.startswith("data:image/png;base64,") for ref in references)
    assert not re.search(r"https?://", html)
    sizes = []
    for ref in references:
        with Image.open(io.BytesIO(base64.b64decode(ref.split(",", 1)[1]))) as image:
            assert image.format == "PNG"
            sizes.append(image.size)
    assert sizes == IMAGES


def test_chromium_renders_tables_and_images_without_any_request(page: Path) -> None:
    seen = visit(page.as_uri(), page.parent / "profile", full_page=True)
    shot = page.with_suffix(".png")
    shot.write_bytes(seen.screenshot)
    assert seen.requests[0] == page.as_uri()
    assert external(seen.requests) == []
    facts = seen.facts
    assert facts["headings"] == [
        "Comparability", "Summary", "Plots", "By load level", "Per-request distributions", "The server's view",
        "GPU telemetry and energy", "What changed between the plans", "Benchmark settings", "Host facts",
        "Metric definitions",
    ]  # fmt: skip
    captions = facts["captions"]
    # too wide for the page, a table shows one table per group of columns ("...: P50 TTFT (ms)")
    for title in ("Runs", "Headline", "Throughput by load", "Latency by load: P50 latency (s)",
                  "Time to first token by load: P99 TTFT (ms)", "Inter-token latency by load: P90 ITL (ms)",
                  "Requests by load", "Latency at equal load", "Where each run's distribution comes from",
                  "Load asked against load run", "Energy by load", "GPU telemetry by level"):  # fmt: skip
        assert any(caption.startswith(title) for caption in captions), (title, captions)
    assert facts["rows"] >= 100
    assert [(i["width"], i["height"]) for i in facts["images"]] == IMAGES
    assert all(i["complete"] and i["data"] for i in facts["images"])
    assert facts["overflowing"] == 0 and facts["width"] <= 1400  # nothing to scroll sideways
    with Image.open(shot) as image:
        assert image.size == (1400, facts["height"])
        colours = {rgb for _, rgb in image.convert("RGB").getcolors(maxcolors=1 << 22) or []}
    # the second, third and fourth runs' line colours exist only inside the plot images
    assert {(0xD5, 0x5E, 0x00), (0x00, 0x9E, 0x73), (0xCC, 0x79, 0xA7)} <= colours


def test_the_page_says_where_each_distribution_comes_from(page: Path) -> None:
    html = page.read_text()
    section = html.split('id="distributions"')[1].split("</section>")[0]
    assert "its knee" in section or "its highest level" in section
    assert "goodput (req/s)" in html and "length 16" in html  # the varied run's objective and cut answers


def test_an_external_request_would_be_seen(tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text('<!DOCTYPE html><html><body><img src="http://orch-report-test.invalid/x.png"></body></html>')
    seen = visit(control.as_uri(), tmp_path / "profile")
    assert external(seen.requests) == ["http://orch-report-test.invalid/x.png"]
    assert seen.facts["images"] == [{"complete": True, "width": 0, "height": 0, "data": False}]
