"""Secrets the redactor must catch, each with the exact expected output (value gone, context kept).

Written from the families of issue 14 and from the rule shapes secret scanners
publish (gitleaks, detect-secrets, trufflehog): prefixes, alphabets, lengths.
Fake secrets are assembled at import time from a seeded generator and split
prefixes, so this file holds no literal a scanner would flag.
"""

from __future__ import annotations

import random
import string
from typing import NamedTuple

_RNG = random.Random(141414)
ALNUM = string.ascii_letters + string.digits
LOWD = string.ascii_lowercase + string.digits
UPD = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
TOK = ALNUM + "_-"
B64 = ALNUM + "+/"
R = "[REDACTED]"
M = "...[REDACTED]"


def rnd(n: int, alphabet: str = ALNUM) -> str:
    """Random string with a digit (and both cases when the alphabet has them)."""
    while True:
        s = "".join(_RNG.choice(alphabet) for _ in range(n))
        cased = any(c.islower() for c in alphabet) and any(c.isupper() for c in alphabet)
        if any(c.isdigit() for c in s) and (not cased or (s.lower() != s and s.upper() != s)):
            return s


def p(*parts: str) -> str:
    """Join parts (prefixes are kept apart in the source on purpose)."""
    return "".join(parts)


class Case(NamedTuple):
    id: str
    text: str
    want: str
    secret: str  # must not survive, in whole or as any 8-character window


# (name, token, the prefix kept in the output)
TOKENS: list[tuple[str, str, str]] = [
    # AI providers
    ("openai-short", p("sk", "-", rnd(12)), "sk-"),
    ("anthropic-oauth", p("sk-", "ant-oat01-", rnd(90, TOK)), "sk-ant-oat01-"),
    ("openrouter", p("sk-", "or-v1-", rnd(64, HEX)), "sk-or-v1-"),
    ("elevenlabs", p("s", "k_", rnd(48, HEX)), "sk_"),
    ("groq", p("gs", "k_", rnd(52)), "gsk_"),
    ("replicate", p("r", "8_", rnd(37)), "r8_"),
    ("perplexity-short", p("pp", "lx-", rnd(22)), "pplx-"),
    ("fireworks-underscore", p("f", "w_", rnd(40)), "fw_"),
    ("fireworks-dash", p("f", "w-", rnd(40)), "fw-"),
    ("fireworks-project", p("fp", "k_", rnd(40)), "fpk_"),
    ("fal", p("fa", "l_", rnd(32, TOK)), "fal_"),
    ("tavily", p("tv", "ly-", rnd(32)), "tvly-"),
    ("tavily-dev", p("tv", "ly-", "dev-", rnd(32)), "tvly-dev-"),
    ("exa", p("ex", "a_", rnd(32)), "exa_"),
    ("agentmail", p("a", "m_", rnd(32, HEX)), "am_"),
    ("agentmail-org", p("a", "m_", "org_", rnd(24)), "am_org_"),
    ("firecrawl", p("f", "c-", rnd(32, HEX)), "fc-"),
    ("xai", p("xa", "i-", rnd(32)), "xai-"),
    ("nvidia", p("nv", "api-", rnd(64, TOK)), "nvapi-"),
    ("huggingface-org", p("api", "_org_", rnd(34, string.ascii_letters + "7")), "api_org_"),
    ("langsmith-sk", p("lsv2", "_sk_", rnd(32, HEX), "_", rnd(10, HEX)), "lsv2_sk_"),
    ("browserbase", p("bb", "_live_", rnd(27, TOK)), "bb_live_"),
    ("matrix", p("sy", "t_", rnd(30)), "syt_"),
    ("pinecone", p("pc", "sk_", rnd(6), "_", rnd(60)), "pcsk_"),
    # code hosting, registries, CI
    *[(f"gitlab-{k}", p("gl", f"{k}-", rnd(20, TOK)), f"gl{k}-")
      for k in ("pat", "dt", "rt", "rtr", "ptt", "cbt", "imt", "ft", "soat", "oas", "agent", "wt",
                "ffct")],
    ("gitlab-feed-16", p("gl", "ft-", rnd(16)), "glft-"),
    ("gitlab-routable", p("gl", "pat-", rnd(30, TOK), ".01.", rnd(9, LOWD)), "glpat-"),
    ("gitlab-runner-routable", p("gl", "rt-", "t2_", rnd(27, TOK), ".0", "1", rnd(7, LOWD)),
     "glrt-"),
    ("gitlab-legacy-runner", p("GR13", "48941", rnd(20, TOK)), "GR1348941"),
    ("rubygems", p("ruby", "gems_", rnd(48, HEX)), "rubygems_"),
    ("bitbucket", p("AT", "BB", rnd(32)), "ATBB"),
    ("circleci", p("CCI", "PAT_", rnd(22), "_", rnd(40, HEX)), "CCIPAT_"),
    ("contentful", p("CF", "PAT-", rnd(43, TOK)), "CFPAT-"),
    ("clojars", p("CLO", "JARS_", rnd(60)), "CLOJARS_"),
    ("nuget", p("o", "y2", rnd(43, LOWD)), "oy2"),
    ("artifactory-reference", p("cmV", "md", rnd(59)), "cmVmd"),
    ("sourcegraph", p("sg", "p_", rnd(16, HEX), "_", rnd(40, HEX)), "sgp_"),
    ("sourcegraph-local", p("sg", "p_", "local_", rnd(40, HEX)), "sgp_"),
    ("readme", p("rd", "me_", rnd(70, LOWD)), "rdme_"),
    ("prefect", p("pn", "u_", rnd(36)), "pnu_"),
    ("octopus", p("AP", "I-", rnd(26, UPD)), "API-"),
    ("harness-pat", p("pa", "t.", rnd(22, TOK), ".", rnd(24), ".", rnd(20)), "pat."),
    ("harness-sat", p("sa", "t.", rnd(22, TOK), ".", rnd(24), ".", rnd(20)), "sat."),
    ("airtable", p("pa", "t", rnd(14), ".", rnd(64, HEX)), "pat"),
    ("terraform", p("atlas", "v1.", rnd(64, TOK)), "atlasv1."),
    ("infracost", p("ic", "o-", rnd(32)), "ico-"),
    ("scalingo", p("tk", "-us-", rnd(48, TOK)), "tk-us-"),
    ("openshift", p("sha", "256~", rnd(43, TOK)), "sha256~"),
    ("defined-networking", p("dn", "key-", rnd(26, LOWD), "-", rnd(52, LOWD)), "dnkey-"),
    ("flyio", p("fo", "1_", rnd(43, TOK)), "fo1_"),
    ("flyio-macaroon", p("fm", "2_", rnd(120, B64), "=="), "fm2_"),
    ("intra42", p("s-s4t2", "ud-", rnd(64, HEX)), "s-s4t2ud-"),
    ("clickhouse", p("4b", "1d", rnd(38)), "4b1d"),
    ("vault-batch", p("hv", "b.", rnd(140, TOK)), "hvb."),
    ("doppler-service", p("dp.", "st.", rnd(44)), "dp.st."),
    # SaaS
    ("stripe-prod", p("rk", "_prod_", rnd(24)), "rk_prod_"),
    ("sendinblue", p("xkey", "sib-", rnd(64, HEX), "-", rnd(16)), "xkeysib-"),
    ("twilio-key-and-secret", p("S", "K", rnd(32, HEX), ":", rnd(32)), "SK"),
    ("twilio-account-and-token", p("A", "C", rnd(32, HEX), ":", rnd(32, HEX)), "AC"),
    ("facebook", p("EA", "AM", rnd(110)), "EAAM"),
    ("easypost", p("EZ", "AK", rnd(54)), "EZAK"),
    ("shippo", p("shippo", "_test_", rnd(40, HEX)), "shippo_test_"),
    ("duffel", p("duffel", "_live_", rnd(43, TOK)), "duffel_live_"),
    ("notion-short", p("nt", "n_", rnd(24)), "ntn_"),
    ("frameio", p("fio", "-u-", rnd(64, TOK)), "fio-u-"),
    ("typeform", p("tf", "p_", rnd(59, TOK)), "tfp_"),
    ("adobe", p("p8", "e-", rnd(32)), "p8e-"),
    ("settlemint", p("sm", "_aat_", rnd(16)), "sm_aat_"),
    ("1password-service", p("ops", "_eyJ", rnd(260, B64)), "ops_eyJ"),
    ("1password-secret-key", p("A", "3-", rnd(6, UPD), "-", rnd(11, UPD), "-", rnd(5, UPD), "-",
                               rnd(5, UPD), "-", rnd(5, UPD)), "A3-"),
    ("newrelic-insert", p("NR", "II-", rnd(32, LOWD)), "NRII-"),
    ("sentry-user", p("sntr", "yu_", rnd(64, HEX)), "sntryu_"),
    ("grafana-service-account", p("gl", "sa_", rnd(32), "_", rnd(8, HEX)), "glsa_"),
    # cloud
    ("aws-a3t", p("A3", "TX", rnd(16, UPD)), "A3TX"),
    ("aws-bedrock", p("AB", "SK", rnd(132, B64)), "ABSK"),
    ("aws-bedrock-slash", p("AB", "SK", "/+", rnd(130, B64)), "ABSK"),
    ("google-api-short", p("AI", "za", rnd(32, TOK)), "AIza"),
    ("alibaba", p("LT", "AI", rnd(20)), "LTAI"),
    ("tencent", p("AK", "ID", rnd(32)), "AKID"),
    ("digitalocean-refresh", p("do", "r_v1_", rnd(64, HEX)), "dor_v1_"),
    ("yandex", p("AQ", "VN", rnd(37, TOK)), "AQVN"),
    ("cloudflare-origin-ca", p("v1", ".0-", rnd(24, HEX), "-", rnd(146, HEX)), "v1.0-"),
    ("google-oauth-secret", p("GOC", "SPX-", rnd(28, TOK)), "GOCSPX-"),
    # private keys
    ("age-mixed-case", p("AGE-", "SECRET-KEY-", "1", rnd(58, "qpzry9x8gf2tvdw0s3jn54khce6mua7l")),
     "AGE-SECRET-KEY-"),
    ("age-plugin", p("AGE-", "PLUGIN-", "YUBIKEY-1", rnd(48, UPD)), "AGE-PLUGIN-"),
]

#: Contexts every token above is tried in: (frame, expected frame).
FRAMES: list[tuple[str, str]] = [
    ("error: key {} rejected\n", "error: key {} rejected\n"),
    ('{{"id": 7, "k": "{}"}}', '{{"id": 7, "k": "{}"}}'),
    ("X={}; echo ok", "X={}; echo ok"),
]

VENDOR_POSITIVES: list[Case] = [
    Case(f"{name}-{i}", frame.format(token), want.format(keep + M), token[len(keep):])
    for name, token, keep in TOKENS
    for i, (frame, want) in enumerate(FRAMES)
]
