"""Accounts use Django's User and Groups; roles are groups (see roles.py)."""
