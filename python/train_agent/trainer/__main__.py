"""`python -m train_agent.trainer`: see cli.py (and the package docstring for the contract)."""

import sys

from train_agent.trainer.cli import main

if __name__ == "__main__":
    sys.exit(main())
