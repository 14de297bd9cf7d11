"""``python -m theodolite``."""

from theodolite.cli import main

raise SystemExit(main())
