"""Serve the example modules programmatically: ``python examples/run.py``.

Equivalent to::

    apcore-a2a serve --extensions-dir examples/extensions --bindings examples/bindings
"""

import sys
from pathlib import Path

from apcore import BindingLoader, Executor, Registry

from apcore_a2a import A2AApprovalHandler, serve

HERE = Path(__file__).resolve().parent


def main() -> None:
    registry = Registry(extensions_dir=str(HERE / "extensions"))
    registry.discover()
    sys.path.insert(0, str(HERE / "bindings"))
    BindingLoader().load_binding_dir(str(HERE / "bindings"), registry)
    executor = Executor(registry, approval_handler=A2AApprovalHandler())
    serve(executor, name="apcore-examples", version="1.0.0", port=8000)


if __name__ == "__main__":
    main()
