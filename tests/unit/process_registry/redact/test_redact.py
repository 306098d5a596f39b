"""Recognition tests for process_registry.redact: what is redacted, what is not.

Fake secrets are built at run time from a seeded generator and from split
prefixes, so this file holds no literal credential for a secret scanner to trip on.
"""

from __future__ import annotations

import random
import string

import pytest

from process_registry.redact import redact_bytes, redact_mapping, redact_text
from process_registry.redact.keys import key_names_secret

_RNG = random.Random(20240521)
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
UPPER_DIGITS = string.ascii_uppercase + string.digits
TOKEN = ALNUM + "_-"


def rnd(n: int, alphabet: str = ALNUM) -> str:
    """Random string that surely holds a digit and both cases (looks like a key)."""
    while True:
        s = "".join(_RNG.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in s) and (
            alphabet in (HEX, UPPER_DIGITS, string.digits)
            or (any(c.islower() for c in s) and any(c.isupper() for c in s))
        ):
            return s


def p(*parts: str) -> str:
    """Join prefix parts (kept apart in the source on purpose)."""
    return "".join(parts)


# (name, text of the secret, prefix kept in the output)
VENDOR_CASES: list[tuple[str, str, str]] = [
    ("openai-legacy", p("sk", "-", rnd(48)), "sk-"),
    ("openai-project", p("sk-", "proj-", rnd(120, TOKEN)), "sk-proj-"),
    ("openai-svcacct", p("sk-", "svcacct-", rnd(80, TOKEN)), "sk-svcacct-"),
    ("anthropic", p("sk-", "ant-api03-", rnd(93, TOKEN), "AA"), "sk-ant-api03-"),
    ("anthropic-admin", p("sk-", "ant-admin01-", rnd(93, TOKEN), "AA"), "sk-ant-admin01-"),
    ("openrouter", p("sk-", "or-v1-", rnd(64, HEX)), "sk-or-v1-"),
    ("github-pat", p("gh", "p_", rnd(36)), "ghp_"),
    ("github-oauth", p("gh", "o_", rnd(36)), "gho_"),
    ("github-user", p("gh", "u_", rnd(36)), "ghu_"),
    ("github-server", p("gh", "s_", rnd(36)), "ghs_"),
    ("github-refresh", p("gh", "r_", rnd(76)), "ghr_"),
    ("github-fine", p("github", "_pat_", rnd(22), "_", rnd(59)), "github_pat_"),
    ("gitlab-pat", p("gl", "pat-", rnd(20, TOKEN)), "glpat-"),
    ("gitlab-deploy", p("gl", "dt-", rnd(20, TOKEN)), "gldt-"),
    ("gitlab-runner", p("gl", "rt-", rnd(26, TOKEN)), "glrt-"),
    ("gitlab-trigger", p("gl", "ptt-", rnd(40, HEX)), "glptt-"),
    ("gitlab-job", p("gl", "cbt-", rnd(30, TOKEN)), "glcbt-"),
    ("gitlab-oauth", p("gl", "oas-", rnd(64, TOKEN)), "gloas-"),
    ("slack-bot", p("xo", "xb-", rnd(12, string.digits), "-", rnd(13, string.digits), "-",
                    rnd(24)), "xoxb-"),
    ("slack-user", p("xo", "xp-", rnd(12, string.digits), "-", rnd(32)), "xoxp-"),
    ("slack-app", p("xa", "pp-1-", rnd(11, UPPER_DIGITS), "-", rnd(13, string.digits), "-",
                    rnd(64, HEX)), "xapp-"),
    ("aws-key-id", p("AK", "IA", rnd(16, UPPER_DIGITS)), "AKIA"),
    ("aws-session-id", p("AS", "IA", rnd(16, UPPER_DIGITS)), "ASIA"),
    ("google-api", p("AI", "za", rnd(35, TOKEN)), "AIza"),
    ("google-oauth-secret", p("GOC", "SPX-", rnd(28, TOKEN)), "GOCSPX-"),
    ("google-access", p("ya", "29.", rnd(120, TOKEN)), "ya29."),
    ("stripe-live", p("sk", "_live_", rnd(24)), "sk_live_"),
    ("stripe-test", p("sk", "_test_", rnd(99)), "sk_test_"),
    ("stripe-restricted", p("rk", "_live_", rnd(24)), "rk_live_"),
    ("stripe-publishable", p("pk", "_live_", rnd(24)), "pk_live_"),
    ("stripe-webhook", p("wh", "sec_", rnd(32)), "whsec_"),
    ("huggingface", p("hf", "_", rnd(34, string.ascii_letters + "0")), "hf_"),
    ("npm", p("np", "m_", rnd(36)), "npm_"),
    ("pypi", p("py", "pi-", "AgEIcHlwaS5vcmc", rnd(80, TOKEN)), "pypi-"),
    ("sendgrid", p("S", "G.", rnd(22, TOKEN), ".", rnd(43, TOKEN)), "SG."),
    ("digitalocean", p("do", "p_v1_", rnd(64, HEX)), "dop_v1_"),
    ("digitalocean-oauth", p("do", "o_v1_", rnd(64, HEX)), "doo_v1_"),
    ("twilio-key", p("S", "K", rnd(32, HEX)), "SK"),
    ("twilio-account", p("A", "C", rnd(32, HEX)), "AC"),
    ("groq", p("gs", "k_", rnd(52)), "gsk_"),
    ("replicate", p("r", "8_", rnd(37)), "r8_"),
    ("perplexity", p("pp", "lx-", rnd(48)), "pplx-"),
    ("fireworks", p("f", "w_", rnd(24)), "fw_"),
    ("xai", p("xa", "i-", rnd(80)), "xai-"),
    ("langsmith", p("lsv2", "_pt_", rnd(32, HEX), "_", rnd(10, HEX)), "lsv2_pt_"),
    ("databricks", p("da", "pi", rnd(32, HEX)), "dapi"),
    ("shopify", p("sh", "pat_", rnd(32, HEX)), "shpat_"),
    ("square-oauth", p("sq0", "csp-", rnd(43, TOKEN)), "sq0csp-"),
    ("square-access", p("EA", "AA", rnd(60, TOKEN)), "EAAA"),
    ("mailgun", p("ke", "y-", rnd(32, HEX)), "key-"),
    ("atlassian", p("ATA", "TT3", rnd(180, TOKEN)), "ATATT3"),
    ("heroku", p("HR", "KU-", rnd(60, TOKEN)), "HRKU-"),
    ("linear", p("lin", "_api_", rnd(40)), "lin_api_"),
    ("notion", p("nt", "n_", rnd(46)), "ntn_"),
    ("notion-legacy", p("sec", "ret_", rnd(43)), "secret_"),
    ("doppler", p("dp.", "pt.", rnd(43)), "dp.pt."),
    ("supabase", p("sb", "p_", rnd(40, HEX)), "sbp_"),
    ("postman", p("PM", "AK-", rnd(24, HEX), "-", rnd(34, HEX)), "PMAK-"),
    ("newrelic", p("NR", "AK-", rnd(27, UPPER_DIGITS)), "NRAK-"),
    ("sentry", p("sntr", "ys_", rnd(80)), "sntrys_"),
    ("grafana", p("gl", "c_", rnd(60)), "glc_"),
    ("tailscale", p("ts", "key-", "auth-", rnd(40)), "tskey-"),
    ("pulumi", p("pu", "l-", rnd(40, HEX)), "pul-"),
    ("vault", p("hv", "s.", rnd(90, TOKEN)), "hvs."),
    ("age", p("AGE-", "SECRET-KEY-", "1", rnd(58, UPPER_DIGITS)), "AGE-SECRET-KEY-"),
    ("figma", p("fi", "gd_", rnd(40, TOKEN)), "figd_"),
    ("dynatrace", p("dt0", "c01.", rnd(24, UPPER_DIGITS), ".", rnd(64, UPPER_DIGITS)), "dt0c01."),
    ("docker-hub", p("dckr", "_pat_", rnd(27, TOKEN)), "dckr_pat_"),
    ("jfrog", p("AK", "Cp", rnd(69)), "AKCp"),
    ("mapbox", p("s", "k.", "eyJ1Ijoi", rnd(40), ".", rnd(22)), "sk."),
    ("slack-webhook", p("hooks.", "slack.com/services/T", rnd(8, UPPER_DIGITS), "/B",
                        rnd(8, UPPER_DIGITS), "/", rnd(24)), "hooks.slack.com/services/"),
    ("discord-webhook", p("discord", ".com/api/webhooks/", rnd(18, string.digits), "/",
                          rnd(68, TOKEN)), "discord.com/api/webhooks/"),
]


@pytest.mark.parametrize(("secret", "keep"), [c[1:] for c in VENDOR_CASES],
                         ids=[c[0] for c in VENDOR_CASES])
def test_vendor_key_is_redacted_keeping_its_prefix(secret: str, keep: str) -> None:
    text = f"got {secret} from the vault\n"
    out = redact_text(text)
    if keep.startswith("discord"):  # the webhook id is part of the kept, non-secret path
        assert out.startswith("got " + keep) and out.endswith("/...[REDACTED] from the vault\n")
    else:
        assert out == f"got {keep}...[REDACTED] from the vault\n"
    body = secret[len(keep):]
    assert body[-12:] not in out
    assert redact_text(out) == out


@pytest.mark.parametrize(("secret", "keep"), [c[1:] for c in VENDOR_CASES[::3]],
                         ids=[c[0] for c in VENDOR_CASES[::3]])
@pytest.mark.parametrize("frame", ['"{}"', "'{}'", "({})", "x={}", "[{}]", "{}"])
def test_vendor_key_in_common_frames(secret: str, keep: str, frame: str) -> None:
    out = redact_text(frame.format(secret))
    assert secret[len(keep):][-16:] not in out
    assert "[REDACTED]" in out


S = rnd(24)  # a generic secret value
JWT = p("eyJ", "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9", ".", "eyJ", "zdWIiOiIxMjM0NTY3ODkwIn0", ".",
        rnd(43, TOKEN))
PEM_BODY = "\n".join(rnd(64, ALNUM + "+/") for _ in range(6)) + "\n" + rnd(20) + "=="

STRUCTURAL: list[tuple[str, str, str]] = [
    # key = value assignments and fields
    ("export", f"export DB_PASSWORD={S}", "export DB_PASSWORD=[REDACTED]"),
    ("env", f"GITHUB_TOKEN={S} make", "GITHUB_TOKEN=[REDACTED] make"),
    ("dotenv-quoted", f'API_KEY="{S}"', 'API_KEY="[REDACTED]"'),
    ("single-quoted", f"client_secret='{S} with space'", "client_secret='[REDACTED]'"),
    ("aws-secret", f"aws_secret_access_key = {S}/{S}", "aws_secret_access_key = [REDACTED]"),
    ("aws-json", f'"SecretAccessKey": "{S}",', '"SecretAccessKey": "[REDACTED]",'),
    ("json", f'{{"api_key": "{S}", "user": "bob"}}', '{"api_key": "[REDACTED]", "user": "bob"}'),
    ("json-spaced", f'{{"password" : "{S}"}}', '{"password" : "[REDACTED]"}'),
    ("yaml", f"  password: {S}\n  user: bob", "  password: [REDACTED]\n  user: bob"),
    ("yaml-weak", "POSTGRES_PASSWORD: postgres", "POSTGRES_PASSWORD: [REDACTED]"),
    ("camel", f"clientSecret={S}&x=1", "clientSecret=[REDACTED]&x=1"),
    ("camel-json", f'"accessToken":"{S}"', '"accessToken":"[REDACTED]"'),
    ("glued", f"PGPASSWORD={S} psql", "PGPASSWORD=[REDACTED] psql"),
    ("mysql-pwd", f"MYSQL_PWD={S}", "MYSQL_PWD=[REDACTED]"),
    ("rails", f"SECRET_KEY_BASE={S}", "SECRET_KEY_BASE=[REDACTED]"),
    ("php-arrow", f"'password' => '{S}',", "'password' => '[REDACTED]',"),
    ("go-walrus", f'password := "{S}"', 'password := "[REDACTED]"'),
    ("subscript", f'env["API_KEY"] = "{S}"', 'env["API_KEY"] = "[REDACTED]"'),
    ("escaped-json", f'\\"token\\": \\"{S}\\"', '\\"token\\": \\"[REDACTED]\\"'),
    ("query", f"GET /cb?code=1&access_token={S}&state=2",
     "GET /cb?code=1&access_token=[REDACTED]&state=2"),
    ("conn-string", f"Server=db;User Id=sa;Password={S};",
     "Server=db;User Id=sa;Password=[REDACTED];"),
    ("azure", f"AccountName=x;AccountKey={S}==;", "AccountName=x;AccountKey=[REDACTED];"),
    ("cli-space", f"mysql --password {S} --user bob", "mysql --password [REDACTED] --user bob"),
    ("cli-equals", f"gh auth --with-token={S}", "gh auth --with-token=[REDACTED]"),
    ("cli-quoted", f"tool --api-key '{S}' run", "tool --api-key '[REDACTED]' run"),
    ("xml", f"<password>{S}</password>", "<password>[REDACTED]</password>"),
    ("xml-ns", f"<ns:apiKey>{S}</ns:apiKey>", "<ns:apiKey>[REDACTED]</ns:apiKey>"),
    ("vendor-in-kv", p("OPENAI_API_KEY=sk-", "proj-", S), "OPENAI_API_KEY=sk-proj-...[REDACTED]"),
    # headers
    ("bearer-header", f"Authorization: Bearer {S}", "Authorization: Bearer [REDACTED]"),
    ("basic-header", f'curl -H "Authorization: Basic {S}==" https://x',
     'curl -H "Authorization: Basic [REDACTED]" https://x'),
    ("token-header", p("Authorization: token gh", "p_", rnd(36)),
     "Authorization: token ghp_...[REDACTED]"),
    ("header-lower", f"-H 'authorization: bearer {S}'", "-H 'authorization: bearer [REDACTED]'"),
    ("dict-repr", f"{{'Authorization': 'Bearer {S}'}}", "{'Authorization': 'Bearer [REDACTED]'}"),
    ("x-api-key", f"x-api-key: {S}", "x-api-key: [REDACTED]"),
    ("x-auth-token", f"X-Auth-Token: {S}\r\n", "X-Auth-Token: [REDACTED]\r\n"),
    ("private-token", f"PRIVATE-TOKEN: {S}", "PRIVATE-TOKEN: [REDACTED]"),
    ("cookie", f"Cookie: session={S}; theme=dark", "Cookie: [REDACTED]"),
    ("bearer-bare", f"using Bearer {S} now", "using Bearer [REDACTED] now"),
    # URLs
    ("postgres", f"postgres://app:{S}@db:5432/app", "postgres://app:[REDACTED]@db:5432/app"),
    ("mongodb-srv", f"mongodb+srv://u:{S}@c0.mongodb.net/x",
     "mongodb+srv://u:[REDACTED]@c0.mongodb.net/x"),
    ("redis-nouser", f"redis://:{S}@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"),
    ("git-https", f"git clone https://oauth2:{S}@gitlab.com/g/p.git",
     "git clone https://oauth2:[REDACTED]@gitlab.com/g/p.git"),
    ("token-as-user", f"https://{S}@github.com/o/r", "https://[REDACTED]@github.com/o/r"),
    ("url-vendor", p("https://x-access-token:gh", "s_", S, S[:12], "@github.com"),
     "https://x-access-token:ghs_...[REDACTED]@github.com"),
    # others
    ("jwt", f"id_token {JWT} end", "id_token eyJ...[REDACTED] end"),
    ("telegram", p("bot", "123456789:", rnd(35, TOKEN), "/getMe"), "bot123456789:[REDACTED]/getMe"),
    ("pem", f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\nok",
     "-----BEGIN RSA PRIVATE KEY-----\n[REDACTED]\n-----END RSA PRIVATE KEY-----\nok"),
    ("pem-openssh",
     f"-----BEGIN OPENSSH PRIVATE KEY-----\r\n{PEM_BODY}\r\n-----END OPENSSH PRIVATE KEY-----",
     "-----BEGIN OPENSSH PRIVATE KEY-----\r\n[REDACTED]\r\n-----END OPENSSH PRIVATE KEY-----"),
    ("pem-encrypted",
     f"-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"
     f"DEK-Info: AES-128-CBC,{rnd(32, HEX)}\n\n{PEM_BODY}\n-----END EC PRIVATE KEY-----",
     "-----BEGIN EC PRIVATE KEY-----\n[REDACTED]\n-----END EC PRIVATE KEY-----"),
    ("pem-pgp",
     f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{PEM_BODY}\n-----END PGP PRIVATE KEY BLOCK-----",
     "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n[REDACTED]\n-----END PGP PRIVATE KEY BLOCK-----"),
    ("pem-truncated", f"$ head -3 key.pem\n-----BEGIN PRIVATE KEY-----\n{PEM_BODY[:129]}",
     "$ head -3 key.pem\n-----BEGIN PRIVATE KEY-----\n[REDACTED]"),
    ("pem-in-json",
     '{"private_key": "-----BEGIN PRIVATE KEY-----\\n' + PEM_BODY.replace("\n", "\\n")
     + '\\n-----END PRIVATE KEY-----\\n"}',
     '{"private_key": "[REDACTED]"}'),
    ("pem-escaped-alone",
     "key=-----BEGIN PRIVATE KEY-----\\n" + PEM_BODY.replace("\n", "\\n")
     + "\\n-----END PRIVATE KEY-----\\n",
     "key=-----BEGIN PRIVATE KEY-----\\n[REDACTED]\\n-----END PRIVATE KEY-----\\n"),
]


@pytest.mark.parametrize(("text", "want"), [c[1:] for c in STRUCTURAL],
                         ids=[c[0] for c in STRUCTURAL])
def test_structural_secret(text: str, want: str) -> None:
    out = redact_text(text)
    assert out == want
    assert redact_text(out) == out


UNCHANGED: list[tuple[str, str]] = [
    ("prose", "The token is valid; rotate your password and keep the secret key safe."),
    ("prose-colon", "passwd: password updated successfully"),
    ("prose-colon-2", "the token: it expires in one hour"),
    ("setting", "PASSWORD_MIN_LENGTH=8 TOKEN_TTL=3600 token_type=bearer"),
    ("llm-usage", '{"prompt_tokens": 12, "completion_tokens": 34, "max_tokens": 4096}'),
    ("git-sha", "commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)"),
    ("uuid", "request_id=123e4567-e89b-12d3-a456-426614174000 ok"),
    ("digest", "Digest: sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ("paths", "cp ~/.aws/credentials /home/user/.ssh/id_rsa ./secrets/token.txt"),
    ("empty", "PASSWORD= TOKEN= API_KEY=\npassword: \n"),
    ("empty-quoted", 'password: "" token=\'\''),
    ("var-ref", "TOKEN=$GITHUB_TOKEN PASSWORD=${DB_PASSWORD} KEY=\"$API_KEY\""),
    ("actions-ref", "token: ${{ secrets.GITHUB_TOKEN }}"),
    ("template", 'password: "{{ vault_db_password }}"'),
    ("placeholder", "OPENAI_API_KEY=<your-api-key> API_TOKEN=%API_TOKEN%"),
    ("pwd", "PWD=/home/user OLDPWD=/tmp cd -"),
    ("booleans", '{"auth": true, "password": null, "secret": false}'),
    ("masked", "password: ******** token=****"),
    ("kebab", "pip install sk-learn-style-transfer ask-questions-first task-runner-config"),
    ("task", "task-0123456789abcdefghijklmnop done"),
    ("certificate", "-----BEGIN CERTIFICATE-----\nMIIB" + "A" * 60 + "\n-----END CERTIFICATE-----"),
    ("public-key", "-----BEGIN PUBLIC KEY-----\nMIIB" + "A" * 60 + "\n-----END PUBLIC KEY-----"),
    ("ssh-pub", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGk1 user@host"),
    ("url-user-only", "git@github.com:o/r.git https://user@example.com/x?y=1"),
    ("url-plain", "https://example.com:8443/path?q=1#frag"),
    ("timestamps", "12:34:56.789 2023-11-27T12:00:00Z Step 1/20 : RUN make"),
    ("yaml-generic", "key: value\nname: app\nkind: Secret\nsecretName: tls-cert"),
    ("sort-key", "sort_key=name public_key=ssh-rsa primary_key=id key=value"),
    ("key-id", "AWS_ACCESS_KEY_ID_FILE=/run/x access_key_id_name=default"),
    ("bearer-prose", "Use a Bearer token in the Authorization header."),
    ("cli-flags", "python -m pip install --upgrade pip --no-cache-dir --password-file /run/pw"),
    ("cli-next-flag", "tool --token --verbose"),
    ("code-call", 'password = getpass() api_key = os.environ["API_KEY"]'),
    ("scope", "auth::Token t; secret::Key k;"),
    ("wwwauth", 'WWW-Authenticate: Basic realm="x"'),
    ("hex-short", "id=abcdef0123 SKIPPED [ 63%] ACCEPTED"),
    ("npm-config", "npm_config_cache=/tmp/npm hf_hub_download key-value store"),
    ("redacted", "sk-...[REDACTED] password=[REDACTED] Authorization: Bearer [REDACTED]"),
    ("jwt-like", "eyJhbGciOiJIUzI1NiJ9 is only a header"),
    ("telegram-like", "12345:ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 1234567890123:x"),
]


@pytest.mark.parametrize("text", [c[1] for c in UNCHANGED], ids=[c[0] for c in UNCHANGED])
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("password", True), ("DB_PASSWORD", True), ("dbPassword", True), ("PGPASSWORD", True),
        ("GITHUB_TOKEN", True), ("access_token", True), ("x-api-key", True), ("apiKey", True),
        ("APIKEY", True), ("aws_secret_access_key", True), ("SecretAccessKey", True),
        ("client_secret", True), ("private_key", True), ("Authorization", True),
        ("auth", True), ("credentials", True), ("MYSQL_PWD", True), ("token2", True),
        ("SECRET_KEY_BASE", True), ("set-cookie", True), ("csrftoken", True),
        ("PASSWORD_MIN_LENGTH", False), ("token_type", False), ("max_tokens", False),
        ("sort_key", False), ("key", False), ("PWD", False), ("OLDPWD", False),
        ("bypass", False), ("oauth", False), ("access_key_id", False), ("public_key", False),
        ("tokenizer", False), ("secretName", False), ("database", False), ("", False),
    ],
)
def test_key_names_secret(key: str, secret: bool) -> None:
    assert key_names_secret(key) is secret


def test_rest_of_text_is_byte_identical() -> None:
    left = "héllo wörld ✓ \x00\x1b[31mred\x1b[0m\t"
    text = f"{left}GITHUB_TOKEN={S} {left}"
    assert redact_text(text) == f"{left}GITHUB_TOKEN=[REDACTED] {left}"


def test_many_secrets_in_one_text_and_none_survives() -> None:
    secrets = [c[1] for c in VENDOR_CASES] + [S, JWT]
    text = "\n".join(f"line {i}: value {s} tail" for i, s in enumerate(secrets[:-2]))
    text += f"\npassword={S}\ntoken {JWT}\n"
    out = redact_text(text)
    for c in VENDOR_CASES:
        assert c[1][len(c[2]):][-10:] not in out, c[0]
    assert S not in out and JWT[-20:] not in out
    assert out.count("line ") == len(VENDOR_CASES)
    assert redact_text(out) == out


def test_idempotent_on_all_samples() -> None:
    samples = [c[1] for c in STRUCTURAL] + [c[1] for c in UNCHANGED]
    for text in samples + [c[1] for c in VENDOR_CASES]:
        once = redact_text(text)
        assert redact_text(once) == once


def test_empty_and_tiny_inputs() -> None:
    for text in ["", "a", "=", ":", "-", "sk-", "eyJ", "-----BEGIN", "Bearer", "://@"]:
        assert redact_text(text) == text


def test_redact_bytes_round_trips_invalid_utf8() -> None:
    raw = b"\xff\xfe binary \x80\x81 " + f"TOKEN={S}".encode() + b" \xc3\x28 end"
    assert redact_bytes(raw) == b"\xff\xfe binary \x80\x81 TOKEN=[REDACTED] \xc3\x28 end"
    assert redact_bytes(b"\x00\x01plain") == b"\x00\x01plain"


def test_redact_mapping_walks_json_like_values() -> None:
    doc = {
        "env": {"GITHUB_TOKEN": S, "HOME": "/root", "TOKEN_REF": "$OTHER"},
        "headers": [{"Authorization": f"Bearer {S}"}, {"Accept": "application/json"}],
        "password": 123456,
        "auth": {"user": "bob", "enabled": True, "token": None},
        "command": f"curl -u x https://u:{S}@h",
        "tags": ("a", f"api_key={S}"),
        "count": 3,
        p("sk-proj-", S): "key as key",
    }
    before = repr(doc)
    out = redact_mapping(doc)
    assert repr(doc) == before  # input untouched
    assert out["env"] == {"GITHUB_TOKEN": "[REDACTED]", "HOME": "/root", "TOKEN_REF": "$OTHER"}
    assert out["headers"] == [{"Authorization": "[REDACTED]"}, {"Accept": "application/json"}]
    assert out["password"] == "[REDACTED]"
    assert out["auth"] == {"user": "[REDACTED]", "enabled": True, "token": None}
    assert out["command"] == "curl -u x https://u:[REDACTED]@h"
    assert out["tags"] == ("a", "api_key=[REDACTED]")
    assert out["count"] == 3
    assert "sk-proj-...[REDACTED]" in out
    assert S not in repr(out)


def test_redact_mapping_keeps_vendor_prefix_and_scalars() -> None:
    assert redact_mapping({"token": p("gh", "p_", rnd(36))}) == {"token": "ghp_...[REDACTED]"}
    assert redact_mapping([1, "x", None, 2.5]) == [1, "x", None, 2.5]
    assert redact_mapping("plain") == "plain"
    assert redact_mapping({"secret": b"raw"}) == {"secret": b"[REDACTED]"}
