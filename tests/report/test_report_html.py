"""`orch report`: one self-contained HTML page, checked as text and in headless Chromium.

Chromium loads the page over the DevTools protocol (chromium.py), which reports every
request the page itself makes (the browser's own background traffic is not the page's):
none may leave the file. A control page with one external image proves that such a
request would be seen. The DOM then says whether the tables rendered and the images
decoded, and a screenshot shows the plots.
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

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs Debian's chromium (scripts/setup installs it)"
)


@pytest.fixture(scope="module")
def page(runs: Runs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("html") / "report.html"
    refs = [str(runs.sim[name]) for name in PIVOTS]
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
    for ref in references:
        with Image.open(io.BytesIO(base64.b64decode(ref.split(",", 1)[1]))) as image:
            assert image.format == "PNG" and image.size == (770, 462)


def test_chromium_renders_tables_and_images_without_any_request(page: Path, tmp_path: Path) -> None:
    seen = visit(page.as_uri(), tmp_path / "profile")
    assert seen.requests[0] == page.as_uri()
    assert external(seen.requests) == []
    facts = seen.facts
    assert facts["tables"] == 10  # runs, headline, 4 by level, 2 plan diffs, settings, one host
    assert facts["rows"] >= 40
    assert len(facts["images"]) == 4
    assert all(i["complete"] and i["data"] and (i["width"], i["height"]) == (770, 462) for i in facts["images"])
    assert facts["headings"][:6] == ["Comparability", "Summary", "Plots", "By load level", "What changed between the plans", "Benchmark settings"]
    with Image.open(io.BytesIO(seen.screenshot)) as image:
        colours = {rgb for _, rgb in image.convert("RGB").getcolors(maxcolors=1 << 22) or []}
    # the second and third runs' line colours exist only inside the plot images
    assert (0xD5, 0x5E, 0x00) in colours and (0x00, 0x9E, 0x73) in colours


def test_an_external_request_would_be_seen(tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text('<!DOCTYPE html><html><body><img src="http://orch-report-test.invalid/x.png"></body></html>')
    seen = visit(control.as_uri(), tmp_path / "profile")
    assert external(seen.requests) == ["http://orch-report-test.invalid/x.png"]
    assert seen.facts["images"] == [{"complete": True, "width": 0, "height": 0, "data": False}]
