"""Plain functions exposed through greetings.binding.yaml."""


def hello(name: str) -> str:
    """Greet someone by name (answers text)."""
    return f"Hello, {name}!"
