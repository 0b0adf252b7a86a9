"""nsyskit's Invoke front: it only composes the tasks of nsyskit.cli (see README, 'Tasks')."""

from pathlib import Path

from invoke import Collection

from nsyskit.cli import config_tasks, registry_tasks, test_tasks

ns = Collection(
    config_tasks.show_config,
    config_tasks.setup,
    test_tasks.test,
    registry_tasks.login,
    registry_tasks.push,
    registry_tasks.pull,
)
ns.configure({"nsyskit": {"root": str(Path(__file__).resolve().parent)}})
