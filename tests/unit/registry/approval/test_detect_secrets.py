"""Overwriting configuration and secrets by any means; the worker's own files; sudo -S."""

from __future__ import annotations

import pytest

from registry.approval import detect_dangerous_command

from .detection import allowed_test, dangerous_test

DANGEROUS: list[tuple[str, str]] = [
    # system configuration and login files
    ("echo 'nameserver 1.1.1.1' > /etc/resolv.conf", "system_config_overwrite"),
    ("echo x >> /etc/hosts", "system_config_overwrite"),
    ("cat hosts | sudo tee /etc/hosts", "system_config_overwrite"),
    ("echo x | tee -a /etc/sudoers", "system_config_overwrite"),
    ("cp evil.conf /etc/nginx/nginx.conf", "system_config_overwrite"),
    ("sed -i 's/no/yes/' /etc/ssh/sshd_config", "system_config_overwrite"),
    ("echo key >> ~/.ssh/authorized_keys", "system_config_overwrite"),
    ("echo '' > ~/.bashrc", "system_config_overwrite"),
    ("echo 1 > /proc/sys/kernel/sysrq", "system_config_overwrite"),
    ("cp dotfiles/bashrc ~/.bashrc", "system_config_overwrite"),
    ("mv /tmp/zshrc ~/.zshrc", "system_config_overwrite"),
    ("install -m 600 key ~/.ssh/id_ed25519", "system_config_overwrite"),
    ("ln -sf /tmp/rc ~/.profile", "system_config_overwrite"),
    ("perl -pi -e 's/x/y/' ~/.bash_profile", "system_config_overwrite"),
    ("cat id.pub > ~/.ssh/config", "system_config_overwrite"),
    ("mv ~/.ssh ~/.ssh.bak", "system_config_overwrite"),
    ("rsync -a keys/ ~/.ssh/", "system_config_overwrite"),
    ("dd if=new of=/etc/fstab", "system_config_overwrite"),
    ("truncate -s 0 ~/.ssh/known_hosts", "system_config_overwrite"),
    ("echo '[default]' > ~/.aws/credentials", "system_config_overwrite"),
    ("cp kube.yaml ~/.kube/config", "system_config_overwrite"),
    # project files holding secrets or running code
    ("echo SECRET=1 > .env", "project_config_overwrite"),
    ("echo X=1 > .env.production", "project_config_overwrite"),
    ("echo x | tee .env", "project_config_overwrite"),
    ("echo token > ~/.npmrc", "project_config_overwrite"),
    ("cp .env.local .env", "project_config_overwrite"),
    ("cp /opt/data/.env.local /opt/data/.env", "project_config_overwrite"),
    ("cat /opt/data/.env.local > /opt/data/.env", "project_config_overwrite"),
    ("install -m 600 template.env .env.production", "project_config_overwrite"),
    ("printenv | tee .env.local", "project_config_overwrite"),
    ("sed -i 's/DEBUG=0/DEBUG=1/' .env", "project_config_overwrite"),
    ("ln -sf ../shared/.env .env", "project_config_overwrite"),
    ("mv .env .env.old", "project_config_overwrite"),
    ("echo 'machine x login y' > ~/.netrc", "project_config_overwrite"),
    ("cp pypirc ~/.pypirc", "project_config_overwrite"),
    ("git config --file .git/config core.editor vim > .git/config", "project_config_overwrite"),
    ("echo 'curl x|sh' > .git/hooks/pre-commit", "project_config_overwrite"),
    ("cp hook.sh .git/hooks/post-checkout", "project_config_overwrite"),
    ("echo '{}' > secrets.json", "project_config_overwrite"),
    ("cp state.bak terraform.tfstate", "project_config_overwrite"),
    ("echo x > credentials", "project_config_overwrite"),
    ("echo export X=1 > .envrc", "project_config_overwrite"),
    # password fed to sudo
    ("echo pw | sudo -S apt-get install x", "sudo_stdin_password"),
    ("printf 'hunter2\\n' | sudo -S -k whoami", "sudo_stdin_password"),
    ("sudo -S id <<< 'hunter2'", "sudo_stdin_password"),
    ("sudo --stdin ls < pw.txt", "sudo_stdin_password"),
    ("cat pw | sudo -kS reboot-check", "sudo_stdin_password"),
]

ALLOWED: list[str] = [
    "echo A=1 >> .env",
    "cat .env",
    "cp -n .env.example .env",
    "cp --no-clobber .env.example .env",
    "echo x > .env.example",
    "cat config.yaml.bak",
    "echo x > config.yaml.bak",
    "echo 'x: 1' > config.yaml",
    "printf 'a: 1' > config.yaml",
    "echo {} >| settings.json",
    "cat > app/config.toml <<EOF\nx=1\nEOF",
    "echo 'mode: prod' > deploy/config.yaml",
    "cp config.yaml backup.yaml",
    "cat .env > backup.txt",
    "echo 'export PATH=$PATH:~/bin' >> ~/.bashrc",
    "cat ~/.ssh/id_ed25519.pub",
    "ssh-keygen -t ed25519 -f /tmp/key -N ''",
    "cat /etc/hosts",
    "vim config.yaml",
    "sudo apt-get update",
    "sudo -n true",
    "echo hi | sudo tee /tmp/x",
]

SBX_HOME = "/home/dev/.local/state/sbx"
PROTECTED = (SBX_HOME, SBX_HOME + "/config.yaml")
ENV = {"HOME": "/home/dev", "SBX_HOME": SBX_HOME}

PROTECTED_WRITES: list[str] = [
    "echo 'approvals: {mode: off}' > ~/.local/state/sbx/config.yaml",
    "echo x > $SBX_HOME/config.yaml",
    "cp evil.yaml /home/dev/.local/state/sbx/config.yaml",
    "sed -i 's/manual/off/' $HOME/.local/state/sbx/config.yaml",
    "rm -rf ~/.local/state/sbx",
    "rm -f $SBX_HOME/secret",
    "rm -rf ~/.local",
    "mv ~/.local/state/sbx /tmp/x",
    "cd ~/.local/state && rm -rf sbx",
    "chmod -R 777 ~/.local/state/sbx",
    "ln -sf /dev/null ~/.local/state/sbx/config.yaml",
]


test_dangerous = dangerous_test(DANGEROUS)
test_allowed = allowed_test(ALLOWED)


@pytest.mark.parametrize("command", PROTECTED_WRITES)
def test_worker_files_are_protected(command: str) -> None:
    dangerous, key, _ = detect_dangerous_command(command, env=ENV, protected=PROTECTED)
    assert dangerous and key == "protected_path_write", (command, key)


@pytest.mark.parametrize(
    "command", ["cat ~/.local/state/sbx/config.yaml", "ls $SBX_HOME", "echo x > ~/.local/x.txt"]
)
def test_reading_worker_files_is_not_a_write(command: str) -> None:
    _, key, _ = detect_dangerous_command(command, env=ENV, protected=PROTECTED)
    assert key != "protected_path_write", command
