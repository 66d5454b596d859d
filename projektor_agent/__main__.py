"""``python -m projektor_agent`` (and the served zipapp) run the command."""

import sys

from projektor_agent.cli import main

if __name__ == "__main__":
    sys.exit(main())
