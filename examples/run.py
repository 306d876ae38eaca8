"""Serve the example modules programmatically: ``python examples/run.py``.

Like ``apcore-a2a serve --extensions-dir examples/extensions --bindings examples/bindings``,
plus the approval policy of ``approvals.py`` (small transfers approved at once). Settings
come from the environment as for the CLI: ``A2A_PORT=9000 python examples/run.py``.
"""

import sys
from pathlib import Path

from apcore import BindingLoader, Executor, Registry

from apcore_a2a import serve

HERE = Path(__file__).resolve().parent


def main() -> None:
    registry = Registry(extensions_dir=str(HERE / "extensions"))
    registry.discover()
    sys.path.insert(0, str(HERE / "bindings"))
    BindingLoader().load_binding_dir(str(HERE / "bindings"), registry)
    sys.path.insert(0, str(HERE))
    from approvals import SmallTransfersApproved

    executor = Executor(registry, approval_handler=SmallTransfersApproved(limit=10_000))
    serve(executor, name="apcore-examples", version="1.0.0")  # port: A2A_PORT, else 8000


if __name__ == "__main__":
    main()
