"""Tool registry, dispatch, approval and built-in tools."""
