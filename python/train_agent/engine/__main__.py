"""`python -m train_agent.engine`: see server.py."""

from train_agent.engine.server import main

if __name__ == "__main__":
    main()
