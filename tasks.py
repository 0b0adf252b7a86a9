"""nsyskit's Invoke front in a checkout: the collection of nsyskit.cli, rooted at this folder (see README, 'Tasks')."""

from pathlib import Path

from nsyskit.cli.collection import ns

ns.configure({"nsyskit": {"root": str(Path(__file__).resolve().parent)}})
