"""Keys and the MACs built from them: a leaf every layer may use.

* :mod:`.formats` -- what session ids, tokens and approver credentials look like (no keys).
* :mod:`.primitives` -- HMAC over length-prefixed parts, key derivation, canonical JSON.
* :mod:`.keyring` -- the deployment's keys by key id (rotation, files under ``SBX_HOME``).
* :mod:`.approver` -- the approver credential (``sbxa1.``).
* :mod:`.sealer` -- worker-only MACs over stored records (receipts, chain heads, grants).

Session tokens are in :mod:`process_registry.sessions`.
"""
