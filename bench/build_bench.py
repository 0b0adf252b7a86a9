"""Benchmark 'invoke build' of the local-cpu image: cold (no layer cache) vs no-change vs example touched.

The baseline is the cold build (every layer rebuilt: apt, pip of torch/transformers, Debian's nsys), as a
fresh CI machine does it. Then, side by side with the ratio to the baseline:
  no change        the same inputs again (every layer from the cache)
  example touched  a copy of the project whose example differs by one comment (only the last layer)
  --mpi false      the MPI flag off (its layer empty; the later layers rebuild)
and the image size over the base image for each flag combination built. Builds go to
nsyskit-bench:* tags (removed afterwards), never to nsyskit:latest.
Usage: .venv/bin/python bench/build_bench.py [--skip-cold]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import tempfile
import time
from pathlib import Path

import docker

from nsyskit import image
from nsyskit.config import load_config
from nsyskit.setup import run_setup

ROOT = Path(__file__).resolve().parents[1]
BENCH_IMAGE = "nsyskit-bench"


def config(root: Path, tag: str, **overrides: str):
    return load_config(root, profile="local-cpu", overrides={"IMAGE": BENCH_IMAGE, "TAG": tag, **overrides}, environ={})


def touched_copy(folder: Path) -> Path:
    """Dockerfile, .env, profiles and Container-Root copied, the example changed by one comment."""
    for name in ("Dockerfile", ".env"):
        shutil.copy2(ROOT / name, folder / name)
    shutil.copytree(ROOT / "profiles", folder / "profiles")
    shutil.copytree(ROOT / "Container-Root", folder / "Container-Root", ignore=shutil.ignore_patterns("__pycache__"))
    example = folder / "Container-Root" / "nsyskit" / "workload" / "train.py"
    example.write_text(example.read_text() + f"\n# bench {time.time()}\n")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--skip-cold", action="store_true", help="use the cached build as the baseline (no full rebuild)"
    )
    options = parser.parse_args()
    run_setup(config(ROOT, "cold"))
    rows: list[tuple[str, image.BuildResult]] = []
    rows.append(
        (
            "cold (no cache)",
            image.build_image(config(ROOT, "cold"), ROOT, show_progress=False, no_cache=not options.skip_cold),
        )
    )
    rows.append(("no change", image.build_image(config(ROOT, "warm"), ROOT, show_progress=False)))
    with tempfile.TemporaryDirectory(prefix="nsyskit-bench-") as tmp:
        copy = touched_copy(Path(tmp))
        rows.append(("example touched", image.build_image(config(copy, "touched"), copy, show_progress=False)))
    rows.append(
        ("--mpi false", image.build_image(config(ROOT, "nompi", INSTALL_MPI="false"), ROOT, show_progress=False))
    )

    baseline = rows[0][1].seconds
    print(f"{'build':<18} {'seconds':>8} {'vs cold':>8} {'rebuilt':>8} {'MB over base':>13}")
    for name, result in rows:
        over = (result.size_bytes - result.base_size_bytes) / 1e6
        print(
            f"{name:<18} {result.seconds:>8.1f} {result.seconds / baseline:>7.3f}x {len(result.rebuilt):>8} {over:>13,.0f}"
        )
    slowest = sorted(rows[0][1].step_seconds.items(), key=lambda item: -item[1])[:5]
    instructions = {n: text for n, text in enumerate(_instructions(), start=1)}
    print("cold build, slowest steps: " + "; ".join(f"{instructions.get(n, n)} {s:.0f} s" for n, s in slowest))
    client = docker.from_env()
    for _, result in rows:
        for tag in result.plan.tags:
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.remove(tag)


def _instructions() -> list[str]:
    lines = [
        line for line in (ROOT / "Dockerfile").read_text().splitlines() if line and not line.startswith((" ", "#"))
    ]
    return [line for line in lines if line.split(" ", 1)[0].isupper()]


if __name__ == "__main__":
    main()
