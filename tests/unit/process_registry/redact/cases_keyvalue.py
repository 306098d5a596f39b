"""Key/value forms (env, JSON, YAML, TOML, INI, headers, cookies) and tokens split on purpose."""

from __future__ import annotations

from tests.unit.process_registry.redact.cases_positive import HEX, TOK, Case, M, R, p, rnd

V = rnd(20)
W = rnd(16)
GH = p("gh", "p_", rnd(36))
SBX = p("sbx", "1.", rnd(43, TOK))
AKIA = p("AK", "IA", rnd(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"))
SK = p("sk-", "proj-", rnd(48, TOK))
DO_HEAD, DO_TAIL = rnd(20, HEX), rnd(44, HEX)


def c(id: str, text: str, want: str, secret: str) -> Case:
    return Case(id, text, want, secret)


KEY_VALUE: list[Case] = [
    # names: lower, mixed, plural, any prefix before _KEY/_TOKEN/_SECRET/_PASSWORD/_PASS/_PWD/_PW
    c("env-lower", f"openai_key={V}", f"openai_key={R}", V),
    c("env-mixed", f"Db_Password={V} ./run", f"Db_Password={R} ./run", V),
    c("env-camel", f"stripeSecretKey={V}", f"stripeSecretKey={R}", V),
    c("env-suffix-key", f"FAL_KEY={V}", f"FAL_KEY={R}", V),
    c("env-suffix-key-2", f"export MISTRAL_KEY={V}", f"export MISTRAL_KEY={R}", V),
    c("env-suffix-token", f"HOMEASSISTANT_TOKEN={V}", f"HOMEASSISTANT_TOKEN={R}", V),
    c("env-suffix-secret", f"WEBHOOK_SIGNING_SECRET={V}", f"WEBHOOK_SIGNING_SECRET={R}", V),
    c("env-suffix-password", f"SMTP_PASSWORD={V}", f"SMTP_PASSWORD={R}", V),
    c("env-suffix-pass", f"MYSQL_PASS={W}", f"MYSQL_PASS={R}", W),
    c("env-suffix-pwd", f"REDIS_PWD={W}", f"REDIS_PWD={R}", W),
    c("env-suffix-pw", f"DB_PW={W}", f"DB_PW={R}", W),
    c("env-plural", f"API_KEYS={V},{W} next", f"API_KEYS={R} next", W),
    c("env-plural-secrets", f"secrets={V},{W}", f"secrets={R}", W),
    c("env-double-quoted", f'SLACK_TOKEN="{V}"', f'SLACK_TOKEN="{R}"', V),
    c("env-single-quoted", f"export API_SECRET='{V} {W}'", f"export API_SECRET='{R}'", W),
    c("env-comment", f"MISTRAL_API_KEY={V} # for tests", f"MISTRAL_API_KEY={R} # for tests", V),
    c("env-export-comment", f"export DB_PASSWORD={W}  # prod", f"export DB_PASSWORD={R}  # prod",
      W),
    c("env-quoted-comment", f'TOKEN="{V}" # rotate monthly', f'TOKEN="{R}" # rotate monthly', V),
    c("env-dump", f"HOME=/root\nGITHUB_TOKEN={GH}\nSHELL=/bin/bash\n",
      f"HOME=/root\nGITHUB_TOKEN=ghp_{M}\nSHELL=/bin/bash\n", GH[4:]),
    c("env-cat-n", f"     3\tNOUS_API_KEY={V}\n", f"     3\tNOUS_API_KEY={R}\n", V),
    c("docker-env-flag", f"docker run -e API_TOKEN={V} img", f"docker run -e API_TOKEN={R} img", V),
    # JSON
    c("json-field", f'{{"user": "bob", "password": "{W}", "ttl": 60}}',
      f'{{"user": "bob", "password": "{R}", "ttl": 60}}', W),
    c("json-camel", f'{{"clientSecret":"{V}"}}', f'{{"clientSecret":"{R}"}}', V),
    c("json-array", f'{{"api_keys": ["{V}", "{W}"], "n": 2}}',
      f'{{"api_keys": ["{R}", "{R}"], "n": 2}}', W),
    c("json-name-value", f'{{"name": "DB_PASSWORD", "value": "{W}"}}',
      f'{{"name": "DB_PASSWORD", "value": "{R}"}}', W),
    c("json-escaped", f'"{{\\"refresh_token\\": \\"{V}\\"}}"',
      f'"{{\\"refresh_token\\": \\"{R}\\"}}"', V),
    c("json-secret-value", f'{{"secret_value": "{V}"}}', f'{{"secret_value": "{R}"}}', V),
    c("json-key-material", f'{{"key_material": "{V}"}}', f'{{"key_material": "{R}"}}', V),
    # YAML
    c("yaml-nested", f"db:\n  host: pg\n  password: {W}\n  port: 5432",
      f"db:\n  host: pg\n  password: {R}\n  port: 5432", W),
    c("yaml-quoted", f"api_token: '{V}'", f"api_token: '{R}'", V),
    c("yaml-comment", f"secret: {V} # from vault", f"secret: {R} # from vault", V),
    c("yaml-k8s-env", f"- name: API_KEY\n  value: {V}\n- name: LOG_LEVEL\n  value: debug",
      f"- name: API_KEY\n  value: {R}\n- name: LOG_LEVEL\n  value: debug", V),
    c("yaml-k8s-secret", f"kind: Secret\ndata:\n  password: {V}==\n  username: YWRtaW4=",
      f"kind: Secret\ndata:\n  password: {R}\n  username: YWRtaW4=", V),
    c("yaml-tls-key", f"  tls.key: {V}", f"  tls.key: {R}", V),
    # TOML / INI / properties
    c("toml", f'[db]\npassword = "{W}"\nhost = "pg"', f'[db]\npassword = "{R}"\nhost = "pg"', W),
    c("toml-single", f"api_key = '{V}'", f"api_key = '{R}'", V),
    c("ini", f"[smtp]\nuser = bob\npass = {W}\n", f"[smtp]\nuser = bob\npass = {R}\n", W),
    c("properties", f"spring.datasource.password={W}\nserver.port=8080",
      f"spring.datasource.password={R}\nserver.port=8080", W),
    c("properties-colon", f"app.api.key: {V}", f"app.api.key: {R}", V),
    c("xml-element", f"<apiKey>{V}</apiKey>", f"<apiKey>{R}</apiKey>", V),
    c("nuget-config", f'<add key="ClearTextPassword" value="{W}" />',
      f'<add key="ClearTextPassword" value="{R}" />', W),
    # HTTP headers and cookies
    c("header-bearer", f"Authorization: Bearer {V}", f"Authorization: Bearer {R}", V),
    c("header-token-scheme", f"authorization: token {V}", f"authorization: token {R}", V),
    c("header-api-key", f"X-API-Key: {V}\r\nAccept: */*", f"X-API-Key: {R}\r\nAccept: */*", V),
    c("header-goog", f"-H 'x-goog-api-key: {V}'", f"-H 'x-goog-api-key: {R}'", V),
    c("header-apim", f"Ocp-Apim-Subscription-Key: {V}", f"Ocp-Apim-Subscription-Key: {R}", V),
    c("header-gitlab", f"PRIVATE-TOKEN: {V}", f"PRIVATE-TOKEN: {R}", V),
    c("header-vault", f"X-Vault-Token: {V}", f"X-Vault-Token: {R}", V),
    c("cookie-header", f"Cookie: sid={V}; lang=en", f"Cookie: {R}", V),
    c("set-cookie", f"Set-Cookie: session={V}; Path=/; HttpOnly; Secure",
      f"Set-Cookie: session={R}; Path=/; HttpOnly; Secure", V),
    c("cookie-pairs", f"theme=dark; csrftoken={W}", f"theme=dark; csrftoken={R}", W),
    c("header-in-dict", f"{{'X-Auth-Token': '{V}', 'Accept': 'json'}}",
      f"{{'X-Auth-Token': '{R}', 'Accept': 'json'}}", V),
    # vendor values keep their prefix
    c("vendor-in-env", f"AWS_ACCESS_KEY_ID={AKIA}", f"AWS_ACCESS_KEY_ID={AKIA[:4]}{M}", AKIA[4:]),
    c("vendor-in-json", f'{{"openai": "{SK}"}}', f'{{"openai": "sk-proj-{M}"}}', SK[8:]),
    c("vendor-in-url", f"https://x-access-token:{GH}@github.com/o/r",
      f"https://x-access-token:ghp_{M}@github.com/o/r", GH[4:]),
]

_SEPARATORS = [
    ("newline", "\n"), ("crlf", "\r\n"), ("ansi-reset", "\x1b[0m"), ("ansi-color", "\x1b[1;31m"),
    ("bare-esc", "\x1b"), ("zwsp", "\u200b"), ("zwnj", "\u200c"), ("zwj", "\u200d"),
    ("word-joiner", "\u2060"), ("bom", "\ufeff"), ("soft-hyphen", "\u00ad"), ("nul", "\x00"),
    ("ansi-then-newline", "\x1b[0m\n"), ("osc-title", "\x1b]0;t\x07"),
    # an invalid byte, as output decodes it ("replace") and as bytes round-trip it
    ("invalid-byte", "\ufffd"), ("invalid-bytes", "\ufffd\ufffd"), ("surrogate-escape", "\udcff"),
]


def _split(name: str, sep: str) -> Case:
    head, tail = GH[:10], GH[10:]
    breaks = "".join(ch for ch in sep if ch in "\r\n")
    return c(f"split-{name}", f"out: {head}{sep}{tail} end", f"out: ghp_{M}{breaks} end", tail)


SPLIT: list[Case] = [
    *[_split(name, sep) for name, sep in _SEPARATORS],
    c("split-right-after-prefix", f"{GH[:4]}\n{GH[4:]}\n", f"ghp_{M}\n\n", GH[4:]),
    c("split-twice-invisible", f"{GH[:8]}\u200b{GH[8:20]}\x1b[0m{GH[20:]}", f"ghp_{M}", GH[20:]),
    c("split-sbx", f"{SBX[:12]}\n{SBX[12:]} ok", f"sbx1{M}\n ok", SBX[12:]),
    c("split-sbx-zw", f"{SBX[:30]}\u200b{SBX[30:]}", f"sbx1{M}", SBX[30:]),
    c("split-fixed-length", f"{AKIA[:9]}\u200b{AKIA[9:]}", f"AKIA{M}", AKIA[9:]),
    c("split-complete-head", p("sk-", "a" * 15, "\x1b", "b" * 25, " x"), f"sk-{M} x", "b" * 25),
    c("split-complete-line-kept", f"Token: {GH}\nbutton [ref=e3]: Copy\n",
      f"Token: ghp_{M}\nbutton [ref=e3]: Copy\n", GH[4:]),
    c("split-complete-bare-line", f"{GH}\nnext {W}\n", f"ghp_{M}\nnext {W}\n", GH[4:]),
    c("split-hex-vendor", p("dop_v1_", DO_HEAD, "\u200b", DO_TAIL), f"dop_v1_{M}", DO_TAIL),
]

# A prefix glued to the run before it: by a joiner, or by an escaped separator.
GLUED: list[Case] = [
    c("glued-underscore", f"tool_{GH} done", f"tool_ghp_{M} done", GH[4:]),
    c("glued-env-name", f"OPENAI_API_KEY_{SK}", f"OPENAI_API_KEY_sk-proj-{M}", SK[8:]),
    c("glued-hyphen", f"my-{SK}\n", f"my-sk-proj-{M}\n", SK[8:]),
    c("glued-fixed-length", f"KEY_{AKIA}.", f"KEY_AKIA{M}.", AKIA[4:]),
    c("glued-json-newline", f'{{"log": "start\\n{GH}\\nend"}}',
      f'{{"log": "start\\nghp_{M}\\nend"}}', GH[4:]),
    c("glued-json-tab", f'"a\\t{GH}"', f'"a\\tghp_{M}"', GH[4:]),
    c("glued-json-unicode", f'"token\\u003d{GH}"', f'"token\\u003dghp_{M}"', GH[4:]),
    c("glued-url-encoded", f"POST body=token%3D{GH}%26x%3D1", f"POST body=token%3Dghp_{M}%26x%3D1",
      GH[4:]),
    c("glued-url-space", f"q=Bearer%20{GH}", f"q=Bearer%20ghp_{M}", GH[4:]),
    c("glued-after-long-name", f"{'x' * 60}_{GH}", f"{'x' * 60}_ghp_{M}", GH[4:]),
    # a body longer than its vendor's longest: redacted to the end of its run
    c("body-past-longest", f"ghp_{GH[4:] * 8}_glpat-{V} x", f"ghp_{M} x", GH[4:] * 8),
]
