"""``python -m tidesched.cli``: the ``tidesched`` command."""

from tidesched.cli import main

main()
