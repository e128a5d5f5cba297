import sys

from ragtrial.cli import main

sys.exit(main())
