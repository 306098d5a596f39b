"""The ``vercel_sandbox`` backend (``pip install 'sbx[vercel]'``): see :mod:`.environment`."""

from .config import VercelConfig, sandbox_name
from .environment import VercelEnvironment, reap_orphans

__all__ = ["VercelConfig", "VercelEnvironment", "reap_orphans", "sandbox_name"]
