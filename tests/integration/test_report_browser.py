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

from fabric_counters_run import write_run  # noqa: E402
from scaled_runs import one_rank_with_counters, widened  # noqa: E402
from test_report import make_run  # noqa: E402

from nsyskit import hostpkgs  # noqa: E402
from nsyskit.analysis import compose, run_analysis, summarize  # noqa: E402
from nsyskit.analysis.outputs import analyze, write  # noqa: E402
from nsyskit.analysis.present.report import write_report  # noqa: E402
from nsyskit.analysis.present.timeline import write_timeline  # noqa: E402
from nsyskit.analysis.request import AnalyzeRequest  # noqa: E402

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


# Measures, after load, every header and text cell (names, ops, buckets, metrics) and every table, from the page's
# own layout: a word (a run of non-blank characters in one text node; names are split where they may wrap) that
# takes two line boxes was broken inside, one wider than its cell's content box squeezes out of it; a table is cut
# off when it runs past its box (or the box past the window) without the box scrolling, or when, scrolled to its
# end, its last column is not whole inside the box or its first column (fixed) left it.
LAYOUT = """<script>
window.addEventListener('load', () => {
  const broken = [], cut = [];
  const cells = [...document.querySelectorAll('th, td.text')].filter(c => c.getClientRects().length);
  for (const cell of cells) {
    const style = getComputedStyle(cell);
    const inner = cell.getBoundingClientRect().width - ['paddingLeft', 'paddingRight', 'borderLeftWidth',
      'borderRightWidth'].reduce((sum, key) => sum + parseFloat(style[key]), 0);
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const match of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const lines = [...range.getClientRects()].filter(r => r.width > 0).length;
        const width = range.getBoundingClientRect().width;
        if (lines > 1 || width > inner + 0.5) broken.push([match[0], cell.textContent.slice(0, 50), lines, width, inner]);
      }
    }
  }
  let scrolling = 0, tables = 0;
  for (const table of document.querySelectorAll('table')) {
    if (!table.getBoundingClientRect().width) continue;  // in a closed <details>
    tables++;
    const box = table.parentElement, boxRect = box.getBoundingClientRect();
    const scrolls = ['auto', 'scroll'].includes(getComputedStyle(box).overflowX);
    if (boxRect.right > window.innerWidth + 1) cut.push(['box past the window', table.textContent.slice(0, 40)]);
    if (table.getBoundingClientRect().right > boxRect.right + 1 && !scrolls) cut.push(['no scroll', table.textContent.slice(0, 40)]);
    if (!scrolls || box.scrollWidth <= box.clientWidth) continue;
    scrolling++;
    box.scrollLeft = box.scrollWidth;
    const heads = [...table.querySelectorAll('thead th')];
    const last = heads[heads.length - 1].getBoundingClientRect(), first = heads[0].getBoundingClientRect();
    if (last.right > boxRect.right + 1) cut.push(['last column cut', table.textContent.slice(0, 40)]);
    if (Math.abs(first.left - boxRect.left) > 1) cut.push(['first column scrolled away', table.textContent.slice(0, 40)]);
    box.scrollLeft = 0;
  }
  const result = {broken, cut, cells: cells.length, tables, scrolling, innerWidth: window.innerWidth,
                  scrollWidth: document.documentElement.scrollWidth};
  const out = document.createElement('pre'); out.id = 'layout'; out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
});
</script>"""


@pytest.fixture(scope="module")
def fabric_counters_report(tmp_path_factory) -> Path:
    """report.html of the 8-rank run with --fabric and GPU/EFA counters (long kernel and metric names, a wide
    collectives table)."""
    run, output = write_run(tmp_path_factory.mktemp("fabric") / "run")
    request = AnalyzeRequest([str(run)], fabric=[str(output)]).check()
    return write(analyze([run], inputs=request.judge_inputs())).report_html


def layout(chromium: str, page: Path, width: int) -> dict:
    """What the LAYOUT probe saw in a copy of `page` in a window `width` px wide."""
    probed = page.with_name("layout.html")
    probed.write_text(page.read_text().replace("</body>", LAYOUT + "</body>"))
    result = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={width},1000",
         "--virtual-time-budget=10000", "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    match = re.search(r'<pre id="layout">(.*?)</pre>', result.stdout, re.S)
    assert match, result.stderr[-2000:]
    return json.loads(
        match.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    )


@pytest.mark.parametrize("width", [1400, 1024, 640])  # 640: a window split in two, where wide tables must scroll
def test_no_cell_breaks_a_word_and_no_column_is_cut_off(chromium, fabric_counters_report, tmp_path, width):
    seen = layout(chromium, fabric_counters_report, width)
    assert seen["innerWidth"] == width and seen["scrollWidth"] <= width  # the page itself never scrolls sideways
    assert seen["cells"] > 100 and seen["tables"] >= 8  # the headers and names of every shown table were measured
    assert seen["broken"] == [], seen["broken"][:5]
    assert seen["cut"] == [], seen["cut"][:5]
    if width == 640:
        assert seen["scrolling"] >= 3  # wide tables scroll in their box (first column fixed) rather than squeeze


def test_a_4096_rank_report_opens_with_its_findings_and_fits_1024px(chromium, tmp_path):
    """4,096 ranks (copies of the real H100 DDP export, scaled_runs) with a column per node in the heat maps and the
    Nodes table: the findings in the first screen, every chart decoded, no word broken or column cut at 1,024 px."""
    analysis = widened(one_rank_with_counters(tmp_path, tmp_path), 4096, slow_rank=1234)
    page = write_report(compose(analysis, summarize(analysis, tmp_path), tmp_path, logs=None))
    seen = probe(chromium, page)
    assert seen["errors"] == [] and seen["console"] == [] and seen["broken"] == [] and seen["images"] == 6
    assert 0 < seen["findingsTop"] < 600 and seen["shownRows"] <= 40
    fits = layout(chromium, page, 1024)
    assert fits["scrollWidth"] <= 1024 and fits["broken"] == [] and fits["cut"] == [], (fits["broken"][:5], fits["cut"][:5])
