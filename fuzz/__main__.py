"""``python -m fuzz``: see :mod:`fuzz.cli`."""

from fuzz.cli import main

raise SystemExit(main())
