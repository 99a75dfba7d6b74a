"""``python -m mdpsim``: the command line (:func:`mdpsim.cli.main`)."""

from mdpsim.cli import main

raise SystemExit(main())
