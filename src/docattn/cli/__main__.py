"""``python -m docattn.cli``: the command line without the installed script."""

from docattn.cli import main

main()
