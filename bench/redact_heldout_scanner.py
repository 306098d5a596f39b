"""Held-out cases in the rule shapes public secret scanners publish (gitleaks,
detect-secrets, trufflehog): prefix, body alphabet and length, one case each, plus
the formats issue 14 names."""

from __future__ import annotations

import string

from bench.redact_heldout_shapes import ALNUM, DIG, HEX, LOW, RNG, TOK, UP, Case, N, P, b64, j, r


def _s(id: str, secret: str, keep: str, frame: str = "found {} in config") -> Case:
    """A scanner rule shape: ``keep`` (the literal prefix) then the secret body."""
    return P(id, frame.format(keep + secret), secret, source="scanner")


_gcp_json = (
    '{\n  "type": "service_account",\n  "project_id": "demo-proj",\n'
    f'  "private_key_id": "{r(40, HEX)}",\n'
    '  "private_key": "-----BEGIN PRIVATE KEY-----\\n' + r(64, ALNUM + "+/") + "\\n"
    + r(64, ALNUM + "+/") + '\\n-----END PRIVATE KEY-----\\n",\n'
    '  "client_email": "svc@demo-proj.iam.gserviceaccount.com"\n}'
)
_gcp_kid = _gcp_json.split('"private_key_id": "')[1][:40]
_gcp_pk = _gcp_json.split("\\n")[1]
_az_key = r(86, ALNUM + "+/") + "=="
_sb_key = r(43, ALNUM + "+/") + "="
_kube = b64("-----BEGIN RSA PRIVATE KEY-----\n" + r(40) + "\n-----END RSA PRIVATE KEY-----\n")
_kube_tok = r(40, ALNUM + "._-")
_shadow = j("$6$", r(16, ALNUM + "./"), "$", r(86, ALNUM + "./"))
_htp = j("$apr1$", r(8, ALNUM + "./"), "$", r(22, ALNUM + "./"))
_bcrypt = j("$2y$10$", r(53, ALNUM + "./"))
_words = ["abandon", "ability", "able", "about", "above", "absent", "absorb", "abstract",
          "absurd", "abuse", "access", "accident"]
_mnem = " ".join(RNG.choice(_words) for _ in range(12))
_disc = j("M", r(23, TOK), ".", r(6, TOK), ".", r(27, TOK))
_tw_sk, _tw_sec = j("SK", r(32, HEX)), r(32, ALNUM)
_tw_ac, _tw_tok = j("AC", r(32, HEX)), r(32, HEX)
_sbx1 = r(43, TOK)
_sbx2 = j("k7.", r(10, DIG), ".", r(43, TOK))
_sbxa = r(48, TOK)
_pw = j("S3cr", r(8, ALNUM))
_tf = r(64, TOK)

SCANNER: list[Case] = [
    _s("1password-service", r(260, ALNUM + "+/"), "ops_eyJ"),
    _s("adobe-client-secret", r(32, LOW), "p8e-"),
    _s("alibaba-access-key", r(20, LOW), "LTAI"),
    _s("anthropic-api", j(r(93, TOK), "AA"), "sk-ant-api03-"),
    _s("artifactory-reference", r(59, ALNUM), "cmVmd"),
    _s("aws-a3t", r(16, UP), "A3TX"),
    _s("aws-bedrock", r(120, ALNUM + "+/"), "ABSK"),
    _s("azure-ad-client-secret", j("8Q~", r(34, ALNUM + "_~.-")), r(3, ALNUM)),
    _s("clickhouse", r(38, ALNUM), "4b1d"),
    _s("clojars", r(60, LOW), "CLOJARS_"),
    _s("cloudflare-origin-ca", j(r(24, HEX), "-", r(146, HEX)), "v1.0-"),
    _s("defined-networking", j(r(26, LOW), "-", r(52, LOW)), "dnkey-"),
    _s("digitalocean-refresh", r(64, HEX), "dor_v1_"),
    _s("duffel", r(43, TOK), "duffel_test_"),
    _s("easypost", r(54, ALNUM), "EZAK"),
    _s("facebook-page", r(110, ALNUM), "EAAM"),
    _s("flyio", r(43, TOK), "fo1_"),
    _s("frameio", r(64, TOK), "fio-u-"),
    _s("grafana-service-account", j(r(32, ALNUM), "_", r(8, HEX)), "glsa_"),
    _s("harness", j(r(22, TOK), ".", r(24, ALNUM), ".", r(20, ALNUM)), "pat."),
    P("hashicorp-tf", f"found {r(14, LOW)}.atlasv1.{_tf} in config", _tf, source="scanner",
      note="the 14 characters before .atlasv1. are the token's id"),
    _s("heroku-v2", r(58, TOK), "HRKU-AA"),
    _s("huggingface-org", r(34, string.ascii_letters), "api_org_"),
    _s("infracost", r(32, ALNUM), "ico-"),
    _s("intra42", r(64, HEX), "s-s4t2ud-"),
    _s("maxmind", j(r(6, ALNUM), "_", r(29, ALNUM), "_mmk"), ""),
    _s("octopus-deploy", r(26, UP), "API-"),
    _s("openai-marked", j(r(20, ALNUM), "T3BlbkFJ", r(20, ALNUM)), "sk-"),
    _s("openshift", r(43, TOK), "sha256~"),
    _s("prefect", r(36, ALNUM), "pnu_"),
    _s("readme", r(70, LOW), "rdme_"),
    _s("rubygems", r(48, HEX), "rubygems_"),
    _s("scalingo", r(48, TOK), "tk-us-"),
    _s("sendinblue", j(r(64, HEX), "-", r(16, ALNUM)), "xkeysib-"),
    _s("sentry-user", r(64, HEX), "sntryu_"),
    _s("settlemint", r(16, ALNUM), "sm_pat_"),
    _s("shippo", r(40, HEX), "shippo_live_"),
    _s("slack-config", r(163, UP), "xoxe.xoxp-1-"),
    _s("slack-refresh", r(146, UP), "xoxe-1-"),
    _s("sourcegraph", j(r(16, HEX), "_", r(40, HEX)), "sgp_"),
    _s("square-sq0atp", r(22, TOK), "sq0atp-"),
    _s("stripe-prod", r(24, ALNUM), "rk_prod_"),
    _s("vault-batch", r(140, TOK), "hvb."),
    _s("vault-legacy", r(24, LOW), "s."),
    _s("airtable-pat", j(r(14, ALNUM), ".", r(64, HEX)), "pat"),
    _s("typeform", r(59, TOK), "tfp_"),
    _s("yandex-api", r(36, TOK), "AQVN"),
    *[P(f"discord-{k}", frame.format(_disc), _disc.split(".", 1)[1], source="scanner",
        note="the first segment is the bot's id, base64") for k, frame in (
        ("bot", "bot token {} leaked"), ("header", "Authorization: Bot {}"),
        ("log", "[INFO] logging in with token={}"))],
    _s("telegram-url", r(35, TOK), j(r(10, DIG), ":"),
       "curl https://api.telegram.org/bot{}/getMe"),
    _s("twilio-key-secret", _tw_sec, j(_tw_sk, ":"), "twilio --auth {}"),
    _s("twilio-curl", _tw_tok, j(_tw_ac, ":"), "curl -u {} https://api.twilio.com/x"),
    P("kube-client-key", f"users:\n- name: admin\n  user:\n    client-key-data: {_kube}\n",
      _kube, keep=("client-key-data:",), source="scanner"),
    P("kube-token", f"users:\n- name: ci\n  user:\n    token: {_kube_tok}\n", _kube_tok,
      keep=("token:",), source="scanner"),
    P("gcp-service-account", _gcp_json, _gcp_kid, _gcp_pk, keep=('"client_email"',),
      source="scanner"),
    P("azure-storage",
      f"DefaultEndpointsProtocol=https;AccountName=demo;AccountKey={_az_key};"
      "EndpointSuffix=core.windows.net", _az_key, keep=("EndpointSuffix=core.windows.net",),
      source="scanner"),
    P("azure-service-bus",
      "Endpoint=sb://demo.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
      f"SharedAccessKey={_sb_key}", _sb_key, keep=("SharedAccessKeyName=",), source="scanner"),
    P("mnemonic", f'MNEMONIC="{_mnem}"', _mnem, keep=("MNEMONIC=",), source="scanner"),
    P("seed-phrase", f"SEED_PHRASE={_mnem.replace(' ', ',')}", _mnem.replace(" ", ","),
      source="scanner"),
    P("shadow", f"root:{_shadow}:19700:0:99999:7:::", _shadow[20:], keep=("root:",),
      source="scanner"),
    P("htpasswd", f"admin:{_htp}", _htp[8:], keep=("admin:",), source="scanner"),
    P("htpasswd-bcrypt", f"deploy:{_bcrypt}", _bcrypt[8:], keep=("deploy:",), source="scanner"),
    P("sbx1", f"SBX_SESSION_TOKEN is sbx1.{_sbx1}", _sbx1, source="scanner"),
    P("sbx2", f"token sbx2.{_sbx2} accepted", _sbx2, source="scanner"),
    P("sbxa1", f"approver sbxa1.{_sbxa}", _sbxa, source="scanner"),
    P("docker-login", f"docker login -u ci -p {_pw} registry.example.com", _pw,
      keep=("registry.example.com",), source="scanner"),
    P("sshpass", f"sshpass -p {_pw} ssh deploy@host", _pw, keep=("ssh deploy@host",),
      source="scanner"),
    P("mysql-p", f"mysql -u root -p{_pw} app", _pw, keep=("-u root", " app"), source="scanner"),
    P("curl-u", f"curl -u admin:{_pw} https://example.com", _pw, keep=("https://example.com",),
      source="scanner"),
    P("netrc", f"machine api.example.com login bob password {_pw}", _pw,
      keep=("machine api.example.com",), source="scanner"),
    P("url-at-in-password", f"https://bob:{_pw}@x@example.com/repo.git", _pw,
      keep=("example.com/repo.git",), source="scanner"),
    P("nuget", f'<add key="ClearTextPassword" value="{_pw}" />', _pw, source="scanner"),
    P("curl-header-key", f"curl -H 'X-Api-Key: {_pw}' https://x", _pw, source="scanner"),
    N("git-log", f"commit {r(40, HEX)}\nAuthor: A <a@b.c>\n", source="scanner"),
    N("uuid", "request id 123e4567-e89b-12d3-a456-426614174000 done", source="scanner"),
    N("sha256sum", f"{r(64, HEX)}  dist/app.tar.gz", source="scanner"),
    N("placeholder-here", "OPENAI_API_KEY=your_api_key_here", source="scanner"),
    N("placeholder-stars", "password: ***", source="scanner"),
    N("placeholder-angle", "Authorization: Bearer <token>", source="scanner"),
    N("missing-key-file", "cat: /secret.key: No such file or directory", source="scanner"),
    N("prose-required", "error: the password field is required", source="scanner"),
    N("token-file-missing", "Error: token file ~/.config/gh/token not found", source="scanner"),
    N("base64-data", "data: SGVsbG8gd29ybGQsIHRoaXMgaXMgbm90IGEgc2VjcmV0Lg==", source="scanner"),
]
