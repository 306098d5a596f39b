"""Sandbox backends, one module or package each; imported lazily through the backend table."""
