"""Secrets by their context: arguments, URLs, key/value forms, formats that leaked, split tokens.

Each case is exact: the expected output keeps everything but the secret.
"""

from __future__ import annotations

import base64

from tests.unit.process_registry.redact.cases_positive import (
    ALNUM,
    B64,
    HEX,
    TOK,
    UPD,
    Case,
    M,
    R,
    p,
    rnd,
)

PW = rnd(14)  # a password
PW2 = rnd(10)
V = rnd(24)  # an opaque value
GH = p("gh", "p_", rnd(36))
GH_BODY = GH[4:]
SBX1 = p("sbx", "1.", rnd(43, TOK))
SBX2 = p("sbx", "2.", "k3.", "1767225600.", rnd(43, TOK))
SBXA = p("sbx", "a1.", rnd(40, TOK))
DISCORD = p("MT", rnd(22, TOK), ".", rnd(6, TOK), ".", rnd(38, TOK))
DISCORD_ID, DISCORD_SECRET = DISCORD.split(".", 1)
TG_ID, TG_SECRET = "7012345678", p("AA", rnd(33, TOK))
TW_SK, TW_SECRET = p("S", "K", rnd(32, HEX)), rnd(32)
TW_AC, TW_TOKEN = p("A", "C", rnd(32, HEX)), rnd(32, HEX)
WORDS = ["legal", "winner", "thank", "year", "wave", "sausage", "worth", "useful", "legal",
         "winner", "thank", "yellow"]
MNEMONIC = " ".join(WORDS)
KUBE_KEY = base64.b64encode(p("-----BEGIN", " RSA PRIVATE KEY-----\n", rnd(64, B64), "\n").encode()
                            ).decode()
AZ_KEY = rnd(86, B64) + "=="
SB_KEY = rnd(43, B64) + "="
SHA512 = p("$6$", rnd(16, ALNUM + "./"), "$", rnd(86, ALNUM + "./"))
YESCRYPT = p("$y$", "j9T$", rnd(22, ALNUM + "./"), "$", rnd(43, ALNUM + "./"))
BCRYPT = p("$2b$", "12$", rnd(53, ALNUM + "./"))
APR1 = p("$apr1$", rnd(8, ALNUM + "./"), "$", rnd(22, ALNUM + "./"))
ARGON = p("$argon2id$", "v=19$m=65536,t=3,p=4$", rnd(22, B64), "$", rnd(43, B64))
MD5 = p("$1$", rnd(8, ALNUM + "./"), "$", rnd(22, ALNUM + "./"))
SSHA = rnd(32, B64)
BASIC = base64.b64encode(f"deploy:{PW}".encode()).decode()
PEM = "\\n".join(rnd(64, B64) for _ in range(3))
SPLIT = p("gh", "p_", rnd(36))
AGE = rnd(58, UPD)
USER_TOKEN, USER_UPPER = rnd(28), rnd(22, UPD)
KEY_ID, SIG = rnd(40, HEX), rnd(64, HEX)
_UUID = "-".join(rnd(n, HEX) for n in (8, 4, 4, 4, 12))
TEAMS = f"{_UUID}@{_UUID}/IncomingWebhook/{rnd(32)}/{_UUID}"


def c(id: str, text: str, want: str, secret: str) -> Case:
    return Case(id, text, want, secret)


LEAKED_FORMATS: list[Case] = [
    c("age-in-file", f"# created: 2024\n# public key: age1xyz\nAGE-SECRET-KEY-1{AGE}\n",
      "# created: 2024\n# public key: age1xyz\nAGE-SECRET-KEY-" + M + "\n", AGE),
    c("discord-bare", f"bot token {DISCORD} leaked", f"bot token {DISCORD_ID}.{R} leaked",
      DISCORD_SECRET),
    c("discord-bot-scheme", f"Authorization: Bot {DISCORD}", f"Authorization: Bot {R}",
      DISCORD_SECRET),
    c("discord-log-line", f"2024-05-01 INFO client.login({DISCORD}) ok",
      f"2024-05-01 INFO client.login({DISCORD_ID}.{R}) ok", DISCORD_SECRET),
    c("telegram-bare", f"{TG_ID}:{TG_SECRET}", f"{TG_ID}:{R}", TG_SECRET),
    c("telegram-url", f"curl https://api.telegram.org/bot{TG_ID}:{TG_SECRET}/getMe",
      f"curl https://api.telegram.org/bot{TG_ID}:{R}/getMe", TG_SECRET),
    c("telegram-env", f"TG_BOT={TG_ID}:{TG_SECRET} python bot.py",
      f"TG_BOT={TG_ID}:{R} python bot.py", TG_SECRET),
    c("twilio-key-secret", f"twilio api --auth {TW_SK}:{TW_SECRET} --json",
      f"twilio api --auth SK{M} --json", TW_SECRET),
    c("twilio-curl", f"curl -u {TW_AC}:{TW_TOKEN} https://api.twilio.com/x",
      f"curl -u AC{M}:{R} https://api.twilio.com/x", TW_TOKEN),
    c("kube-client-key", f"  user:\n    client-key-data: {KUBE_KEY}\n    token: {V}\n",
      f"  user:\n    client-key-data: {R}\n    token: {R}\n", KUBE_KEY),
    c("kube-cert-stays", f"    client-certificate-data: LS0tCg==\n    client-key-data: {KUBE_KEY}",
      f"    client-certificate-data: LS0tCg==\n    client-key-data: {R}", KUBE_KEY),
    c("sbx1-bare", f"session sbx1 token {SBX1} issued", f"session sbx1 token sbx1{M} issued",
      SBX1[5:]),
    c("sbx2-bare", f"token {SBX2}.", f"token sbx2{M}.", SBX2[5:]),
    c("sbxa1-bare", f"approver={SBXA}", f"approver=sbxa1{M}", SBXA[6:]),
    c("sbx-env", f"SBX_SESSION_TOKEN={SBX1} sbx exec -- ls",
      f"SBX_SESSION_TOKEN={R} sbx exec -- ls",
      SBX1[5:]),
    c("sbx-json", f'{{"session_token": "{SBX2}", "ok": true}}',
      f'{{"session_token": "{R}", "ok": true}}', SBX2[5:]),
    c("sbx-header", f"X-Sbx-Session: {SBX1}\r\n", f"X-Sbx-Session: sbx1{M}\r\n", SBX1[5:]),
    c("sbx-query", f"GET /poll?id=p1&t={SBX1} HTTP/1.1", f"GET /poll?id=p1&t=sbx1{M} HTTP/1.1",
      SBX1[5:]),
    c("sbx-quoted-log", f"invalid token '{SBXA}' for s-42", f"invalid token 'sbxa1{M}' for s-42",
      SBXA[6:]),
    c("gcp-private-key-id", f'  "private_key_id": "{KEY_ID}",\n  "client_id": "1234"',
      f'  "private_key_id": "{R}",\n  "client_id": "1234"', KEY_ID),
    c("gcp-private-key", f'  "private_key": "-----BEGIN PRIVATE KEY-----\\n{PEM}\\n'
                         '-----END PRIVATE KEY-----\\n",', f'  "private_key": "{R}",', PEM[:40]),
    c("azure-storage", f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={AZ_KEY};"
                       "EndpointSuffix=core.windows.net",
      f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={R};"
      "EndpointSuffix=core.windows.net", AZ_KEY),
    c("azure-service-bus", "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;"
                           f"SharedAccessKey={SB_KEY}",
      f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={R}",
      SB_KEY),
    c("azure-sas", f"https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sp=r&sig={V}%3D",
      f"https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sp=r&sig={R}", V),
    c("mnemonic-quoted", f'MNEMONIC="{MNEMONIC}"', f'MNEMONIC="{R}"', MNEMONIC),
    c("mnemonic-yaml", f"wallet:\n  seed_phrase: {MNEMONIC}\n  chain: eth",
      f"wallet:\n  seed_phrase: {R}\n  chain: eth", MNEMONIC),
    c("mnemonic-commas", f"SEED_PHRASE={','.join(WORDS)}", f"SEED_PHRASE={R}", ",".join(WORDS)),
    c("mnemonic-recovery", f"recovery_words: {MNEMONIC} # backup", f"recovery_words: {R} # backup",
      MNEMONIC),
    c("shadow-sha512", f"root:{SHA512}:19700:0:99999:7:::", f"root:$6${R}:19700:0:99999:7:::",
      SHA512[3:]),
    c("shadow-yescrypt", f"dev:{YESCRYPT}:19800:0:99999:7:::", f"dev:$y${R}:19800:0:99999:7:::",
      YESCRYPT[3:]),
    c("shadow-locked", f"svc:!{MD5}:19000::::::", f"svc:!$1${R}:19000::::::", MD5[3:]),
    c("htpasswd-apr1", f"admin:{APR1}\n", f"admin:$apr1${R}\n", APR1[6:]),
    c("htpasswd-bcrypt", f"deploy:{BCRYPT}", f"deploy:$2b${R}", BCRYPT[4:]),
    c("htpasswd-ssha", f"ops:{{SSHA}}{SSHA}", f"ops:{{SSHA}}{R}", SSHA),
    c("argon2-config", f'password_hash = "{ARGON}"', f'password_hash = "$argon2id${R}"',
      ARGON[10:]),
    c("useradd-hash", f"useradd -m -p '{SHA512}' ci", f"useradd -m -p '$6${R}' ci", SHA512[3:]),
]

ARGUMENTS_AND_URLS: list[Case] = [
    c("docker-login", f"docker login -u ci -p {PW} registry.example.com",
      f"docker login -u ci -p {R} registry.example.com", PW),
    c("docker-login-glued", f"docker login -p{PW} ghcr.io", f"docker login -p{R} ghcr.io", PW),
    c("docker-login-long", f"docker login --username ci --password {PW} ghcr.io",
      f"docker login --username ci --password {R} ghcr.io", PW),
    c("podman-login", f"sudo podman login -u me -p '{PW}' quay.io",
      f"sudo podman login -u me -p '{R}' quay.io", PW),
    c("helm-registry-login", f"helm registry login r.io -u me -p {PW}",
      f"helm registry login r.io -u me -p {R}", PW),
    c("sshpass", f"sshpass -p {PW} ssh deploy@10.0.0.5 uptime",
      f"sshpass -p {R} ssh deploy@10.0.0.5 uptime", PW),
    c("sshpass-glued", f"sshpass -p'{PW}' scp f host:", f"sshpass -p'{R}' scp f host:", PW),
    c("mysql-glued", f"mysql -h db -u root -p{PW} app < dump.sql",
      f"mysql -h db -u root -p{R} app < dump.sql", PW),
    c("mysqldump-glued", f"$ mysqldump -uroot -p{PW} --all-databases",
      f"$ mysqldump -uroot -p{R} --all-databases", PW),
    c("mysql-env-prefix", f"MYSQL_HOST=db mysql -p{PW} -e 'select 1'",
      f"MYSQL_HOST=db mysql -p{R} -e 'select 1'", PW),
    c("redis-cli", f"redis-cli -h cache -a {PW} ping", f"redis-cli -h cache -a {R} ping", PW),
    c("mongosh", f"mongosh --host db -u admin -p {PW}", f"mongosh --host db -u admin -p {R}", PW),
    c("ldapsearch", f"ldapsearch -x -D cn=admin,dc=ex -w {PW} -b dc=ex",
      f"ldapsearch -x -D cn=admin,dc=ex -w {R} -b dc=ex", PW),
    c("zip", f"zip -r -P {PW} out.zip dir/", f"zip -r -P {R} out.zip dir/", PW),
    c("7z", f"7z a -p{PW} -mhe=on out.7z dir", f"7z a -p{R} -mhe=on out.7z dir", PW),
    c("ssh-keygen", f'ssh-keygen -t ed25519 -N "{PW}" -f id',
      f'ssh-keygen -t ed25519 -N "{R}" -f id',
      PW),
    c("smbclient", f"smbclient //srv/share -U bob%{PW} -c ls",
      f"smbclient //srv/share -U bob%{R} -c ls",
      PW),
    c("openssl-passin", f"openssl pkcs12 -in c.p12 -passin pass:{PW} -nodes",
      f"openssl pkcs12 -in c.p12 -passin pass:{R} -nodes", PW),
    c("keytool", f"keytool -importkeystore -srcstorepass {PW} -deststorepass {PW2}",
      f"keytool -importkeystore -srcstorepass {R} -deststorepass {R}", PW),
    c("sqlcmd", f"sqlcmd -S db -U sa -P {PW} -Q 'select 1'",
      f"sqlcmd -S db -U sa -P {R} -Q 'select 1'",
      PW),
    c("curl-u", f"curl -u admin:{PW} https://example.com/api", f"curl -u admin:{R} https://example.com/api",
      PW),
    c("curl-user-quoted", f"curl --user 'ci:{PW}' -X POST https://x",
      f"curl --user 'ci:{R}' -X POST https://x", PW),
    c("curl-u-glued", f"curl -uadmin:{PW} https://x", f"curl -uadmin:{R} https://x", PW),
    c("curl-proxy-user", f"curl -x proxy:3128 --proxy-user u:{PW} https://x",
      f"curl -x proxy:3128 --proxy-user u:{R} https://x", PW),
    c("curl-in-pipeline", f"set -x; curl -fsS -u bot:{PW} https://h | jq .",
      f"set -x; curl -fsS -u bot:{R} https://h | jq .", PW),
    c("netrc-one-line", f"machine api.example.com login bob password {PW}",
      f"machine api.example.com login bob password {R}", PW),
    c("netrc-lines", f"machine git.example.com\n  login bob\n  password {PW}\n",
      f"machine git.example.com\n  login bob\n  password {R}\n", PW),
    c("netrc-default", f"default login anonymous password {PW}",
      f"default login anonymous password {R}", PW),
    c("git-remote", f"git remote set-url origin https://bob:{PW}@github.com/o/r.git",
      f"git remote set-url origin https://bob:{R}@github.com/o/r.git", PW),
    c("git-remote-token-user", f"origin\thttps://{USER_TOKEN}@github.com/o/r.git (fetch)",
      f"origin\thttps://{R}@github.com/o/r.git (fetch)", USER_TOKEN),
    c("git-remote-upper-user", f"https://{USER_UPPER}@git.example.com/r.git",
      f"https://{R}@git.example.com/r.git", USER_UPPER),
    c("ssh-url", f"ssh://deploy:{PW}@host:2222/srv/repo", f"ssh://deploy:{R}@host:2222/srv/repo",
      PW),
    c("ftp-url", f"wget ftp://anon:{PW}@ftp.example.com/pub/f.iso",
      f"wget ftp://anon:{R}@ftp.example.com/pub/f.iso", PW),
    c("url-password-with-at", f"https://bob:{PW[:5]}@{PW[5:]}@example.com/r.git",
      f"https://bob:{R}@example.com/r.git", PW[5:]),
    c("url-password-two-ats", f"amqp://u:a@b{PW}@mq:5672/vh", f"amqp://u:{R}@mq:5672/vh", PW),
    c("url-scheme-relative", f'src="//user:{PW}@cdn.example.com/x.js"',
      f'src="//user:{R}@cdn.example.com/x.js"', PW),
    c("basic-header", f"Authorization: Basic {BASIC}", f"Authorization: Basic {R}", BASIC),
    c("basic-in-curl", f"curl -H 'Authorization: Basic {BASIC}' https://x",
      f"curl -H 'Authorization: Basic {R}' https://x", BASIC),
    c("proxy-authorization", f"Proxy-Authorization: Basic {BASIC}\r\n",
      f"Proxy-Authorization: Basic {R}\r\n", BASIC),
    c("teams-webhook", f"POST https://acme.webhook.office.com/webhookb2/{TEAMS} HTTP/1.1",
      f"POST https://acme.webhook.office.com/webhookb2/{M} HTTP/1.1", TEAMS[80:]),
    c("odbc-pwd", f"Driver={{ODBC 18}};Server=db;Uid=sa;Pwd={PW};Encrypt=yes",
      f"Driver={{ODBC 18}};Server=db;Uid=sa;Pwd={R};Encrypt=yes", PW),
    c("query-token", f"GET /cb?state=x&access_token={V}&scope=read HTTP/1.1",
      f"GET /cb?state=x&access_token={R}&scope=read HTTP/1.1", V),
    c("query-signature", f"https://b.s3.amazonaws.com/k?X-Amz-Signature={SIG}&X-Amz-Date=1",
      f"https://b.s3.amazonaws.com/k?X-Amz-Signature={R}&X-Amz-Date=1", SIG),
    c("query-encoded-key", f"/cb?client%5Fsecret={V}&view=1", f"/cb?client%5Fsecret={R}&view=1", V),
    c("query-fragment", f"https://x.test/#access_token={V}&token_type=bearer",
      f"https://x.test/#access_token={R}&token_type=bearer", V),
]
