"""Sandbox backends that live in their own folder (one module or package each)."""
