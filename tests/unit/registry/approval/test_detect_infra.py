"""Infrastructure and cloud: Kubernetes, Helm, Terraform and the like, storage, cloud resources."""

from __future__ import annotations

import pytest

from .detection import assert_allowed, assert_dangerous, assert_detected

DANGEROUS: list[tuple[str, str]] = [
    ("kubectl delete pod web-0", "kubectl_delete"),
    ("kubectl delete ns production", "kubectl_delete"),
    ("kubectl -n prod delete deployment api", "kubectl_delete"),
    ("kubectl delete -f k8s/", "kubectl_delete"),
    ("kubectl delete pods --all", "kubectl_delete"),
    ("kubectl --context prod delete svc api", "kubectl_delete"),
    ("kubectl drain node-1 --ignore-daemonsets", "kubectl_delete"),
    ("kubectl scale deployment api --replicas=0", "kubectl_delete"),
    ("kubectl replace --force -f pod.yaml", "kubectl_delete"),
    ("oc delete project demo", "kubectl_delete"),
    ("microk8s kubectl delete pod x", "kubectl_delete"),
    ("helm uninstall my-release", "helm_uninstall"),
    ("helm delete my-release -n prod", "helm_uninstall"),
    ("helm -n prod uninstall api", "helm_uninstall"),
    ("terraform destroy", "infra_destroy"),
    ("terraform destroy -auto-approve", "infra_destroy"),
    ("terraform apply -destroy -auto-approve", "infra_destroy"),
    ("terraform -chdir=infra destroy", "infra_destroy"),
    ("tofu destroy", "infra_destroy"),
    ("terragrunt run-all destroy", "infra_destroy"),
    ("terraform state rm aws_instance.web", "infra_destroy"),
    ("terraform workspace delete staging", "infra_destroy"),
    ("pulumi destroy --yes", "infra_destroy"),
    ("pulumi stack rm dev", "infra_destroy"),
    ("cdk destroy --force", "infra_destroy"),
    ("serverless remove --stage prod", "infra_destroy"),
    ("sam delete --stack-name app", "infra_destroy"),
    ("eksctl delete cluster --name prod", "infra_destroy"),
    ("flyctl apps destroy myapp", "infra_destroy"),
    ("heroku apps:destroy myapp --confirm myapp", "infra_destroy"),
    ("aws s3 rm s3://bucket/data --recursive", "cloud_storage_delete"),
    ("aws s3 rm s3://bucket/key.txt", "cloud_storage_delete"),
    ("aws s3 rb s3://bucket --force", "cloud_storage_delete"),
    ("aws s3 sync . s3://bucket --delete", "cloud_storage_delete"),
    ("aws s3api delete-bucket --bucket b", "cloud_storage_delete"),
    ("aws s3api delete-objects --bucket b --delete file://d.json", "cloud_storage_delete"),
    ("gsutil rm -r gs://bucket", "cloud_storage_delete"),
    ("gsutil -m rm gs://bucket/**", "cloud_storage_delete"),
    ("gsutil rb gs://bucket", "cloud_storage_delete"),
    ("gsutil rsync -d -r . gs://bucket", "cloud_storage_delete"),
    ("gcloud storage rm --recursive gs://bucket", "cloud_storage_delete"),
    ("gcloud storage buckets delete gs://bucket", "cloud_storage_delete"),
    ("az storage blob delete-batch --source c --account-name a", "cloud_storage_delete"),
    ("az storage container delete --name c", "cloud_storage_delete"),
    ("rclone purge remote:bucket", "cloud_storage_delete"),
    ("rclone delete remote:path", "cloud_storage_delete"),
    ("mc rm --recursive --force minio/bucket", "cloud_storage_delete"),
    ("s3cmd del s3://bucket/file", "cloud_storage_delete"),
    ("aws ec2 terminate-instances --instance-ids i-123", "cloud_resource_delete"),
    ("aws rds delete-db-instance --db-instance-identifier prod", "cloud_resource_delete"),
    ("aws dynamodb delete-table --table-name users", "cloud_resource_delete"),
    ("aws cloudformation delete-stack --stack-name app", "cloud_resource_delete"),
    ("aws iam delete-user --user-name bob", "cloud_resource_delete"),
    ("aws --region us-east-1 lambda delete-function --function-name f", "cloud_resource_delete"),
    ("gcloud compute instances delete vm-1 --zone us-east1-b", "cloud_resource_delete"),
    ("gcloud projects delete my-project", "cloud_resource_delete"),
    ("gcloud container clusters delete prod", "cloud_resource_delete"),
    ("gcloud sql instances delete db", "cloud_resource_delete"),
    ("az group delete --name rg-prod --yes", "cloud_resource_delete"),
    ("az vm delete -g rg -n vm1", "cloud_resource_delete"),
    ("doctl compute droplet delete web-1", "cloud_resource_delete"),
    ("hcloud server delete web", "cloud_resource_delete"),
]

OBFUSCATED: list[tuple[str, str]] = [
    ("k=kubectl; $k delete pod x", "kubectl_delete"),
    ("kubectl de''lete pod x", "kubectl_delete"),
    ("terraform $(echo destroy)", "infra_destroy"),
    ("bash -c 'terraform destroy -auto-approve'", "infra_destroy"),
    ("sudo -E aws s3 rm s3://b --recursive", "cloud_storage_delete"),
    ("AWS_PROFILE=prod aws ec2 terminate-instances --instance-ids i-1", "cloud_resource_delete"),
    ("npx cdk destroy", "infra_destroy"),
    ("ssh bastion 'kubectl delete ns prod'", "kubectl_delete"),
    ("docker run --rm hashicorp/terraform sh -c 'terraform destroy'", "infra_destroy"),
    ("kubectl exec pod -- rm -rf /", "delete_root"),
]

ALLOWED: list[str] = [
    "kubectl get pods",
    "kubectl describe pod web-0",
    "kubectl apply -f k8s/",
    "kubectl logs -f deploy/api",
    "kubectl scale deployment api --replicas=3",
    "kubectl rollout restart deployment api",
    "helm install my-release ./chart",
    "helm upgrade --install api ./chart",
    "helm list -A",
    "terraform plan",
    "terraform plan -destroy",
    "terraform apply",
    "terraform init",
    "terraform fmt -recursive",
    "terraform state list",
    "pulumi preview",
    "pulumi up --yes",
    "aws s3 ls s3://bucket",
    "aws s3 cp file.txt s3://bucket/",
    "aws s3 sync . s3://bucket",
    "aws ec2 describe-instances",
    "aws sts get-caller-identity",
    "gsutil ls gs://bucket",
    "gsutil cp a.txt gs://bucket/",
    "gcloud compute instances list",
    "gcloud auth login",
    "az group list",
    "az vm list -g rg",
    "rclone copy src remote:dst",
    "doctl compute droplet list",
]


@pytest.mark.parametrize(("command", "key"), DANGEROUS)
def test_dangerous(command: str, key: str) -> None:
    assert_dangerous(command, key)


@pytest.mark.parametrize(("command", "key"), OBFUSCATED)
def test_obfuscated(command: str, key: str) -> None:
    assert_detected(command, key)


@pytest.mark.parametrize("command", ALLOWED)
def test_allowed(command: str) -> None:
    assert_allowed(command)
