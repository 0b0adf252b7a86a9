"""Parsing of the engine's build stream and the one-line BuildError (no engine needed)."""

from __future__ import annotations

from nsyskit.errors import BuildError
from nsyskit.image.builder import BuildProgress, _failure, stream_lines

STREAM = [
    {"stream": "Step 1/4 : ARG BASE_IMAGE=x\n"},
    {"stream": "Step 2/4 : FROM ${BASE_IMAGE}\n ---> abc\n"},
    {"stream": "Step 3/4 : COPY a /a\n"},
    {"stream": " ---> Using cache\n ---> def\n"},
    {"stream": "Step 4/4 : RUN bash /nsyskit/setup.sh efa\n ---> Running in 123\n"},
    {"stream": "nsyskit[efa]: downloading http://h/x.tar.gz\n\x1b[91mnsyskit[efa]: error: checksum mismatch for x.tar.gz (http://h/x.tar.gz): "},
    {"stream": "expected sha256 aaa, got bbb\n\x1b[0m"},
    {"error": "The command '/bin/sh -c bash /nsyskit/setup.sh efa' returned a non-zero code: 1",
     "errorDetail": {"message": "The command '/bin/sh -c bash /nsyskit/setup.sh efa' returned a non-zero code: 1"}},
]  # fmt: skip


def feed_all(chunks) -> tuple[BuildProgress, str]:
    progress, error = BuildProgress(), ""
    for kind, value in stream_lines(chunks):
        if kind == "line":
            progress.feed(value)
        elif kind == "error":
            error = value
    return progress, error


def test_steps_cache_hits_and_split_lines_are_tracked():
    progress, error = feed_all(STREAM)
    assert (progress.step, progress.total, progress.instruction) == (4, 4, "RUN bash /nsyskit/setup.sh efa")
    assert progress.cached_steps == {3} and progress.rebuilt_steps == [4]
    assert (
        "nsyskit[efa]: error: checksum mismatch for x.tar.gz (http://h/x.tar.gz): expected sha256 aaa, got bbb"
        in progress.tail
    )
    assert error.startswith("The command")


def test_failure_is_one_line_with_step_cause_and_engine_message():
    progress, error = feed_all(STREAM)
    exc = _failure(progress, error, "run invoke setup")
    assert isinstance(exc, BuildError) and (exc.step, exc.total) == (4, 4)
    line = exc.one_line()
    assert line == str(exc).splitlines()[0]
    assert line.startswith(
        "image build failed at step 4/4 (RUN bash /nsyskit/setup.sh efa): nsyskit[efa]: error: checksum mismatch"
    )
    assert "expected sha256 aaa, got bbb" in line and "non-zero code: 1" in line
    assert "invoke setup" not in line  # the base-image fix belongs to FROM failures only


def test_from_failure_gets_the_base_image_fix():
    chunks = [{"stream": "Step 1/3 : FROM nope:1\n"}, {"error": "pull access denied for nope"}]
    progress, error = feed_all(chunks)
    line = _failure(progress, error, "check BASE_IMAGE=nope:1").one_line()
    assert (
        line
        == "image build failed at step 1/3 (FROM nope:1): pull access denied for nope; fix: check BASE_IMAGE=nope:1"
    )


def test_fully_cached_stream_rebuilds_nothing():
    chunks = [{"stream": "Step 1/3 : ARG B=x\n"}, {"stream": "Step 2/3 : FROM x\n ---> a\n"},
              {"stream": "Step 3/3 : COPY . /\n ---> Using cache\n"}, {"aux": {"ID": "sha256:1"}}]  # fmt: skip
    progress, _ = feed_all(chunks)
    assert progress.rebuilt_steps == []
