"""``python -m graphrt``: the graphrt command (see graphrt/cli.py)."""
from .cli import main

raise SystemExit(main())
