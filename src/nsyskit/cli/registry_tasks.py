"""Tasks that log in to the registry, push the kit image to it and pull it back (ECR or any registry)."""

from __future__ import annotations

from nsyskit import console
from nsyskit.cli import PROFILE_HELP, load, task

REGISTRY_HELP = "Registry host (overrides REGISTRY), e.g. 123456789012.dkr.ecr.us-west-2.amazonaws.com."
TAG_HELP = "Image tag (overrides TAG)."


@task(help={"profile": PROFILE_HELP, "registry": REGISTRY_HELP})
def login(c, profile=None, registry_=None):
    """Check the registry accepts our credentials (ECR: a fresh token via boto3); nothing is written to disk."""
    from nsyskit import registry

    cfg = load(c, profile, registry=registry_)
    result = registry.login(cfg)
    console.out.print(f"logged in to {result.host} as {result.username} ({result.source}; {result.expiry})")


@task(
    help={
        "profile": PROFILE_HELP,
        "registry": REGISTRY_HELP,
        "tag": TAG_HELP,
        "progress": "Show live per-layer progress bars (default: yes; --no-progress keeps only one line per layer).",
    }
)
def push(c, profile=None, registry_=None, tag=None, progress=True):
    """Push the built image to REGISTRY (creating the ECR repository when missing) and print its digest."""
    from nsyskit import registry

    cfg = load(c, profile, registry=registry_, tag=tag)
    result = registry.push(cfg, show_progress=progress)
    verb = "up to date" if result.noop else "pushed"
    console.out.print(f"{verb} {result.reference} digest {result.digest} ({result.layers}; {result.seconds:.1f} s)")


@task(
    help={
        "profile": PROFILE_HELP,
        "registry": REGISTRY_HELP,
        "tag": TAG_HELP,
        "digest": "Pull this manifest digest (sha256:...) instead of the tag.",
        "progress": "Show live per-layer progress bars (default: yes).",
    }
)
def pull(c, profile=None, registry_=None, tag=None, digest=None, progress=True):
    """Pull the image from REGISTRY (by tag or --digest) and tag it locally as the image the run tasks use."""
    from nsyskit import registry

    cfg = load(c, profile, registry=registry_, tag=tag)
    result = registry.pull(cfg, digest=digest, show_progress=progress)
    console.out.print(
        f"pulled {result.reference} digest {result.digest} image {result.image_id} as {result.local_tag} ({result.seconds:.1f} s)"
    )
