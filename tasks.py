"""nsyskit's Invoke front: it only composes the tasks of nsyskit.cli (see README, 'Tasks')."""

from pathlib import Path

from invoke import Collection

from nsyskit.cli import config_tasks, test_tasks

ns = Collection(
    config_tasks.show_config,
    config_tasks.setup,
    test_tasks.test,
)
ns.configure({"nsyskit": {"root": str(Path(__file__).resolve().parent)}})
