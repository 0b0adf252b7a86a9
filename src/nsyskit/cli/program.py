"""The `nsyskit` command: Invoke's Program over the kit's collection, run from any folder (the project is the cwd)."""

from __future__ import annotations

import sys

from invoke import Argument, Program

from nsyskit import __version__
from nsyskit.cli.collection import ns

ENV_FILE_HELP = "Settings file to read instead of ./.env (a missing file is an error)."


class NsyskitProgram(Program):
    """Invoke's Program with the kit's own core flag --env-file; the project folder is the current folder."""

    def core_args(self) -> list[Argument]:
        return [*super().core_args(), Argument(names=("env-file",), help=ENV_FILE_HELP)]

    def update_config(self, merge: bool = True) -> None:
        super().update_config(merge=merge)
        # Tasks read these from c.config.nsyskit: which program shows task help, and the settings file.
        self.config["nsyskit"] = {"program": self.binary, "env_file": self.args["env-file"].value}


program = NsyskitProgram(name="nsyskit", binary="nsyskit", version=__version__, namespace=ns)


def main() -> None:
    """Entry point of the console script and of `python -m nsyskit`."""
    if sys.argv[1:2] == ["wrap"]:  # one rank of the user's launch line: its own parser, no Invoke (nor its '--')
        from nsyskit.ranks.wrap import main as wrap

        raise SystemExit(wrap(sys.argv[2:]))
    try:
        program.run(sys.argv)
    except BrokenPipeError:  # the reader of our output went away (| head): nothing to say
        sys.stderr.close()
        raise SystemExit(141) from None
