"""Kernels whose short names collide each keep the least of their template arguments or parameters that tells them
apart, within the width; two rows of a table share a short name only when their full names are equal."""

from __future__ import annotations

import json
import re
from collections import defaultdict

from nsyskit.analysis.compute.kernelnames import SHORT_WIDTH, short_name, short_names
from nsyskit.analysis.trace import analyze_run

ELEMENTWISE = "void at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl<{}>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)"  # noqa: E501
LAMBDA = "void clover::par_ranged1d_kernel<build_field(global_variables &)::[lambda(int) (instance {})]>(clover::Range1d, T1)"


def test_colliding_kernels_keep_the_functor_that_tells_them_apart():
    functors = ["at::native::CUDAFunctor_add<float>", "at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float>>",
                "at::native::FillFunctor<c10::Half>"]  # fmt: skip
    names = [ELEMENTWISE.format(functor) for functor in functors]
    other = "void other_kernel<(int)4>(float *)"
    shown = short_names([*names, other])
    assert shown[-1] == short_name(other) == "other_kernel"  # a name that collides with none stays as it was
    assert len(set(shown[:3])) == 3
    assert all(len(s) <= SHORT_WIDTH and s.startswith("elementwise_kernel<") for s in shown[:3])
    assert "CUDAFunctor_add<float>" in shown[0] and "FillFunctor<Half>" in shown[2]  # namespaces dropped
    assert "AUnaryFunctor<BFloat16" in shown[1] or "MulFunctor<float>" in shown[1]


def test_equal_but_for_their_lambdas_they_are_told_by_the_lambdas_instance_numbers():
    shown = short_names([LAMBDA.format(n) for n in (1, 2, 10)])
    assert [re.search(r"#(\d+)$", s).group(1) for s in shown] == ["1", "2", "10"]
    assert len({s.rsplit(" #", 1)[0] for s in shown}) == 1 and shown[0].startswith("par_ranged1d_kernel<build_field")


def test_a_short_name_repeats_only_for_equal_full_names():
    names = [ELEMENTWISE.format("F<int>"), ELEMENTWISE.format("F<int>"), "k", "k ", " k", "void k()", "k<1>"]
    shown = short_names(names)
    assert shown[0] == shown[1]  # one kernel, two rows (two ranks): one name
    assert len({(name, short) for name, short in zip(names, shown, strict=True)}) == len(set(names))
    assert len(set(shown)) == len(set(names))


def test_no_two_rows_share_a_short_name_unless_their_full_names_are_equal(real_export, tmp_path):
    analysis = analyze_run([real_export])
    tables = [analysis.top_kernels, *analysis.kernel_summaries.values()]
    for table in tables:
        full_of = defaultdict(set)
        for row in table.rows():
            full_of[row["short_name"]].add(row["name"])
            assert len(row["short_name"]) <= max(SHORT_WIDTH, len(short_name(row["name"])))
        assert all(len(full) == 1 for full in full_of.values()), {s: f for s, f in full_of.items() if len(f) > 1}
    rows = json.loads(json.dumps(analysis.to_json(rows=1 << 30), default=str))["top_kernels"]
    assert all(row["name"] and row["short_name"] for row in rows)  # the JSON keeps the full name beside the short one
