"""``python -m docattn``: the CLI without the installed script (e.g. a source checkout on PYTHONPATH)."""

from docattn.cli import main

main()
