"""Kubernetes-only tasks: preparing a cluster for 'invoke deploy --k8s'."""

from __future__ import annotations

from nsyskit import console
from nsyskit.cli import PROFILE_HELP, load, project_root, task


@task(name="k8s-setup", help={"profile": PROFILE_HELP})
def k8s_setup(c, profile=None):
    """Install the Kubeflow MPI operator (pinned release v0.8.2, or K8S_MPI_OPERATOR_MANIFEST) when the cluster lacks the MPIJob CRD."""
    from nsyskit import k8s

    console.out.print(k8s.setup_operator(load(c, profile), project_root(c)))
