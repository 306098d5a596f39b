"""Provider tokens: AI providers, code hosting, package registries, SaaS -- by their fixed prefix.

Facts (prefix, body alphabet, length) follow the vendors' documentation and
the rule shapes public secret scanners publish (gitleaks, detect-secrets,
trufflehog).  A short or common prefix (``sk_``, ``fal_``, ``am_``) needs a
plausible body (:func:`~.values.plausible`) and, where identifiers share the
prefix, a body that ends its token run (``closed``).
"""

from __future__ import annotations

from typing import Final

from .vendor import Vendor, vendor

_GITLAB = ("pat", "dt", "rt", "rtr", "ptt", "cbt", "imt", "ft", "soat", "oas", "agent", "wt",
           "ffct")
_SLACK = "abposre"
#: GitLab routable tokens end in ``.<2>.<7-9>`` (or ``.<9>``).
_GITLAB_ROUTE = r"(?:\.[0-9a-z]{2}(?:\.[0-9a-z]{7,9}|[0-9a-z]{7}))?"

AI: Final[tuple[Vendor, ...]] = (
    # OpenAI, Anthropic (api, admin, oauth), OpenRouter, DeepSeek & other sk- clones.
    vendor("openai-anthropic", ("sk-", "sk-ant-", "sk-proj-", "sk-svcacct-", "sk-admin-"),
           r"sk-(?:ant-(?:api|admin|oat|sid)\d\d-|ant-|proj-|svcacct-|admin-|or-v1-|None-)?",
           r"[A-Za-z0-9_-]{10,8192}+", random=True),
    vendor("elevenlabs", ("sk_",), "sk_", r"[A-Za-z0-9]{24,255}+", random=True, closed=True),
    vendor("groq", ("gsk_",), "gsk_", r"[A-Za-z0-9]{40,255}+"),
    vendor("replicate", ("r8_",), "r8_", r"[A-Za-z0-9]{30,255}+"),
    vendor("perplexity", ("pplx-",), "pplx-", r"[A-Za-z0-9]{20,255}+", random=True),
    vendor("fireworks", ("fw_", "fw-", "fpk_"), "fw_|fw-|fpk_", r"[A-Za-z0-9]{20,255}+",
           random=True),
    vendor("fal", ("fal_",), "fal_", r"[A-Za-z0-9_-]{20,255}+", random=True),
    vendor("tavily", ("tvly-",), r"tvly-(?:dev-|prod-)?", r"[A-Za-z0-9]{20,255}+", random=True),
    vendor("exa", ("exa_",), "exa_", r"[A-Za-z0-9]{20,255}+", random=True, closed=True),
    vendor("agentmail", ("am_", "am_org_"), "am_org_|am_", r"[A-Za-z0-9]{20,255}+", random=True,
           closed=True),
    vendor("firecrawl", ("fc-",), "fc-", r"[A-Za-z0-9]{20,255}+", random=True, closed=True),
    vendor("xai", ("xai-",), "xai-", r"[A-Za-z0-9]{30,255}+"),
    vendor("nvidia", ("nvapi-",), "nvapi-", r"[A-Za-z0-9_-]{40,255}+"),
    vendor("huggingface", ("hf_", "api_org_"), "hf_|api_org_", r"[A-Za-z0-9]{30,255}+"),
    vendor("langsmith", ("lsv2_pt_", "lsv2_sk_"), r"lsv2_(?:pt|sk)_",
           r"[a-f0-9]{32}_[a-f0-9]{10}", fixed=True),
    vendor("browserbase", ("bb_live_",), "bb_live_", r"[A-Za-z0-9_-]{20,255}+"),
    vendor("matrix", ("syt_",), "syt_", r"[A-Za-z0-9_]{20,255}+", random=True),
    vendor("pinecone", ("pcsk_",), "pcsk_", r"[A-Za-z0-9_]{40,255}+", random=True),
)

DEV: Final[tuple[Vendor, ...]] = (
    vendor("github", tuple(f"gh{c}_" for c in "pousr"), r"gh[pousr]_", r"[A-Za-z0-9]{30,255}+"),
    vendor("github-fine-grained", ("github_pat_",), "github_pat_", r"[A-Za-z0-9_]{20,255}+"),
    vendor("gitlab", tuple(f"gl{k}-" for k in _GITLAB), rf"gl(?:{'|'.join(_GITLAB)})-",
           rf"[A-Za-z0-9_-]{{16,300}}+{_GITLAB_ROUTE}"),
    vendor("gitlab-runner-legacy", ("GR1348941",), "GR1348941", r"[A-Za-z0-9_-]{20,255}+"),
    vendor("npm", ("npm_",), "npm_", r"[A-Za-z0-9]{36,255}+"),
    vendor("pypi", ("pypi-",), "pypi-", r"Ag[A-Za-z0-9_-]{50,4096}+"),
    vendor("rubygems", ("rubygems_",), "rubygems_", r"[a-f0-9]{48}", fixed=True),
    vendor("clojars", ("CLOJARS_",), "CLOJARS_", r"[A-Za-z0-9]{60}", fixed=True),
    vendor("nuget", ("oy2",), "oy2", r"[a-z0-9]{43}", fixed=True),
    vendor("docker-hub", ("dckr_pat_",), "dckr_pat_", r"[A-Za-z0-9_-]{20,255}+"),
    vendor("bitbucket", ("ATBB",), "ATBB", r"[A-Za-z0-9]{28,64}+", random=True, closed=True),
    vendor("circleci", ("CCIPAT_",), "CCIPAT_", r"[A-Za-z0-9]{20,32}_[a-fA-F0-9]{40}", fixed=True),
    vendor("jfrog", ("AKCp", "cmVmd"), "AKCp|cmVmd", r"[A-Za-z0-9]{59,100}+"),
    vendor("atlassian", ("ATATT3",), "ATATT3", r"[A-Za-z0-9_=-]{100,512}+"),
    vendor("postman", ("PMAK-",), "PMAK-", r"[a-f0-9]{24}-[a-f0-9]{34}", fixed=True),
    vendor("sourcegraph", ("sgp_",), "sgp_",
           r"(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}", fixed=True),
    vendor("buildkite", ("bkua_",), "bkua_", r"[a-f0-9]{40}", fixed=True),
    vendor("readme", ("rdme_",), "rdme_", r"[a-z0-9]{70}", fixed=True),
    vendor("prefect", ("pnu_",), "pnu_", r"[A-Za-z0-9]{36}", fixed=True),
    vendor("octopus", ("API-",), "API-", r"[A-Z0-9]{26}", fixed=True, random=True),
    vendor("harness", ("pat.", "sat."), r"[ps]at\.",
           r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}", fixed=True),
    vendor("airtable", ("pat",), "pat", r"[A-Za-z0-9]{14}\.[a-f0-9]{64}", fixed=True),
    vendor("hashicorp-terraform", ("atlasv1.",), r"atlasv1\.", r"[A-Za-z0-9_=-]{60,70}+"),
    vendor("pulumi", ("pul-",), "pul-", r"[a-f0-9]{40}", fixed=True),
    vendor("vault", ("hvs.", "hvb.", "hvr."), r"hv[sbr]\.", r"[A-Za-z0-9_-]{24,512}+"),
    vendor("doppler", tuple(f"dp.{k}." for k in ("pt", "st", "sa", "ct", "scim", "audit")),
           r"dp\.(?:pt|st|sa|ct|scim|audit)\.", r"[A-Za-z0-9]{40,255}+"),
    vendor("infracost", ("ico-",), "ico-", r"[A-Za-z0-9]{32}", fixed=True),
    vendor("scalingo", ("tk-us-",), "tk-us-", r"[A-Za-z0-9_-]{48}", fixed=True),
    vendor("openshift", ("sha256~",), "sha256~", r"[A-Za-z0-9_-]{43}", fixed=True),
    vendor("defined-networking", ("dnkey-",), "dnkey-", r"[A-Za-z0-9=_-]{26}-[A-Za-z0-9=_-]{52}",
           fixed=True),
    vendor("flyio", ("fo1_", "fm1a_", "fm1r_", "fm2_"), r"fo1_|fm1[ar]_|fm2_",
           r"[A-Za-z0-9_+/=-]{43,4096}+"),
    vendor("intra42", ("s-s4t2ud-", "s-s4t2af-"), r"s-s4t2(?:ud|af)-", r"[a-f0-9]{64}",
           fixed=True),
    vendor("clickhouse", ("4b1d",), "4b1d", r"[A-Za-z0-9]{38}", fixed=True, random=True),
)

SAAS: Final[tuple[Vendor, ...]] = (
    vendor("slack", (*(f"xox{c}-" for c in _SLACK), "xapp-"),
           rf"xox[{_SLACK}]-|xapp-", r"[A-Za-z0-9-]{10,255}+"),
    vendor("slack-webhook", ("hooks.slack.com/",),
           r"hooks\.slack\.com/(?:services|workflows|triggers)/", r"[A-Za-z0-9/_-]{20,255}+"),
    vendor("teams-webhook", ("webhook.office.com/",), r"webhook\.office\.com/webhookb2/",
           r"[A-Za-z0-9@-]{40,100}+/IncomingWebhook/[A-Za-z0-9]{32}/[A-Za-z0-9-]{36}"),
    vendor("discord-webhook", ("discord.com/", "discordapp.com/"),
           r"discord(?:app)?\.com/api/webhooks/[0-9]{5,30}/", r"[A-Za-z0-9_-]{20,255}+"),
    vendor("stripe", tuple(f"{a}k_{b}_" for a in "srp" for b in ("live", "test", "prod")),
           r"[srp]k_(?:live|test|prod)_", r"[A-Za-z0-9]{10,255}+"),
    vendor("stripe-webhook", ("whsec_",), "whsec_", r"[A-Za-z0-9]{20,255}+"),
    vendor("sendgrid", ("SG.",), r"SG\.", r"[A-Za-z0-9_-]{16,32}+\.[A-Za-z0-9_-]{16,64}+"),
    vendor("sendinblue", ("xkeysib-",), "xkeysib-", r"[a-f0-9]{64}-[A-Za-z0-9]{16}", fixed=True),
    vendor("mailgun", ("key-",), "key-", r"[a-f0-9]{32}", fixed=True),
    # Twilio: an API key SID with its secret (SK...:secret), an account SID with its token.
    vendor("twilio-key", ("SK",), "SK", r"[0-9a-fA-F]{32}", fixed=True, pair="[A-Za-z0-9]{32}"),
    vendor("twilio-account", ("AC",), "AC", r"[0-9a-f]{32}", fixed=True, pair="[0-9a-f]{32}"),
    vendor("shopify", ("shpat_", "shpss_", "shpca_", "shppa_"), r"shp(?:at|ss|ca|pa)_",
           r"[a-fA-F0-9]{32}", fixed=True),
    vendor("square", ("sq0atp-", "sq0csp-"), r"sq0(?:atp|csp)-", r"[A-Za-z0-9_-]{22,64}+"),
    vendor("square-access", ("EAAA",), "EAAA", r"[A-Za-z0-9_-]{60,255}+"),
    vendor("facebook", ("EAAM", "EAAC"), "EAA[MC]", r"[A-Za-z0-9]{100,512}+"),
    vendor("easypost", ("EZAK", "EZTK"), "EZ[AT]K", r"[A-Za-z0-9]{54}", fixed=True),
    vendor("shippo", ("shippo_live_", "shippo_test_"), r"shippo_(?:live|test)_", r"[a-fA-F0-9]{40}",
           fixed=True),
    vendor("duffel", ("duffel_test_", "duffel_live_"), r"duffel_(?:test|live)_",
           r"[A-Za-z0-9_=-]{43}", fixed=True),
    vendor("linear", ("lin_api_", "lin_oauth_"), r"lin_(?:api|oauth)_", r"[A-Za-z0-9]{30,255}+"),
    vendor("notion", ("ntn_",), "ntn_", r"[A-Za-z0-9]{20,255}+", random=True),
    vendor("notion-legacy", ("secret_",), "secret_", r"[A-Za-z0-9]{40,255}+", random=True),
    vendor("figma", ("figd_",), "figd_", r"[A-Za-z0-9_-]{30,255}+"),
    vendor("contentful", ("CFPAT-",), "CFPAT-", r"[A-Za-z0-9_-]{43}", fixed=True),
    vendor("frameio", ("fio-u-",), "fio-u-", r"[A-Za-z0-9_=-]{64}", fixed=True),
    vendor("typeform", ("tfp_",), "tfp_", r"[A-Za-z0-9_.=-]{59}", fixed=True),
    vendor("adobe", ("p8e-",), "p8e-", r"[A-Za-z0-9]{32}", fixed=True),
    vendor("settlemint", ("sm_pat_", "sm_aat_", "sm_sat_"), r"sm_[pas]at_", r"[A-Za-z0-9]{16}",
           fixed=True),
    vendor("onepassword-service", ("ops_eyJ",), "ops_eyJ", r"[A-Za-z0-9+/]{250,8192}+={0,3}"),
    vendor("onepassword-secret-key", ("A3-",), "A3-",
           r"[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
           fixed=True),
    vendor("databricks", ("dapi",), "dapi", r"[a-f0-9]{32}(?:-[0-9])?", fixed=True),
    vendor("heroku", ("HRKU-",), "HRKU-", r"[A-Za-z0-9_-]{30,255}+"),
    vendor("supabase", ("sbp_", "sb_secret_"), "sbp_|sb_secret_", r"[A-Za-z0-9_-]{30,255}+"),
    vendor("newrelic", ("NRAK-", "NRII-"), "NRAK-|NRII-", r"[A-Za-z0-9-]{27,32}", fixed=True),
    vendor("sentry", ("sntrys_", "sntryu_"), r"sntry[su]_", r"[A-Za-z0-9+/=_]{40,512}+"),
    vendor("grafana", ("glc_", "glsa_"), "glc_|glsa_", r"[A-Za-z0-9+/=_]{32,512}+"),
    vendor("tailscale", ("tskey-",), "tskey-", r"[A-Za-z0-9-]{20,255}+"),
    vendor("dynatrace", ("dt0c01.",), r"dt0c01\.", r"[A-Z0-9]{24}\.[A-Z0-9]{64}", fixed=True),
    vendor("mapbox", ("sk.",), r"sk\.", r"eyJ[A-Za-z0-9_-]{20,1024}+\.[A-Za-z0-9_-]{20,255}+"),
    vendor("planetscale", ("pscale_tkn_", "pscale_pw_", "pscale_oauth_"),
           r"pscale_(?:tkn|pw|oauth)_", r"[A-Za-z0-9_.-]{30,255}+"),
    vendor("netlify", ("nfp_",), "nfp_", r"[A-Za-z0-9]{30,255}+"),
    vendor("render", ("rnd_",), "rnd_", r"[A-Za-z0-9]{30,255}+"),
)
