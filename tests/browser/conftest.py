"""The console's browser tests use tests/conftest.py's fixtures (stack, tenants, api)."""
