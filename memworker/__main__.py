import sys

from memworker.cli import main

sys.exit(main())
