"""Fixtures that give tests real sandbox backends: local, docker, ssh, apptainer stand-in.

Registered from tests/conftest.py (``pytest_plugins``). WorkerRuntime that cannot be
reached are a *failure* in CI (``CI`` set) and a skip with the reason locally:

* docker: a Docker engine with the images built by ``tests/services/docker.sh``;
* ssh: a real ``/usr/sbin/sshd`` started here on 127.0.0.1 with its own host key;
* apptainer: ``tests/fakes/apptainer`` (runs instances under bubblewrap) first on PATH;
* local_jail: bubblewrap able to make the local backend's jail (user namespaces).

Each ``*_factory`` fixture returns ``make(session_id) -> Environment`` and closes
what it made at teardown.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from environments.base import Environment
from tests.sshd import ServiceUnavailable, running_sshd
from tests.sshd import SSHServer as SSHServer

Factory = Callable[[str], Environment]
REPO = Path(__file__).resolve().parent.parent
FAKES = REPO / "tests" / "fakes"
KILL_GRACE = 0.5
DOCKER_IMAGES = {
    "busybox": "sbx-test-busybox:latest",
    "bash": "sbx-test-bash:latest",
    "python": "sbx-test-python:latest",
}


def unavailable(reason: str) -> None:
    """Fail in CI, skip elsewhere: CI must never pass by skipping a real service."""
    if os.environ.get("CI"):
        pytest.fail(f"required test service unavailable in CI: {reason}", pytrace=False)
    pytest.skip(reason)


class _Tracker:
    """Creates environments and closes every one of them at teardown."""

    def __init__(self, create: Factory) -> None:
        self._create = create
        self.made: list[Environment] = []

    def __call__(self, session_id: str) -> Environment:
        env = self._create(session_id)
        self.made.append(env)
        return env

    def close_all(self) -> None:
        for env in self.made:
            with contextlib.suppress(Exception):
                env.close()


# -- local ----------------------------------------------------------------------


def require_jail() -> None:
    """Fail in CI, skip elsewhere, when the local backend's jail cannot be made here."""
    from environments.backends.local.config import LocalConfig
    from environments.backends.local.jail import probe

    ok, why = probe(LocalConfig())
    if not ok:
        unavailable(why)


def make_local_factory(tmp_path: Path, **settings: Any) -> _Tracker:
    from environments.backends.local.environment import LocalConfig, LocalEnvironment

    config = LocalConfig(cwd=str(tmp_path), kill_grace=KILL_GRACE, **settings)
    return _Tracker(lambda sid: LocalEnvironment(sid, config=config))


@pytest.fixture
def local_factory(tmp_path: Path) -> Iterator[Factory]:
    """The local backend without a jail (``isolation: none``)."""
    tracker = make_local_factory(tmp_path, isolation="none")
    yield tracker
    tracker.close_all()


@pytest.fixture
def local_jail_factory(tmp_path: Path) -> Iterator[Factory]:
    """The local backend in its bubblewrap jail (the default), network ``none``."""
    require_jail()
    tracker = make_local_factory(tmp_path, isolation="bwrap")
    yield tracker
    tracker.close_all()


# -- docker ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def docker_client_ready() -> object:
    """A docker SDK client for a running engine that has the test images."""
    try:
        import docker
    except ImportError:
        unavailable("the docker SDK is not installed (pip install 'sbx[docker]')")
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:
        unavailable(f"no Docker engine ({exc}); run tests/services/docker.sh")
    for image in DOCKER_IMAGES.values():
        try:
            client.images.get(image)
        except Exception:
            unavailable(f"test image {image} missing; run tests/services/docker.sh")
    yield client
    # Whatever this test run left behind (a crashed test) goes.
    from environments.backends.docker.orphans import reap_orphans

    reap_orphans(-1, client=client, labels={"sbx.worker": f"{socket.gethostname()}:{os.getpid()}"})


def make_docker_factory(client: Any, image: str, **overrides: Any) -> _Tracker:
    from environments.backends.docker.config import DockerConfig
    from environments.backends.docker.environment import DockerEnvironment

    config = DockerConfig(image=image, kill_grace=KILL_GRACE, **overrides)
    return _Tracker(lambda sid: DockerEnvironment(sid, config=config, client=client))


@contextlib.contextmanager
def docker_session_client(
    api: Any, sbx_home: Path, start_worker: Any, session_id: str
) -> Iterator[Any]:
    """A client of session ``session_id`` on the docker backend (busybox image) of a real
    worker started now; the session's containers are removed after."""
    from tests.fixtures_workers import settings_for
    from worker.client import SandboxClient

    start_worker(
        None, SBX_DOCKER_IMAGE=DOCKER_IMAGES["busybox"], SBX_ALLOWED_BACKENDS="local,docker"
    )
    client = SandboxClient(
        session_id=session_id, backend="docker", settings=settings_for(sbx_home, None)
    )
    try:
        yield client
    finally:
        client.close()
        labels = {"label": ["sbx=1", f"sbx.session={session_id}"]}
        for found in api.containers(all=True, filters=labels):
            api.remove_container(found["Id"], force=True)


@pytest.fixture
def docker_factory(docker_client_ready: object) -> Iterator[Factory]:
    """Containers of the busybox-only image (POSIX sh, no bash)."""
    tracker = make_docker_factory(docker_client_ready, DOCKER_IMAGES["busybox"])
    yield tracker
    tracker.close_all()


@pytest.fixture
def docker_bash_factory(docker_client_ready: object) -> Iterator[Factory]:
    """Containers of the image that also has bash (the session shell is bash there)."""
    tracker = make_docker_factory(docker_client_ready, DOCKER_IMAGES["bash"])
    yield tracker
    tracker.close_all()


@pytest.fixture
def docker_python_factory(docker_client_ready: object) -> Iterator[Factory]:
    """Containers of the busybox image with python3 (which pty processes need)."""
    tracker = make_docker_factory(docker_client_ready, DOCKER_IMAGES["python"])
    yield tracker
    tracker.close_all()


# -- ssh ------------------------------------------------------------------------


def _sshd_or_unavailable() -> Iterator[SSHServer]:
    """:func:`running_sshd` for a fixture: a missing OpenSSH fails under CI, else skips."""
    try:
        server_cm = running_sshd()
        server = server_cm.__enter__()
    except ServiceUnavailable as exc:
        unavailable(str(exc))
    try:
        yield server
    finally:
        server_cm.__exit__(None, None, None)


@pytest.fixture(scope="session")
def sshd_server() -> Iterator[SSHServer]:
    """A real sshd on 127.0.0.1 for the whole test session."""
    yield from _sshd_or_unavailable()


@pytest.fixture
def own_sshd() -> Iterator[SSHServer]:
    """A real sshd on 127.0.0.1 of this test's own, for tests that kill or restart it (the
    session's shared one must stay up)."""
    yield from _sshd_or_unavailable()


def ssh_config_for(server: SSHServer, **overrides: object) -> object:
    from environments.backends.ssh.environment import SSHConfig

    settings: dict[str, object] = {
        "host": server.host,
        "port": server.port,
        "user": server.user,
        "key_file": server.key_file,
        "known_hosts": server.known_hosts,
        "use_agent": False,
        "kill_grace": KILL_GRACE,
    }
    settings.update(overrides)
    return SSHConfig(**settings)  # type: ignore[arg-type]


@pytest.fixture
def ssh_factory(sshd_server: SSHServer) -> Iterator[Factory]:
    try:
        from environments.backends.ssh.environment import SSHEnvironment
    except ImportError:
        unavailable("asyncssh is not installed (pip install 'sbx[ssh]')")
    config = ssh_config_for(sshd_server)
    tracker = _Tracker(lambda sid: SSHEnvironment(sid, config=config))  # type: ignore[arg-type]
    yield tracker
    tracker.close_all()


# -- apptainer (stand-in) -------------------------------------------------------


@pytest.fixture(scope="session")
def apptainer_rootfs() -> Iterator[Path]:
    """A busybox-only root file system directory, usable as an apptainer sandbox image."""
    busybox = shutil.which("busybox")
    if busybox is None:
        unavailable("busybox not installed (apt-get install busybox-static)")
    assert busybox is not None
    root = Path(tempfile.mkdtemp(prefix="sbx-rootfs-"))
    for sub in ("bin", "etc", "tmp", "proc", "dev", "sys", "workspace"):
        (root / sub).mkdir()
    shutil.copy2(busybox, root / "bin" / "busybox")
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True)
    for applet in applets.stdout.split():
        if applet != "busybox":
            (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n"
    )
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def fake_apptainer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Puts tests/fakes/apptainer first on PATH; yields the log of its invocations."""
    if not shutil.which("bwrap"):
        unavailable("bubblewrap not installed (apt-get install bubblewrap)")
    if not shutil.which("nsenter"):
        unavailable("nsenter not installed (apt-get install util-linux)")
    state = Path(tempfile.mkdtemp(prefix="sbx-fake-apptainer-"))
    log = tmp_path / "apptainer.log"
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_APPTAINER_STATE", str(state))
    monkeypatch.setenv("FAKE_APPTAINER_LOG", str(log))
    yield log
    # Stop whatever instance a failed test left running.
    subprocess.run(
        [str(FAKES / "apptainer"), "instance", "stop", "--all"], check=False, capture_output=True
    )
    shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def apptainer_factory(fake_apptainer: Path, apptainer_rootfs: Path) -> Iterator[Factory]:
    from environments.backends.apptainer import ApptainerConfig, ApptainerEnvironment

    config = ApptainerConfig(image=str(apptainer_rootfs), kill_grace=KILL_GRACE)
    tracker = _Tracker(lambda sid: ApptainerEnvironment(sid, config=config))
    yield tracker
    tracker.close_all()


# -- every backend --------------------------------------------------------------

BACKENDS = ["local", "local_jail", "docker", "docker_bash", "ssh", "apptainer"]


@pytest.fixture(params=BACKENDS)
def any_backend(request: pytest.FixtureRequest) -> Factory:
    """Each backend in turn (docker once per test image)."""
    factory: Factory = request.getfixturevalue(f"{request.param}_factory")
    return factory
