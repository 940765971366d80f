"""``python -m kraft`` runs the same command line as the ``kraft`` script."""

from kraft.cli import main

raise SystemExit(main())
