"""`python -m train_agent.trainer`: see module.py."""

import sys

from train_agent.trainer.module import main

if __name__ == "__main__":
    sys.exit(main())
