"""Slurm-only tasks: enroot credentials for ECR and importing the pushed image into a .sqsh for Pyxis."""

from __future__ import annotations

import shlex

from nsyskit import console
from nsyskit.cli import PROFILE_HELP, load, task


@task(name="enroot-credentials", help={"profile": PROFILE_HELP})
def enroot_credentials(c, profile=None):
    """Write the ECR line (token from boto3) into enroot's credentials file, mode 0600, keeping its other lines."""
    from nsyskit import enroot

    path = enroot.write_credentials(load(c, profile))
    console.out.print(f"ECR credentials written to {path} (the token is valid for 12 hours)")


@task(name="enroot-import", help={"profile": PROFILE_HELP, "force": "Re-import even if the .sqsh file exists.",
                                  "dry_run": "Print the enroot command only."})  # fmt: skip
def enroot_import(c, profile=None, force=False, dry_run=False):
    """Import the image (pushed; without REGISTRY the local one, dockerd://) into the .sqsh Pyxis runs (needs enroot here)."""
    from nsyskit import enroot

    cfg = load(c, profile)
    if dry_run:
        console.out.print(shlex.join(enroot.import_command(cfg)))
        return
    path, imported = enroot.import_image(cfg, force=force)
    console.out.print(f"image imported: {path}" if imported else f"{path} exists; kept it (--force re-imports)")
