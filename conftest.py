"""Root pytest configuration: README.md and docs/*.md are test files too.

Their code blocks run with Sybil (see tests/docs/_runner.py) when pytest is pointed at them:
``python -m pytest README.md docs``. The suite (``testpaths = tests``) runs that command in
a child process, tests/docs/test_docs.py.
"""

from tests.docs._runner import docs_env, docs_sybil

__all__ = ["docs_env"]

pytest_collect_file = docs_sybil().pytest()
