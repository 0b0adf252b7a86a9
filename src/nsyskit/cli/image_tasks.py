"""The task that builds the kit image (push and pull live in registry_tasks)."""

from __future__ import annotations

from nsyskit import console
from nsyskit.cli import PROFILE_HELP, load, project_root, task


def _mb(size: int) -> str:
    return f"{size / 1e6:,.0f} MB"


@task(
    help={
        "profile": PROFILE_HELP,
        "tag": "Image tag (overrides TAG); the build also adds a content tag.",
        "base_image": "Base image (overrides BASE_IMAGE).",
        "mpi": "true/false: install OpenMPI and sshd (overrides INSTALL_MPI).",
        "efa": "true/false: install the EFA stack (overrides INSTALL_EFA).",
        "tests": "true/false: build the NCCL tests (overrides INSTALL_TESTS).",
        "dry_run": "Print the exact build arguments, tags and context files; build nothing.",
        "progress": "Live progress (default: yes; --no-progress prints nothing until the result).",
        "no_cache": "Rebuild every layer (ignore the layer cache).",
    }
)
def build(
    c,
    profile=None,
    tag=None,
    base_image=None,
    mpi=None,
    efa=None,
    tests=None,
    dry_run=False,
    progress=True,
    no_cache=False,
):
    """Build the image (Dockerfile + Container-Root) with build args from the config; tags IMAGE_REF and a content tag."""
    from nsyskit import image

    cfg = load(c, profile, tag=tag, base_image=base_image, install_mpi=mpi, install_efa=efa, install_tests=tests)
    root = project_root(c)
    if dry_run:
        plan = image.plan_build(cfg, root)
        console.out.print(plan.docker_command(), markup=False)
        console.out.print(f"# context: {len(plan.context_files)} files (Dockerfile, Container-Root/)", markup=False)
        for url_path, path in sorted(plan.assets.files.items()):
            console.out.print(f"# served to the build, never in a layer: {url_path} <- {path}", markup=False)
        if plan.assets.wheelhouse:
            console.out.print(
                f"# served to the build, never in a layer: /wheels/ <- {plan.assets.wheelhouse}", markup=False
            )
        return
    result = image.build_image(cfg, root, show_progress=progress, no_cache=no_cache)
    cache = "fully cached" if result.fully_cached else f"{len(result.rebuilt)} of {result.steps} steps rebuilt"
    console.out.print(
        f"built {' '.join(result.plan.tags)} image {result.image_id[7:19]} in {result.seconds:.1f} s ({cache}); "
        f"size {_mb(result.size_bytes)}, {_mb(result.size_bytes - result.base_size_bytes)} over the base"
    )
