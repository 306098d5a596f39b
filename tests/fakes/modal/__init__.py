"""A fake Modal (control plane and task command router) for the tests of the modal backend.

The real ``modal`` SDK talks gRPC to it on 127.0.0.1; sandboxes are real process
trees under bubblewrap (:mod:`.jail`). Written against the SDK version pinned in
``PINNED_SDK``: the generated servicer bases come from that SDK's ``modal_proto``.
"""

from .service import TOKEN_ID, TOKEN_SECRET, FakeModal, FakeSandbox

PINNED_SDK = "1.6"
"""Minor version of the ``modal`` package this fake was written against."""

__all__ = ["PINNED_SDK", "TOKEN_ID", "TOKEN_SECRET", "FakeModal", "FakeSandbox"]
