import sys

from agentbench.cli import main

sys.exit(main())
