"""The image a Pyxis analysis runs in: the run's image imported once into a .sqsh on the shared folder, before the map.

Given an image URI, Pyxis imports the image at the start of every job step, so each map element would import the
whole kit image (3 GB, 25-60 s) before reading a report. An import job writes one squashfs file instead, and every
element and the merge start from it. A file named by the image's content (its image ID or digest) is reused by later
analyses; one named by a tag only is imported again, since the tag may have moved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from nsyskit.config import Config

SQSH_FOLDER = "enroot"  # under SLURM_SHARED_DIR, beside the files of 'invoke enroot-import'
SCHEMES = ("docker://", "dockerd://", "podman://")


@dataclass(frozen=True)
class AnalysisImage:
    """What the analysis jobs run: `sqsh`, the squashfs file; `uri`, where it comes from; `imports`, whether a job
    imports `uri` into `sqsh` before the map (False: the file is the run's own, or was imported earlier)."""

    uri: str
    sqsh: str
    imports: bool

    def describe(self) -> str:
        """One phrase for the jobs' output and the submitted lines: which image runs, and where it came from."""
        if self.uri == self.sqsh:
            return f"{self.sqsh} (the squashfs image the run ran)"
        if self.imports:
            return f"{self.sqsh}, imported once from {self.uri} by the import job before the map"
        return f"{self.sqsh}, imported earlier from {self.uri} (named by its content: reused)"


def enroot_uri(image: str) -> str:
    """The image as `enroot import` takes it: Pyxis' scheme-less form ([USER@][REGISTRY#]IMAGE[:TAG]) is docker://."""
    return image if image.startswith(SCHEMES) else f"docker://{image}"


def content_id(image: str, image_id: str = "") -> str:
    """What names the image's content: the digest of a URI that names one, else the image ID recorded with the run
    (dockerd://), else '' (a tag, which may have moved since the run)."""
    digest = re.search(r"@sha256:([0-9a-f]{64})", image)
    if digest:
        return digest[1][:16]
    return image_id.removeprefix("sha256:")[:16]


def cached_sqsh(shared_dir: str, image: str, image_id: str = "") -> str:
    """Where the import writes the squashfs of `image`: SLURM_SHARED_DIR/enroot/<scheme+name+tag[+content]>.sqsh."""
    name = re.sub(r"@sha256:[0-9a-f]{64}", "", enroot_uri(image).replace("://", "+"))
    slug = re.sub(r"[^A-Za-z0-9._-]+", "+", name).strip("+")
    content = content_id(image, image_id)
    return f"{shared_dir.rstrip('/')}/{SQSH_FOLDER}/{slug}{'+' + content if content else ''}.sqsh"


def analysis_image(cfg: Config, image: str, image_id: str = "") -> AnalysisImage:
    """The squashfs the analysis of a run in `image` (a .sqsh path or a URI Pyxis takes) runs, and whether it must
    be imported first (`image_id`: the run's recorded image ID, naming a dockerd:// image's content)."""
    from nsyskit.config.slurm_parse import image_file

    if image_file(image):
        return AnalysisImage(image, image, imports=False)
    sqsh = cached_sqsh(cfg.slurm_shared_dir, image, image_id)
    reusable = bool(content_id(image, image_id)) and Path(sqsh).is_file()
    return AnalysisImage(enroot_uri(image), sqsh, imports=not reusable)
