import sys

from memworker.cli.main import main

sys.exit(main())
