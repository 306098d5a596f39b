"""Cloud keys: AWS, Google Cloud, Azure, Alibaba, Tencent, DigitalOcean, Yandex, Cloudflare.

Azure storage and service-bus connection strings (``AccountKey=``,
``SharedAccessKey=``), SAS signatures (``sig=``) and a service account's
``private_key_id`` are key/value forms (see :mod:`.keys`); what is here has a
shape of its own.
"""

from __future__ import annotations

import re
from typing import Final

from .base import MARKED, Hit, Rule, rule
from .vendor import Vendor, vendor

CLOUD: Final[tuple[Vendor, ...]] = (
    vendor("aws-access-key-id", ("AKIA", "ASIA", "ABIA", "ACCA"), r"A(?:KIA|SIA|BIA|CCA)",
           r"[A-Z0-9]{16}", fixed=True),
    vendor("aws-access-key-id-a3t", ("A3T",), r"A3T[A-Z0-9]", r"[A-Z0-9]{16}", fixed=True),
    vendor("aws-bedrock", ("ABSK",), "ABSK", r"[A-Za-z0-9+/]{109,269}+={0,2}"),
    vendor("google-api-key", ("AIza",), "AIza", r"[A-Za-z0-9_-]{30,40}+", closed=True),
    vendor("google-oauth-secret", ("GOCSPX-",), "GOCSPX-", r"[A-Za-z0-9_-]{20,64}+"),
    vendor("google-oauth-token", ("ya29.",), r"ya29\.", r"[A-Za-z0-9_-]{20,4096}+"),
    vendor("alibaba", ("LTAI",), "LTAI", r"[A-Za-z0-9]{20}", fixed=True),
    vendor("tencent", ("AKID",), "AKID", r"[A-Za-z0-9]{32}", fixed=True),
    vendor("digitalocean", ("dop_v1_", "doo_v1_", "dor_v1_"), r"do[por]_v1_", r"[a-f0-9]{64}",
           fixed=True),
    vendor("yandex", ("AQVN",), "AQVN", r"[A-Za-z0-9_-]{35,38}+", closed=True),
    vendor("cloudflare-origin-ca", ("v1.0-",), r"v1\.0-", r"[a-f0-9]{24}-[a-f0-9]{146}",
           fixed=True),
)

# Azure AD client secret: 3 characters, a digit, "Q~", then 31-34 more.
_AZURE_HEAD: Final = re.compile(r"[A-Za-z0-9_~.]{3}[0-9]Q~")
_AZURE_BODY: Final = re.compile(r"[A-Za-z0-9_~.-]{31,34}+(?![A-Za-z0-9_~.-])")
_AZURE_EDGE: Final = re.compile(r"[A-Za-z0-9_~.-]")


def _azure_ad(text: str, p: int) -> Hit | None:
    start = p - 4
    if start < 0 or not _AZURE_HEAD.match(text, start):
        return None
    if _AZURE_EDGE.match(text[start - 1 : start]):  # inside a longer run
        return None
    m = _AZURE_BODY.match(text, p + 2)
    return None if m is None else (m.start(), m.end(), MARKED)


RULES: Final[tuple[Rule, ...]] = (
    rule("azure-ad-secret", r"Q~(?<=[0-9]Q~)(?=[A-Za-z0-9_~.-]{31})", _azure_ad),
)
