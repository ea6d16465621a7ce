"""A test-only app: the suite's ``flush`` (management/commands/flush.py)."""
