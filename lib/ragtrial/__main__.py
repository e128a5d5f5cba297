"""`python -m ragtrial`: the same command line as `ragtrial`."""

import sys

from ragtrial.cli import main

sys.exit(main())
