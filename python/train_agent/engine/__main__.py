"""`python -m train_agent.engine`: see cli.py (the routes are server.py's)."""

from train_agent.engine.cli import main

if __name__ == "__main__":
    main()
