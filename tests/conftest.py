"""Fixtures shared by every test folder; server fixtures live in plugin modules under tests/fixtures/."""

# moto_ecr, ecr_registry, start_registry: moto as the ECR API and docker-registry with htpasswd (tests/fixtures/servers.py).
# kit_image, kit_image_build: the local-cpu kit image built (layer-cached) through nsyskit.image (tests/fixtures/kit_image.py).
pytest_plugins = ["fixtures.servers", "fixtures.kit_image"]
