"""The Dockerfile builds an image of the product alone that runs as a non-root user and checks
its own health; the build context .dockerignore leaves is enough to build the wheel, and that
wheel holds the product and not its lab. Docker itself runs here only on request
(XDS_CONTROL_DOCKER_BUILD=1): a build takes minutes and needs a daemon."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from component.deploy.helm_chart import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    lines = [line.strip() for line in joined.splitlines()]
    pairs = [line.split(maxsplit=1) for line in lines if line and not line.startswith("#")]
    return [(pair[0].upper(), pair[1] if len(pair) > 1 else "") for pair in pairs]


def _final_stage() -> list[tuple[str, str]]:
    steps = _instructions()
    last_from = max(i for i, (op, _) in enumerate(steps) if op == "FROM")
    return steps[last_from:]


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last pattern that matches the path or one of its
    parent folders decides; `!` re-includes."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern.removeprefix("!").strip("/")
        regex = re.escape(body).replace(r"\*\*/", "(?:.*/)?").replace(r"\*", "[^/]*")
        if any(re.fullmatch(regex, prefix) for prefix in prefixes):
            ignored = not negate
    return ignored


def _context(into: Path) -> Path:
    """Copy what .dockerignore lets into the build context, as `docker build .` sends it."""
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in tracked + [str(p.relative_to(ROOT)) for p in (ROOT / "xds_control").rglob("*")]:
        source = ROOT / name
        if source.is_file() and not _ignored(name, patterns):
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def test_two_stages_and_the_runtime_stage_gets_only_wheels() -> None:
    steps = _instructions()
    assert sum(op == "FROM" for op, _ in steps) >= 2
    assert all("-slim" in args for op, args in steps if op == "FROM")
    copies = [args for op, args in steps if op == "COPY"]
    assert copies, "the build stage copies the sources"
    assert not any("lab" in args.split() or "lab/" in args for args in copies)
    assert not any(op == "COPY" for op, _ in _final_stage()), "sources leaked into the runtime"


def test_runs_as_a_numeric_non_root_user() -> None:
    users = [args for op, args in _final_stage() if op == "USER"]
    assert users, "the runtime stage sets no USER: it would run as root"
    uid = users[-1].split(":")[0]
    # Kubernetes' runAsNonRoot can only verify a numeric user.
    assert uid.isdigit()
    assert int(uid) != 0


def test_health_check_asks_healthz_and_serve_is_the_entrypoint() -> None:
    checks = [args for op, args in _final_stage() if op == "HEALTHCHECK"]
    assert len(checks) == 1
    assert "/healthz" in checks[0]
    entrypoint = [json.loads(args) for op, args in _final_stage() if op == "ENTRYPOINT"]
    assert entrypoint == [["xds-control", "serve"]]


def test_the_chart_runs_the_image_as_its_user() -> None:
    """The chart's pod securityContext names the image's user, so files it writes (the
    engine's state in /tmp) and the sidecar socket's group agree."""
    values = yaml.safe_load((ROOT / "deploy/helm/xds-control/values.yaml").read_text())
    uid = next(args for op, args in _final_stage() if op == "USER").split(":")
    assert values["podSecurityContext"]["runAsUser"] == int(uid[0])
    assert values["podSecurityContext"]["runAsGroup"] == int(uid[1])


def test_context_builds_the_product_wheel_without_the_lab(tmp_path: Path) -> None:
    context = _context(tmp_path / "context")
    assert not (context / "lab").exists()
    assert not (context / "tests").exists()
    out = tmp_path / "wheels"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"),
            *("--no-build-isolation", "--wheel-dir", str(out), str(context)),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    (wheel,) = out.glob("xds_control-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "xds_control/cli/main.py" in names
    assert "xds_control/py.typed" in names
    assert any(n.startswith("xds_control/admin/v1/") and n.endswith("_pb2.py") for n in names)
    assert not any(n.startswith("xds_lab/") for n in names)
    # The Dockerfile installs xds-control[kubernetes]; pip only warns about an unknown extra,
    # so a renamed one would ship an image without EndpointSlice discovery.
    assert "[kubernetes]" in DOCKERFILE
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert "Provides-Extra: kubernetes" in zipfile.ZipFile(wheel).read(metadata).decode()
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert (
        "xds-control = xds_control.cli.main:app"
        in zipfile.ZipFile(wheel).read(entry_points).decode()
    )


@pytest.mark.skipif(
    os.environ.get("XDS_CONTROL_DOCKER_BUILD") != "1",
    reason="docker build takes minutes and a daemon: set XDS_CONTROL_DOCKER_BUILD=1 to run it",
)
def test_docker_build_and_the_image_validates_a_config() -> None:
    tag = "xds-control:test"
    subprocess.run(["docker", "build", "-t", tag, str(ROOT)], check=True, timeout=900)
    run = subprocess.run(
        [
            *("docker", "run", "--rm", "-v", f"{ROOT / 'examples'}:/cfg:ro"),
            *("--entrypoint", "xds-control", tag, "validate", "--config", "/cfg/config.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    user = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "id", tag, "-u"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert user.stdout.strip() == "10001"
