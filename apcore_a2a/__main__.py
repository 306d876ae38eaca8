"""``python -m apcore_a2a`` is the ``apcore-a2a`` command."""

from apcore_a2a.cli import console

if __name__ == "__main__":
    console()
