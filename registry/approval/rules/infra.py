"""Infrastructure and cloud: deleting clusters' objects, stacks, buckets, instances, projects.

Same contract as :mod:`registry.approval.rules`. The cloud CLIs name their
verbs consistently (``aws ... delete-*``/``terminate-*``, ``gcloud ... delete``,
``az ... delete``), so the rules key on verbs rather than on lists of
services; reads and creations are never matched.
"""

from __future__ import annotations

from registry.approval.rules.base import Pattern
from registry.approval.shell.args import has_long, short_flags, subcommand, word_set
from registry.approval.shell.resolve import Cmd

__all__ = ["INFRA_PATTERNS"]

_KUBECTL = frozenset({"kubectl", "oc", "kubecolor", "k", "microk8s.kubectl"})
_KUBECTL_SHORT = frozenset("nlcfsoL")
_KUBECTL_LONG = word_set(
    """
    namespace context cluster kubeconfig server token user selector output as
    """
)
_KUBECTL_DESTRUCTIVE = frozenset({"delete", "drain"})
_IAC = frozenset({"terraform", "tofu", "terragrunt", "terramate", "tf"})
_DELETE_VERB_PREFIXES = ("delete", "terminate", "remove", "purge", "deregister", "destroy")
_GENERIC_CLOUD = frozenset({"gcloud", "az", "doctl", "hcloud", "linode-cli", "vultr-cli", "exo",
                            "scw", "oci", "ibmcloud", "aliyun", "civo", "upcloud"})  # fmt: skip
_IAC_TOOLS = word_set(
    """
    pulumi cdk cdktf serverless sls sam copilot eksctl kind minikube k3d fly flyctl heroku
    vercel
    """
)
_OBJECT_STORES = frozenset({"gsutil", "rclone", "mc", "s3cmd", "azcopy", "b2"})


def _kubectl_delete(cmd: Cmd) -> bool:
    name = cmd.name
    if name == "microk8s" and cmd.args[:1] == ["kubectl"]:
        args = cmd.args[1:]
    elif name in _KUBECTL:
        args = cmd.args
    else:
        return False
    verb = subcommand(args, _KUBECTL_SHORT, _KUBECTL_LONG)[1]
    if verb == "replace":
        return has_long(args, "force")
    if verb == "scale":
        return "--replicas=0" in args or any(
            a == "--replicas" and args[i + 1 : i + 2] == ["0"] for i, a in enumerate(args)
        )
    return verb in _KUBECTL_DESTRUCTIVE


def _helm_uninstall(cmd: Cmd) -> bool:
    return cmd.name == "helm" and subcommand(
        cmd.args, frozenset("n"), frozenset({"namespace", "kube-context", "kubeconfig"})
    )[1] in ("uninstall", "delete", "del", "un")


def _iac_destroy(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name in _IAC:
        ops = [a for a in args if not a.startswith("-")]
        if ops[:1] == ["destroy"] or ops[:2] == ["run-all", "destroy"]:
            return True
        if ops[:1] in (["apply"], ["plan"]) and any(a in ("-destroy", "--destroy") for a in args):
            return ops[0] == "apply"
        return ops[:2] in (["state", "rm"], ["workspace", "delete"])
    if name == "pulumi":
        ops = [a for a in args if not a.startswith("-")]
        return ops[:1] in (["destroy"], ["down"]) or ops[:2] == ["stack", "rm"]
    if name == "cdk" or name == "cdktf":
        return subcommand(args)[1] == "destroy"
    if name in ("serverless", "sls"):
        return subcommand(args)[1] == "remove"
    if name == "sam":
        return subcommand(args)[1] == "delete"
    if name in ("copilot", "eksctl", "kind", "minikube", "k3d"):
        return subcommand(args)[1] == "delete" or "delete" in args[:2]
    if name in ("fly", "flyctl"):
        return any(a in ("destroy", "apps destroy") for a in args[:2])
    if name == "heroku":
        return any(a.startswith(("apps:destroy", "pg:reset", "addons:destroy")) for a in args)
    if name == "vercel":
        return subcommand(args)[1] in ("remove", "rm")
    return False


_AWS_ARG_OPTS = word_set(
    """
    region profile output endpoint-url query color cli-read-timeout cli-connect-timeout
    ca-bundle cli-binary-format
    """
)


def _aws_verb(args: list[str]) -> tuple[str, str]:
    """``(service, operation)`` of an ``aws`` command, global options skipped."""
    ops: list[str] = []
    i = 0
    while i < len(args) and len(ops) < 2:
        a = args[i]
        if a.startswith("--"):
            i += 2 if a[2:] in _AWS_ARG_OPTS else 1
            continue
        if not a.startswith("-"):
            ops.append(a.lower())
        i += 1
    return (ops[0], ops[1]) if len(ops) == 2 else ("", "")


def _cloud_storage_delete(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name == "aws":
        service, verb = _aws_verb(args)
        if service == "s3":
            return verb in ("rm", "rb") or (verb == "sync" and has_long(args, "delete"))
        return service == "s3api" and verb.startswith("delete-")
    if name == "gsutil":
        verb = subcommand(args, frozenset("ohu"))[1]
        return verb in ("rm", "rb") or (verb == "rsync" and "d" in short_flags(args))
    if name == "gcloud" and args[:1] == ["storage"]:
        return args[1:2] == ["rm"] or args[1:3] == ["buckets", "delete"]
    if name == "az" and args[:1] == ["storage"]:
        return any(a.startswith("delete") for a in args[1:4])
    if name in _OBJECT_STORES:
        verb = subcommand(args)[1]
        if name == "rclone":
            return verb in ("delete", "purge", "deletefile", "rmdir", "rmdirs", "cleanup") or (
                verb == "sync"
            )
        if name in ("mc", "s3cmd", "b2"):
            return verb in ("rm", "rb", "del", "delete", "purge", "delete-bucket", "rm-bucket")
        return verb in ("remove", "rm")
    return False


def _cloud_resource_delete(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name == "aws":
        service, verb = _aws_verb(args)
        return service not in ("s3", "s3api") and verb.startswith(_DELETE_VERB_PREFIXES)
    if name in _GENERIC_CLOUD:
        ops = [a.lower() for a in args if not a.startswith("-")][:5]
        return any(o.startswith(_DELETE_VERB_PREFIXES) for o in ops)
    return False


INFRA_PATTERNS: list[Pattern] = [
    Pattern(
        "kubectl_delete",
        _kubectl_delete,
        "delete, drain, scale to zero or force-replace Kubernetes objects",
        names=_KUBECTL | {"microk8s"},
    ),
    Pattern(
        "helm_uninstall", _helm_uninstall, "uninstall a Helm release", names=frozenset({"helm"})
    ),
    Pattern(
        "infra_destroy",
        _iac_destroy,
        "destroy infrastructure (terraform destroy)",
        names=_IAC | _IAC_TOOLS,
    ),
    Pattern(
        "cloud_storage_delete",
        _cloud_storage_delete,
        "delete cloud storage objects or buckets (aws s3 rm, gsutil rm, az storage delete)",
        names=_OBJECT_STORES | {"aws", "gcloud", "az"},
    ),
    Pattern(
        "cloud_resource_delete",
        _cloud_resource_delete,
        "delete or terminate cloud resources (instances, projects, resource groups)",
        names=_GENERIC_CLOUD | {"aws"},
    ),
]
