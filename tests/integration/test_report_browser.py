"""report.html in a real headless Chromium (Debian's chromium, installed when missing), as a new user opens it.

A probe script is added to a copy of the page: after load it records console errors, failed resources, images
that did not decode and the page's width at a 1400 px window, and writes them into the DOM that --dump-dom prints.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "analysis"))

from test_report import make_run  # noqa: E402

from nsyskit import hostpkgs  # noqa: E402
from nsyskit.analysis import run_analysis  # noqa: E402
from nsyskit.analysis.present.timeline import write_timeline  # noqa: E402

WIDTH = 1400
PROBE = """<script>
window.__errors = [];
const keep = console.error.bind(console);
console.error = (...args) => { window.__errors.push(args.join(' ')); keep(...args); };
window.addEventListener('error', e => window.__errors.push('error: ' + (e.message || (e.target && (e.target.src || e.target.href)))), true);
window.addEventListener('load', () => {
  const images = [...document.images];
  const result = {
    errors: window.__errors,
    images: images.length,
    broken: images.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.alt),
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    findingsTop: (document.querySelector('#findings') || {getBoundingClientRect: () => ({top: -1})}).getBoundingClientRect().top,
    shownRows: Math.max(0, ...[...document.querySelectorAll('table')].filter(t => !t.closest('details'))
      .map(t => t.querySelectorAll('tbody tr').length)),
    wide: [...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
      .map(e => e.tagName + '.' + e.className).slice(0, 5),
  };
  const out = document.createElement('pre'); out.id = 'probe'; out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
});
</script>"""


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium, installed with apt when missing (as CI starts on a fresh machine)."""
    if not shutil.which("chromium"):
        hostpkgs.apt_install("chromium")
    return shutil.which("chromium")


def headless(chromium: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={WIDTH},1000",
         "--enable-logging=stderr", "--v=0", *args],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def probe(chromium: str, page: Path) -> dict:
    """Load a probed copy of `page` beside it (same relative links) and return what the probe saw."""
    probed = page.with_name("probed.html")
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    result = headless(chromium, "--virtual-time-budget=10000", "--dump-dom", probed.as_uri())
    match = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout, re.S)
    assert match, result.stderr[-2000:]
    seen = json.loads(
        match.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    )
    seen["console"] = [line for line in result.stderr.splitlines() if "CONSOLE" in line]
    return seen


@pytest.mark.parametrize("ranks", [3, 40])
def test_report_loads_cleanly_renders_every_chart_and_fits_1400px(chromium, tmp_path, ranks):
    run = make_run(tmp_path / "run", ranks=ranks, slow_rank=ranks - 1)
    for rank in range(ranks):
        (run / f"run_rank_{rank}.nsys-rep").write_bytes(b"report")
    write_timeline([run], run / "timeline.json.gz")
    page = run_analysis([run])[1]
    seen = probe(chromium, page)
    assert seen["errors"] == [] and seen["console"] == []
    assert seen["images"] == 4 and seen["broken"] == []
    assert seen["scrollWidth"] <= seen["innerWidth"] == WIDTH, seen["wide"]
    shot = tmp_path / f"report-{ranks}-ranks.png"
    result = headless(chromium, f"--screenshot={shot}", "--window-size=1400,3000", page.as_uri())
    assert shot.exists() and shot.read_bytes().startswith(b"\x89PNG"), result.stderr[-2000:]


def test_a_1024_rank_report_opens_with_its_findings_and_caps_its_tables(chromium, tmp_path):
    run = make_run(tmp_path / "run", ranks=1024, slow_rank=700)
    page = run_analysis([run])[1]
    seen = probe(chromium, page)
    assert seen["errors"] == [] and seen["console"] == []
    assert 0 < seen["findingsTop"] < 600  # the run header, then the findings: in the first screen
    assert seen["shownRows"] <= 40  # every long table capped; its whole form one click away (<details>)
    text = page.read_text()
    assert "all 1024 rows</summary>" in text and "across 1,024 ranks (min / median / p95 / max)" in text
    assert seen["scrollWidth"] <= seen["innerWidth"] == WIDTH, seen["wide"]
