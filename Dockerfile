# nsyskit image: BASE_IMAGE + nsys + the example's Python side + (per flag) OpenMPI/SSH, EFA, NCCL tests, ncu,
# then Container-Root/ (the nsys wrapper and the example) as the last layer.
# Build it with 'invoke build' (build args from .env and the profile); a plain 'docker build' works too
# with the same --build-arg names. One component per layer, heavy and rarely changed first, so that
# editing the example or the wrapper rebuilds only the last layer. A flag that is off leaves its
# layer empty (0 B). Proxies (http_proxy, https_proxy, no_proxy) are Docker's predefined build args:
# used by the steps, never written to the image or its history. EXTRA_CA_BUNDLE and local sources
# are served to the build by the kit (NSYSKIT_ASSETS) and fetched and removed within one step.

ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:25.01-py3
FROM ${BASE_IMAGE}

LABEL org.opencontainers.image.title="nsyskit" \
      org.opencontainers.image.description="Nsight Systems, OpenMPI, EFA and NCCL tests around a PyTorch DDP example"

COPY Container-Root/nsyskit/setup.sh /nsyskit/setup.sh
COPY Container-Root/nsyskit/install/lib.sh /nsyskit/install/lib.sh

ARG DEBIAN_MIRROR=http://deb.debian.org/debian
ARG NSYSKIT_ASSETS=
COPY Container-Root/nsyskit/install/base.sh /nsyskit/install/base.sh
RUN bash /nsyskit/setup.sh base

ARG TORCH_VERSION=2.13.0
ARG PIP_WHEELHOUSE=
ARG PIP_WHEELHOUSE_DIGEST=
COPY Container-Root/nsyskit/install/python.sh \
     Container-Root/nsyskit/install/python-requirements.txt \
     Container-Root/nsyskit/install/python-constraints.txt /nsyskit/install/
RUN bash /nsyskit/setup.sh python

ARG NSYS_SOURCE=nvidia
ARG NSYS_VERSION=2025.2.1
ARG NSYS_URL=
ARG NSYS_SHA256=
COPY Container-Root/nsyskit/install/nsys.sh /nsyskit/install/nsys.sh
RUN bash /nsyskit/setup.sh nsys

ARG INSTALL_MPI=true
ARG OPENMPI_SOURCE=efa
ARG OPENMPI_VERSION=4.1.7
ARG OPENMPI_URL=
ARG OPENMPI_SHA256=
ARG INSTALL_EFA=true
COPY Container-Root/nsyskit/install/mpi.sh /nsyskit/install/mpi.sh
RUN bash /nsyskit/setup.sh mpi

ARG EFA_INSTALLER_VERSION=1.38.0
ARG EFA_INSTALLER_URL=
ARG EFA_INSTALLER_SHA256=
COPY Container-Root/nsyskit/install/efa.sh /nsyskit/install/efa.sh
RUN bash /nsyskit/setup.sh efa

ARG INSTALL_TESTS=true
ARG NCCL_VERSION=2.23.4-1
ARG NCCL_TESTS_VERSION=v2.13.11
ARG NCCL_TESTS_URL=
ARG NCCL_TESTS_SHA256=
ARG NCCL_TESTS_GENCODE="-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90"
COPY Container-Root/nsyskit/install/nccl-tests.sh Container-Root/nsyskit/install/nccl-tests-binaries.txt /nsyskit/install/
RUN bash /nsyskit/setup.sh nccl-tests

# Nsight Compute (PROFILER=ncu): after the heavy layers, so adding or changing it rebuilds only this one.
ARG INSTALL_NCU=true
ARG NCU_SOURCE=base
ARG NCU_VERSION=2025.2.1
ARG NCU_URL=
ARG NCU_SHA256=
COPY Container-Root/nsyskit/install/ncu.sh /nsyskit/install/ncu.sh
RUN bash /nsyskit/setup.sh ncu

# Last: the wrapper, the example and the rest of Container-Root (rebuilds in seconds).
COPY Container-Root/ /
