"""What a person reads: short kernel names (whole ones on request, on hover and in JSON), the kernels and NCCL
operations that changed between two runs, one line instead of empty tables, and numbers that agree everywhere."""

from __future__ import annotations

import io
import json

import pytest
from nsys_fixtures import Export, Kernel, Range, write_export
from real_exports import decompress
from rich.console import Console
from test_report import NCCL

from nsyskit.analysis import compose, print_report, run_analysis, summarize
from nsyskit.analysis.compute import units
from nsyskit.analysis.compute.kernelnames import short_name
from nsyskit.analysis.judge.diff import changes
from nsyskit.analysis.rundiff import load_side
from nsyskit.nccllog import analyze as analyze_logs
from nsyskit.nccllog import print_analysis

H100 = "h100_gpt2_ddp_nsys2025.3.1.sqlite"  # tests/data/real: PyTorch and CUTLASS kernels with long templates


@pytest.mark.parametrize(
    ("full", "short"),
    [
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1>>"
         "(int, T2, T3)", "vectorized_elementwise_kernel"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(T1::Params)",
         "Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>"),
        ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false>(T2 *, const T1 *, int)",
         "softmax_warp_forward"),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
         "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
        ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
        ("<unnamed kernel>", "<unnamed kernel>"),
    ],
)  # fmt: skip
def test_short_kernel_names(full, short):
    assert short_name(full) == short


def report_text(path, width: int = 120, full_names: bool = False) -> str:
    analysis, _ = run_analysis([path], write=False)
    console = Console(file=io.StringIO(), width=width, color_system=None)
    print_report(compose(analysis, summarize(analysis, path.parent), path.parent, full_names), console, top=15)
    return console.file.getvalue()


def table_lines(text: str, title: str) -> list[str]:
    block = text.split(title, 1)[1]
    return block[: block.index("└")].splitlines()[4:]  # the rows, below the heading and its rule


def test_real_kernel_names_take_one_line_each_at_120_columns(real_exports_dir):
    path = decompress(H100, real_exports_dir)
    rows = table_lines(report_text(path), "Top kernels, all ranks (top 15)")
    assert len(rows) == 15  # 47 wrapped lines at 160 columns before
    assert "Kernel2<cutlass_75_tensorop_bf16_s1688gemm" in rows[0] and "13.2 ms" in rows[0]  # numbers whole
    full = table_lines(report_text(path, full_names=True), "Top kernels, all ranks (top 15)")
    assert len(full) > 30 and "void" in full[0]


@pytest.mark.parametrize("width", [80, 120])
def test_real_kernel_tables_fit_the_terminal_width(real_exports_dir, width):
    path = decompress(H100, real_exports_dir)
    text = report_text(path, width)
    for title in ("Top kernels, all ranks (top 15)", "Kernel summary, rank 0", "GPU time breakdown per rank/GPU"):
        block = text.split(title, 1)[1]
        lines = block[: block.index("└") + 1].splitlines()[1:]
        assert max(len(line) for line in lines) <= width, title  # 137 and 169 columns at 120 before
    rows = table_lines(text, "Top kernels, all ranks (top 15)")
    assert len(rows) == 15 and all("…" in row or "_" in row for row in rows)
    assert "13.2 ms" in rows[0] and "3.33 ms" in rows[0]  # the numbers stay whole; the names give up width


def test_json_keeps_both_names_and_html_shows_the_full_one_on_hover(real_exports_dir, tmp_path):
    path = decompress(H100, real_exports_dir)
    analysis, html = run_analysis([path], output=tmp_path)
    rows = json.loads((tmp_path / "analysis.json").read_text())["top_kernels"]
    assert len(rows) == len(analysis.top_kernels)  # every row: a diff may read it
    assert rows[0]["short_name"] == short_name(rows[0]["name"]) != rows[0]["name"]
    page = html.read_text()
    assert f'title="{rows[0]["name"]}"' in page.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def kernels_run(folder, gemm_ns: int):
    folder.mkdir()
    kernels = [Kernel(i * 1000, i * 1000 + gemm_ns, "void gemm<float>(int)") for i in range(4)]
    kernels += [Kernel(i * 1000 + 500, i * 1000 + 600, NCCL, stream=20) for i in range(4)]
    ranges = [Range(i * 1000, i * 1000 + 1000, f"step {i}") for i in range(4)]
    ranges += [Range(i * 1000 + 500, i * 1000 + 600, "ncclAllReduce", payload=1 << 20) for i in range(4)]
    write_export(folder / "r_rank_0.sqlite", Export(kernels=kernels, ranges=ranges))
    return folder


def test_diff_names_the_kernels_whose_time_changed(tmp_path):
    a, b = load_side([str(kernels_run(tmp_path / "a", 300))]), load_side([str(kernels_run(tmp_path / "b", 450))])
    table = changes(a.kernels, b.kernels, ("name",))
    first = next(table.rows())
    assert first["name"] == "void gemm<float>(int)" and (first["count_a"], first["count_b"]) == (4, 4)
    assert (first["total_a_ns"], first["total_b_ns"], first["change_ns"]) == (1200, 1800, 600)
    assert first["change_pct"] == pytest.approx(50.0)
    nccl = changes(a.nccl, b.nccl, ("op", "bucket", "origin"))
    assert next(nccl.rows())["change_ns"] == 0 and next(nccl.rows())["count_a"] == 4


def test_diff_reads_the_same_changes_from_analysis_json(tmp_path):
    run_a, run_b = kernels_run(tmp_path / "a", 300), kernels_run(tmp_path / "b", 450)
    fresh = changes(load_side([str(run_a)]).kernels, load_side([str(run_b)]).kernels, ("name",))
    for run in (run_a, run_b):
        run_analysis([run])  # writes analysis.json: the sides are read from it now
    stored = changes(load_side([str(run_a)]).kernels, load_side([str(run_b)]).kernels, ("name",))
    assert list(stored.rows()) == list(fresh.rows())


def test_a_log_without_collective_lines_says_why_in_one_line(real_logs):
    analysis = analyze_logs([real_logs / "32-k8s-mpijob-ofi-plugin-version.log"])
    console = Console(file=io.StringIO(), width=200, color_system=None)
    print_analysis(analysis, console)
    text = console.file.getvalue()
    assert "NCCL_DEBUG_SUBSYS includes COLL" in text and "NCCL_DEBUG_SUBSYS=INIT,COLL" in text
    assert "Per-op message sizes" not in text and "histogram" not in text


@pytest.fixture
def real_logs():
    from fixtures.realdata import REAL_DATA, need

    return need(REAL_DATA / "nccl-logs")


def test_no_negative_zero():
    assert units.fixed(-0.04, 1) == "0.0" and units.percent(-0.0) == "0.0%" and units.duration(-0.0) == "0 ns"
    assert units.fixed(-0.06, 1) == "-0.1" and units.duration(-1500) == "-1.50 us"


def test_the_ranks_comm_share_is_the_findings_on_a_cpu_run(tmp_path):
    # A CPU run (no kernels): communication is the NCCL-domain ranges the example marks on gloo too.
    folder = tmp_path / "run"
    folder.mkdir()
    for rank, comm in ((0, 200), (1, 400)):
        ranges = [Range(i * 1000, i * 1000 + 1000, f"step {i}") for i in range(4)]
        ranges += [Range(i * 1000 + 100, i * 1000 + 100 + comm, "ncclAllReduce", payload=1 << 20, domain="NCCL")
                   for i in range(4)]  # fmt: skip
        write_export(folder / f"r_rank_{rank}.sqlite", Export(ranges=ranges))
    analysis, _ = run_analysis([folder], write=False)
    summary = summarize(analysis, folder)
    shares = analysis.ranks["comm_share_pct"].tolist()
    assert shares == pytest.approx([20.0, 40.0])
    assert summary.metrics["comm_share"] == pytest.approx(30.0)  # the findings' number: the ranks' weighted share


def test_a_gloo_run_is_not_labelled_nccl(tmp_path):
    # The example marks each DDP bucket's allreduce in its backend's NVTX domain: gloo on CPU runs.
    ranges = [Range(i * 1000, i * 1000 + 1000, f"step {i}") for i in range(3)]
    ranges += [Range(i * 1000 + 100, i * 1000 + 300, "glooAllReduce (DDP bucket 0)", payload=1 << 20, domain="gloo")
               for i in range(3)]  # fmt: skip
    path = write_export(tmp_path / "r_rank_0.sqlite", Export(ranges=ranges))
    analysis, _ = run_analysis([path], write=False)
    assert [(r["op"], r["origin"], r["count"]) for r in analysis.nccl_sizes.rows()] == [("AllReduce", "gloo-nvtx", 3)]


def test_an_empty_analysis_table_is_one_line_saying_why(tmp_path):
    # Kernels only: no NVTX range, no collective. Each empty table is one line with the reason and the fix.
    path = write_export(tmp_path / "r_rank_0.sqlite", Export(kernels=[Kernel(0, 10, "void gemm<float>(int)")]))
    text = report_text(path)
    assert "NVTX ranges (top 15): none in these reports" in text and "nsys -t nvtx" in text
    assert "Collective operations by message size (NCCL, gloo): none in these reports" in text
    assert "┏━━━━┓" not in text  # no table without rows
