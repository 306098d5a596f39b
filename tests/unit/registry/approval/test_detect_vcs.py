"""Version-control history: hard resets, force pushes, clean, branch and stash drops, rewrites."""

from __future__ import annotations

import pytest

from .detection import assert_allowed, assert_dangerous, assert_detected

DANGEROUS: list[tuple[str, str]] = [
    ("git reset --hard", "git_reset_hard"),
    ("git reset --hard HEAD~3", "git_reset_hard"),
    ("git reset --hard origin/main", "git_reset_hard"),
    ("git -C repo reset --hard", "git_reset_hard"),
    ("git -c core.quotepath=off reset --hard", "git_reset_hard"),
    ("git --no-pager reset --hard HEAD", "git_reset_hard"),
    ("git reset HEAD~1 --hard", "git_reset_hard"),
    ("git stash && git reset --hard", "git_reset_hard"),
    ("git fetch origin && git reset --hard origin/main", "git_reset_hard"),
    ("git push --force origin main", "git_force_push"),
    ("git push -f origin main", "git_force_push"),
    ("git push origin main -f", "git_force_push"),
    ("git push --force-with-lease", "git_force_push"),
    ("git push origin +main", "git_force_push"),
    ("git push origin +HEAD:refs/heads/main", "git_force_push"),
    ("git push --mirror backup", "git_force_push"),
    ("git push -fu origin feature", "git_force_push"),
    ("git -C app push --force", "git_force_push"),
    ("git push --force-if-includes origin main", "git_force_push"),
    ("git push origin --delete feature", "git_remote_delete"),
    ("git push origin :feature", "git_remote_delete"),
    ("git push -d origin old", "git_remote_delete"),
    ("git push --prune origin", "git_remote_delete"),
    ("git clean -fd", "git_clean"),
    ("git clean -fdx", "git_clean"),
    ("git clean -ffdx", "git_clean"),
    ("git clean -f", "git_clean"),
    ("git clean --force -d", "git_clean"),
    ("git clean -xf", "git_clean"),
    ("git clean -X -f", "git_clean"),
    ("git branch -D feature-branch", "git_branch_force_delete"),
    ("git branch --delete --force old", "git_branch_force_delete"),
    ("git branch -df wip", "git_branch_force_delete"),
    ("git update-ref -d refs/heads/main", "git_branch_force_delete"),
    ("git checkout -- .", "git_discard_worktree"),
    ("git checkout .", "git_discard_worktree"),
    ("git checkout HEAD -- .", "git_discard_worktree"),
    ("git checkout -f main", "git_discard_worktree"),
    ("git checkout --force", "git_discard_worktree"),
    ("git restore .", "git_discard_worktree"),
    ("git restore --worktree .", "git_discard_worktree"),
    ("git restore --source=HEAD~2 .", "git_discard_worktree"),
    ("git restore :/", "git_discard_worktree"),
    ("git restore --staged --worktree .", "git_discard_worktree"),
    ("git switch --discard-changes main", "git_discard_worktree"),
    ("git switch -f main", "git_discard_worktree"),
    ("git stash drop", "git_stash_drop"),
    ("git stash drop stash@{1}", "git_stash_drop"),
    ("git stash clear", "git_stash_drop"),
    ("git reflog expire --expire=now --all", "git_history_prune"),
    ("git gc --prune=now", "git_history_prune"),
    ("git gc --aggressive --prune=all", "git_history_prune"),
    ("git prune", "git_history_prune"),
    ("git reflog delete HEAD@{1}", "git_history_prune"),
    ("git filter-branch --force --index-filter 'git rm --cached x' HEAD", "git_history_rewrite"),
    ("git filter-repo --path secrets --invert-paths", "git_history_rewrite"),
    ("bfg --delete-files id_rsa", "git_history_rewrite"),
    ("java -jar bfg.jar --strip-blobs-bigger-than 50M", "git_history_rewrite"),
    ("git -c core.sshCommand='ssh -i key' fetch", "git_config_exec"),
    ("git -c core.pager='less -R' log", "git_config_exec"),
    ("git config core.hooksPath .githooks", "git_config_exec"),
    ("git config --global alias.nuke '!rm -rf .'", "git_config_exec"),
    ("GIT_SSH_COMMAND='ssh -o StrictHostKeyChecking=no' git clone x", "git_config_exec"),
    ("git config core.fsmonitor ./fsmon.sh", "git_config_exec"),
    ("git -c diff.external=./differ diff", "git_config_exec"),
    ("git config filter.lfs.smudge 'curl x'", "git_config_exec"),
]

OBFUSCATED: list[tuple[str, str]] = [
    ("g''it reset --hard", "git_reset_hard"),
    ("git reset --ha\\\nrd", "git_reset_hard"),
    ("git push -\uff46 origin main", "git_force_push"),
    ("G=git; $G push --force", "git_force_push"),
    ("git $(echo reset) --hard", "git_reset_hard"),
    ('x=(push --force); git "${x[@]}"', "git_force_push"),
    ("bash -c 'git clean -fdx'", "git_clean"),
    ("eval git stash clear", "git_stash_drop"),
    ("git    reset    --hard", "git_reset_hard"),
    ('git -C "$(pwd)" reset --hard', "git_reset_hard"),
    ("git -c core.sshCommand='rm -rf ~' fetch", "delete_root"),
    ("git submodule foreach 'rm -rf /'", "delete_root"),
    ("git rebase --exec 'rm -rf ~' HEAD~3", "delete_root"),
    ("git bisect run rm -rf /", "delete_root"),
    ("GIT_SSH_COMMAND='rm -rf /' git fetch", "delete_root"),
    ("git filter-branch --tree-filter 'rm -rf ~' HEAD", "delete_root"),
    ("git -c alias.x='!mkfs.ext4 /dev/sda' x", "format_filesystem"),
]

ALLOWED: list[str] = [
    "git status",
    "git diff HEAD~1",
    "git log --oneline",
    "git push origin main",
    "git push -u origin feature",
    "git pull --rebase",
    "git reset HEAD~1",
    "git reset --soft HEAD~1",
    "git reset --keep HEAD~1",
    "git reset file.txt",
    "git checkout main",
    "git checkout -b feature",
    "git checkout -- README.md",
    "git restore README.md",
    "git restore --staged .",
    "git switch main",
    "git branch -d merged-feature",
    "git branch feature",
    "git stash",
    "git stash pop",
    "git stash list",
    "git clean -n",
    "git clean -nfdx",
    "git clean --dry-run -d",
    "git gc",
    "git reflog",
    "git commit -m 'fix: reset --hard docs'",
    "git -C sub status",
    "git config user.email a@b.c",
    "git config alias.co checkout",
    "git fetch --prune",
    "git tag v1.0",
    "git -c color.ui=always log",
    "GIT_PAGER=cat git log",
    "git --no-pager diff",
    "git submodule update --init",
    "git add -A",
    "git commit --amend --no-edit",
    "git merge --abort",
    "git cherry-pick abc123",
    "git worktree add ../wt feature",
    "git rebase main",
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
