"""invoke login / push / pull against real servers: moto as the ECR API and Debian's docker-registry as the ECR host.

REGISTRY is moto's ECR host (boto3 creates the repository and gets the token there); REGISTRY_ENDPOINT sends the
Docker traffic to the local docker-registry, whose htpasswd user/password are exactly what the token decodes to.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import boto3
import docker
import pytest
from fixtures.servers import start_moto

from nsyskit import engine

ROOT = Path(__file__).resolve().parents[2]
DIGEST = re.compile(r"digest (sha256:[0-9a-f]{64})")
pytestmark = pytest.mark.engine


def invoke(*args: str, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    """Run `invoke ARGS` as a user would, with only the AWS/registry environment the test gives."""
    clean = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "NSYSKIT_")) and key not in ("REGISTRY", "REGISTRY_ENDPOINT", "IMAGE", "TAG")
    }
    clean.update({"NSYSKIT_PROFILE": "local-cpu", "COLUMNS": "200"}, **env)
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=timeout
    )


def error_line(result: subprocess.CompletedProcess) -> str:
    """The one-line error a failed task printed last on stderr (and proof there was no traceback)."""
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


def digest_of(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    match = DIGEST.search(result.stdout)
    assert match, result.stdout
    return match[1]


def ecr_api(moto, **keys: str):
    """A boto3 ECR client on moto, for checking what the kit did."""
    return boto3.client("ecr", endpoint_url=moto.endpoint_url, region_name=moto.region,
                        aws_access_key_id=keys.get("key", "testing"), aws_secret_access_key=keys.get("secret", "testing"))  # fmt: skip


@pytest.fixture(scope="session")
def client() -> docker.DockerClient:
    """The Docker engine (started by the project's own setup code when missing)."""
    return engine.ensure_engine()[0]


@pytest.fixture
def scratch_image(client):
    """A factory for small images with unique content on top of the local-cpu base; all their tags are removed afterwards."""
    made: list[str] = []

    def build(name: str, tag: str = "latest"):
        dockerfile = f"FROM nsyskit-base:bookworm\nRUN echo {secrets.token_hex(8)} > /nsyskit-regtest\n"
        image = client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=f"{name}:{tag}", rm=True)[0]
        made.append(image.id)
        return image

    yield build
    for image_id in made:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(image_id, force=True)  # by ID: every tag and recorded digest goes


@pytest.fixture(scope="session")
def push_image(request, client):
    """(IMAGE, TAG, image id) of what the round-trip test pushes: the kit image of the session (fixture kit_image)."""
    try:
        kit = request.getfixturevalue("kit_image")
    except pytest.FixtureLookupError:
        kit = None  # until the image engineer's kit_image fixture lands: a small stand-in
    if kit is None:
        dockerfile = b"FROM nsyskit-base:bookworm\nRUN head -c 2000000 /dev/urandom > /payload\n"
        image = client.images.build(fileobj=io.BytesIO(dockerfile), tag="nsyskit-regtest-kit:latest", rm=True)[0]
        yield "nsyskit-regtest-kit", "latest", image.id
        client.images.remove("nsyskit-regtest-kit:latest")
        return
    ref = kit if isinstance(kit, str) else (getattr(kit, "ref", None) or kit.tags[0])
    name, _, tag = ref.rpartition(":")
    yield name, tag, client.images.get(ref).id


def _untag(client, *refs: str) -> None:
    for ref in refs:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(ref)  # only a tag: the image keeps its other names


def test_push_creates_repository_logs_in_pushes_then_noop_and_pulls_by_digest(ecr_registry, push_image, client):
    name, tag, image_id = push_image
    moto, host = ecr_registry.moto, ecr_registry.registry.host
    moto.reset()
    env = {**ecr_registry.env, "NSYSKIT_IMAGE": name, "NSYSKIT_TAG": tag}
    try:
        login = invoke("login", env=env)
        assert login.returncode == 0, login.stderr
        assert f"logged in to {host} as AWS (ECR token of account {moto.account}" in login.stdout

        started = time.monotonic()
        first = invoke("push", env=env)
        first_s = time.monotonic() - started
        digest = digest_of(first)
        assert first.stdout.startswith(f"pushed {host}/{name}:{tag}"), first.stdout
        assert f"created ECR repository {name} (scan on push: on, tags: mutable)" in first.stderr
        assert re.search(r"layer [0-9a-f]{12} (pushed|already in the registry|mounted)", first.stderr), first.stderr
        described = ecr_api(moto).describe_repositories(repositoryNames=[name])["repositories"][0]
        assert described["imageScanningConfiguration"] == {"scanOnPush": True}
        assert described["imageTagMutability"] == "MUTABLE"

        # The registry itself holds a manifest whose config is our image (independent of the engine's bookkeeping).
        request = urllib.request.Request(f"http://{host}/v2/{name}/manifests/{digest}", headers={
            "Accept": "application/vnd.docker.distribution.manifest.v2+json",
            "Authorization": "Basic " + moto.token,
        })  # fmt: skip
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.load(response)["config"]["digest"] == image_id

        started = time.monotonic()
        second = invoke("push", env=env)
        second_s = time.monotonic() - started
        assert digest_of(second) == digest
        assert second.stdout.startswith(f"up to date {host}/{name}:{tag}"), second.stdout
        assert "layer" not in second.stderr  # nothing sent

        pulled = invoke("pull", "--digest", digest, env=env)
        assert pulled.returncode == 0, pulled.stderr
        assert f"digest {digest} image {image_id}" in pulled.stdout
        assert client.images.get(f"{host}/{name}@{digest}").id == image_id
        history = json.dumps(client.api.history(f"{host}/{name}@{digest}"))
        assert moto.password not in history and moto.token not in history
        print(f"\nFIGURES push first {first_s:.1f} s, second (no-op) {second_s:.1f} s, image {name}:{tag}")
    finally:
        _untag(client, f"{host}/{name}:{tag}", f"{moto.registry_host}/{name}:{tag}")


def test_pull_by_digest_restores_a_removed_image(ecr_registry, scratch_image, client):
    name = f"nsyskit-regtest-pull-{secrets.token_hex(3)}"
    image = scratch_image(name)
    env = {**ecr_registry.env, "NSYSKIT_IMAGE": name, "NSYSKIT_TAG": "latest"}
    digest = digest_of(invoke("push", "--no-progress", env=env))
    for ref in client.images.get(image.id).tags:
        client.images.remove(ref)
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(image.id)

    pulled = invoke("pull", "--digest", digest, env=env)
    assert pulled.returncode == 0, pulled.stderr
    assert re.search(r"layer [0-9a-f]{12} pulled", pulled.stderr), pulled.stderr
    assert client.images.get(image.id).id == image.id  # same config digest: same image ID
    assert (
        f"{ecr_registry.moto.registry_host}/{name}:latest" in client.images.get(image.id).tags
    )  # what the run tasks use


def test_wrong_password_is_one_clear_line(ecr_registry, start_registry, scratch_image):
    name = f"nsyskit-regtest-auth-{secrets.token_hex(3)}"
    scratch_image(name)
    other = start_registry("AWS", "not-what-the-ecr-token-says")
    env = {**ecr_registry.env, "NSYSKIT_REGISTRY_ENDPOINT": other.host, "NSYSKIT_IMAGE": name}
    for task in ("login", "push"):
        line = error_line(invoke(task, env=env))
        assert line.startswith(f"error: registry {other.host} rejected the credentials (ECR token of account"), line
        assert "401 Unauthorized" in line


def test_stopped_registry_is_one_clear_line(ecr_registry, start_registry, scratch_image):
    name = f"nsyskit-regtest-down-{secrets.token_hex(3)}"
    scratch_image(name)
    stopped = start_registry("AWS", ecr_registry.moto.password)
    stopped.stop()
    result = invoke("push", env={**ecr_registry.env, "NSYSKIT_REGISTRY_ENDPOINT": stopped.host, "NSYSKIT_IMAGE": name})
    line = error_line(result)
    assert line.startswith(f"error: registry {stopped.host} unreachable for login after 3 attempts"), line
    assert "connection refused" in line
    assert result.stderr.count("retrying in") == 2  # backoff: 1 s, then 2 s


def test_missing_aws_credentials_say_how_to_provide_them(ecr_registry, scratch_image):
    name = f"nsyskit-regtest-nocreds-{secrets.token_hex(3)}"
    scratch_image(name)
    env = {
        key: value
        for key, value in ecr_registry.env.items()
        if key not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    }
    env["NSYSKIT_IMAGE"] = name
    for task in ("login", "push"):
        line = error_line(invoke(task, env=env))
        assert line.startswith("error: no AWS credentials found for ecr:"), line
        assert "AWS_PROFILE" in line and "AWS_ACCESS_KEY_ID" in line


def test_image_not_built_yet(ecr_registry):
    line = error_line(invoke("push", env={**ecr_registry.env, "NSYSKIT_IMAGE": "nsyskit-regtest-never-built"}))
    assert "nsyskit-regtest-never-built:latest is not in the local Docker engine; fix: build it first" in line


def test_access_denied_names_the_missing_iam_action(tmp_path, ecr_registry, scratch_image):
    name = f"nsyskit-regtest-iam-{secrets.token_hex(3)}"
    scratch_image(name)
    moto = start_moto(tmp_path, enforce_iam_after=3)  # its own server: IAM checks on from the 4th request
    try:
        iam = boto3.client("iam", endpoint_url=moto.endpoint_url, region_name="us-east-1",
                           aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
        iam.create_user(UserName="pusher")
        policy = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["ecr:GetAuthorizationToken", "ecr:DescribeRepositories"], "Resource": "*"}
        ]}  # fmt: skip
        iam.put_user_policy(UserName="pusher", PolicyName="no-create", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="pusher")["AccessKey"]
        env = {**ecr_registry.env, "AWS_ENDPOINT_URL_ECR": moto.endpoint_url, "NSYSKIT_IMAGE": name,
               "AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}  # fmt: skip
        assert invoke("login", env=env).returncode == 0  # GetAuthorizationToken is allowed
        line = error_line(invoke("push", env=env))
        assert line.startswith("error: AWS denied ecr:CreateRepository: grant the IAM action ecr:CreateRepository"), (
            line
        )
    finally:
        moto.proc.terminate()
        moto.proc.wait(timeout=10)


def test_tag_immutability_conflict_is_caught_before_uploading(ecr_registry, scratch_image, client):
    name = f"nsyskit-regtest-immutable-{secrets.token_hex(3)}"
    env = {**ecr_registry.env, "NSYSKIT_IMAGE": name, "NSYSKIT_TAG": "v1", "NSYSKIT_ECR_TAG_IMMUTABILITY": "true"}
    scratch_image(name, "v1")
    first = invoke("push", env=env)
    digest = digest_of(first)
    assert "tags: immutable" in first.stderr
    mutability = ecr_api(ecr_registry.moto).describe_repositories(repositoryNames=[name])["repositories"][0]
    assert mutability["imageTagMutability"] == "IMMUTABLE"

    scratch_image(name, "v1")  # a different image under the same tag
    result = invoke("push", env=env)
    line = error_line(result)
    assert line.startswith(f"error: tag v1 already names another image ({digest}) in ECR repository {name}"), line
    assert "push under a new TAG" in line
    assert "layer" not in result.stderr  # refused before sending anything


def test_token_never_in_process_list_logs_or_image_history(ecr_registry, scratch_image, client):
    moto = ecr_registry.moto
    needles = {moto.password, moto.token}
    marker = f"nsyskit-marker-{secrets.token_hex(6)}"
    seen: list[str] = []
    snapshots = 0
    stop = threading.Event()

    def poll_ps():
        nonlocal snapshots
        while not stop.is_set():
            # 'e' adds each process's environment after its arguments: argv and environment in one listing
            listing = subprocess.run(
                ["ps", "-e", "-ww", "e", "-o", "pid=,args="], capture_output=True, text=True
            ).stdout
            snapshots += 1
            seen.extend(line for line in listing.splitlines() if any(n in line for n in (*needles, marker)))

    name = f"nsyskit-regtest-secret-{secrets.token_hex(3)}"
    scratch_image(name)
    env = {**ecr_registry.env, "NSYSKIT_IMAGE": name}
    poller = threading.Thread(target=poll_ps, daemon=True)
    poller.start()
    try:
        # Control: the poller does see a marker placed in a child's environment, so a leaked token would show.
        subprocess.run(["sleep", "1"], env={**os.environ, "NSYSKIT_TEST_MARKER": marker}, check=True)
        runs = [invoke("login", env=env), invoke("push", env=env), invoke("pull", env=env)]
    finally:
        stop.set()
        poller.join(timeout=30)
    assert any(marker in line for line in seen), "the ps poller never saw the control marker"
    leaks = [line[:200] for line in seen if marker not in line]
    assert not leaks, leaks
    assert snapshots > 10

    for run in runs:
        assert run.returncode == 0, run.stderr
        assert not any(n in run.stdout + run.stderr for n in needles)  # the kit's own output (its log)
    history = subprocess.run(["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}} {{.Comment}}",
                              f"{ecr_registry.registry.host}/{name}:latest"], capture_output=True, text=True, check=True)  # fmt: skip
    assert history.stdout.strip() and not any(n in history.stdout for n in needles)
    inspect = client.api.inspect_image(f"{ecr_registry.registry.host}/{name}:latest")
    assert not any(n in json.dumps(inspect) for n in needles)

    # Files: the repository (tracked and untracked), the kit's log folder, and the Docker config (nothing stored).
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    files = [ROOT / path for path in listed.stdout.splitlines()]
    files += [path for path in Path("/var/log/nsyskit").glob("**/*") if path.is_file()]
    files += [Path(os.environ.get("DOCKER_CONFIG", Path.home() / ".docker")) / "config.json"]
    encoded = {n.encode() for n in needles} | {base64.b64encode(n.encode()) for n in needles}
    for path in files:
        if path.is_file():
            data = path.read_bytes()
            assert not any(n in data for n in encoded), f"token found in {path}"


def test_generic_aws_endpoint_url_is_honoured(ecr_registry):
    env = {key: value for key, value in ecr_registry.env.items() if key != "AWS_ENDPOINT_URL_ECR"}
    env["AWS_ENDPOINT_URL"] = ecr_registry.moto.endpoint_url  # boto3's all-services override
    result = invoke("login", env=env)
    assert result.returncode == 0, result.stderr
    assert f"from the ECR API at {ecr_registry.moto.endpoint_url}" in result.stdout  # named in the result line
    assert "reported expiry 2015-01-01 is past; ignored" in result.stdout  # moto's fixed expiry does not break the flow


def test_build_push_is_one_command(ecr_registry, push_image, client):
    name, _, _ = push_image  # the session's kit image: the build below is served from its layer cache
    moto, host = ecr_registry.moto, ecr_registry.registry.host
    env = {**ecr_registry.env, "NSYSKIT_IMAGE": name, "NSYSKIT_TAG": "buildpush"}
    built_ref = f"{moto.registry_host}/{name}:buildpush"
    try:
        result = invoke("build", "--no-progress", "push", "--no-progress", env=env, timeout=1800)
        digest = digest_of(result)
        built, pushed = result.stdout.strip().splitlines()[-2:]
        assert built.startswith(f"built {built_ref}"), result.stdout
        assert pushed.startswith(f"pushed {host}/{name}:buildpush"), result.stdout
        assert f"{host}/{name}@{digest}" in client.images.get(built_ref).attrs["RepoDigests"]  # the build is what went
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            _untag(
                client,
                *[ref for ref in client.images.get(built_ref).tags if ref.startswith((host, moto.registry_host))],
            )


def test_other_registry_with_credentials_from_environment(start_registry, scratch_image, client):
    name = f"nsyskit-regtest-plain-{secrets.token_hex(3)}"
    scratch_image(name)
    plain = start_registry("robot", "robot-password")
    env = {"NSYSKIT_REGISTRY": plain.host, "NSYSKIT_IMAGE": name, "DOCKER_CONFIG": str(plain.workdir)}  # an empty Docker config
    line = error_line(invoke("login", env=env))
    assert line.startswith(f"error: no credentials for registry {plain.host}: set NSYSKIT_REGISTRY_USERNAME"), line

    wrong = error_line(
        invoke("push", env={**env, "NSYSKIT_REGISTRY_USERNAME": "robot", "NSYSKIT_REGISTRY_PASSWORD": "nope"})
    )
    assert "rejected the credentials (NSYSKIT_REGISTRY_USERNAME/NSYSKIT_REGISTRY_PASSWORD, user robot)" in wrong, wrong

    env.update({"NSYSKIT_REGISTRY_USERNAME": "robot", "NSYSKIT_REGISTRY_PASSWORD": "robot-password"})
    assert invoke("login", env=env).returncode == 0
    pushed = invoke("push", env=env)
    digest_of(pushed)
    assert pushed.stdout.startswith(f"pushed {plain.host}/{name}:latest"), pushed.stdout
    assert "ECR" not in pushed.stderr  # no AWS call for a plain registry
