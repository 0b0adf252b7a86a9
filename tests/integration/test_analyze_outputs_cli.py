"""invoke analyze's report flags end to end: --timeline, --json with findings first, --diff on analysis.json, exit 3."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "analysis"))

from test_report import make_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
INVOKE = [str(Path(sys.executable).parent / "invoke"), "--search-root", str(ROOT)]


def invoke(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*INVOKE, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=300
    )


def test_timeline_flag_writes_the_trace_and_report_html_links_it(tmp_path):
    run = make_run(tmp_path / "run", ranks=2)
    result = invoke("analyze", str(run), "--timeline", "--timeline-max-events", "10")
    assert result.returncode == 0, result.stderr
    trace = json.loads(gzip.decompress((run / "timeline.json.gz").read_bytes()))
    assert {e["pid"] for e in trace["traceEvents"]} == {0, 1}
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) == 10  # 5 per rank: the cap
    assert "events kept (--timeline-max-events)" in result.stderr + result.stdout
    assert '<a href="timeline.json.gz">' in (run / "report.html").read_text()


def test_json_opens_with_run_findings_and_metrics(tmp_path):
    run = make_run(tmp_path / "run", ranks=3, slow_rank=1)
    result = invoke("analyze", str(run), "--json", "--no-html")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert list(data)[:4] == ["schema", "run", "findings", "metrics"]
    assert any(f["rule"] == "straggler" and "rank 1" in f["title"] for f in data["findings"])


def test_diff_gate_on_analysis_json_with_step_summary(tmp_path):
    fast, slow = make_run(tmp_path / "fast"), make_run(tmp_path / "slow", step_ns=1300)
    for run in (fast, slow):
        assert invoke("analyze", str(run)).returncode == 0
    summary = tmp_path / "summary.md"
    passed = invoke("analyze", "--diff", str(fast / "analysis.json"), str(slow), "--fail-on", "step_time=50",
                    env={"GITHUB_STEP_SUMMARY": str(summary)})  # fmt: skip
    assert passed.returncode == 0, passed.stderr
    assert "no regression past the thresholds" in summary.read_text()
    failed = invoke(
        "analyze", "--diff", str(fast), str(slow / "analysis.json"), "--fail-on", "step_time=10,gpu_idle=50"
    )
    assert failed.returncode == 3 and "step_time" in failed.stderr
    bad = invoke("analyze", "--diff", str(fast), str(slow), "--fail-on", "steps=10")
    assert bad.returncode == 1 and bad.stderr.startswith("error: --fail-on steps=10: unknown metric 'steps'")
    assert len(bad.stderr.strip().splitlines()) == 1


def test_progress_over_many_reports(tmp_path):
    run = make_run(tmp_path / "run", ranks=8)
    result = invoke("analyze", str(run), "--timeline", "--no-html")
    assert result.returncode == 0, result.stderr
    assert "analyze: 8/8 reports" in result.stderr and "timeline: 8/8 reports" in result.stderr
    few = invoke("analyze", str(make_run(tmp_path / "few", ranks=2)), "--no-html")
    assert few.returncode == 0 and "analyze: 2/2" not in few.stderr  # a few reports are quick: no progress lines
