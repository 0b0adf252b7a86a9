"""Fixtures shared by every test folder; server fixtures live in plugin modules under tests/fixtures/."""

# moto_ecr, ecr_registry, start_registry: moto as the ECR API and docker-registry with htpasswd (tests/fixtures/servers.py).
pytest_plugins = ["fixtures.servers"]
