"""`python -m releases`: see releases/__init__.py."""

from releases import main

raise SystemExit(main())
