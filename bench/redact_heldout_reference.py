"""Held-out cases in the shapes of the reference implementation's own redaction tests.

The same context words, vendor prefixes, body lengths and alphabets, with
bodies of our own.  Where the reference expects the opposite of what sbx is
specified to do (it lets ``user:pass@`` URLs and credential query parameters
through), the case follows sbx's specification and says so in ``note``.
"""

from __future__ import annotations

import string

from bench.redact_heldout_shapes import (
    ALNUM,
    DIG,
    HEX,
    LOW,
    TOK,
    UP,
    Case,
    N,
    P,
    b64,
    b64url,
    j,
    jwt,
    r,
)

_proj = r(24, LOW)
_or = r(36, LOW)
_gh21 = r(21, LOW)
_ghfine = r(24, LOW)
_aiza = j("SyB-", r(30, TOK))
_pplx = r(20, LOW)
_fal = r(20, LOW)
_ntn = r(20, LOW)
_short = j("short", r(7, DIG))
_q = j("quietvalue", r(9, DIG))
_jwtish = j("eyJ", r(33, TOK), ".", "opaquepart.tail")
_bear = r(25, LOW)
_basic = b64(j("admin:longpass", r(6, DIG)))
_opq = j("opaque-cred-", r(10, DIG))
_proxy = b64(j("user:supersecret", r(4, DIG)))
_skq = r(16, LOW)
_xk = j("opaque-provider-key-", r(10, DIG))
_xkc = j(r(10, ALNUM), "-", r(6, DIG))
_apik = r(26, ALNUM)
_tgid, _tgs = r(9, DIG), r(33, TOK)
_tgid2, _tgs2 = r(11, DIG), r(36, ALNUM)
_p1, _p2, _p3 = r(30, LOW), r(36, ALNUM), r(20, LOW)
_tg3 = r(35, TOK)
_sv = j("test-secret-", r(10, DIG))
_el = r(29, LOW)
_tv = r(25, ALNUM)
_ex = r(27, ALNUM)
_jwt3, _jwt3s = jwt('{"iss":"4f2b8c1d9e7a6053"}')
_jwt2 = j(b64url('{"alg":"HS256"}'), ".", b64url('{"sub":"8203"}'))
_hdr = b64url('{"alg":"RS256","typ":"JWT","kid":"k7"}')
_pad = j(b64url('{"alg":"HS256"}'), ".", b64url('{"sub":"77"}'), "=.", r(16, LOW))
_git = r(25, string.ascii_uppercase)
_sshu = j(r(9, string.ascii_lowercase), r(7, DIG))
_ftpu = j(r(8, string.ascii_lowercase), r(6, DIG))
_hu = j(r(6, string.ascii_lowercase), r(7, DIG))
_longu = j(r(6, string.ascii_lowercase), "x" * 20, r(4, string.ascii_lowercase))
_upw = r(13, string.ascii_lowercase)
_f1, _f2 = j("my", r(6, LOW)), j("opaque", r(5, ALNUM))
_cs, _apw = j("top", r(6, LOW)), j("alice", r(3, LOW))
_sp = j("Sup3r", r(6, ALNUM), "!")
_ak = j("ak_live_", r(6, DIG))
_lp = r(16, LOW)
_y1 = j("Hunt3r", r(5, ALNUM), "!")
_y2 = j("hunter", r(5, LOW))
_xai = r(56, ALNUM)
_bare_fw = "A" * 40
_gl = {
    "glpat-": r(20, ALNUM), "gloas-": "a" * 64, "gldt-": r(20, ALNUM),
    "glrt-": j("t1_", r(20, ALNUM)), "glcbt-": j("a1B2_", r(20, ALNUM)), "glptt-": "c" * 40,
    "glft-": r(16, ALNUM), "glimt-": r(25, ALNUM), "glagent-": "d" * 50,
    "glsoat-": r(20, ALNUM), "glffct-": r(20, ALNUM), "glwt-": r(20, ALNUM),
}
_glrt_dot = j("A" * 27, ".01.", "a" * 9)
_glrtr_dot = j("B" * 27, ".01.", "b" * 9)
_gr = "E" * 20
_am = [j("am_", r(32, HEX)), j("am_", "Ab9" * 8), j("am_org_", "Zq7k" * 6)]
_bech = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_age_safe = "K" * 29 + "k" * 29
_age_0l = "70" * 29
_age_bio = "b" * 10 + "i" * 10 + "o" * 10 + "K" * 28
_lenv = r(24, LOW)
_ghsplit = j("ghp_", r(38, ALNUM))
_ha = j(b64url('{"alg":"HS256"}'), ".abc123.xyz")
_mist, _nous = j("abc", r(3, DIG), "opaqueSecretValue"), j("xyz", r(3, DIG), "opaqueKey")
_cust = j("opaquecustomkey", r(6, DIG))
_ghr = j("ghp_", "S1", r(30, LOW), "Pn2T")
_frag = [j(w, r(6, DIG)) for w in ("FRAG", "REL", "ENC", "DOUBLE", "SEMI", "NET")]
_cdp1, _cdp2 = j("aaa-", r(8, LOW)), j("bbb-", r(8, LOW))
_web = [j("opaque_value_", r(8, DIG)), j("PRESIGNED", r(12, UP)), j("WsToken", r(6, DIG)),
        j("webhook", r(8, ALNUM))]

_CASES: list[Case] = [
    # vendor prefixes
    P("openai-proj", f"Using key sk-proj-{_proj}", _proj, keep=("Using key sk-pro",)),
    P("openrouter-env", f"OPENROUTER_API_KEY=sk-or-v1-{_or}", _or),
    P("github-classic-short", f"token: ghp_{_gh21}", _gh21),
    P("github-fine-short", f"github_pat_{_ghfine}", _ghfine),
    P("slack-degenerate", j("xo", "xb-", "0" * 12, "-", "a" * 14), "a" * 14),
    P("google-api", j("AI", "za", _aiza), _aiza),
    P("perplexity-short", j("pplx-", _pplx), _pplx),
    P("fal", j("fal_", _fal), _fal),
    P("notion-short", j("ntn_", _ntn), _ntn),
    P("sk-short-after-key", f"key=sk-{_short}", _short),
    P("export-openai", f"export OPENAI_API_KEY=sk-proj-{_proj}", _proj,
      keep=("OPENAI_API_KEY=",)),
    P("quoted-token", f'MY_SECRET_TOKEN="{_q}"', _q, keep=("MY_SECRET_TOKEN=",)),
    P("json-apikey", f'{{"apiKey": "sk-proj-{_proj}"}}', _proj),
    P("json-access-token", f'{{"access_token": "{_jwtish}"}}', _jwtish),
    P("bearer-header", f"Authorization: Bearer sk-proj-{_proj}", _proj,
      keep=("Authorization: Bearer",)),
    P("bearer-lower", f"authorization: bearer {_bear}", _bear),
    P("basic-header", f"Authorization: Basic {_basic}", _basic, keep=("Authorization: Basic",)),
    P("token-scheme", f"Authorization: token {_opq}", _opq, keep=("Authorization: token",)),
    P("proxy-auth", f"Proxy-Authorization: Basic {_proxy}", _proxy),
    P("bearer-in-quotes", f'curl -H "Authorization: Bearer sk-{_skq}"', _skq,
      keep=('curl -H "Authorization: Bearer ',)),
    P("x-api-key", f"x-api-key: {_xk}", _xk, keep=("x-api-key:",)),
    P("x-api-key-curl", f'curl -H "x-api-key: sk-local-{_xkc}" https://api.example.com', _xkc,
      keep=("https://api.example.com",)),
    P("api-key-header", f"api-key: {_apik}", _apik),
    P("telegram-bot", f"bot{_tgid}:{_tgs}", _tgs, keep=(f"{_tgid}:",)),
    P("telegram-raw", f"{_tgid2}:{_tgs2}", _tgs2),
    P("dict-repr", f"{{'token': 'sk-proj-{_proj}'}}", _proj),
    P("log-message", f"Key is sk-proj-{_proj}", _proj, keep=("Key is sk-pro",)),
    P("printenv",
      f"HOME=/home/user\nPATH=/usr/local/bin:/usr/bin\nOPENAI_API_KEY=sk-proj-{_p1}\n"
      f"OPENROUTER_API_KEY=sk-or-v1-{_p2}\nFIRECRAWL_API_KEY=fc-{_p3}\n"
      f"TELEGRAM_BOT_TOKEN=bot{_tgid}:{_tg3}\nSHELL=/bin/bash\nUSER=dev",
      _p1, _p2, _p3, _tg3, keep=("HOME=/home/user", "SHELL=/bin/bash", "USER=dev")),
    P("secret-value-json", f'{{"success": true, "secret_value": "sk-{_sv}"}}', _sv),
    P("raw-secret-json", f'{{"raw_secret": "ghp_{_gh21}"}}', _gh21),
    P("elevenlabs-env", f"ELEVENLABS_API_KEY=sk_{_el}", _el),
    P("elevenlabs-log", f"Connecting to ElevenLabs with key sk_{_el}", _el),
    P("tavily-env", f"TAVILY_API_KEY=tvly-{_tv}", _tv),
    P("tavily-log", f"Initialising Tavily client with tvly-{_tv}", _tv),
    P("exa-env", f"EXA_API_KEY=exa_{_ex}", _ex),
    P("exa-log", f"Using Exa client with key exa_{_ex}", _ex),
    P("three-keys-env",
      f"HOME=/home/user\nELEVENLABS_API_KEY=sk_{_el}\nTAVILY_API_KEY=tvly-{_tv}\n"
      f"EXA_API_KEY=exa_{_ex}\nSHELL=/bin/bash\n", _el, _tv, _ex,
      keep=("HOME=/home/user", "SHELL=/bin/bash")),
    # JWTs
    P("jwt-3part", f"Token: {_jwt3}", _jwt3s, keep=("Token:",)),
    P("jwt-2part", _jwt2, _jwt2.split(".")[1]),
    P("jwt-header-only", f"leaked header: {_hdr} here", _hdr, keep=("leaked header:",),
      note="a JWT header alone decodes to {alg, typ, kid}: sbx leaves it"),
    P("jwt-padding", _pad, _pad.split(".")[-1]),
    P("jwt-home-assistant", f"Home Assistant API Token: {_jwt3}", _jwt3s,
      keep=("Home Assistant API Token:",)),
    # URLs
    P("git-remote-bare", f"git remote set-url origin https://{_git}@github.com/someone/repo.git",
      _git, keep=("@github.com", "someone/repo.git")),
    P("ssh-bare", f"ssh://{_sshu}@gitlab.com/project.git", _sshu, keep=("@gitlab.com",)),
    P("ftp-bare", f"ftp://{_ftpu}@ftp.example.com/files", _ftpu),
    P("https-bare-query", f"https://{_hu}@host.com/path?foo=bar", _hu, keep=("?foo=bar",)),
    P("https-bare-long", f"https://{_longu}@github.com/u/r.git", _longu),
    P("https-userinfo", f"URL: https://user:{_upw}@host.example.com/path", _upw,
      note="the reference lets user:pass@ through; sbx's specification redacts it"),
    P("form-body", f"password={_f1}&username=bob&token={_f2}", _f1, _f2, keep=("username=bob",)),
    P("oauth-form",
      f"grant_type=password&client_id=app&client_secret={_cs}&username=alice&password={_apw}",
      _cs, _apw, keep=("client_id=app",)),
    P("spring-dotted", f"spring.datasource.password={_sp}", _sp,
      keep=("spring.datasource.password=",)),
    P("dotted-api-key", f"app.api.key={_ak}", _ak, keep=("app.api.key=",)),
    P("line-start-password", f"password={_lp}", _lp),
    P("quoted-lower-password", f"password='{_lp}'", _lp),
    P("yaml-password", f"password: {_y1}", _y1, keep=("password:",)),
    P("yaml-indented", f"spring:\n  datasource:\n    password: {_y2}", _y2),
    P("properties-dump",
      f"server.port=8080\nspring.datasource.username=admin\nspring.datasource.password={_sp}\n"
      "logging.level.root=INFO", _sp, keep=("server.port=8080", "username=admin")),
    P("xai-bare", f"using key xai-{_xai}", _xai, keep=("xai-",)),
    P("xai-env", f"XAI_API_KEY=xai-{_xai}", _xai),
    *[P(f"connstr-{scheme}", f"{scheme}://user:{secret}@host:1234/db", secret)
      for scheme, secret in [("postgres", j("pg", r(10, LOW))), ("mysql", j("my", r(11, LOW))),
                             ("redis", j("rd", r(11, LOW))), ("mongodb+srv", j("mg", r(11, LOW))),
                             ("amqp", j("mq", r(10, LOW)))]],
    P("connstr-log", f"connected via postgres://user:{_lp}@host:5432/db ok", _lp,
      keep=("connected via", " ok")),
    P("connstr-literal", f"postgresql://admin:{_upw}@db.internal:5432/app", _upw),
    P("connstr-dbpass", f"postgres://admin:{_y2}@db.internal:5432/app", _y2),
    P("prefix-in-url", j("https://evil.com/steal?key=sk-", "a" * 30), "a" * 30),
    # GitLab families
    *[P(f"gitlab-{k.rstrip('-')}", f"leaked {k}{v} in output", v) for k, v in _gl.items()],
    P("gitlab-runner-routable", f"leaked glrt-{_glrt_dot} in output", _glrt_dot),
    P("gitlab-runner-reg-routable", f"leaked glrtr-{_glrtr_dot} in output", _glrtr_dot),
    P("gitlab-legacy-runner", f"leaked GR1348941{_gr} in output", _gr),
    # AgentMail, age, Fireworks
    *[P(f"agentmail-{i}", f"leaked {k} in output", k[-12:]) for i, k in enumerate(_am)],
    P("age-secret", f"generated AGE-SECRET-KEY-1{_age_safe} ok", _age_safe),
    P("age-secret-0l", f"generated AGE-SECRET-KEY-1{_age_0l} ok", _age_0l),
    P("age-recipient", f"generated age1{_age_safe} ok", _age_safe,
      note="an age recipient is a public key: sbx leaves it"),
    P("age-recipient-0l", f"generated age1{_age_0l} ok", _age_0l,
      note="an age recipient is a public key: sbx leaves it"),
    *[P(f"fireworks-{pre.rstrip('-_')}", f"provider error {pre}{c * 40}", c * 40)
      for pre, c in (("fw-", "A"), ("fw_", "B"), ("fpk_", "C"))],
    P("fireworks-key", f"fireworks error: key fw_{_bare_fw}", _bare_fw),
    # key names
    P("suffix-fal-key", "FAL_KEY=sk-abc123def456", "abc123def456"),
    P("suffix-openai-key", "OPENAI_KEY=sk-abc123def456", "abc123def456"),
    P("suffix-mysql-pass", "MYSQL_PASS=ghi789", "ghi789"),
    P("suffix-db-pw", "DB_PW=jkl012", "jkl012"),
    P("suffix-lower", f"openai_key={_lenv}", _lenv),
    P("value-hunter", "PASSWORD=hunter2", "hunter2"),
    P("value-short-word", "SECRET_TOKEN=bailu", "bailu"),
    P("value-id-token", "id_token=local", "local"),
    P("value-custom-token", "CUSTOM_TOKEN=opaqueValue123456789", "opaqueValue123456789"),
    P("value-json-token", '{"token": "opaqueValue123456789"}', "opaqueValue123456789"),
    P("value-key-material", '{"key_material": "CPU"}', "CPU"),
    P("value-bearer-field", '{"bearer": "local"}', "local"),
    P("value-sk-token", j("TOKEN=sk-", "a" * 30), "a" * 20),
    P("export-secret-token", "export SECRET_TOKEN=mypassword", "mypassword",
      keep=("export ", "SECRET_TOKEN=")),
    P("gate-api-key", "API_KEY=sk-fakefakefakefakefake1234567890abcd", "fakefake"),
    P("gate-github", j("GITHUB_TOKEN=gh", "p_FAKEfakeFAKEfake1234567890fake"), "FAKEfake"),
    P("gate-service-token", f"MY_SERVICE_TOKEN={r(20)}", "", note="filled below"),
    P("gate-hex-token", f"TOKEN={r(32, HEX)}", "", note="filled below"),
    P("gate-password", "password=hunter2", "hunter2"),
    P("gate-yaml-password", "db_password: hunter2", "hunter2"),
    P("gate-auth-token", f"auth_token: {r(32, HEX)}", "", note="filled below"),
    P("gate-json-token", f'"token": "{r(21)}"', "", note="filled below"),
    P("gate-session-short", "SESSION_TOKEN=shrt", "shrt"),
    P("gate-client-secret-short", "client_secret=abc", "abc"),
    P("gate-spring", "spring.datasource.password=fakePass123", "fakePass123"),
    P("sep-client-secret", f"client_secret: {r(21, LOW)}", "", note="filled below"),
    P("sep-auth-token", f"auth_token: {r(21, LOW)}", "", note="filled below"),
    P("sep-my-secret", f"my_secret: {r(23, LOW)}", "", note="filled below"),
    P("sep-db-password", "db.password=hunter2verylongpassword", "hunter2verylongpassword"),
    P("camel-client-secret", f"clientSecret: {r(21, LOW)}", "", note="filled below"),
    P("camel-secret-key", f"secretKey: {r(24, LOW)}", "", note="filled below"),
    P("camel-api-token", f"APIToken: {r(23, LOW)}", "", note="filled below"),
    P("plural-secrets", "secrets: hunter2hunter2hunter2hh", "hunter2hunter2hunter2hh"),
    P("cat-env",
      f"MISTRAL_API_KEY={_mist}\nNOUS_API_KEY={_nous}\nDEBUG=true\n", _mist, _nous,
      keep=("DEBUG=true",)),
    P("cat-n-env", f"     1\tMISTRAL_API_KEY={_mist}\n", _mist),
    P("cat-env-local", f"CUSTOM_API_KEY={_cust}", _cust),
    P("env-inline-comment", f"MISTRAL_API_KEY={_mist} # used for tests", _mist,
      keep=("MISTRAL_API_KEY=", " # used for tests")),
    P("export-inline-comment", f"export MISTRAL_API_KEY={_mist} # prod key", _mist,
      keep=("export MISTRAL_API_KEY=", " # prod key")),
    P("printenv-custom-token", f"CUSTOM_TOKEN=zzzopaque{r(16, LOW)}", "", note="filled below"),
    P("file-read-token", f"token: {_ghr}", _ghr[4:]),
    P("file-read-env-style", f"GITHUB_PERSONAL_ACCESS_TOKEN: {_ghr}", _ghr[4:]),
    # split on purpose
    P("split-newline", f"{_ghsplit[:10]}\n{_ghsplit[10:]}", _ghsplit[10:]),
    P("split-esc", f"{_ghsplit[:10]}\x1b{_ghsplit[10:]}", _ghsplit[10:]),
    P("split-zero-width", f"{_ghsplit[:10]}\u200b{_ghsplit[10:]}", _ghsplit[10:]),
    P("split-head-complete", j("sk-", "a" * 15, "\x1b", "b" * 25), "b" * 25, "a" * 12),
    P("complete-token-then-line", j("text: Token: gh", "p_", "F" * 29, "\nbutton [ref=e3]: Copy\n"),
      "F" * 20, keep=("button", "ref=e3")),
    P("env-dump-not-joined",
      f"HOME=/home/user\nELEVENLABS_API_KEY=sk_{r(21, LOW)}\nEXA_API_KEY=exa_{r(16, ALNUM)}\n"
      "SHELL=/bin/bash\n", "", keep=("SHELL=/bin/bash", "HOME=/home/user"), note="filled below"),
    P("env-real-jwt", f"HOMEASSISTANT_TOKEN={_ha}", _ha.split(".")[0]),
    # credential URLs and query parameters (the reference passes most by default)
    P("url-fragment-token", f"https://x.test/#access_token={_frag[0]}&view=public", _frag[0],
      keep=("&view=public",), note="the reference passes it unless opted in"),
    P("url-relative-token", f"/resume?token={_frag[1]}&view=public", _frag[1],
      keep=("&view=public",), note="the reference passes it unless opted in"),
    P("url-encoded-key", f"https://x.test/cb?client%5Fsecret={_frag[2]}&view=public", _frag[2],
      keep=("&view=public",), note="the reference passes it unless opted in"),
    P("url-double-encoded-key", f"https://x.test/cb?client%255Fsecret={_frag[3]}&view=public",
      _frag[3], keep=("&view=public",), note="the reference passes it unless opted in"),
    P("url-semicolon", f"/resume?token={_frag[4]};view=public", _frag[4],
      keep=(";view=public",), note="the reference passes it unless opted in"),
    P("url-scheme-relative", f"//user:{_frag[5]}@x.test/path", _frag[5],
      note="the reference passes it unless opted in"),
    P("cdp-url", f"wss://provider.example/session?token={_cdp1}&apikey={_cdp2}", _cdp1, _cdp2),
    P("web-access-token", f"Fetching https://example.com/api?access_token={_web[0]}&format=json",
      _web[0], keep=("&format=json",), note="the reference passes credential query parameters"),
    P("web-signature", f"https://s3.amazonaws.com/bucket/k?signature={_web[1]}&id=public",
      _web[1], keep=("&id=public",), note="the reference passes credential query parameters"),
    P("web-ws-token", f"wss://api.example.com/ws?token={_web[2]}", _web[2],
      note="the reference passes credential query parameters"),
    P("web-access-log",
      f'INFO aiohttp.access: 127.0.0.1 "POST /hook?password={_web[3]}&event=new-message '
      'HTTP/1.1" 200 173 "-" "test-client"', _web[3], keep=("&event=new-message",),
      note="the reference passes credential query parameters"),
    # negatives
    N("prose-gitlab", "the glossary explains gitlab tokens"),
    N("gitlab-short", "glpat-short"),
    N("gitlab-embedded", f"myglpat-{r(20, ALNUM)}"),
    N("agentmail-identifier", "schema.am_example_identifier_123"),
    N("agentmail-path", "path/to/am_monthly_report.sql"),
    N("age-prose", "the ages1 catalogued sites were visited"),
    N("age-short", "AGE-SECRET-KEY-SHORT"),
    N("age-not-bech32", f"generated AGE-SECRET-KEY-1{_age_bio} ok"),
    N("age-recipient-not-bech32", f"generated age1{_age_bio} ok"),
    N("fireworks-short", "fw-tooshort fw_tooshort fpk_tooshort"),
    N("env-home", "HOME=/home/user"),
    N("env-path", "PATH=/usr/local/bin:/usr/bin"),
    N("ambiguous-identity-token", 'IDENTITY_TOKEN="bailu"',
      note="the reference keeps a non-credential-looking value; sbx redacts it"),
    N("ambiguous-tensor", "--override-tensor per_layer_token_embd.weight=CPU"),
    N("ambiguous-runtime-token", 'runtime.token="local"',
      note="the reference keeps a non-credential-looking value; sbx redacts it"),
    N("ambiguous-json-cpu", '{"token": "CPU"}',
      note="the reference keeps a non-credential-looking value; sbx redacts it"),
    N("ambiguous-yaml-cpu", "token: CPU",
      note="the reference keeps a non-credential-looking value; sbx redacts it"),
    N("prose-keyboard", "KEYBOARD=notsecret"),
    N("prose-passage", "PASSAGE=notsecret"),
    N("env-lookup", "MY_API_KEY=os.getenv('OPENAI_API_KEY')"),
    N("env-lookup-multiline",
      "Set it up like this:\n    HA_TOKEN=os.getenv('HOMEASSISTANT_TOKEN')\n"
      "    if not HA_TOKEN:\n        raise ValueError('Missing credentials')"),
    N("json-plain", '{"name": "John", "model": "gpt-4"}'),
    N("prose-authorization", "the authorization model is fully open"),
    N("fstring-bearer", "auth = f'Authorization: Bearer {placeholder}'"),
    N("code-usage-tokens", "before_tokens = response.usage.prompt_tokens"),
    N("code-config-get", "api_key = config.get('api_key')"),
    N("code-await-token", "const token = await getToken();"),
    N("code-await-secret", "const secret = await fetchSecret();"),
    N("prose-normal", "Hello world, this is a normal log message with no secrets."),
    N("code-normal", "def main():\n    print('hello')\n    return 42"),
    N("url-plain-api", "Connecting to https://api.openai.com/v1/chat/completions"),
    N("discord-mention", "Hello <@222589316709220353>"),
    N("discord-nick", "Ping <@!1331549159177846844>"),
    N("discord-two", "<@111111111111111111> and <@222222222222222222>"),
    N("discord-short", "<@12345>"),
    N("slack-mention", "<@U024BE7LH>"),
    N("discord-sentence", "User <@222589316709220353> said hello"),
    N("oauth-code", "GET https://api.example.com/oauth/cb?code=abc123xyz789&state=csrf_ok"),
    N("magic-link", "Open https://checkout.example.com/resume?magic=ABCDEF123456&customer=42"),
    N("url-user-git", "https://git@github.com/user/repo.git"),
    N("url-user-admin", "https://admin@example.com/x"),
    N("url-user-deploy", "https://deploy@host.com/y"),
    N("url-email-query", "https://example.com/search?q=user@example.com"),
    N("url-email-path", "https://example.com/users/john@doe.com/profile"),
    N("url-plain-repo", "https://github.com/user/repo.git"),
    N("lines-plain", "first=1\nsecond=2"),
    N("prose-password-foo", "I have password=foo and other things"),
    N("prose-note-secret", "note: secret meeting at noon"),
    N("prose-secretary", "Secretary: JanetYellen1234567890"),
    N("xai-short", "text xai-tooshort here"),
    N("xai-company", "xai is a company"),
    N("gate-max-tokens", "MAX_TOKENS=4096"),
    N("gate-runtime-local", "runtime.token=local",
      note="the reference keeps a non-credential-looking value; sbx redacts it"),
    N("gate-tokenizer", "The tokenizer splits on whitespace; set max_new_tokens=256."),
    N("gate-kv-heads", "num_key_value_heads=8"),
    N("gate-llm-load", "llm_load_tensors: per_layer_token_embd.weight=CPU buffer"),
    N("metrics-url", "/metrics?token_count=17&session_id=public"),
    N("env-example-placeholder", "MISTRAL_API_KEY=placeholder_value_here"),
    N("fstring-dsn", 'return f"postgresql://{user}:{password}@{host}:{port}/{db}"'),
    N("fstring-dsn-attr", 'dsn = f"postgresql://{u}:{self.db_pass}@{h}:{p}/{d}"'),
    N("decorator-block",
      '            return f"postgresql://{auth}@{self.pg_host}:{self.pg_port}/{self.pg_db}"\n'
      '\n    @model_validator(mode="after")\n    def _validate(self) -> "Settings":'),
]


def _fill(cases: list[Case]) -> list[Case]:
    """Cases marked "filled below" take their secret from the text (the value)."""
    out = []
    for c in cases:
        if c.note == "filled below":
            secrets: tuple[str, ...]
            if c.id == "env-dump-not-joined":
                lines = c.text.splitlines()
                secrets = (lines[1].split("_", 3)[-1], lines[2].split("_", 2)[-1])
            else:
                value = c.text.replace('"', "").split("=", 1)[-1].split(": ", 1)[-1]
                secrets = (value.removeprefix("zzz"),)
            c = Case(c.id, c.source, c.text, secrets, c.keep, "")
        out.append(c)
    return out


REFERENCE: list[Case] = _fill(_CASES)
