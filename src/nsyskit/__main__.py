"""`python -m nsyskit`: the nsyskit command."""

from nsyskit.cli.program import main

main()
